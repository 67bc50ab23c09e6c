"""A run folder of one kind is never read or written as another (a scoring run's config.json is
not a calibration's, though both files have that name)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from evolve.cli import app
from evolve.config import load_run_config
from evolve.errors import RunError
from evolve.runs import check_resumable, folder_kind

runner = CliRunner()


def _folder(root: Path, name: str, files: dict[str, object]) -> Path:
    path = root / name
    path.mkdir(parents=True)
    for file, data in files.items():
        (path / file).write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.fixture
def folders(tmp_path: Path) -> dict[str, Path]:
    return {
        "calibration": _folder(tmp_path, "cal", {"config.json": {"run_id": "cal", "pack": "p", "splits": "s"}}),
        "scoring": _folder(tmp_path, "scored", {"config.json": {"run_id": "scored", "targets": "t.csv", "judge": "j"}}),
        "bench": _folder(tmp_path, "bench", {"manifest.json": {}}),
        "otb": _folder(tmp_path, "otb", {"run_config.json": {}}),
    }


def test_each_kind_is_told_apart_by_what_it_writes_first(folders: dict[str, Path], tmp_path: Path) -> None:
    assert {kind: folder_kind(path) for kind, path in folders.items()} == {k: k for k in folders}
    assert folder_kind(tmp_path / "nowhere") is None
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("[1]", encoding="utf-8")
    assert folder_kind(tmp_path / "broken") is None  # the kind's own reader names that problem


def test_a_run_of_another_kind_is_refused_resumed_or_not_and_left_untouched(folders: dict[str, Path]) -> None:
    scoring = folders["scoring"]
    before = sorted(p.name for p in folders["calibration"].iterdir())
    for resume in (False, True):
        with pytest.raises(RunError, match=r"cal holds a calibration run \(evolve calibrate\), not a scoring run: "
                                           r"nothing of it is read or written"):
            check_resumable(folders["calibration"], "config.json", resume, what="a scoring run", kind="scoring")
    assert sorted(p.name for p in folders["calibration"].iterdir()) == before
    with pytest.raises(RunError, match="holds a scoring run"):
        check_resumable(scoring, "config.json", True, what="a calibration run", kind="calibration")
    assert check_resumable(scoring, "config.json", True, what="a scoring run", kind="scoring") is True


def test_readers_of_calibration_runs_name_the_kind_they_were_given(folders: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(RunError, match=r"holds a scoring run \(evolve judge\), not a calibration run\. Its report is "
                                       r"report\.md and summary\.json"):
        load_run_config(folders["scoring"])
    for args in (["report", str(folders["scoring"])], ["audit", str(folders["scoring"])],
                 ["compare", str(folders["bench"]), str(folders["scoring"])]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2 and "holds a scoring run" in result.output, (args, result.output)
        assert "Traceback" not in result.output and "pydantic" not in result.output
    odd = _folder(tmp_path, "odd", {"config.json": {"run_id": "odd", "pack": "p", "splits": "s", "budget": 3,
                                                    "nonsense": 1}})
    with pytest.raises(RunError) as err:
        load_run_config(odd)
    assert "invalid field(s), the first" in str(err.value) and "errors.pydantic.dev" not in str(err.value)


def test_a_refused_resume_names_each_changed_field_with_both_values(tmp_path: Path) -> None:
    from evolve.runs import check_same_settings

    stored = {"run_id": "a", "decoding": {"temperature": 0.0, "top_p": 1.0}, "judge": {"model": "m"},
              "criteria": ["x"], "note": "n" * 100}
    current = {"run_id": "b", "decoding": {"temperature": 0.5, "top_p": 1.0}, "judge": {"model": "m", "seed": 3},
               "criteria": ["x", "y"], "note": "m" * 100}
    with pytest.raises(RunError) as err:
        check_same_settings(tmp_path / "config.json", stored, current, ignore=("run_id",))
    message = str(err.value)
    assert "differs from this one in ['criteria', 'decoding', 'judge', 'note']" in message
    assert ("criteria: ['x'] then, ['x', 'y'] now; decoding.temperature: 0.0 then, 0.5 now; "
            "judge.seed: unset then, 3 now; note: 'nnn") in message
    assert "top_p" not in message and "run_id" not in message and "n" * 70 not in message  # long values are cut
    many = {f"k{i}": i for i in range(9)}
    with pytest.raises(RunError, match=r"k5: 5 then, 6 now; and 3 more\)"):
        check_same_settings(tmp_path / "config.json", many, {k: v + 1 for k, v in many.items()})
    check_same_settings(tmp_path / "config.json", stored, {**stored, "run_id": "c"}, ignore=("run_id",))  # nothing differs
