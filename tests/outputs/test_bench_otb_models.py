"""``bench_report.json`` and ``otb_report.json`` as typed records: real reports of fixed runs
(fake provider) validate and round-trip, every optional section is exercised, an unknown field
or another version is refused, and the Markdown renderers reading attributes give exactly the
Markdown the dict-reading renderers gave (``data/*.md``, captured before the change)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from evolve.outputs import BENCH_REPORT_VERSION, OTB_REPORT_VERSION, BenchReport, OtbReport
from evolve.report import build_bench_report, build_otb_report, render_bench_markdown, render_otb_markdown, write_bench_report, write_otb_report
from evolve.runs import BenchFolder, OtbFolder
from tests.outputs.runs import bench_synthetic, bench_unjudged, bench_with_judge_file, otb_with_judge_file

DATA = Path(__file__).parent / "data"
N_BOOT, SEED = 50, 1
"""The bootstrap the golden Markdown files were rendered with."""


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("runs")


@pytest.fixture(scope="module")
def bench_runs(root: Path) -> dict[str, Path]:
    """The three bench runs, by golden-file name: not judged, judged with a judge file, synthetic."""
    runs = {}
    for name, make in (("bench_unjudged", bench_unjudged), ("bench_judge_file", bench_with_judge_file),
                       ("bench_synthetic", bench_synthetic)):
        (root / name).mkdir()
        runs[name] = make(root / name)
    return runs


@pytest.fixture(scope="module")
def bench_reports(bench_runs: dict[str, Path]) -> dict[str, BenchReport]:
    return {name: build_bench_report(run, n_boot=N_BOOT, seed=SEED) for name, run in bench_runs.items()}


@pytest.fixture(scope="module")
def otb_run(root: Path) -> Path:
    (root / "otb_judge_file").mkdir()
    return otb_with_judge_file(root / "otb_judge_file")


@pytest.fixture(scope="module")
def otb_report(otb_run: Path) -> OtbReport:
    return build_otb_report(otb_run, n_boot=N_BOOT, seed=SEED)


def _normalised(markdown: str, root: Path) -> str:
    """The Markdown with the temporary folder and the judge file's sha256 (it holds that folder's
    path) replaced, as in the golden files."""
    text = markdown.replace(str(root.resolve()), "<ROOT>").replace(str(root), "<ROOT>")
    return re.sub(r"sha256 [0-9a-f]{16}…", "sha256 <SHA>…", text)


def test_the_bench_reports_cover_every_optional_section(bench_reports):
    unjudged, anchored, synthetic = (bench_reports[n] for n in ("bench_unjudged", "bench_judge_file", "bench_synthetic"))
    assert unjudged.version == BENCH_REPORT_VERSION and not unjudged.judged and unjudged.anchored is None
    assert unjudged.tables.table6 == [] and unjudged.tables.table7 and unjudged.tables.table7[0].quality is None
    assert all(p.quality is None for p in unjudged.pipelines)
    section = anchored.anchored
    assert anchored.judged and section is not None and section.available and section.judge_file is not None
    assert section.judge_file.run_id == "calib-test" and section.systems and section.differences
    assert any(s.anchored_mean is not None for s in section.systems)
    assert anchored.tables.table2[0].n_cases == 3 and anchored.tables.table2[0].words_median is not None
    t = synthetic.tables
    assert synthetic.judged and len(synthetic.counts.models) == 2 and synthetic.anchored is not None
    assert not synthetic.anchored.available and synthetic.anchored.judge_file is None  # judged without a judge file
    assert t.table4 and t.table8 and t.table9 and t.distribution and t.complexity and t.format and t.panels
    assert t.table2[0].n_cases == 0 and t.table2[0].words_median is None  # no case file: the cohort has no texts
    assert any("Table 2 has no case texts" in n for n in synthetic.notes)


def test_the_otb_report_covers_every_optional_section(otb_report):
    assert otb_report.version == OTB_REPORT_VERSION and {r.task for r in otb_report.tables.main} == {"board", "turn"}
    assert otb_report.tables.decisions and otb_report.tables.question_types
    assert otb_report.anchored is not None and otb_report.anchored.judge_file.run_id == "otb-calib"
    assert otb_report.tables.main[0].format_failures == 1 and otb_report.tables.main[1].judge_failures == 1


@pytest.mark.parametrize("name", ["bench_unjudged", "bench_judge_file", "bench_synthetic"])
def test_a_bench_report_round_trips_through_its_json(bench_reports, name):
    report = bench_reports[name]
    assert BenchReport.model_validate_json(report.model_dump_json()) == report


def test_an_otb_report_round_trips_through_its_json(otb_report):
    assert OtbReport.model_validate_json(otb_report.model_dump_json()) == otb_report


def test_the_written_files_are_the_reports(bench_runs, otb_run):
    run = bench_runs["bench_judge_file"]
    written = write_bench_report(run, n_boot=N_BOOT, seed=SEED, html=False)
    assert BenchReport.model_validate_json((run / BenchFolder.REPORT_JSON).read_text(encoding="utf-8")) == written
    otb = write_otb_report(otb_run, n_boot=N_BOOT, seed=SEED, html=False)
    assert OtbReport.model_validate_json((otb_run / OtbFolder.REPORT_JSON).read_text(encoding="utf-8")) == otb


def test_an_unknown_field_or_another_version_is_refused(bench_reports, otb_report):
    bench = json.loads(bench_reports["bench_synthetic"].model_dump_json())
    otb = json.loads(otb_report.model_dump_json())
    for model, data, edit in [
        (BenchReport, bench, lambda d: d.update(extra=1)),
        (BenchReport, bench, lambda d: d["tables"]["table3"][0].update(stop_other=1)),
        (BenchReport, bench, lambda d: d.update(version=BENCH_REPORT_VERSION + 1)),
        (OtbReport, otb, lambda d: d["tables"]["main"][0].update(bleu=0.5)),
        (OtbReport, otb, lambda d: d.update(version=OTB_REPORT_VERSION + 1)),
    ]:
        changed = json.loads(json.dumps(data))
        edit(changed)
        with pytest.raises(ValidationError):
            model.model_validate(changed)


@pytest.mark.parametrize("name", ["bench_unjudged", "bench_judge_file", "bench_synthetic"])
def test_the_bench_markdown_is_what_the_dict_renderer_wrote(bench_reports, root, name):
    expected = (DATA / f"{name}.md").read_text(encoding="utf-8")
    assert _normalised(render_bench_markdown(bench_reports[name]), root) == expected


def test_the_otb_markdown_is_what_the_dict_renderer_wrote(otb_report, root):
    expected = (DATA / "otb_judge_file.md").read_text(encoding="utf-8")
    assert _normalised(render_otb_markdown(otb_report), root) == expected
