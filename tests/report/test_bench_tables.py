"""Benchmark tables 3, 4, 6, 7, 8, 9 and role harmonisation, checked against plain-Python recomputation.

The synthetic run folder is built from :class:`~evolve.consilium.CaseRun` objects and a
hand-made ``judge_scores.csv``; each test recomputes a table with loops over the same objects
and CSV rows and compares it with what :func:`build_bench_report` produced.
"""

from __future__ import annotations

import csv
import json
import math
import statistics
from collections import Counter, defaultdict
from itertools import pairwise
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evolve.consilium import CallRecord, CaseRun, RoundRecord, Vote
from evolve.data import PanelRole
from evolve.errors import DataError, RunError
from evolve.report import (
    JUDGE_SCORE_COLUMNS,
    ROLES_COLUMNS,
    TABLE3_COLUMNS,
    TABLE4_COLUMNS,
    TABLE6_COLUMNS,
    TABLE7_COLUMNS,
    TABLE8_COLUMNS,
    TABLE9_COLUMNS,
    build_bench_report,
    harmonise_role,
    write_bench_report,
)
from evolve.stats import cluster_bootstrap

N_BOOT = 400
CASES = ("case-1", "case-2", "case-3", "case-4")
MODELS = ("model-a", "model-b")
CONDITIONS = ("free-form", "structured")

PANELS = {  # (case, model) -> [(label, primary)]; panels are shared by both conditions
    ("case-1", "model-a"): [("Cardiologist", True), ("Infectious Diseases Specialist", False)],
    ("case-2", "model-a"): [("Cardiology consultant", True), ("ID specialist", False)],
    ("case-3", "model-a"): [("cardiology", False), ("Neurologist", True)],
    ("case-4", "model-a"): [("Neurology", True), ("Radiologist", False)],
    ("case-1", "model-b"): [("Cardiologist", True), ("Radiology", False), ("Infectiologist", False)],
    ("case-2", "model-b"): [("Paediatrician", True), ("Pediatrics", False)],
    ("case-3", "model-b"): [("Neurology", True), ("ENT surgeon", False)],
    ("case-4", "model-b"): [("Intensivist", True), ("Critical care physician", False)],
}

# (case, model, condition) -> (votes per round as "Y"/"N" per role in panel order, stop reason)
SCHEDULE = {
    ("case-1", "model-a", "free-form"): (["YY"], "consensus"),
    ("case-1", "model-a", "structured"): (["NY", "YY"], "consensus"),
    ("case-2", "model-a", "free-form"): (["NN", "NY", "YY"], "consensus"),
    ("case-2", "model-a", "structured"): (["NY", "NN", "NY", "YN", "NY"], "max_rounds"),
    ("case-3", "model-a", "free-form"): (["NY"], "no_substantive_change"),
    ("case-3", "model-a", "structured"): (["NY", "NN"], "failure"),
    ("case-4", "model-a", "free-form"): (["YY"], "consensus"),
    ("case-4", "model-a", "structured"): (["YN", "YN", "YY"], "consensus"),
    ("case-1", "model-b", "free-form"): (["YYY"], "consensus"),
    ("case-1", "model-b", "structured"): (["NYN", "YYN", "YYY"], "consensus"),
    ("case-2", "model-b", "free-form"): (["NN", "YN"], "repeated_report"),
    ("case-2", "model-b", "structured"): (["YN", "YY"], "consensus"),
    ("case-3", "model-b", "free-form"): (["NY", "YY"], "consensus"),
    ("case-3", "model-b", "structured"): (["YY"], "consensus"),
    ("case-4", "model-b", "free-form"): (["NN", "NY", "YN", "YY"], "consensus"),
    ("case-4", "model-b", "structured"): (["NY", "YY"], "consensus"),
}

REASONING = (1, 2, 3, 4, 5, 7, 8)
OPINION = (1, 2, 4, 6, 8)
NAMES = {1: "factual_accuracy", 2: "problem_prioritisation", 3: "data_use", 4: "reasoning_coherence",
         5: "differential_diagnosis", 6: "final_conclusion", 7: "management", 8: "clinical_safety",
         9: "panel_adequacy", 10: "case_complexity"}


def make_run(case_id: str, model: str, condition: str, schedule: list[str], stop: str, k: int) -> CaseRun:
    roles = tuple(PanelRole(name=n, primary=p, rationale="synthetic") for n, p in PANELS[(case_id, model)])
    rounds = []
    for number, votes in enumerate(schedule, start=1):
        vs = tuple(Vote(role=r.name, round=number, vote="yes" if v == "Y" else "no",
                        critique="" if v == "Y" else "objection") for r, v in zip(roles, votes))
        rounds.append(RoundRecord(number=number, report=f"report {number}", votes=vs, consensus="N" not in votes))
    calls = [
        CallRecord(stage="role_assignment", model=model, prompt_tokens=1000 + 10 * k, completion_tokens=200),
        CallRecord(stage="synthesis", model=model, prompt_tokens=3000 + 7 * k, completion_tokens=900 + k),
        *(CallRecord(stage="vote", role=r.name, round=i + 1, model=model, prompt_tokens=2000, completion_tokens=150 + k)
          for i in range(len(schedule)) for r in roles),
    ]
    if k == 5:  # a judge call recorded on a pipeline: not a generation token
        calls.append(CallRecord(stage="judge", model="judge", prompt_tokens=99_999, completion_tokens=9_999))
    failed = stop == "failure"
    return CaseRun(
        case_id=case_id, model=model, condition=condition, roles=roles, rounds=tuple(rounds),
        final="" if failed else f"final opinion {k}", stop_reason=stop, rounds_completed=len(schedule),
        consensus=not failed and "N" not in schedule[-1], first_round_consensus="N" not in schedule[0],
        calls=tuple(calls), error="moderator timed out" if failed else "",
    )


def all_runs() -> list[CaseRun]:
    return [make_run(c, m, cond, votes, stop, k) for k, ((c, m, cond), (votes, stop)) in enumerate(SCHEDULE.items())]


def score_of(k: int, component: str, number: int) -> int:
    return (k * 3 + number * (2 if component == "final" else 1) + len(component)) % 4


def judge_rows(runs: list[CaseRun], case_per_pipeline: bool = False) -> list[dict]:
    """Final 1-8 for both conditions, primary role reasoning/opinion for structured, case 9/10; a few
    not-evaluable and failed calls, a second repeat, one non-primary role row and one orphan row.

    Case rows follow the runner: judged once per case and model, condition and topology empty
    (``case_per_pipeline``: once per pipeline, with its condition and topology instead).
    """
    rows = []
    panels_done = set()

    def add(r: CaseRun, component: str, role: str, number: int, outcome: str = "score", score=None, repeat: int = 1):
        wide = component == "case" and not case_per_pipeline
        rows.append({
            "case_id": r.case_id, "model": r.model, "condition": "" if wide else r.condition,
            "topology": "" if wide else r.topology,
            "component": component, "role": role, "criterion": NAMES[number], "number": number, "repeat": repeat,
            "seed": 7, "outcome": outcome, "score": "" if outcome != "score" else score, "guidance_id": "g",
            "rubric_version": "1", "prompt_hash": "abc", "prompt_tokens": 100, "completion_tokens": 20,
            "cached": False, "rationale": "because",
        })

    for k, r in enumerate(runs):
        if r.stop_reason == "failure":
            continue
        primary = next(p.name for p in r.roles if p.primary)
        for n in range(1, 9):
            if k == 2 and n == 6:
                add(r, "final", "", n, "not_evaluable")
            elif k == 4 and n == 8:
                add(r, "final", "", n, "model_failure")
            else:
                add(r, "final", "", n, score=score_of(k, "final", n))
        if r.condition == "structured":
            for n in REASONING:
                add(r, "reasoning", primary, n, score=score_of(k, "reasoning", n))
            for n in OPINION:
                add(r, "opinion", primary, n, score=score_of(k, "opinion", n))
        if case_per_pipeline or (r.case_id, r.model) not in panels_done:
            panels_done.add((r.case_id, r.model))
            add(r, "case", "", 9, score=score_of(k, "case", 9))
            add(r, "case", "", 10, score=score_of(k, "case", 10))
    first = runs[1]  # case-1 model-a structured: a second repeat of final criterion 1 and a non-primary role row
    add(first, "final", "", 1, score=(score_of(1, "final", 1) + 1) % 4, repeat=2)
    add(first, "reasoning", "Infectious Diseases Specialist", 1, score=0)
    orphan = runs[0].model_copy(update={"case_id": "case-9"})
    add(orphan, "final", "", 1, score=3)
    return rows


def write_folder(root: Path, runs: list[CaseRun], scores: list[dict] | None) -> Path:
    (root / "cases").mkdir(parents=True)
    for r in runs:
        (root / "cases" / f"{r.case_id}.{r.model}.{r.condition}.{r.topology}.json").write_text(r.model_dump_json(), "utf-8")
    if scores is not None:
        with (root / "judge_scores.csv").open("w", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, fieldnames=JUDGE_SCORE_COLUMNS)
            w.writeheader()
            w.writerows(scores)
    return root


@pytest.fixture(scope="module")
def runs() -> list[CaseRun]:
    return all_runs()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, runs) -> Path:
    return write_folder(tmp_path_factory.mktemp("bench"), runs, judge_rows(runs))


@pytest.fixture(scope="module")
def report(run_dir) -> dict:
    """The report as ``bench_report.json`` holds it (the tables' rows keyed by their CSV columns)."""
    return build_bench_report(run_dir, n_boot=N_BOOT, seed=3).model_dump()


# -- plain-Python recomputation helpers -----------------------------------------------------------


def groups_of(key_model, key_condition):
    """Which (model, condition) groups a row belongs to, pooled rows included."""
    return [(key_model, key_condition), ("all", key_condition)]


def mean(xs):
    return sum(xs) / len(xs) if xs else None


def close(a, b):
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def rows_by(table, *keys):
    return {tuple(r[k] for k in keys): r for r in table}


def read_scores(run_dir: Path, runs: list[CaseRun]):
    """Judge rows that belong to a case artifact and, at role level, to its primary role."""
    primary = {(r.case_id, r.model, r.condition): next((p.name for p in r.roles if p.primary), "") for r in runs}
    with (run_dir / "judge_scores.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    panels = {(c, m) for c, m, _ in primary}
    kept = []
    for row in rows:
        key = (row["case_id"], row["model"], row["condition"])
        if row["condition"] == "":  # a case row judged once per case and model
            if (row["case_id"], row["model"]) in panels:
                kept.append({**row, "condition": "all"})
            continue
        if key not in primary:
            continue
        if row["component"] in ("reasoning", "opinion") and row["role"] != primary[key]:
            continue
        kept.append(row)
    return kept


def unit_scores(rows):
    """(case, model, condition, component, role, number) -> mean numeric score over repeats (None if none)."""
    acc = defaultdict(list)
    for row in rows:
        key = (row["case_id"], row["model"], row["condition"], row["component"], row["role"], int(row["number"]))
        acc.setdefault(key, [])
        if row["outcome"] == "score":
            acc[key].append(float(row["score"]))
    return {k: mean(v) for k, v in acc.items()}


def output_quality(units):
    per = defaultdict(list)
    for (case, model, cond, comp, _role, n), s in units.items():
        if comp == "final" and 1 <= n <= 8 and s is not None:
            per[(case, model, cond)].append(s)
    return {k: mean(v) for k, v in per.items()}


def complexity(units, runs):
    """Criterion 10 per output: its own case row, or the one row of its case and model (condition 'all')."""
    c10 = {(c, m, cond): s for (c, m, cond, comp, _r, n), s in units.items() if comp == "case" and n == 10 and s is not None}
    out = {}
    for r in runs:
        own, wide = c10.get((r.case_id, r.model, r.condition)), c10.get((r.case_id, r.model, "all"))
        if own is not None or wide is not None:
            out[(r.case_id, r.model, r.condition)] = own if own is not None else wide
    return out


def manual_cluster_interval(case_ids, values, n_boot, seed):
    """Independent case-resampling loop: draw cases, keep all their observations, percentile interval."""
    cases = sorted(set(case_ids))
    by_case = {c: [v for cid, v in zip(case_ids, values) if cid == c] for c in cases}
    rng = np.random.default_rng(seed)
    reps = []
    for _ in range(n_boot):
        drawn = rng.integers(0, len(cases), size=len(cases))
        obs = [v for i in drawn for v in by_case[cases[i]]]
        reps.append(sum(obs) / len(obs))
    return tuple(np.quantile(reps, [0.025, 0.975]))


# -- Table 3 --------------------------------------------------------------------------------------


def test_table3_matches_recomputation(report, runs):
    t3 = rows_by(report["tables"]["table3"], "model", "condition")
    expected = defaultdict(list)
    for r in runs:
        for g in groups_of(r.model, r.condition):
            expected[g].append(r)
    assert set(t3) == set(expected)
    for g, rs in expected.items():
        row = t3[g]
        done = [r for r in rs if r.stop_reason != "failure"]
        assert row["n_pipelines"] == len(rs)
        assert row["n_completed"] == len(done)
        assert row["n_cases"] == len({r.case_id for r in rs})
        assert close(row["first_round_consensus_share"], mean([float(r.first_round_consensus) for r in done]))
        assert close(row["consensus_share"], mean([float(r.consensus) for r in done]))
        assert close(row["mean_rounds"], mean([r.rounds_completed for r in done]))
        assert close(row["max_rounds_share"], mean([float(r.stop_reason == "max_rounds") for r in done]))
        assert close(row["failure_share"], mean([float(r.stop_reason == "failure") for r in rs]))
        counts = Counter(r.stop_reason for r in rs)
        for reason in ("consensus", "no_substantive_change", "repeated_report", "max_rounds", "failure"):
            assert row[f"stop_{reason}"] == counts[reason]
    assert t3[("model-a", "structured")]["stop_failure"] == 1
    assert t3[("model-a", "structured")]["stop_max_rounds"] == 1


def test_intervals_contain_estimates(report):
    n = 0
    for name, table in report["tables"].items():
        for row in table:
            for col, est in row.items():
                if f"{col}_low" in row and est is not None and row[f"{col}_low"] is not None:
                    assert row[f"{col}_low"] - 1e-9 <= est <= row[f"{col}_high"] + 1e-9, (name, col, row)
                    n += 1
    assert n > 100


def test_intervals_resample_whole_cases(report, runs):
    """A per-model share equals evolve.stats.cluster_bootstrap; a pooled mean (two pipelines per case)
    equals an independent loop that draws cases and keeps all their observations."""
    row = rows_by(report["tables"]["table3"], "model", "condition")[("model-b", "free-form")]
    rs = [r for r in runs if r.model == "model-b" and r.condition == "free-form"]
    pairs = pd.DataFrame({"case_id": [r.case_id for r in rs], "judge": [float(r.first_round_consensus) for r in rs]})
    pairs["rater"] = pairs["judge"]
    iv = cluster_bootstrap(pairs, lambda j, r: float(np.mean(j)), n_boot=N_BOOT, seed=3)
    assert row["first_round_consensus_share_low"] == pytest.approx(iv.low)
    assert row["first_round_consensus_share_high"] == pytest.approx(iv.high)

    pooled = rows_by(report["tables"]["table3"], "model", "condition")[("all", "free-form")]
    rs = [r for r in runs if r.condition == "free-form"]
    low, high = manual_cluster_interval([r.case_id for r in rs], [r.rounds_completed for r in rs], N_BOOT, 3)
    assert (pooled["mean_rounds_low"], pooled["mean_rounds_high"]) == pytest.approx((low, high))
    # resampling pipelines instead of cases would draw 8 units, not 4: a different interval
    rng = np.random.default_rng(3)
    vals = np.array([r.rounds_completed for r in rs], float)
    naive = np.quantile([vals[rng.integers(0, len(vals), len(vals))].mean() for _ in range(N_BOOT)], [0.025, 0.975])
    assert tuple(naive) != pytest.approx((low, high))


def test_same_seed_same_intervals_other_seed_differs(run_dir, report):
    again = build_bench_report(run_dir, n_boot=N_BOOT, seed=3).model_dump()
    assert again["tables"] == report["tables"]
    other = build_bench_report(run_dir, n_boot=N_BOOT, seed=4).model_dump()
    assert other["tables"]["table3"] != report["tables"]["table3"]


# -- Table 4 --------------------------------------------------------------------------------------


def test_table4_matches_recomputation(report, runs):
    counts = defaultdict(Counter)
    for r in runs:
        rounds = list(r.rounds)
        for a, b in pairwise(rounds):
            assert b.number == a.number + 1
            nxt = {v.role: v.vote for v in b.votes}
            for v in a.votes:
                kind = f"{v.vote}_{nxt[v.role]}"
                for g in groups_of(r.model, r.condition):
                    counts[(*g, "all", "all")][kind] += 1
                    counts[(*g, "all", f"{a.number}-{b.number}")][kind] += 1
                    counts[(*g, harmonise_role(v.role), "all")][kind] += 1
    t4 = rows_by(report["tables"]["table4"], "model", "condition", "role", "rounds")
    assert set(t4) == set(counts)
    for key, c in counts.items():
        row = t4[key]
        total = sum(c.values())
        assert row["n_transitions"] == total
        for kind in ("yes_yes", "yes_no", "no_yes", "no_no"):
            assert row[kind] == c[kind]
            assert close(row[f"{kind}_share"], c[kind] / total)
        from_no = c["no_yes"] + c["no_no"]
        assert close(row["dissent_resolved_share"], c["no_yes"] / from_no if from_no else None)
        from_yes = c["yes_yes"] + c["yes_no"]
        assert close(row["assent_lost_share"], c["yes_no"] / from_yes if from_yes else None)
    # roles with different exact labels share one category row
    assert ("model-a", "structured", "cardiology", "all") in t4


def test_table4_counts_consecutive_round_pairs_only(tmp_path):
    run = make_run("case-2", "model-a", "free-form", ["NN", "NY", "YY"], "consensus", 0)
    report = build_bench_report(write_folder(tmp_path / "one", [run], None), n_boot=50).model_dump()
    t4 = rows_by(report["tables"]["table4"], "role", "rounds")
    assert set(t4) == {("all", "all"), ("all", "1-2"), ("all", "2-3"), ("cardiology", "all"), ("infectious disease", "all")}
    assert t4[("all", "all")]["n_transitions"] == 4  # 2 roles x 2 consecutive pairs, never round 1 -> 3
    p12, p23 = t4[("all", "1-2")], t4[("all", "2-3")]
    assert (p12["no_no"], p12["no_yes"], p12["yes_yes"], p12["yes_no"]) == (1, 1, 0, 0)
    assert (p23["no_no"], p23["no_yes"], p23["yes_yes"], p23["yes_no"]) == (0, 1, 1, 0)
    assert t4[("cardiology", "all")]["no_yes"] == 1 and t4[("cardiology", "all")]["no_no"] == 1
    assert t4[("all", "all")]["dissent_resolved_share"] == pytest.approx(2 / 3)


# -- harmonisation --------------------------------------------------------------------------------


@pytest.mark.parametrize(("label", "category"), [
    ("Cardiologist", "cardiology"), ("cardiology", "cardiology"), ("Cardiology consultant", "cardiology"),
    ("Consultant in Cardiology", "cardiology"), ("Infectious Diseases Specialist", "infectious disease"),
    ("ID specialist", "infectious disease"), ("Infectiologist", "infectious disease"),
    ("Paediatrician", "pediatrics"), ("Pediatrics", "pediatrics"), ("ENT surgeon", "otorhinolaryngology"),
    ("Intensivist", "critical care"), ("Critical care physician", "critical care"),
    ("Emergency Physician", "emergency medicine"), ("Haematologist", "hematology"),
    ("Interventional Cardiologist", "interventional cardiology"), ("Neuroradiologist", "neuroradiology"),
    ("Physician", "physician"),
])
def test_harmonise_role(label, category):
    assert harmonise_role(label) == category


def test_roles_table_counts_exact_labels_per_category(report, runs):
    panels = {}
    for r in runs:
        panels[(r.case_id, r.model)] = r.roles  # both conditions share one panel: count it once
    labels = Counter(p.name for roles in panels.values() for p in roles)
    primaries = Counter(p.name for roles in panels.values() for p in roles if p.primary)
    by_cat = defaultdict(set)
    for label in labels:
        by_cat[harmonise_role(label)].add(label)
    roles = report["roles"]
    assert roles["n_panels"] == len(PANELS)
    assert roles["n_assignments"] == sum(labels.values())
    assert roles["n_exact_labels"] == len(labels)
    assert roles["n_categories"] == len(by_cat)
    assert roles["n_collapsed"] == len(labels) - len(by_cat)
    cats = {c["category"]: c for c in roles["categories"]}
    for cat, members in by_cat.items():
        assert cats[cat]["n_exact_labels"] == len(members)
        assert set(cats[cat]["exact_labels"].split("; ")) == members
        assert cats[cat]["n_assignments"] == sum(labels[m] for m in members)
        assert cats[cat]["n_primary"] == sum(primaries[m] for m in members)
    assert cats["cardiology"]["n_exact_labels"] == 3  # Cardiologist, Cardiology consultant, cardiology


# -- judge-based tables ---------------------------------------------------------------------------


def test_left_out_rows_are_noted(report):
    notes = " ".join(report["notes"])
    assert "1 judge_scores.csv rows name no case artifact" in notes
    assert "1 role-level judge rows are not the primary role's" in notes


def test_table6_matches_recomputation(report, runs, run_dir):
    rows = read_scores(run_dir, runs)
    units = unit_scores(rows)
    parts = {"reasoning": ("reasoning", range(1, 9)), "opinion": ("opinion", range(1, 9)),
             "final": ("final", range(1, 9)), "case-9": ("case", (9,)), "case-10": ("case", (10,))}
    t6 = {(r["model"], r["condition"], r["component"] if r["component"] != "case" else f"case-{r['criteria']}"): r
          for r in report["tables"]["table6"]}
    seen = set()
    groups = {(r.model, r.condition) for r in runs} | {(m, "all") for m in MODELS}
    groups |= {("all", c) for c in (*CONDITIONS, "all")}
    for model, cond in groups:
        for label, (comp, numbers) in parts.items():
            calls = [row for row in rows if row["component"] == comp and int(row["number"]) in numbers
                     and row["condition"] == cond and model in ("all", row["model"])]
            if not calls:
                continue
            seen.add((model, cond, label))
            row = t6[(model, cond, label)]
            numeric = [row_ for row_ in calls if row_["outcome"] == "score"]
            assert row["n_calls"] == len(calls)
            assert row["n_numeric"] == len(numeric)
            assert row["n_not_evaluable"] == sum(c["outcome"] == "not_evaluable" for c in calls)
            assert row["n_model_failure"] == sum(c["outcome"] == "model_failure" for c in calls)
            assert close(row["coverage"], len(numeric) / len(calls))
            vals = [s for (c, m, cd, cp, _r, n), s in units.items()
                    if cp == comp and n in numbers and cd == cond and model in ("all", m) and s is not None]
            assert close(row["mean"], mean(vals))  # not-evaluable and failures are excluded, never zeros
            assert close(row["sd"], statistics.pstdev(vals))
    assert seen == set(t6)
    assert t6[("model-a", "free-form", "final")]["n_not_evaluable"] == 1
    assert t6[("model-a", "free-form", "final")]["n_model_failure"] == 1
    assert t6[("model-a", "free-form", "final")]["criteria"] == "1,2,3,4,5,6,7,8"
    assert t6[("model-a", "structured", "reasoning")]["criteria"] == "1,2,3,4,5,7,8"
    assert ("model-a", "free-form", "reasoning") not in t6  # role level judged on structured only here
    # case-level criteria judged once per case and model: one call per case, condition "all"
    assert t6[("model-a", "all", "case-10")]["n_calls"] == len(CASES)
    assert t6[("all", "all", "case-9")]["n_calls"] == len(CASES) * len(MODELS)
    assert not any(k[2].startswith("case") and k[1] != "all" for k in t6)


def test_case_rows_judged_per_pipeline(tmp_path, runs):
    """judge_scores.csv may also carry criteria 9/10 per pipeline (with its condition): used as given."""
    folder = write_folder(tmp_path / "per-pipeline", runs, judge_rows(runs, case_per_pipeline=True))
    report = build_bench_report(folder, n_boot=50).model_dump()
    units = unit_scores(read_scores(folder, runs))
    quality, cplx = output_quality(units), complexity(units, runs)
    t6 = {(r["model"], r["condition"], r["criteria"]): r for r in report["tables"]["table6"] if r["component"] == "case"}
    assert t6[("model-a", "structured", "10")]["n_calls"] == 3  # one pipeline of model-a structured failed
    assert not any(cond == "all" for _m, cond, _c in t6)
    row = rows_by(report["tables"]["table9"], "condition", "rounds")[("all", "1")]
    ones = [(r.case_id, r.model, r.condition) for r in runs if r.rounds_completed == 1
            and (r.case_id, r.model, r.condition) in quality]
    assert close(row["complexity_mean"], mean([cplx[k] for k in ones]))


def test_table7_matches_recomputation(report, runs, run_dir):
    quality = output_quality(unit_scores(read_scores(run_dir, runs)))
    t7 = rows_by(report["tables"]["table7"], "model", "condition")
    expected = defaultdict(list)
    for r in runs:
        for g in groups_of(r.model, r.condition):
            expected[g].append(r)
    assert set(t7) == set(expected)
    for g, rs in expected.items():
        row = t7[g]
        tokens = [sum(c.prompt_tokens + c.completion_tokens for c in r.calls if c.stage != "judge") for r in rs]
        q = [quality[(r.case_id, r.model, r.condition)] for r in rs if (r.case_id, r.model, r.condition) in quality]
        assert row["n_pipelines"] == len(rs)
        assert row["n_scored"] == len(q)
        assert close(row["mean_tokens"], mean(tokens))
        assert close(row["quality"], mean(q))
        assert close(row["tokens_per_point"], mean(tokens) / mean(q))
    # the judge call recorded on pipeline 5 is not counted as generation
    assert t7[("model-a", "free-form")]["mean_tokens"] < 50_000


def test_table8_matches_recomputation(report, runs, run_dir):
    units = unit_scores(read_scores(run_dir, runs))
    t8 = rows_by(report["tables"]["table8"], "model", "condition", "number")
    def component_mean(model, cond, number, comp):
        return mean([s for (_c, mo, cd, cp, _r, n), s in units.items()
                     if cp == comp and n == number and cd == cond and model in ("all", mo) and s is not None])

    for (model, cond, number), row in t8.items():
        def m(comp, key=(model, cond, number)):
            return component_mean(*key, comp)
        assert close(row["final_mean"], m("final"))
        assert close(row["reasoning_mean"], m("reasoning"))
        assert close(row["opinion_mean"], m("opinion"))
        if m("reasoning") is not None:
            assert close(row["final_minus_reasoning"], m("final") - m("reasoning"))
        else:
            assert row["final_minus_reasoning"] is None
        assert row["criterion"] == NAMES[number]
    assert t8[("all", "structured", 6)]["reasoning_mean"] is None  # criterion 6 is not judged on reasoning
    assert t8[("all", "structured", 3)]["opinion_mean"] is None
    assert {n for (_m, _c, n) in t8} == set(range(1, 9))


def test_table9_groups_rounds_1_2_and_3_plus(report, runs, run_dir):
    units = unit_scores(read_scores(run_dir, runs))
    quality, cplx = output_quality(units), complexity(units, runs)
    t9 = rows_by(report["tables"]["table9"], "condition", "rounds")
    assert {k[1] for k in t9} == {"1", "2", "3+"}
    for scope in ("all", *CONDITIONS):
        for group in ("1", "2", "3+"):
            outs = [r for r in runs if (r.case_id, r.model, r.condition) in quality
                    and scope in ("all", r.condition)
                    and (str(r.rounds_completed) == group or (group == "3+" and r.rounds_completed >= 3))]
            q = [quality[(r.case_id, r.model, r.condition)] for r in outs]
            c = [cplx[(r.case_id, r.model, r.condition)] for r in outs if (r.case_id, r.model, r.condition) in cplx]
            row = t9[(scope, group)]
            assert row["n_outputs"] == len(q)
            assert close(row["mean"], mean(q))
            assert close(row["sd"], statistics.pstdev(q) if q else None)
            assert close(row["below_2_share"], mean([float(x < 2) for x in q]))
            assert close(row["complexity_mean"], mean(c))
    # rounds 3, 4 and 5 all land in 3+ (the max-round pipeline has 5 rounds, one has 4)
    assert t9[("all", "3+")]["n_outputs"] == sum(
        1 for r in runs if r.rounds_completed >= 3 and r.stop_reason != "failure")
    low, high = manual_cluster_interval(
        [r.case_id for r in runs if r.rounds_completed == 1 and (r.case_id, r.model, r.condition) in quality],
        [quality[(r.case_id, r.model, r.condition)] for r in runs
         if r.rounds_completed == 1 and (r.case_id, r.model, r.condition) in quality], N_BOOT, 3)
    assert (t9[("all", "1")]["mean_low"], t9[("all", "1")]["mean_high"]) == pytest.approx((low, high))


# -- files, unjudged runs, errors -----------------------------------------------------------------


def test_write_bench_report_files(tmp_path, runs):
    folder = write_folder(tmp_path / "run", runs, judge_rows(runs))
    report = write_bench_report(folder, n_boot=100, seed=1).model_dump()
    for name, cols in [("table3", TABLE3_COLUMNS), ("table4", TABLE4_COLUMNS), ("table6", TABLE6_COLUMNS),
                       ("table7", TABLE7_COLUMNS), ("table8", TABLE8_COLUMNS), ("table9", TABLE9_COLUMNS),
                       ("roles", ROLES_COLUMNS)]:
        frame = pd.read_csv(folder / f"{name}.csv")
        assert list(frame.columns) == cols
        expected = report["roles"]["categories"] if name == "roles" else report["tables"][name]
        assert len(frame) == len(expected) > 0
    assert json.loads((folder / "bench_report.json").read_text("utf-8")) == report
    md = (folder / "bench_report.md").read_text("utf-8")
    for title in ("Table 3", "Table 4", "Table 6", "Table 7", "Table 8", "Table 9", "Role labels"):
        assert f"## {title}" in md
    row = rows_by(report["tables"]["table3"], "model", "condition")[("model-a", "free-form")]
    share = row["first_round_consensus_share"] * 100
    assert f"{share:.1f}% [{row['first_round_consensus_share_low'] * 100:.1f}, " in md
    assert "Not judged yet" not in md


def test_report_without_judge_scores(tmp_path, runs):
    folder = write_folder(tmp_path / "unjudged", runs, None)
    report = write_bench_report(folder, n_boot=50).model_dump()
    assert report["judged"] is False
    assert report["tables"]["table6"] == report["tables"]["table8"] == report["tables"]["table9"] == []
    assert report["tables"]["table3"] and report["tables"]["table4"]
    assert all(r["quality"] is None and r["mean_tokens"] > 0 for r in report["tables"]["table7"])
    md = (folder / "bench_report.md").read_text("utf-8")
    assert md.count("Not judged yet") == 4  # tables 6, 8, 9 and the score distributions
    assert report["tables"]["panels"] and report["tables"]["distribution"] == report["tables"]["format"] == []
    assert pd.read_csv(folder / "table6.csv").empty
    assert list(pd.read_csv(folder / "table9.csv").columns) == TABLE9_COLUMNS


def test_folder_without_cases_is_refused(tmp_path):
    (tmp_path / "not-a-run").mkdir()
    with pytest.raises(RunError, match=r"no cases/ folder.*evolve bench"):
        build_bench_report(tmp_path / "not-a-run")
    (tmp_path / "not-a-run" / "cases").mkdir()
    with pytest.raises(RunError, match="no case artifacts"):
        build_bench_report(tmp_path / "not-a-run")
    with pytest.raises(RunError, match="does not exist"):
        build_bench_report(tmp_path / "missing")


def test_broken_artifacts_are_refused(tmp_path, runs):
    folder = write_folder(tmp_path / "dup", runs[:2], None)
    (folder / "cases" / "copy.json").write_text(runs[0].model_dump_json(), "utf-8")
    with pytest.raises(RunError, match="keep one of them"):
        build_bench_report(folder)
    (folder / "cases" / "copy.json").write_text("{}", "utf-8")
    with pytest.raises(RunError, match="not a CaseRun artifact"):
        build_bench_report(folder)


def test_malformed_judge_scores_are_refused(tmp_path, runs):
    rows = judge_rows(runs[:2])
    rows[3]["outcome"] = "zero"
    folder = write_folder(tmp_path / "bad", runs[:2], rows)
    with pytest.raises(DataError, match=r"row 5: outcome 'zero'"):
        build_bench_report(folder)
    pd.read_csv(folder / "judge_scores.csv").drop(columns=["outcome"]).to_csv(folder / "judge_scores.csv", index=False)
    with pytest.raises(DataError, match=r"\['outcome'\] are missing"):
        build_bench_report(folder)
