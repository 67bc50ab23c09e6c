"""What an OpenTumorBoard run and its judging will send, before anything is sent (``--plan``).

:func:`plan_otb_run` counts the calls of ``evolve otb run`` and :func:`plan_otb_judge` those of
``evolve otb judge`` on a generated run, as a :class:`~evolve.runs.CallPlan` (issue 25, item 1).

How a run spends calls (:func:`~evolve.otb.generate_otb`, :func:`~evolve.otb.judge_otb`):

- **generation**: one call per item and model, never re-asked (a failed call goes to
  ``errors.jsonl`` and is asked again on resume). No call waits on another, so the phase is
  ``batchable``;
- **extraction** of the answer (boundary, conclusion, fallbacks) is local: no call;
- **judging**: per answered item that is not malformed, one call (Specialist Turn: clinical
  equivalence and its flags) or two (Board Simulation: conclusion alignment, and the four
  decisions unless ``judge.four_decisions`` is off). Before generation every answer is assumed
  usable (a malformed one is not judged, so a run makes at most that many judge calls); on a
  generated run the count is exact. Batchable.

Tokens: generation prompts are the real requests (our prompts, or the released ones stored in the
test manifests), counted by the server's tokenizer when the ``counter`` asks one, else estimated;
judge prompts are the real judge messages - before generation with the candidate answer left
empty and added at its expected size, on a generated run with the extracted answers themselves.
Completion tokens are estimates (:data:`TURN_ANSWER_TOKENS`, :data:`BOARD_ANSWER_TOKENS`, a judge
rationale at its schema limit), each at most its output limit; a declared reasoning model may
think up to its whole output limit, which the high end then takes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel

from evolve.otb._config import OtbConfig, Task
from evolve.otb._judging import _judge_request, _rubrics, calibrated_guidance, load_otb_config
from evolve.otb._prompts import Rubric, judge_messages, judge_schema
from evolve.otb._records import BoardCase, TurnQuestion
from evolve.otb._runner import _request, load_otb_inputs, load_otb_items, read_responses
from evolve.rubric import run_prompts_root
from evolve.runs import CHARS_PER_TOKEN, CallPlan, OtbFolder, PhasePlan, count_tokens, prompt_text

__all__ = [
    "BOARD_ANSWER_TOKENS", "CONCLUSION_TOKENS", "TURN_ANSWER_TOKENS", "answered_items", "generation_phase", "judging_phase",
    "judge_reply_tokens", "plan_otb_judge", "plan_otb_run",
]

TokenCounter = Callable[[Sequence[str]], tuple[list[int], str]]
"""``texts -> (tokens per text, how they were counted)``."""

TASK_NAMES: dict[str, str] = {"board": "Board Simulation", "turn": "Specialist Turn"}

BOARD_ANSWER_TOKENS = 1200
"""Expected Board Simulation answer, tokens: a numbered discussion of some ten turns and a
conclusion of two to four sentences (an estimate)."""

CONCLUSION_TOKENS = 120
"""Expected extracted board conclusion (two to four sentences), tokens: what the judge reads."""

TURN_ANSWER_TOKENS = 100
"""Expected Specialist Turn answer (at most three sentences inside ``{"answer": ...}``), tokens."""

JSON_TOKENS = 20
"""Expected tokens of a judge reply's keys, scores and flags."""


def generation_phase(task: str) -> str:
    """Name of the generation phase of ``task`` (``board`` or ``turn``)."""
    return f"generation: {TASK_NAMES[task]}"


def judging_phase(task: str) -> str:
    """Name of the judging phase of ``task``."""
    return f"judging: {TASK_NAMES[task]}"


def judge_reply_tokens(config: OtbConfig, rubric: Rubric) -> tuple[int, int]:
    """Expected judge reply, tokens, ``(low, high)``: the scores with a rationale of a quarter of,
    or all of, its schema limit, at most the judge's output limit for the task."""
    chars = _rationale_chars(judge_schema(rubric)[0])
    limit = config.judge.max_tokens_turn if rubric == "clinical_equivalence" else config.judge.max_tokens_board

    def tokens(n: float) -> int:
        return min(limit, JSON_TOKENS + math.ceil(n / CHARS_PER_TOKEN))

    return tokens(chars / 4), tokens(chars)


def _rationale_chars(model: type[BaseModel]) -> int:
    """``maxLength`` of the ``rationale`` a judge reply model holds (nested models searched)."""
    for name, info in model.model_fields.items():
        if name == "rationale":
            return next((m.max_length for m in info.metadata if getattr(m, "max_length", None)), 1000)
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
            return _rationale_chars(info.annotation)
    return 0


def _answer_tokens(config: OtbConfig, task: str, model: str) -> tuple[int, int]:
    """Expected ``(low, high)`` output of one generation call: the typical answer (at most the
    limit); a reasoning model's high end is its whole output limit."""
    d = config.decoding_of(model)
    limit = d.max_tokens_board if task == "board" else d.max_tokens_turn
    typical = min(limit, BOARD_ANSWER_TOKENS if task == "board" else TURN_ANSWER_TOKENS)
    return typical, limit if model in config.reasoning_models else typical


def _guidance(config: OtbConfig, calibration_run: Path | str | None, prompts_root: Path | str | None) -> dict[str, str]:
    if calibration_run is None:
        return {}
    root = config.prompts_root if prompts_root is None else run_prompts_root(OtbFolder(config.run_dir).prompts_root,
                                                                              prompts_root)
    return calibrated_guidance(calibration_run, prompts_root=root)[0]


def plan_otb_run(
    config: OtbConfig,
    *,
    judge: bool = True,
    calibration_run: Path | str | None = None,
    items: Mapping[Task, Sequence[BoardCase | TurnQuestion]] | None = None,
    stored: Mapping[Task, Mapping[str, tuple[str, str, str]]] | None = None,
    counter: TokenCounter | None = None,
    answered: Mapping[tuple[str, str], set[str]] | None = None,
) -> CallPlan:
    """The calls, tokens and phases of ``evolve otb run``, without a call.

    Args:
        config: The resolved run configuration.
        judge: The run judges its answers afterwards (adds a judging phase per task).
        calibration_run: The judge file of rubric ``otb`` guiding the judge.
        items, stored: The records and stored prompts (:func:`~evolve.otb._runner.load_otb_inputs`);
            None reads them.
        counter: ``texts -> (tokens, source)`` (the endpoint's ``/tokenize``); None estimates.
        answered: ``(task, model) -> item ids`` a resumed run holds answers to
            (:func:`answered_items`): their generation is left out (the plan of what is left).

    Raises:
        DataError: A record file or manifest is invalid.
        RunError: A bad calibration run.
    """
    if items is None or stored is None:
        items, stored = load_otb_inputs(config)
    guidance = _guidance(config, calibration_run, None) if judge else {}
    texts: list[str] = []
    spans: list[tuple[str, str, int]] = []  # (kind, task, number of texts)
    for task, records in items.items():
        texts += [prompt_text(_request(config, task, config.models[0], it, stored.get(task, {}).get(it.item_id)).messages)
                  for it in records]
        spans.append(("generation", task, len(records)))
        if judge:
            for rubric in _rubrics(config, task):
                texts += [prompt_text(judge_messages(rubric, it, "", guidance.get(rubric))) for it in records]
                spans.append((rubric, task, len(records)))
    counts, source = (counter or count_tokens)(texts)
    phases: list[PhasePlan] = []
    start = 0
    judged: dict[str, list[tuple[float, tuple[int, int], int]]] = {}
    answered = answered or {}
    for kind, task, n in spans:
        per_item = counts[start:start + n]
        tokens = sum(per_item)
        start += n
        if kind == "generation":
            ids = [it.item_id for it in items[task]]  # type: ignore[index]
            todo = {m: [k for k, i in enumerate(ids) if i not in answered.get((task, m), ())] for m in config.models}
            calls = sum(len(v) for v in todo.values())
            outs = [(len(todo[m]), _answer_tokens(config, task, m)) for m in config.models]
            per_call = (sum(k * o[0] for k, o in outs) / max(calls, 1), sum(k * o[1] for k, o in outs) / max(calls, 1))
            phases.append(_phase(generation_phase(task), calls, sum(per_item[k] for v in todo.values() for k in v),
                                 per_call, note="1 call per item and model; extraction is local (no call)"))
        else:
            candidate = CONCLUSION_TOKENS if task == "board" else TURN_ANSWER_TOKENS
            judged.setdefault(task, []).append((tokens + n * candidate, judge_reply_tokens(config, kind), n))  # type: ignore[arg-type]
    for task, parts in judged.items():
        calls = sum(n for _, _, n in parts) * len(config.models)
        prompt = sum(p for p, _, _ in parts) * len(config.models)
        out = tuple(sum(o[side] * n for _, o, n in parts) * len(config.models) / max(calls, 1) for side in (0, 1))
        phases.append(_phase(judging_phase(task), calls, prompt, (out[0], out[1]),
                             note=("every answer assumed usable (a malformed one is not judged); the candidate at "
                                   "its expected size")))
    done = sum(len(v) for v in answered.values())
    left = (f"{done} answer(s) stored already (their generation is not counted; the judging is counted whole: what "
            "an earlier judging asked comes from the response cache)." if done else "")
    return CallPlan(command="evolve otb run", phases=_ordered(phases), token_source=source,
                    completion_source=_completion_source(config),
                    notes=tuple(n for n in (_counts_note(config, items), left,
                                            "Calls a resumed run already made come from the response cache, free.") if n))


def answered_items(config: OtbConfig) -> dict[tuple[str, str], set[str]]:
    """``(task, model) -> ids`` of the items ``config.run_dir`` holds an answer to (reads only):
    what resuming the run does not ask again."""
    folder = OtbFolder(config.run_dir)
    return {(task, model): {str(r.get("simulation_id") or r.get("qa_id")) for r in read_responses(folder.responses(task, model))}
            for task, _ in config.tasks() for model in config.models}


def _phase(name: str, calls: int, prompt_tokens: float, completion_per_call: float | tuple[float, float], *,
           note: str) -> PhasePlan:
    return PhasePlan.of_calls(name, calls, calls, prompt_tokens_per_call=prompt_tokens / max(calls, 1),
                              completion_tokens_per_call=completion_per_call, batchable=True, note=note)


def _ordered(phases: list[PhasePlan]) -> tuple[PhasePlan, ...]:
    """Generation phases first (the run answers everything, then judges)."""
    return tuple(sorted(phases, key=lambda p: not p.phase.startswith("generation")))


def _counts_note(config: OtbConfig, items: Mapping[Task, Sequence[object]]) -> str:
    per_task = ", ".join(f"{len(v)} {TASK_NAMES[t]} item(s)" for t, v in items.items())
    return f"{per_task} x {len(config.models)} model(s); no call is ever re-asked."


def _completion_source(config: OtbConfig) -> str:
    thinking = " (a declared reasoning model up to its output limit)" if config.reasoning_models else ""
    return (f"estimate: a board answer about {BOARD_ANSWER_TOKENS:,} tokens, a turn answer {TURN_ANSWER_TOKENS}"
            f"{thinking}, a judge rationale a quarter of to all of its schema limit, each at most its output limit")


def plan_otb_judge(
    run_dir: Path | str,
    *,
    calibration_run: Path | str | None = None,
    prompts_root: Path | str | None = None,
    counter: TokenCounter | None = None,
) -> CallPlan:
    """The judge calls ``evolve otb judge`` would send on a generated run, without a call: one
    per answered, non-malformed item and judge rubric, with the real judge messages.

    Raises:
        RunError: Not an OpenTumorBoard run folder, an answer to an unknown item, or a bad
            calibration run.
    """
    from evolve.errors import RunError

    folder = OtbFolder(run_dir)
    config = load_otb_config(run_dir)
    guidance = _guidance(config, calibration_run, prompts_root)
    items = {t: {it.item_id: it for it in records} for t, records in load_otb_items(config).items()}
    requests: dict[str, list[tuple[Rubric, str]]] = {}
    malformed = 0
    for task, by_id in items.items():
        for model in config.models:
            for r in read_responses(folder.responses(task, model)):
                item = by_id.get(str(r.get("simulation_id") or r.get("qa_id")))
                if item is None:
                    raise RunError(f"{folder.responses(task, model)}: an answer to an item the run's {task} file does "
                                   "not hold; the folder was edited.")
                if r.get("malformed"):
                    malformed += 1
                    continue
                for rubric in _rubrics(config, task):
                    request = _judge_request(config, rubric, item, r.get("extracted_final_response", ""), guidance)
                    requests.setdefault(task, []).append((rubric, prompt_text(request.messages)))
    texts = [t for calls in requests.values() for _, t in calls]
    counts, source = (counter or count_tokens)(texts)
    phases, start = [], 0
    for name, calls in requests.items():
        tokens = counts[start:start + len(calls)]
        start += len(calls)
        replies = [judge_reply_tokens(config, rubric) for rubric, _ in calls]
        out = (sum(r[0] for r in replies) / max(len(calls), 1), sum(r[1] for r in replies) / max(len(calls), 1))
        phases.append(_phase(judging_phase(name), len(calls), sum(tokens), out,
                             note="exact: the run's extracted answers"))
    notes = [f"{malformed} malformed answer(s) are not judged."] if malformed else []
    notes.append("Calls answered by the response cache (an earlier judging with the same judge) are not paid again.")
    return CallPlan(command="evolve otb judge", phases=tuple(phases), token_source=source,
                    completion_source=("estimate: a judge rationale a quarter of to all of its schema limit, at most the judge's "
                                       "output limit"),
                    notes=tuple(notes))
