"""`evolve calibrate`'s layers: a config file's split folder and run id are used unless the
command line names its own; the command line's defaults (``splits/<pack name>``, a dated run
id) only fill what no layer gives."""

from __future__ import annotations

import json
import re
from pathlib import Path

from evolve.workflows._options import CalibrateOptions

REPO = Path(__file__).resolve().parents[2]
PACK = REPO / "ratings" / "example"


def _config(tmp_path: Path, file: dict | None, **options):
    config_file = None
    if file is not None:
        config_file = tmp_path / "config.json"
        config_file.write_text(json.dumps(file), encoding="utf-8")
    return CalibrateOptions(pack=PACK, config_file=config_file, **options).config()


def test_a_config_files_splits_and_run_id_are_kept_when_the_command_line_names_none(tmp_path: Path) -> None:
    config = _config(tmp_path, {"splits": str(tmp_path / "my-splits"), "run_id": "from-file"})
    assert (config.splits, config.run_id) == (tmp_path / "my-splits", "from-file")


def test_the_command_line_wins_over_the_file_and_its_defaults_fill_what_none_gives(tmp_path: Path) -> None:
    given = _config(tmp_path, {"splits": "from-file", "run_id": "from-file"}, splits=tmp_path / "cli", run_id="cli")
    assert (given.splits, given.run_id) == (tmp_path / "cli", "cli")
    for file in (None, {"seed": 3}):
        defaulted = _config(tmp_path, file)
        assert defaulted.splits == Path("splits") / "example"
        assert re.fullmatch(r"example-\d{8}-\d{6}", defaulted.run_id), defaulted.run_id


def test_the_benchmark_runners_keep_a_config_files_run_id_too(tmp_path: Path) -> None:
    from evolve.workflows._options import BenchRunOptions, OtbRunOptions

    cases = REPO / "ratings" / "example-workbooks" / "cases.jsonl"
    otb = REPO / "ratings" / "otb-example" / "task2_example.jsonl"
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps({"run_id": "from-file"}), encoding="utf-8")
    for make in (lambda **o: BenchRunOptions(cases=cases, **o), lambda **o: OtbRunOptions(turn=otb, **o)):
        assert make(config_file=config_file).config().run_id == "from-file"
        assert make(config_file=config_file, run_id="cli").config().run_id == "cli"
        assert re.fullmatch(r"(bench-cases|otb)-\d{8}-\d{6}", make().config().run_id)
