"""Judging OpenTumorBoard answers and aggregating them as released (``OTB_FORMAT.md`` §3-§4).

Per answered item, the judge sees the extracted conclusion (board) or answer (turn) only -
never the model's name or the raw output - and replies in a strict JSON schema at temperature 0,
top_p 1, seed 0: *conclusion alignment* (and, by default, the *four decisions*) for a board
answer, *clinical equivalence* with its two flags for a turn answer. A malformed answer is not
sent; a reply that is cut or does not fit the schema (read as sent, never coerced) is a *judge
failure* (excluded, counted, and never cached: judging again asks again).
Every judge call is a line of ``judge_scores.jsonl`` with the rubric version; every
(task, model) gets the released ``summary.json``; ``metrics.csv`` holds ROUGE-L per answer and a
BERTScore-style F1 on an offline stand-in encoder, named beside it (:mod:`evolve.otb._similarity`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from pydantic import ValidationError

from evolve.errors import RunError, require_extra
from evolve.judge import prompt_hash
from evolve.llm import CallFailure, ChatRequest, ChatResponse, limits_sent, parse_json_object, validate_reply, validation_problem
from evolve.otb._aggregate import DECISIONS, JudgedItem, rouge_l, summarize
from evolve.otb._config import OtbConfig, Task, read_otb_config
from evolve.otb._prompts import JUDGE_RUBRIC_VERSION, Rubric, judge_messages, judge_schema
from evolve.otb._records import BoardCase, TurnQuestion
from evolve.otb._runner import load_otb_items, read_responses
from evolve.otb._similarity import ENCODER, token_f1
from evolve.rubric import run_prompts_root
from evolve.runs import (
    CalibrationFolder,
    Event,
    NoProgress,
    OtbFolder,
    ProgressHook,
    atomic_write,
    locks_run,
    on_call,
    owned_client,
)

if TYPE_CHECKING:  # pragma: no cover
    from evolve.consilium import JudgeFileRecord
    from evolve.llm import Client

__all__ = [
    "BERTSCORE_MISSING", "METRIC_COLUMNS", "OtbJudgeResult", "calibrated_guidance", "judge_otb", "load_judged_items",
    "load_otb_config",
]

# the calibrated criteria whose guidance goes into each judge call (the flags share the
# equivalence call, as in the released schema)
_GUIDED_BY: dict[str, tuple[str, ...]] = {
    "clinical_equivalence": ("clinical_equivalence", "critical_error", "unsupported_claim"),
    "conclusion_alignment": ("conclusion_alignment",),
}

BERTSCORE_MISSING = "the released BERTScore model (microsoft/deberta-xlarge-mnli, layer 40) is not available offline"
"""Why ``metrics.csv`` has no paper BERTScore: the ``bertscore`` column is the stand-in named in
``bertscore_model`` (``bertscore_missing`` says why a row has no value at all)."""

METRIC_COLUMNS = ["task", "model", "item_id", "case_id", "malformed", "output_tokens", "rouge_l", "bertscore",
                  "bertscore_model", "bertscore_missing"]

PROGRESS_KEY = "otb_judge"


def load_otb_config(run_dir: Path | str) -> OtbConfig:
    """The configuration stored in an OpenTumorBoard run folder (:func:`~evolve.otb.read_otb_config`:
    paths resolved from the run folder, ``prompts_root`` the run's own rubric copy when it has one).

    Raises:
        RunError: Not such a folder, or an unreadable ``run_config.json``.
    """
    folder = OtbFolder(run_dir)
    if not (folder / folder.CONFIG).is_file():
        raise RunError(f"{folder.path}: no {folder.CONFIG}; pass a folder written by `evolve otb run`.")
    try:
        return read_otb_config(run_dir)
    except ValidationError as exc:
        raise RunError(f"{folder / folder.CONFIG}: not a valid OpenTumorBoard configuration ({exc.errors()[0]['msg']}).") from exc


@dataclass
class OtbJudgeResult:
    """What :func:`judge_otb` did: judge calls, their outcomes, the summaries per (task, model),
    the guidance used per judge rubric, warnings (e.g. guidance calibrated for another judge)
    and the judge file behind the guidance (path, sha256; None without one)."""

    calls: int = 0
    failures: int = 0
    cached: int = 0
    summaries: dict[tuple[str, str], dict] = field(default_factory=dict)
    guidance: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    judge_file: JudgeFileRecord | None = None


def _judge_file(calibration_run: Path | str) -> tuple[JudgeFileRecord, bytes] | None:
    from evolve.consilium import read_judge_file_record  # loaded only with guidance

    return read_judge_file_record(calibration_run)


def _keep_judge_file(folder: OtbFolder, judge_file: tuple[JudgeFileRecord, bytes] | None) -> None:
    """Keep the judge file's copy and its record (``calibrated_judge.json``, ``judge_file.json``)
    beside the scores it produced; remove a stale pair when judged without one."""
    if judge_file is None:
        for name in (folder.CALIBRATED_JUDGE, folder.JUDGE_FILE_RECORD):
            (folder / name).unlink(missing_ok=True)
        return
    from evolve.consilium import keep_judge_file

    keep_judge_file(folder, *judge_file)
    atomic_write(folder / folder.JUDGE_FILE_RECORD, judge_file[0].model_dump_json(indent=2) + "\n")


def calibrated_guidance(calibration_run: Path | str, *, prompts_root: Path | str | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """The guidance of a calibrated judge of rubric ``otb`` (a calibration run folder or its
    ``judge.json``), per judge rubric, and the judge model it was calibrated for.

    The selected winner of each calibrated criterion goes into the judge call that rates it:
    clinical equivalence and the two flags into the equivalence call (each under its name),
    conclusion alignment into the alignment call. The guidance was evolved with ``evolve``'s
    own judge prompt (one criterion per call); here it is added to the released-style prompt.

    Returns:
        ``({judge rubric: guidance text}, {"model": the calibration's judge model or "",
        "worse_than_none": the criteria whose winner validated worse than no guidance})``.

    Raises:
        RunError: Not a finished calibration run, or one of another rubric (see
            :func:`evolve.consilium.load_calibrated_guidance`).
    """
    from evolve.consilium import load_calibrated_guidance  # the winners' reader; loaded only with guidance
    from evolve.rubric import load_rubric

    rubric = load_rubric("otb", root=prompts_root)
    names = {c.criterion_id: c.name for c in rubric.criteria}
    chosen = load_calibrated_guidance(calibration_run, rubric)
    out = {}
    for judge_rubric, criteria in _GUIDED_BY.items():
        parts = [f"{names[c]}: {chosen[c].text}" if len(criteria) > 1 else chosen[c].text
                 for c in criteria if c in chosen and chosen[c].text]
        if parts:
            out[judge_rubric] = "\n\n".join(parts)
    from evolve.calibrated import JUDGE_FILE, load_judge_file  # below the engines

    run = Path(calibration_run)
    if not run.is_dir() or (run / JUDGE_FILE).is_file():  # the judge file says it all
        judge = load_judge_file(run)
        worse = sorted(c for c, w in judge.criteria.items() if c in chosen
                       and any(v.versus == "no-guidance" and v.verdict == "worse" for v in w.verdicts))
        return out, {"model": judge.judge.model, "worse_than_none": ", ".join(worse)}
    folder = CalibrationFolder(calibration_run)  # a run made before judge files
    config = folder.read_json(folder.CONFIG, optional=True) or {}
    report = folder.read_json(folder.REPORT_JSON, optional=True) or {}
    worse = sorted(row["criterion"] for row in report.get("table5", [])
                   if row.get("vs_none_verdict") == "worse" and row.get("criterion") in chosen)
    return out, {"model": str((config.get("judge") or {}).get("model") or ""), "worse_than_none": ", ".join(worse)}


def _rubrics(config: OtbConfig, task: Task) -> list[Rubric]:
    if task == "turn":
        return ["clinical_equivalence"]
    return ["conclusion_alignment", "four_decisions"] if config.judge.four_decisions else ["conclusion_alignment"]


def _judge_request(config: OtbConfig, rubric: Rubric, item: BoardCase | TurnQuestion, candidate: str,
                   guidance: dict[str, str]) -> ChatRequest:
    j = config.judge
    _, fmt = judge_schema(rubric)
    return ChatRequest(model=j.model or config.endpoint.model, messages=judge_messages(rubric, item, candidate, guidance.get(rubric)),
                       temperature=j.temperature, top_p=j.top_p, seed=j.seed, response_format=fmt, tag="otb_judge",
                       max_tokens=j.max_tokens_board if isinstance(item, BoardCase) else j.max_tokens_turn,
                       affinity=item.item_id)  # several endpoints: every answer to an item on one replica


def _read_reply(rubric: Rubric, res: ChatResponse | CallFailure, *, limits_sent: bool = True) -> tuple[dict | None, str]:
    """The validated reply fields, or None and why the judge failed.

    Args:
        limits_sent: Whether the endpoint was told the rationale's length limit (the
            endpoint's ``schema_limits``). Told, a longer rationale is a judge failure (never
            clipped); not told, it breaks nothing it was asked for and is read whole
            (:func:`evolve.llm.validate_reply`). Every other field is validated as sent, never
            coerced.
    """
    if isinstance(res, CallFailure):
        return None, f"endpoint: {res.error}"
    if res.finish_reason != "stop":
        return None, f"reply cut (finish_reason={res.finish_reason}); raise the judge's max_tokens"
    model, _ = judge_schema(rubric)
    try:
        return validate_reply(parse_json_object(res.text), model, schema_limits=limits_sent).model_dump(), ""
    except ValidationError as exc:  # one line naming each field, its value and the rule
        return None, f"reply does not fit the {rubric} schema: {validation_problem(exc)}"
    except ValueError as exc:
        return None, f"reply is not one JSON object: {validation_problem(exc)}"


def _score_row(row: dict, rubric: Rubric, request: ChatRequest, res: Any, reply: dict | None, error: str,
               guidance: dict[str, str]) -> dict:
    out: dict = {
        "task": row["task"], "item_id": row["item_id"], "case_id": row["case_id"], "model": row["model"],
        "qa_type": row.get("qa_type", ""), "rubric": rubric, "rubric_version": JUDGE_RUBRIC_VERSION,
        "judge_model": request.model, "outcome": "scored" if reply is not None else "judge_failure", "error": error,
        "guided": rubric in guidance, "prompt_hash": prompt_hash(request),
        "prompt_tokens": getattr(res, "prompt_tokens", 0), "completion_tokens": getattr(res, "completion_tokens", 0),
        "cached": bool(getattr(res, "cached", False)),
        "cached_prompt_tokens": getattr(res, "cached_prompt_tokens", 0),
    }
    if reply is not None:
        if rubric == "conclusion_alignment":
            out.update(score=reply["conclusion_alignment"]["score"], rationale=reply["conclusion_alignment"]["rationale"])
        elif rubric == "clinical_equivalence":
            out.update(score=reply["clinical_equivalence_score"], critical_error=reply["critical_error"],
                       unsupported_claim=reply["unsupported_claim"], rationale=reply["rationale"])
        else:
            out.update({d: reply[d] for d in DECISIONS}, rationale=reply["rationale"])
    return out


def _judged_item(task: str, row: dict, scores: Sequence[dict]) -> JudgedItem:
    """An answered item and its judge score lines: the main score (alignment or equivalence)
    and, apart from it, the four-decision call's outcome (a failure of either is its own)."""
    main = next((s for s in scores if s["rubric"] != "four_decisions"), None)
    four = [s for s in scores if s["rubric"] == "four_decisions"]
    decisions = next((s for s in four if s["outcome"] == "scored"), None)
    scored = main is not None and main["outcome"] == "scored"
    return JudgedItem(
        task=task, item_id=row["item_id"], case_id=row["case_id"], model=row["model"], qa_type=row.get("qa_type", ""),  # type: ignore[arg-type]
        malformed=row["malformed"], judge_failed=not row["malformed"] and not scored,
        score=main["score"] if scored and main else None,
        critical_error=main.get("critical_error") if scored and main else None,
        unsupported_claim=main.get("unsupported_claim") if scored and main else None,
        decisions={d: decisions[d] for d in DECISIONS} if decisions else {},
        decisions_failed=bool(four) and decisions is None and not row["malformed"],
    )


def _metric_row(task: str, row: dict, reference: str) -> dict:
    text = row["extracted_final_response"]
    # board: a missing conclusion counts 0; turn: a failed answer is left out (released)
    score = rouge_l(text, reference) if text else (0.0 if task == "board" else None)
    bert, model, missing = None, ENCODER, ""
    if text:  # over items with text (released)
        try:
            bert = token_f1(text, reference)
        except (ImportError, FileNotFoundError) as exc:
            model, missing = "", f"{BERTSCORE_MISSING}, and the stand-in failed to load ({exc})"
    else:
        model, missing = "", "no text to compare"
    return {"task": task, "model": row["model"], "item_id": row["item_id"], "case_id": row["case_id"],
            "malformed": row["malformed"], "output_tokens": row["usage"]["completion_tokens"], "rouge_l": score,
            "bertscore": bert, "bertscore_model": model, "bertscore_missing": missing}


@locks_run(lambda run_dir, **_: run_dir)  # one process writes a run folder
def judge_otb(run_dir: Path | str, *, client: Client | None = None, guidance: dict[str, str] | None = None,
              calibration_run: Path | str | None = None, progress: ProgressHook | None = None,
              prompts_root: Path | str | None = None) -> OtbJudgeResult:
    """Judge every answer of an OpenTumorBoard run; write ``judge_scores.jsonl``, ``metrics.csv``
    and each (task, model)'s ``summary.json``.

    Args:
        run_dir: A folder written by :func:`~evolve.otb.generate_otb`.
        client: A ready client; None opens one from the run's endpoint and releases it.
        guidance: Extra judge guidance per judge rubric (``<GUIDANCE>`` block).
        calibration_run: The judge file of rubric ``otb`` whose winners guide the judge
            (:func:`calibrated_guidance`): a calibration run folder or its ``judge.json``;
            merged over ``guidance``. The run keeps a copy (``calibrated_judge.json``) and its
            record (path, sha256: ``judge_file.json``).
        progress: Progress hook (key ``otb_judge``, one step per call).
        prompts_root: For a run made before runs kept their own rubric copy: where rubric
            ``otb`` (the criteria of ``calibration_run``) is looked up before the shipped rubrics.
            None, or a run with a copy: the run's ``prompts_root`` (its copy).

    Raises:
        RunError: Not an OpenTumorBoard run folder, a response naming an unknown item, or a
            calibration run that is not one of rubric ``otb``.
        RubricError: Rubric ``otb`` cannot be found under the prompts root or shipped.
        MissingExtraError: The ``otb`` extra (its metrics) is not installed: checked before any call.
    """
    require_extra("otb", "OpenTumorBoard (its ROUGE-L and embedding-similarity metrics)")
    progress = progress or NoProgress()
    guidance = dict(guidance or {})
    folder = OtbFolder(run_dir)
    config = load_otb_config(run_dir)
    warnings = []
    judge_file = None
    if calibration_run is not None:
        root = config.prompts_root if prompts_root is None else run_prompts_root(folder.prompts_root, prompts_root)
        calibrated, meta = calibrated_guidance(calibration_run, prompts_root=root)
        guidance.update(calibrated)
        judge_file = _judge_file(calibration_run)
        calib_model = judge_file[0].judge_model if judge_file is not None else meta["model"]
        if calib_model and calib_model != config.judge.model:
            warnings.append(f"the guidance was calibrated for judge model {calib_model!r} but this run judges with "
                            f"{config.judge.model!r}; the calibration may not carry over")
        if meta["worse_than_none"]:
            warnings.append(f"the calibration found its winner worse than no guidance on validation for "
                            f"{meta['worse_than_none']}; that guidance is used as given - judge without --guidance, or "
                            "calibrate again, to avoid it")
    items = {t: {it.item_id: it for it in records} for t, records in load_otb_items(config).items()}
    plan: list[tuple[dict, Rubric, ChatRequest]] = []
    answered: list[tuple[str, dict]] = []
    metrics = []
    for task, by_id in items.items():
        for model in config.models:
            for r in read_responses(folder.responses(task, model)):
                item_id = str(r.get("simulation_id") or r.get("qa_id"))
                item = by_id.get(item_id)
                if item is None:
                    raise RunError(f"{folder.responses(task, model)}: answer to {item_id!r}, which the run's {task} "
                                   "file does not hold; the folder was edited.")
                row = {"task": task, "item_id": item_id, "case_id": r["case_id"], "model": model,
                       "qa_type": r.get("qa_type", ""), "malformed": bool(r.get("malformed")),
                       "extracted_final_response": r.get("extracted_final_response", ""), "usage": r.get("usage", {})}
                answered.append((task, row))
                reference = item.reference_conclusion if isinstance(item, BoardCase) else item.reference_answer
                metrics.append(_metric_row(task, row, reference))
                if not row["malformed"]:
                    plan += [(row, rb, _judge_request(config, rb, item, row["extracted_final_response"], guidance))
                             for rb in _rubrics(config, task)]
    journal = folder.journal()
    record = judge_file[0] if judge_file is not None else None
    journal.append(Event.JUDGE_STARTED, calls=len(plan), judge_model=config.judge.model, guided=sorted(guidance),
                   calibration_run=str(calibration_run) if calibration_run is not None else None,
                   judge_file=record.model_dump() if record is not None else None)
    for warning in warnings:
        journal.append(Event.WARNING, message=warning)
    result = OtbJudgeResult(calls=len(plan), guidance=guidance, warnings=warnings, judge_file=record)
    with owned_client(config.endpoint, cache_path=config.cache_path, journal=journal, client=client) as client:
        progress.phase("judging", len(plan), key=PROGRESS_KEY, unit="judge calls")
        results = client.map([p[2] for p in plan], on_result=on_call(progress, PROGRESS_KEY), batchable=True)
        told = limits_sent(client)  # the length limits the calls were sent with
    scores = []
    for (row, rubric, request), res in zip(plan, results):
        reply, error = _read_reply(rubric, res, limits_sent=told)
        scores.append(_score_row(row, rubric, request, res, reply, error, guidance))
    result.failures = sum(s["outcome"] == "judge_failure" for s in scores)
    result.cached = sum(s["cached"] for s in scores)
    atomic_write(folder / folder.JUDGE_SCORES, "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in scores))
    atomic_write(folder / folder.METRICS, pd.DataFrame(metrics, columns=METRIC_COLUMNS).to_csv(index=False))
    _keep_judge_file(folder, judge_file)
    every = _judged_items(answered, scores)
    for name in items:
        for model in config.models:
            judged = [i for i in every if i.task == name and i.model == model]
            figures = summarize(judged, four_decisions=name == "board" and config.judge.four_decisions)
            result.summaries[(name, model)] = {"task": name, "model": model, "rubric_version": JUDGE_RUBRIC_VERSION, **figures}
    for (task_name, model_name), summary in result.summaries.items():  # written once every count has added up
        atomic_write(folder.summary(task_name, model_name), json.dumps(summary, indent=2) + "\n")
    journal.append(Event.JUDGE_FINISHED, rows=len(scores), failures=result.failures, cached=result.cached)
    return result


def load_judged_items(run_dir: Path | str) -> list[JudgedItem]:
    """Every answered item of a judged run, rebuilt from ``responses.jsonl`` and
    ``judge_scores.jsonl`` (no model call), in task, model and file order.

    Raises:
        RunError: Not an OpenTumorBoard run folder, not judged yet, or a damaged file.
    """
    folder = OtbFolder(run_dir)
    config = load_otb_config(run_dir)
    path = folder.require(folder.JUDGE_SCORES)
    try:
        scores = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except json.JSONDecodeError as exc:
        raise RunError(f"{path}: damaged ({exc.msg}); judge the run again (`evolve otb judge {folder.path}`).") from exc
    answered = []
    for task, _ in config.tasks():
        for model in config.models:
            for r in read_responses(folder.responses(task, model)):
                answered.append((task, {"item_id": str(r.get("simulation_id") or r.get("qa_id")), "case_id": r["case_id"],
                                        "model": model, "qa_type": r.get("qa_type", ""), "malformed": bool(r.get("malformed"))}))
    return _judged_items(answered, scores)


def _judged_items(answered: Sequence[tuple[str, dict]], scores: Sequence[dict]) -> list[JudgedItem]:
    """One :class:`JudgedItem` per answered ``(task, row)``, from its judge score lines."""
    by_item: dict[tuple[str, str, str], list[dict]] = {}
    for s in scores:
        by_item.setdefault((s["task"], s["model"], s["item_id"]), []).append(s)
    return [_judged_item(task, row, by_item.get((task, row["model"], row["item_id"]), [])) for task, row in answered]
