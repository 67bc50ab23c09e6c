"""Table 2, panel sizes, score distributions, quality by complexity and the structured-minus-
free-form difference (issue 13 item 8), recomputed with plain Python from the same artifacts."""

from __future__ import annotations

import json
import statistics
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest

from evolve.report import write_bench_report
from tests.report.test_bench_tables import (
    PANELS,
    all_runs,
    complexity,
    judge_rows,
    mean,
    output_quality,
    unit_scores,
    write_folder,
)

N_BOOT = 300
TEXTS = {"case-1": "one two three four", "case-2": "a b c d e f g h", "case-3": "x " * 12, "case-4": "only two"}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    runs = all_runs()
    rows = judge_rows(runs)
    folder = write_folder(tmp_path_factory.mktemp("cohort"), runs, rows)
    (folder / "cases.jsonl").write_text("".join(
        json.dumps({"case_id": c, "title": f"INVENTED {c}", "text": t, "reference_answer": "x"}) + "\n"
        for c, t in TEXTS.items()), encoding="utf-8")
    report = write_bench_report(folder, n_boot=N_BOOT, seed=5)
    known = {(r.case_id, r.model, r.condition) for r in runs}
    kept = [{**r, "condition": "all"} if r["condition"] == "" else r for r in rows
            if r["case_id"] != "case-9" and (r["condition"] == "" or (r["case_id"], r["model"], r["condition"]) in known)]
    # the fixture's one non-primary role row is irrelevant here (role components are not used)
    return runs, unit_scores(kept), report, folder


def test_table2_counts_words_and_averages_complexity_per_case(built):
    runs, units, report, folder = built
    (t2,) = report.tables.table2
    words = [len(t.split()) for t in TEXTS.values()]
    assert t2.n_cases == 4 and t2.words_median == statistics.median(words)
    assert (t2.words_min, t2.words_max) == (min(words), max(words))
    assert t2.words_q1 == float(np.percentile(words, 25)) and t2.words_q3 == float(np.percentile(words, 75))
    per_case = defaultdict(list)  # criterion 10: each panel's score, then the mean per case
    for (case, _m, _cond, comp, _r, n), s in units.items():
        if comp == "case" and n == 10 and s is not None:
            per_case[case].append(s)
    assert t2.n_complexity == len(per_case)
    assert t2.complexity_mean == pytest.approx(mean([mean(v) for v in per_case.values()]))
    assert t2.complexity_mean_low <= t2.complexity_mean <= t2.complexity_mean_high
    assert list(pd.read_csv(folder / "table2.csv").columns)[:2] == ["n_cases", "words_median"]
    assert "## Table 2 — cohort" in (folder / "bench_report.md").read_text()


def test_panel_sizes_count_each_panel_once(built):
    _runs, _units, report, _folder = built
    rows = {(r.model, r.topology): r for r in report.tables.panels}
    for model in ("model-a", "model-b"):
        sizes = [len(p) for (c, m), p in PANELS.items() if m == model]
        row = rows[(model, "single")]
        assert row.n_panels == len(sizes) and row.median_roles == statistics.median(sizes)
        assert row.by_size == [sizes.count(k) for k in range(1, 6)]
    assert rows[("all", "single")].n_panels == len(PANELS)


def test_score_distributions_of_the_final_report(built):
    _runs, units, report, _folder = built
    by_number = defaultdict(list)
    for (case, _m, _cond, comp, _r, n), s in units.items():
        if comp == "final" and s is not None:
            by_number[n].append((case, s))
    for row in report.tables.distribution:
        obs = by_number[row.number]
        assert row.n_outputs == len(obs)
        assert row.at_max_share == pytest.approx(sum(round(s) == 3 for _, s in obs) / len(obs))
        assert row.zero_or_one_share == pytest.approx(sum(round(s) <= 1 for _, s in obs) / len(obs))
        cases = defaultdict(list)
        for c, s in obs:
            cases[c].append(s)
        case_means = [mean(v) for v in cases.values()]
        assert row.n_cases == len(case_means) and row.case_median == pytest.approx(statistics.median(case_means))
    assert sorted(r.number for r in report.tables.distribution) == list(range(1, 9))


def test_quality_by_complexity_groups_outputs_by_their_cases_complexity(built):
    runs, units, report, _folder = built
    quality, cplx = output_quality(units), complexity(units, runs)
    groups = defaultdict(list)
    for key, q in quality.items():
        if key in cplx:
            groups[round(cplx[key])].append(q)
    rows = {r.complexity: r for r in report.tables.complexity}
    assert set(rows) == set(groups)
    for level, qs in groups.items():
        assert rows[level].n_outputs == len(qs) and rows[level].quality_mean == pytest.approx(mean(qs))
        assert rows[level].below_2_share == pytest.approx(sum(q < 2 for q in qs) / len(qs))


def test_structured_minus_free_form_is_paired_by_output(built):
    _runs, units, report, folder = built
    pairs = defaultdict(list)
    for (case, model, cond, comp, _r, n), s in units.items():
        if comp == "final" and cond == "structured" and s is not None:
            other = units.get((case, model, "free-form", comp, _r, n))
            if other is not None:
                pairs[n].append(s - other)
    rows = {r.number: r for r in report.tables.format}
    assert set(rows) == set(pairs)
    for n, diffs in pairs.items():
        assert rows[n].n_pairs == len(diffs) and rows[n].difference == pytest.approx(mean(diffs))
        assert rows[n].difference_low <= rows[n].difference <= rows[n].difference_high
    md = (folder / "bench_report.md").read_text()
    assert "## Structured − free-form (final report)" in md and "## Final-report quality by case complexity" in md
