"""Runs side by side (``evolve compare``): paired differences on the targets they share.

Two calibration runs compare only when they calibrated on the same rating pack and the same
split: then every difference is paired - the same validation targets, repeats and physician
ratings on both sides - and is tested by a sign-flip permutation test over case clusters, with
the 95% interval that inverts it (:func:`evolve.stats.paired_mae_difference`). Two bench runs
compare only when they ran the same case file: each arm (model x condition x topology of a run)
is paired with the first run's first arm case by case. Anything else is refused in words,
because a difference between runs on different targets says nothing about the judges.

No verdict is given where the evidence cannot carry one: runs that share no validation target
(each run subsamples its targets with its own seed when a target limit is set) are told so with
how to make them share; fewer than :data:`MIN_SHARED_PAIRS` shared pairs or fewer than
:data:`~evolve.stats.MIN_CASES` cases give "too few ..." instead of better/worse; and since a
comparison of several runs and criteria makes many tests, every better/worse verdict is marked
when it does not survive Holm's correction over all of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from evolve.errors import RunError
from evolve.markdown import format_interval, md_code, md_inline
from evolve.outputs import ComparisonReport, CriterionReport, Difference, RunSide
from evolve.report._holm import mark_holm
from evolve.report._html import figure_html, page, section, tables
from evolve.report._pages import forest_row
from evolve.report._report import build_report
from evolve.report._settings import report_settings
from evolve.rubric import run_prompts_root
from evolve.runs import KINDS, BenchFolder, CalibrationFolder, ComparisonFolder, folder_kind
from evolve.stats import MIN_CASES, paired_mae_difference, shift_interval, sign_flip_test

if TYPE_CHECKING:
    from evolve.config import CalibrationConfig

DIFFERENCE_COLUMNS = ["criterion", "what", "run", "versus", "estimate", "low", "high", "n_pairs", "n_targets", "n_cases",
                      "verdict", "p_value", "holm_p", "holm_survives"]
"""Columns of ``differences.csv``: one paired difference (run minus the reference) per row, with
its sign-flip p-value, the Holm-adjusted p-value over every difference of the comparison and
whether a better/worse (higher/lower) verdict survives it (empty for other verdicts)."""

MIN_SHARED_PAIRS = 20
"""Fewest shared (target, repeat, physician rating) pairs on which ``evolve compare`` gives a
verdict; below it the verdict is "too few shared pairs to tell". (Separately, fewer than
:data:`~evolve.stats.MIN_CASES` validation cases give "too few cases to tell".)"""

ALPHA = 0.05
"""Level of each paired test (95% intervals) and of Holm's correction over a comparison."""

NO_SHARED_TARGETS = "the runs share no targets"
"""Verdict of a difference between runs that scored no validation target in common."""

HOW_TO_SHARE = ("To make calibration runs share their validation targets, calibrate them on the same pack with the same "
                "--splits folder, the same target limit (--max-validation-targets; the quick preset keeps 8) and the same "
                "--seed (the seed picks which targets a limit keeps), and with the same number of re-evaluation repeats "
                "(pairs are matched by target, repeat and physician).")
"""What a comparison says when runs share no target: how to make them share."""

_ROWS = (("winner", "winner"), ("no-guidance", "no guidance"), ("best-initial", "best initial"))


def _kind(run_dir: Path) -> str:
    if not run_dir.is_dir():
        raise RunError(f"{run_dir}: no such folder. Pass run folders under archives/, e.g. archives/<run_id>.")
    kind = folder_kind(run_dir)
    if kind == "calibration":
        CalibrationFolder(run_dir).require(CalibrationFolder.SCORES)  # an unfinished run: says how to resume it
        return "calibration"
    if kind == "bench":
        return "bench"
    if kind is not None:
        raise RunError(f"{run_dir} holds {KINDS[kind]}: `evolve compare` compares calibration runs, or bench runs. "
                       "Pass the folders `evolve calibrate` or `evolve bench run` wrote under archives/.")
    raise RunError(f"{run_dir}: neither a calibration run (config.json and scores.csv) nor a bench run (manifest.json). "
                   "Pass the folders `evolve calibrate` or `evolve bench run` wrote under archives/.")


def build_comparison(run_dirs: Sequence[Path | str], *, n_boot: int = 2000, seed: int = 0,
                     prompts_root: Path | str | None = None) -> ComparisonReport:
    """Compare two or more runs of the same kind (no model calls).

    Args:
        run_dirs: Calibration run folders, or bench run folders; the first is the reference
            every other run is compared with.
        n_boot: Bootstrap replicates per interval.
        seed: Bootstrap seed.
        prompts_root: For calibration runs made before runs kept their own rubric copy: where
            their rubric is looked up before the shipped rubrics (runs with a copy read it).

    Returns:
        The typed comparison (:class:`~evolve.outputs.ComparisonReport`): ``kind``, ``runs``,
        ``differences`` (:data:`DIFFERENCE_COLUMNS`) and the side-by-side rows (``criteria`` for
        calibration runs, ``arms`` for bench runs).

    Raises:
        RunError: Fewer than two runs, a folder that is no run, runs of different kinds, or
            runs that do not share a pack and split (calibration) or a case file (bench).
    """
    dirs = [Path(d) for d in run_dirs]
    if len(dirs) < 2:
        raise RunError("compare needs at least two run folders, e.g. `evolve compare archives/run-a archives/run-b`.")
    same = {d.resolve() for d in dirs}
    if len(same) < len(dirs):
        raise RunError("the same run folder is given twice; compare different runs (a copy of a run is the same run).")
    kinds = {d: _kind(d) for d in dirs}
    if len(set(kinds.values())) > 1:
        listed = ", ".join(f"{d} ({k})" for d, k in kinds.items())
        raise RunError(f"cannot compare runs of different kinds: {listed}. Compare calibration runs with calibration runs "
                       "and bench runs with bench runs.")
    if kinds[dirs[0]] == "calibration":
        return ComparisonReport.model_validate(_compare_calibrations(dirs, n_boot, seed, prompts_root))
    return ComparisonReport.model_validate(_compare_benches(dirs, n_boot, seed))


# -- calibration runs -----------------------------------------------------------------------------


def _calibration_label(run_dir: Path, config: CalibrationConfig) -> str:
    """``<folder> (<judge model>)``: the embedded model's name, or the model id sent to the endpoint."""
    model = config.endpoint.local_model if config.endpoint.provider == "embedded" else config.judge.model
    return f"{run_dir.name} ({model})"


def _check_same_frame(dirs: list[Path], configs: list) -> tuple:
    """The pack and split every run shares, or a RunError saying which run differs and how."""
    from evolve.data import load_pack
    from evolve.splits import load_splits

    packs = [load_pack(c.pack, prompts_root=run_prompts_root(CalibrationFolder(d).prompts_root, c.prompts_root))
             for d, c in zip(dirs, configs)]  # each run's own copy of its rubric, when it has one
    splits = [load_splits(c.splits) for c in configs]
    ref = packs[0].manifest
    for d, pack, split in zip(dirs[1:], packs[1:], splits[1:]):
        m = pack.manifest
        if (m.name, m.rubric.id, m.rubric.version, m.source_sha256) != (ref.name, ref.rubric.id, ref.rubric.version, ref.source_sha256):
            raise RunError(f"{d} calibrated on pack {m.name!r} (rubric {m.rubric.id} v{m.rubric.version}) but {dirs[0]} on "
                           f"{ref.name!r} (rubric {ref.rubric.id} v{ref.rubric.version}), or on another import of its "
                           "source files: the runs do not share a pack. Compare runs made with the same --pack.")
        if (split.train, split.validation) != (splits[0].train, splits[0].validation):
            raise RunError(f"{d} used another split than {dirs[0]} (train or validation cases differ): the runs do not share "
                           "a split, so their validation targets differ. Compare runs made with the same --splits folder.")
    return packs[0], splits[0]


def _candidate_of(entry: CriterionReport, key: str) -> str | None:
    row = entry.row("initial" if key == "best-initial" else key)  # type: ignore[arg-type]  # the _ROWS keys
    return row.candidate_id if row is not None else None


def _compare_calibrations(dirs: list[Path], n_boot: int, seed: int, prompts_root: Path | str | None = None) -> dict:
    from evolve.config import load_run_config

    configs = [load_run_config(d) for d in dirs]
    if prompts_root is not None:  # runs without their own rubric copy read their rubric from there
        configs = [c.model_copy(update={"prompts_root": Path(prompts_root)}) for c in configs]
    pack, _ = _check_same_frame(dirs, configs)
    ratings = pack.ratings_frame()
    reports = [build_report(d, n_boot=n_boot, seed=seed, prompts_root=prompts_root) for d in dirs]
    labels = [_calibration_label(d, c) for d, c in zip(dirs, configs)]
    if len(set(labels)) < len(labels):
        labels = [f"{label} [{i + 1}]" for i, label in enumerate(labels)]
    scores = []
    for d in dirs:
        folder = CalibrationFolder(d)
        frame = folder.read_frame(folder.SCORES, dtype={"target_id": str, "case_id": str})
        assert frame is not None  # required file
        scores.append(frame[(frame["phase"] == "reeval") & (frame["split"] == "validation")])
    shared = [c for c in reports[0].criteria if all(c in r.criteria for r in reports[1:])]
    if not shared:
        raise RunError(f"the runs have no criterion with a winner in common ({', '.join(labels)}); nothing to compare.")
    criteria, differences = {}, []
    for criterion in shared:
        entries = [r.criteria[criterion] for r in reports]
        criteria[criterion] = {"name": entries[0].name, "runs": [_side(label, e) for label, e in zip(labels, entries)]}
        for key, what in _ROWS:
            ids = [_candidate_of(e, key) for e in entries]
            for i in range(1, len(dirs)):
                differences.append(_paired(criterion, what, labels[i], labels[0], scores[i], ids[i], scores[0], ids[0],
                                           ratings, n_boot, seed))
    return {"kind": "calibration", "pack": pack.manifest.name, "splits": str(configs[0].splits),
            "bootstrap": {"n_boot": n_boot, "seed": seed, "confidence": 0.95, "cluster": "case_id"},
            "runs": [{"label": label, "path": str(d), "judge_model": c.judge.model, "provider": c.endpoint.provider,
                      "local_model": c.endpoint.local_model if c.endpoint.provider == "embedded" else None}
                     for label, d, c in zip(labels, dirs, configs)],
            "criteria": criteria, "differences": differences, "comparisons": mark_holm(differences, ALPHA),
            "notes": list(dict.fromkeys(n for r in reports for n in r.rubric.notes)) + _not_shared(shared, labels, reports)
            + _partly_shared(shared, labels, scores)
            + ([HOW_TO_SHARE] if any(d["verdict"] == NO_SHARED_TARGETS for d in differences) else [])}


def _not_shared(shared: list[str], labels: list[str], reports: list) -> list[str]:
    """A note naming, per run, the criteria with a winner that not every run has (left out)."""
    left = [(label, [c for c in r.criteria if c not in shared]) for label, r in zip(labels, reports)]
    named = "; ".join(f"{label}: {', '.join(criteria)}" for label, criteria in left if criteria)
    if not named:
        return []
    return [f"Compared on the criteria every run calibrated ({', '.join(shared)}); left out, because not every run has "
            f"a winner for them: {named}."]


def _partly_shared(criteria: list[str], labels: list[str], scores: list[pd.DataFrame]) -> list[str]:
    """A note per criterion whose runs re-scored different validation targets: their side-by-side
    MAEs are then on different targets, and the paired differences rest on the shared ones."""
    notes = []
    for criterion in criteria:
        sets = [set(s.loc[s["criterion"] == criterion, "target_id"]) for s in scores]
        common = set.intersection(*sets)
        if all(t == common for t in sets) or not common:  # the same targets; or none shared (HOW_TO_SHARE)
            continue
        each = ", ".join(f"{label} {len(t)}" for label, t in zip(labels, sets))
        notes.append(f"criterion {criterion}: the runs re-scored different validation targets ({each}; {len(common)} "
                     "shared), so their side-by-side MAEs are on different targets and the paired differences rest on "
                     f"the {len(common)} shared. {HOW_TO_SHARE}")
    return notes


def _side(label: str, entry: CriterionReport) -> dict:
    row: dict = {"run": label, "winner": entry.winner.candidate_id, "origin": entry.winner.origin}
    for key, _ in (*_ROWS, ("ceiling", "ceiling")):
        by_split = entry.agreement.get(key)
        mae = by_split.validation.get("mae") if by_split is not None else None
        name = key.replace("-", "_")
        row.update({f"{name}_mae": mae.estimate if mae else None, f"{name}_low": mae.low if mae else None,
                    f"{name}_high": mae.high if mae else None})
    return row


def _paired(criterion: str, what: str, run: str, versus: str, a_scores: pd.DataFrame, a_id: str | None,
            b_scores: pd.DataFrame, b_id: str | None, ratings: pd.DataFrame, n_boot: int, seed: int) -> dict:
    """``what`` of run A minus ``what`` of run B on the validation targets both scored."""
    row: dict = {"criterion": criterion, "what": what, "run": run, "versus": versus}
    empty = {"estimate": None, "low": None, "high": None, "n_pairs": 0, "n_targets": 0, "n_cases": 0, "p_value": None,
             "holm_p": None, "holm_survives": None}
    if a_id is None or b_id is None:
        return {**row, **empty, "verdict": "not in both runs"}
    a = a_scores[a_scores["candidate_id"] == a_id]
    b = b_scores[b_scores["candidate_id"] == b_id]
    targets = set(a["target_id"]) & set(b["target_id"])
    if not targets:
        return {**row, **empty, "verdict": NO_SHARED_TARGETS}
    a, b = a[a["target_id"].isin(targets)], b[b["target_id"].isin(targets)]
    d = paired_mae_difference(a, b, ratings, n_boot=n_boot, seed=seed)
    return {**row, "estimate": _finite(d.estimate), "low": _finite(d.low), "high": _finite(d.high), "n_pairs": d.n_pairs,
            "n_targets": len(targets), "n_cases": d.n_cases, "verdict": _guarded(d.verdict, d.n_pairs),
            "p_value": d.p_value, "holm_p": None, "holm_survives": None}


def _guarded(verdict: str, n_pairs: int) -> str:
    """The test's verdict, unless fewer than :data:`MIN_SHARED_PAIRS` pairs are shared: then
    "too few shared pairs to tell" whatever it says (a test over a handful of pairs is not a
    judgement of two judges). The case rule (:data:`~evolve.stats.MIN_CASES`) is the test's own."""
    if n_pairs < MIN_SHARED_PAIRS and verdict != "too few cases to tell":
        return f"too few shared pairs to tell ({n_pairs}; at least {MIN_SHARED_PAIRS} are needed)"
    return verdict


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


# -- bench runs -----------------------------------------------------------------------------------


def _compare_benches(dirs: list[Path], n_boot: int, seed: int) -> dict:
    from evolve.report._bench import build_bench_report  # reads the consilium's records: loaded for bench runs only

    manifests = [BenchFolder(d).read_json(BenchFolder.MANIFEST) for d in dirs]
    for d, m in zip(dirs[1:], manifests[1:]):
        if m.get("cases_sha256") != manifests[0].get("cases_sha256"):
            raise RunError(f"{d} ran the cases of {m.get('cases_path')} but {dirs[0]} those of "
                           f"{manifests[0].get('cases_path')} (different sha256): the runs do not share a case file. "
                           "Compare bench runs made with the same --cases file.")
    reports = [build_bench_report(d, n_boot=n_boot, seed=seed) for d in dirs]
    judges = [_bench_judge(d) for d in dirs]
    labels = [f"{d.name} (judge {model})" if model else d.name for d, (model, _) in zip(dirs, judges)]
    arms = []
    for d, label, report in zip(dirs, labels, reports):
        pipelines = pd.DataFrame([p.model_dump() for p in report.pipelines])
        for key, rows in pipelines.groupby(["model", "condition", "topology"], sort=True):
            arms.append({"label": f"{label}: {' · '.join(map(str, key))}", "run": str(d), "frame": rows})
    ref = arms[0]
    differences = [_quality_difference(arm, ref, n_boot, seed) for arm in arms[1:]]
    side = [{"arm": a["label"], "pipelines": len(a["frame"]), "consensus_share": float(a["frame"]["consensus"].astype(float).mean()),
             "mean_rounds": float(a["frame"]["rounds_completed"].mean()), "mean_tokens": float(a["frame"]["tokens"].mean()),
             "quality": _finite(float(pd.to_numeric(a["frame"]["quality"], errors="coerce").mean()))} for a in arms]
    return {"kind": "bench", "cases_sha256": manifests[0].get("cases_sha256"),
            "bootstrap": {"n_boot": n_boot, "seed": seed, "confidence": 0.95, "cluster": "case_id"},
            "runs": [{"label": label, "path": str(d), "models": r.counts.models, "judge_model": model}
                     for d, label, r, (model, _) in zip(dirs, labels, reports, judges)],
            "arms": side, "differences": differences, "comparisons": mark_holm(differences, ALPHA),
            "notes": _judges_differ(labels, judges)}


def _bench_judge(run_dir: Path) -> tuple[str | None, str | None]:
    """The judge model and the guidance (judge file or calibration run, None without) a bench run's
    scores were made with, from its ``judge.json``; (None, None) for a run never judged."""
    from evolve.report._bench_anchored import _judge_record

    _, meta = _judge_record(BenchFolder(run_dir))
    return (meta.get("judge") or {}).get("model"), meta.get("calibration_run")


def _judges_differ(labels: list[str], judges: list[tuple[str | None, str | None]]) -> list[str]:
    """A note when the runs' quality was judged differently (another judge model or guidance):
    their differences then mix the systems with the judges."""
    if len(set(judges)) < 2:
        return []
    each = "; ".join(f"{label}: {model or 'not judged'}, {'guidance of ' + guidance if guidance else 'no guidance'}"
                     for label, (model, guidance) in zip(labels, judges))
    return [f"the runs were judged differently ({each}): a quality difference between them mixes the systems with "
            "the judges. Judge both with the same judge (evolve bench judge RUN --guidance ...) to compare systems."]


def _quality_difference(arm: dict, ref: dict, n_boot: int, seed: int) -> dict:
    """Final-report quality of ``arm`` minus the reference arm, paired by case (each case's
    mean over its judged pipelines on each side)."""
    def per_case(frame: pd.DataFrame) -> pd.Series:
        return pd.to_numeric(frame["quality"], errors="coerce").groupby(frame["case_id"].astype(str)).mean().dropna()

    a, b = per_case(arm["frame"]), per_case(ref["frame"])
    cases = sorted(set(a.index) & set(b.index))
    row = {"criterion": "final-report quality (0-3)", "what": "quality", "run": arm["label"], "versus": ref["label"],
           "n_targets": len(cases), "n_cases": len(cases), "n_pairs": len(cases)}
    if not cases:
        return {**row, "estimate": None, "low": None, "high": None, "verdict": "no judged case in common",
                "p_value": None, "holm_p": None, "holm_survives": None}
    diff = a.loc[cases].to_numpy(dtype=np.float64) - b.loc[cases].to_numpy(dtype=np.float64)
    p = sign_flip_test(diff, seed=seed)
    low, high = shift_interval(diff, np.ones_like(diff), confidence=1 - ALPHA, seed=seed)
    if len(cases) < MIN_CASES:
        verdict = "too few cases to tell"
    else:
        verdict = "higher" if low > 0 else "lower" if high < 0 else "no distinguishable difference"
    return {**row, "estimate": _finite(float(diff.mean())), "low": _finite(low), "high": _finite(high),
            "verdict": verdict, "p_value": p, "holm_p": None, "holm_survives": None}


# -- rendering ------------------------------------------------------------------------------------


def _ci(est, low, high) -> str:
    return format_interval(est, low, high, digits=3)


def _side_line(s: RunSide) -> str:
    cells = [_ci(s.winner_mae, s.winner_low, s.winner_high), _ci(s.no_guidance_mae, s.no_guidance_low, s.no_guidance_high),
             _ci(s.best_initial_mae, s.best_initial_low, s.best_initial_high), _ci(s.ceiling_mae, s.ceiling_low, s.ceiling_high)]
    return f"| {md_inline(s.run)} | {md_inline(s.winner)} ({s.origin}) | " + " | ".join(cells) + " |"


def _side_by_side(comparison: ComparisonReport) -> list[str]:
    """The calibration runs' criteria, or the bench arms, one table row each."""
    if comparison.kind == "calibration":
        lines = [f"Pack {md_code(comparison.pack)}, split {md_code(comparison.splits)}. Validation MAE against every physician "
                 "rating (lower is better); negative differences: the other run agrees better.", ""]
        for criterion, entry in comparison.criteria.items():
            lines += [f"## {md_inline(entry.name or criterion)} ({md_inline(criterion)})", "",
                      "| run | winner | winner MAE | no guidance MAE | best initial MAE | physician ceiling |",
                      "|---|---|---|---|---|---|", *[_side_line(s) for s in entry.runs], ""]
        return lines
    lines = ["| arm | pipelines | consensus | mean rounds | mean tokens | final-report quality |", "|---|---|---|---|---|---|"]
    for a in comparison.arms:
        rounds = "—" if a.mean_rounds is None else f"{a.mean_rounds:.2f}"
        tokens = "—" if a.mean_tokens is None else f"{a.mean_tokens:.0f}"
        lines.append(f"| {md_inline(a.arm)} | {a.pipelines} | {format_interval(a.consensus_share, None, None, digits=2)} | "
                     f"{rounds} | {tokens} | {format_interval(a.quality, None, None)} |")
    return [*lines, ""]


def render_comparison_markdown(comparison: ComparisonReport) -> str:
    """The comparison as Markdown: the runs, the side-by-side table and the paired differences."""
    runs = comparison.runs
    lines = ["# Runs compared", "",
             f"Reference: **{md_inline(runs[0].label)}**; every difference is the other run minus the reference, paired on the "
             "targets both scored, tested by a sign-flip permutation test over case clusters (p) with the 95% interval "
             "that inverts it.", ""]
    lines += [f"- {md_inline(r.label)}: {md_code(r.path)}" for r in runs] + [""]
    lines += [f"- Note: {md_inline(n)}" for n in comparison.notes] + ([""] if comparison.notes else [])
    lines += _side_by_side(comparison)
    lines += ["## Paired differences", "",
              "| criterion | what | run − reference | difference [95% CI] | p | pairs | targets | cases | verdict |",
              "|---|---|---|---|---|---|---|---|---|"]
    for d in comparison.differences:
        p = "—" if d.p_value is None else f"{d.p_value:.3f}"
        lines.append(f"| {md_inline(d.criterion)} | {md_inline(d.what)} | {md_inline(d.run)} − {md_inline(d.versus)} | "
                     f"{_ci(d.estimate, d.low, d.high)} | "
                     f"{p} | {d.n_pairs} | {d.n_targets} | {d.n_cases} | {difference_verdict(d)} |")
    lines += ["", "A difference whose interval covers 0 is noise at this sample size: the runs cannot be told apart. "
              f"No verdict is given on fewer than {MIN_CASES} cases (too few cases to tell) or fewer than {MIN_SHARED_PAIRS} "
              "shared pairs (too few shared pairs to tell).", ""]
    if (text := comparison_count_text(comparison)) is not None:
        lines += [text, ""]
    if any(d.verdict == NO_SHARED_TARGETS for d in comparison.differences):
        lines += [f"**{NO_SHARED_TARGETS[0].upper()}{NO_SHARED_TARGETS[1:]}** for some differences above, so they have "
                  f"no verdict. {HOW_TO_SHARE}", ""]
    return "\n".join(lines)


def difference_verdict(d: Difference) -> str:
    """A difference's verdict, marked when a better/worse verdict does not survive Holm's correction."""
    return d.verdict + (" - not after Holm's correction" if d.holm_survives is False else "")


def comparison_count_text(comparison: ComparisonReport) -> str | None:
    """How many paired comparisons were made and how many definitive verdicts do not survive
    Holm's correction over all of them (None with fewer than two)."""
    c = comparison.comparisons
    if c.n < 2:
        return None
    text = f"{c.n} paired comparisons, each at level {c.alpha:g}; with Holm's correction over all {c.n}, "
    if not c.definitive:
        return text + "nothing changes: no difference is shown."
    if not c.not_surviving:
        return text + f"all {c.definitive} definitive verdicts survive."
    return text + (f"{c.not_surviving} of {c.definitive} definitive verdicts do not survive (marked \"not after "
                   "Holm's correction\"): read them as possibly due to chance among many comparisons.")


def _difference_rows(comparison: ComparisonReport) -> list[dict]:
    return [forest_row(f"{d.criterion}: {d.what} ({d.run})", d.model_dump()) for d in comparison.differences]


def comparison_html(comparison: ComparisonReport, markdown_text: str) -> str:
    """The comparison as one self-contained page: the paired differences as a forest plot,
    then the Markdown tables."""
    from evolve.report import _figures as fig

    rows = _difference_rows(comparison)
    xlabel = "paired MAE difference (negative: better than the reference)" if comparison.kind == "calibration" \
        else "paired quality difference (positive: better than the reference)"
    forest = figure_html(lambda ax: fig.interval_plot(rows, xlabel=xlabel, title="each run minus the reference",
                                                      reference=0.0, ax=ax),
                         "paired differences with case-clustered 95% intervals", size=(9.0, 1.0 + 0.4 * max(len(rows), 1)))
    parts = [section("Paired differences", [forest]), tables(markdown_text)]
    return page("Runs compared: " + " vs ".join(r.label for r in comparison.runs), parts)


def write_comparison(run_dirs: Sequence[Path | str], out_dir: Path | str, *, n_boot: int | None = None, seed: int = 0,
                     html: bool = True, prompts_root: Path | str | None = None) -> ComparisonReport:
    """Compare runs and write ``report.md``, ``report.json``, ``differences.csv`` and
    ``report.html`` into ``out_dir`` (``reports/<name>/``).

    ``n_boot``: bootstrap replicates per interval (default: :class:`~evolve.report.ReportSettings`
    from the environment, ``$EVOLVE_REPORT_REPLICATES``, else 2000).

    Raises:
        RunError: As :func:`build_comparison`; nothing is written then.
        ConfigError: ``n_boot`` or ``$EVOLVE_REPORT_REPLICATES`` out of range.
    """
    replicates = report_settings(None, n_boot).replicates
    comparison = build_comparison(run_dirs, n_boot=replicates, seed=seed, prompts_root=prompts_root)
    folder = ComparisonFolder(out_dir)
    markdown = render_comparison_markdown(comparison)
    folder.write(folder.REPORT_JSON, comparison.model_dump_json(indent=2) + "\n")
    folder.write(folder.DIFFERENCES, pd.DataFrame([d.model_dump() for d in comparison.differences],
                                                  columns=DIFFERENCE_COLUMNS).to_csv(index=False))
    folder.write(folder.REPORT_MD, markdown)
    if html:
        folder.write(folder.REPORT_HTML, comparison_html(comparison, markdown))
    return comparison
