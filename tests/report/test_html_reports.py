"""report.html of every run kind, and the figure functions behind it (no browser here: see
test_browser.py for the page as a person sees it)."""

from __future__ import annotations

import base64
import io
import json
from html.parser import HTMLParser
from pathlib import Path

import matplotlib.image as mpimg
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from evolve import report as fig  # the figure functions are public: evolve.report.archive_heatmap, ...
from evolve.outputs import CandidateSummary, PipelineRecord, Table4Row
from evolve.report import build_report, write_bench_report, write_report


class _Page(HTMLParser):
    """Collects every image source, link target and table of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []
        self.links: list[str] = []
        self.tables = 0
        self.scripts = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.images.append(a.get("src", ""))
        if tag in ("a", "link") and a.get("href"):
            self.links.append(a["href"])
        self.tables += tag == "table"
        self.scripts += tag == "script"


def parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text("utf-8"))
    return page


def decoded_images(page: _Page) -> list[np.ndarray]:
    """Every embedded figure decoded as a PNG (fails on anything else)."""
    out = []
    for src in page.images:
        head, data = src.split(",", 1)
        assert head == "data:image/png;base64", head[:40]
        raw = base64.b64decode(data)
        assert raw[:8] == b"\x89PNG\r\n\x1a\n"
        out.append(mpimg.imread(io.BytesIO(raw), format="png"))
    return out


def markdown_tables(md: str) -> int:
    return sum(1 for line in md.splitlines() if line.startswith("|---") or line.startswith("| ---"))


# -- the figure functions -------------------------------------------------------------------------

CANDS = [CandidateSummary.model_validate(c) for c in [
    {"candidate_id": "c:none", "parent_id": "", "origin": "none", "status": "accepted", "seq": 0, "elite": False,
     "selected": False, "length": 0, "train_mae": None, "train_signed_error": None},
    {"candidate_id": "c:initial_1", "parent_id": "", "origin": "initial", "status": "accepted", "seq": 1, "elite": True,
     "selected": False, "length": 300, "train_mae": 0.9, "train_signed_error": 0.5},
    {"candidate_id": "c:m001", "parent_id": "c:initial_1", "origin": "mutation", "status": "pruned", "seq": 2,
     "elite": False, "selected": False, "length": 200, "train_mae": 0.5, "train_signed_error": 0.1},
    {"candidate_id": "c:m002", "parent_id": "c:initial_1", "origin": "mutation", "status": "accepted", "seq": 3,
     "elite": True, "selected": False, "length": 420, "train_mae": 0.7, "train_signed_error": -0.3},
    {"candidate_id": "c:m003", "parent_id": "c:m002", "origin": "mutation", "status": "accepted", "seq": 4,
     "elite": True, "selected": True, "length": 650, "train_mae": 0.6, "train_signed_error": 0.0},
]]


def _draws():
    return [
        lambda ax: fig.archive_heatmap(CANDS, length_bins=20, bias_bins=27, bias_range=2.0, ax=ax),
        lambda ax: fig.mae_over_attempts(CANDS, ax=ax),
        lambda ax: fig.lineage(CANDS, ax=ax),
        lambda ax: fig.confusion_heatmap([[3, 1], [0, 2]], [0, 1], ax=ax),
        lambda ax: fig.interval_plot([{"label": "a", "estimate": 0.4, "low": 0.2, "high": 0.6}], xlabel="MAE", ax=ax),
        lambda ax: fig.drift_flags([{"criterion": "c", "flags": [("winner", "ok"), ("initial_1", "drift")]}], ax=ax),
        lambda ax: fig.stop_reasons_by_round([_pipeline(1, "consensus")], ax=ax),
        lambda ax: fig.vote_transitions([_transitions("1-2", 3, 1, 2, 0)], ax=ax),
        lambda ax: fig.quality_vs_tokens([_pipeline(1, "consensus", tokens=1000, quality=2.5)], ax=ax),
    ]


def test_every_figure_draws_on_the_axes_it_is_given_and_never_shows(monkeypatch):
    monkeypatch.setattr(plt, "show", lambda *a, **k: pytest.fail("a figure function called show()"))
    before = plt.get_fignums()
    for draw in _draws():
        ax = Figure().add_subplot()
        assert draw(ax) is ax
        assert ax.has_data() or ax.patches or ax.texts
    assert plt.get_fignums() == before  # nothing left in pyplot's global state


def test_mae_over_attempts_steps_through_the_best_fully_scored_mae():
    ax = fig.mae_over_attempts(CANDS)
    step = next(line for line in ax.get_lines() if line.get_label() == "best so far")
    # the pruned m001 (0.5 on part of the targets) does not count as the best
    assert list(step.get_xdata()) == [1, 2, 3, 4]
    assert list(step.get_ydata()) == [0.9, 0.9, 0.7, 0.6]


def test_archive_heatmap_colours_one_cell_per_elite_by_mae_and_stars_the_winner():
    ax = fig.archive_heatmap(CANDS, length_bins=20, bias_bins=27, bias_range=2.0)
    mesh = ax.collections[0]
    values = np.ma.masked_invalid(np.asarray(mesh.get_array(), dtype=float)).compressed()
    assert sorted(values.round(6)) == [0.6, 0.7, 0.9]  # MAE itself, not the objective -MAE
    star = next(line for line in ax.get_lines() if line.get_label() == "winner")
    assert (star.get_xdata()[0], star.get_ydata()[0]) == (650, 0.0)


def test_lineage_follows_parents_from_the_winner_to_its_initial_prompt():
    ax = fig.lineage(CANDS)
    path = max(ax.get_lines(), key=lambda line: line.get_linewidth())
    assert list(path.get_xdata()) == [1, 3, 4]  # initial_1 -> m002 -> m003
    assert "2 mutation(s) from initial_1" in ax.get_title()


def test_confusion_heatmap_shows_the_counts():
    ax = fig.confusion_heatmap([[3, 1], [0, 2]], [0, 1])
    assert sorted(t.get_text() for t in ax.texts) == ["0", "1", "2", "3"]
    assert ax.get_ylabel() == "physician score" and ax.get_xlabel() == "judge score"


def _pipeline(rounds: int, stop: str, *, tokens: int = 0, quality: float | None = None) -> PipelineRecord:
    """A bench pipeline record (case c1 of model m, structured, single) for the figures."""
    return PipelineRecord(case_id="c1", model="m", condition="structured", topology="single", stop_reason=stop,
                          rounds_completed=rounds, consensus=stop == "consensus", tokens=tokens, quality=quality)


def _transitions(rounds: str, yes_yes: int, yes_no: int, no_yes: int, no_no: int) -> Table4Row:
    """A Table 4 row of one round pair with these counts (shares left undefined)."""
    shares = {f"{kind}{end}": None for kind in ("yes_yes_share", "yes_no_share", "no_yes_share", "no_no_share",
                                                "dissent_resolved_share", "assent_lost_share") for end in ("", "_low", "_high")}
    return Table4Row.model_validate({"model": "m", "condition": "structured", "topology": "single", "role": "all",
                                     "rounds": rounds, "n_pipelines": 1, "n_transitions": yes_yes + yes_no + no_yes + no_no,
                                     "yes_yes": yes_yes, "yes_no": yes_no, "no_yes": no_yes, "no_no": no_no, **shares})


def test_stop_reasons_and_vote_transitions_stack_the_counts():
    pipes = [_pipeline(1, "consensus"), _pipeline(1, "consensus"), _pipeline(3, "max_rounds")]
    ax = fig.stop_reasons_by_round(pipes)
    layers = {c.get_label(): [p.get_height() for p in c] for c in ax.containers}
    assert layers == {"consensus": [2, 0], "max_rounds": [0, 1]}
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "3"]
    ax = fig.vote_transitions([_transitions("1-2", 3, 1, 2, 0), _transitions("2-3", 4, 0, 1, 1)])
    layers = {c.get_label(): [p.get_height() for p in c] for c in ax.containers}
    assert layers == {"yes→yes": [3, 4], "yes→no": [1, 0], "no→yes": [2, 1], "no→no": [0, 1]}
    tops = [max(p.get_y() + p.get_height() for c in ax.containers for p in [c[i]]) for i in range(2)]
    assert tops == [6, 6]  # stacked, not overlaid


def test_the_public_figures_draw_a_read_run_in_a_notebook(calibration_runs):
    from evolve.outputs import read_run

    criterion = read_run(calibration_runs[0]).report.criteria["entailment"]
    grid = criterion.archive
    figure = Figure()
    axes = figure.subplots(1, 3)
    fig.archive_heatmap(criterion.candidates, length_bins=grid.length_bins, bias_bins=grid.bias_bins,
                        bias_range=grid.bias_range, ax=axes[0])
    fig.mae_over_attempts(criterion.candidates, ax=axes[1])
    fig.confusion_heatmap(criterion.confusion.matrix, criterion.confusion.labels, ax=axes[2])
    assert axes[0].collections and axes[1].lines and axes[2].images
    assert sum(int(t.get_text()) for t in axes[2].texts) == criterion.confusion.n_pairs


# -- calibration report.html ----------------------------------------------------------------------


def test_confusion_matrix_counts_every_validation_pair_of_the_winner(calibration_runs):
    run = calibration_runs[0]
    report = build_report(run, n_boot=50)
    entry = report.criteria["entailment"]
    scores = pd.read_csv(run / "scores.csv", dtype={"target_id": str})
    ratings = pd.read_csv(Path(json.loads((run / "config.json").read_text())["pack"]) / "ratings.csv", dtype={"target_id": str})
    val = scores[(scores["phase"] == "reeval") & (scores["split"] == "validation")
                 & (scores["candidate_id"] == entry.winner.candidate_id) & (scores["outcome"] == "score")]
    expected = np.zeros((3, 3), dtype=int)
    for _, call in val.iterrows():
        for _, rating in ratings[(ratings["target_id"] == call["target_id"]) & (ratings["criterion"] == "entailment")].iterrows():
            expected[int(rating["score"]), int(call["score"])] += 1
    assert entry.confusion.labels == [0, 1, 2]
    assert entry.confusion.matrix == expected.tolist()
    assert entry.confusion.n_pairs == expected.sum() > 0


@pytest.mark.full_report  # checks the PNG figures
def test_a_calibration_run_leaves_a_self_contained_report_html_with_every_figure(calibration_runs, tmp_path):
    import shutil

    run = Path(shutil.copytree(calibration_runs[0], tmp_path / "copy"))  # the shared run's reports are light
    write_report(run, holdout=False)  # what a run writes at its end, with the default settings
    page = parse(run / "report.html")
    report = json.loads((run / "report.json").read_text())
    per_criterion = [5 + any(v and v["verdict"] != "same candidate" for v in e["verdicts"].values())
                     for e in report["criteria"].values()]
    assert len(page.images) == sum(per_criterion) + 1  # + the drift audit
    assert all(img.shape[0] > 100 and img.shape[1] > 100 for img in decoded_images(page))
    assert page.links == [] and page.scripts == 0  # nothing to fetch, nothing to run
    assert page.tables == markdown_tables((run / "report.md").read_text()) > 0
    html = (run / "report.html").read_text()
    assert html.count("<h1") == 1 and "<h2" in html  # the report's own headings sit under the page title


@pytest.mark.full_report  # checks the PNG figures
def test_report_html_can_be_skipped_and_rebuilt(calibration_runs, tmp_path):
    import shutil

    run = Path(shutil.copytree(calibration_runs[0], tmp_path / "copy"))
    (run / "report.html").unlink()
    write_report(run, n_boot=50, html=False)
    assert not (run / "report.html").exists()
    write_report(run, n_boot=50)
    assert len(parse(run / "report.html").images) >= 6


# -- bench and OpenTumorBoard ---------------------------------------------------------------------


@pytest.mark.full_report  # checks the PNG figures
def test_a_bench_report_html_has_rounds_transitions_and_quality_figures(bench_run):
    report = write_bench_report(bench_run, n_boot=50)
    page = parse(bench_run / "report.html")
    assert len(decoded_images(page)) == 3
    assert page.tables == markdown_tables((bench_run / "bench_report.md").read_text())
    assert len(report.pipelines) == report.counts.case_artifacts
    assert any(p.quality is not None for p in report.pipelines)
    html = (bench_run / "report.html").read_text()
    for title in ("Consensus and stop reasons by round", "Vote transitions", "Quality against tokens"):
        assert title in html


def test_candidate_records_carry_the_mae_of_every_candidate_pruned_ones_on_their_raced_targets(calibration_runs):
    run = calibration_runs[0]
    records = json.loads((run / "report.json").read_text())["criteria"]["entailment"]["candidates"]
    cands = pd.read_csv(run / "candidates.csv", keep_default_na=False, dtype=str).set_index("candidate_id")
    scores = pd.read_csv(run / "scores.csv", dtype={"target_id": str})
    ratings = pd.read_csv(Path(json.loads((run / "config.json").read_text())["pack"]) / "ratings.csv", dtype={"target_id": str})
    assert [r["candidate_id"] for r in records] == cands.index.tolist()
    statuses = set()
    for r in records:
        statuses.add(r["status"])
        stored = cands.loc[r["candidate_id"], "train_mae"]
        if stored:
            assert r["train_mae"] == pytest.approx(float(stored))
        elif r["status"] == "pruned":
            calls = scores[(scores["candidate_id"] == r["candidate_id"]) & (scores["phase"] == "evolution")
                           & (scores["outcome"] == "score")]
            errors = [abs(c["score"] - x["score"]) for _, c in calls.iterrows()
                      for _, x in ratings[ratings["target_id"] == c["target_id"]].iterrows()]
            assert r["train_mae"] == pytest.approx(sum(errors) / len(errors))
    assert "pruned" in statuses  # the fixture's racing stops at least one mutant


def test_raw_html_quoted_from_model_output_is_shown_as_text_never_run():
    from evolve.report._html import markdown_html, page

    text = "| guidance |\n|---|\n| <img src=http://127.0.0.1:9/x.png> score `<b>` & <script>alert(1)</script> |\n"
    out = _Page()
    out.feed(page("t", [markdown_html(text)]))
    assert out.images == [] and out.scripts == 0 and out.tables == 1
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in markdown_html(text)
