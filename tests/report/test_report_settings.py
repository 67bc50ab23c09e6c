"""Light reports (issue 26, item 6): fewer bootstrap replicates and no figures, set in Python or
by ``EVOLVE_REPORT_REPLICATES`` / ``EVOLVE_REPORT_FIGURES``; the report states what it used."""

from __future__ import annotations

import json

import pytest

from evolve.errors import ConfigError
from evolve.report import ReportSettings, report_settings, write_bench_report
from evolve.report._html import tables_page
from evolve.report._settings import FIGURES_OFF_NOTE
from tests.report.conftest import bench_folder


def test_the_environment_sets_replicates_and_figures():
    assert ReportSettings.from_env({}) == ReportSettings(replicates=2000, figures=True)
    assert ReportSettings.from_env({"EVOLVE_REPORT_REPLICATES": " 50 ", "EVOLVE_REPORT_FIGURES": "off"}) == \
        ReportSettings(replicates=50, figures=False)
    assert ReportSettings.from_env({"EVOLVE_REPORT_REPLICATES": "", "EVOLVE_REPORT_FIGURES": "TRUE"}).figures is True


@pytest.mark.parametrize(("name", "value", "says"), [
    ("EVOLVE_REPORT_REPLICATES", "many", r"EVOLVE_REPORT_REPLICATES='many': expected a whole number .* from 1 to 100,000"),
    ("EVOLVE_REPORT_REPLICATES", "0", "e.g. EVOLVE_REPORT_REPLICATES=200"),
    ("EVOLVE_REPORT_REPLICATES", "100001", "unset it for the default 2,000"),
    ("EVOLVE_REPORT_FIGURES", "maybe", r"EVOLVE_REPORT_FIGURES='maybe': expected 0 \(no figures in report.html\) or 1"),
])
def test_a_bad_value_names_the_variable_and_what_it_takes(name, value, says):
    with pytest.raises(ConfigError, match=says):
        ReportSettings.from_env({name: value})


def test_an_explicit_replicate_count_wins_and_given_settings_ignore_the_environment(monkeypatch):
    monkeypatch.setenv("EVOLVE_REPORT_REPLICATES", "30")
    monkeypatch.setenv("EVOLVE_REPORT_FIGURES", "0")
    assert report_settings() == ReportSettings(replicates=30, figures=False)
    assert report_settings(n_boot=400) == ReportSettings(replicates=400, figures=False)
    assert report_settings(ReportSettings()) == ReportSettings(replicates=2000, figures=True)
    with pytest.raises(ConfigError, match="n_boot=0: expected 1 to 100,000"):
        report_settings(n_boot=0)


def test_a_page_without_figures_says_they_were_turned_off_and_keeps_the_tables():
    html = tables_page("Benchmark report: x", "| a | b |\n|---|---|\n| 1 | 2 |\n")
    assert FIGURES_OFF_NOTE.split("(")[0] in html and "<table>" in html and "<img" not in html


def test_a_light_bench_report_states_its_replicates_and_draws_no_figure(tmp_path):
    run = bench_folder(tmp_path)
    write_bench_report(run, settings=ReportSettings(replicates=7, figures=False))
    assert json.loads((run / "bench_report.json").read_text())["bootstrap"]["n_boot"] == 7
    assert "7 replicates" in (run / "bench_report.md").read_text()
    page = (run / "report.html").read_text()
    assert "Figures were turned off for this report" in page and "<img" not in page and "<table>" in page
    write_bench_report(run, settings=ReportSettings(replicates=7))
    assert "<img" in (run / "report.html").read_text() and "Figures were turned off" not in (run / "report.html").read_text()


def test_the_report_commands_follow_the_environment_unless_n_boot_is_given(calibration_runs, tmp_path, monkeypatch):
    import shutil
    from pathlib import Path

    from typer.testing import CliRunner

    from evolve.cli import app

    run = Path(shutil.copytree(calibration_runs[0], tmp_path / "run"))
    monkeypatch.setenv("EVOLVE_REPORT_REPLICATES", "7")
    for argv, replicates in ((["report", str(run), "--no-html"], 7), (["report", str(run), "--no-html", "--n-boot", "9"], 9)):
        done = CliRunner().invoke(app, argv)
        assert done.exit_code == 0, done.output
        assert json.loads((run / "report.json").read_text("utf-8"))["bootstrap"]["n_boot"] == replicates
    done = CliRunner().invoke(app, ["compare", str(run), str(calibration_runs[1]), "--reports-dir", str(tmp_path / "r"),
                                    "--no-html"])
    assert done.exit_code == 0, done.output
    (folder,) = (tmp_path / "r").iterdir()
    assert json.loads((folder / "report.json").read_text("utf-8"))["bootstrap"]["n_boot"] == 7
