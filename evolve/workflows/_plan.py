"""``--plan``: what ``evolve calibrate`` and ``evolve judge`` would send, before anything is sent.

A plan reads the same inputs as the run (pack, split, rubric, judge file, targets), builds the
requests the run would send and counts them; it writes nothing (no run folder, no cache file),
starts no embedded server and makes no model call. The only request it may send is ``POST
/tokenize`` to an OpenAI-compatible server that serves one (llama.cpp, vLLM), to count prompt
tokens with the model's own tokenizer.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from evolve.audit import DriftCheckSettings, drift_request
from evolve.calibrated import load_judge_file
from evolve.calibration import calibration_calls, calls_left, plan_calibration
from evolve.config import CalibrationConfig
from evolve.judge import Judge, derive_seed
from evolve.llm import ChatRequest, FakeProvider
from evolve.outputs import DRIFT_RATIONALE_MAX_CHARS
from evolve.rubric import MAX_GUIDANCE_CHARS
from evolve.runs import (
    CHARS_PER_TOKEN,
    CalibrationFolder,
    CallPlan,
    EndpointSettings,
    Journal,
    PhasePlan,
    ScoringFolder,
    cached_keys,
    count_tokens,
    default_cache_path,
    prompt_text,
    run_usage,
)
from evolve.scoring import chosen_criteria, scoring_requests

__all__ = ["plan_calibration_run", "plan_judge_run", "run_folder_journal", "token_counter"]

REPLY_OVERHEAD_CHARS = 40
"""Characters of a structured reply besides its free text (braces, keys, quotes, the score)."""


def token_counter(endpoint: EndpointSettings):
    """A function counting prompt tokens for this endpoint: ``texts -> (tokens, source)``.

    An ``openai_compatible`` endpoint is asked ``POST /tokenize`` (with the API key from
    ``endpoint.api_key_env`` when set); the embedded endpoint is never started for a plan and
    the fake provider has no tokenizer: both are estimated at :data:`CHARS_PER_TOKEN`.
    """
    if endpoint.provider != "openai_compatible" or endpoint.base_url is None:
        why = "the embedded model is not started for a plan" if endpoint.provider == "embedded" else "no tokenizer"

        def estimate(texts: Sequence[str]) -> tuple[list[int], str]:
            counts, source = count_tokens(texts)
            return counts, f"{source} ({why})"
        return estimate
    key = os.environ.get(endpoint.api_key_env)
    headers = {"Authorization": f"Bearer {key}"} if key else {}

    def tokenize(texts: Sequence[str]) -> tuple[list[int], str]:
        return count_tokens(texts, base_url=endpoint.base_url, model=endpoint.model, headers=headers)
    return tokenize


def endpoint_identity(endpoint: EndpointSettings) -> str | None:
    """The endpoint identity a run's client puts in its cache keys (as
    :func:`evolve.runs.open_client` builds it), found without starting or calling anything.

    Returns:
        ``embedded:<model>:<sha>``, a replica group's ``group:<name>``, the base URL of an
        ``openai_compatible`` endpoint, the fake provider's ``fake://``; None when unknown.
    """
    if endpoint.provider == "embedded":
        from evolve.local import LOCAL_MODELS

        spec = LOCAL_MODELS.get(endpoint.local_model)
        return None if spec is None else f"embedded:{spec.name}:{(spec.sha256 or '')[:12]}"
    if getattr(endpoint, "is_group", False):
        return endpoint.cache_identity() or None
    if endpoint.provider == "openai_compatible" and endpoint.base_url:
        from evolve.llm import get_provider

        return str(get_provider("openai_compatible", base_url=endpoint.base_url, api_key=None,
                                timeout=endpoint.timeout_s, schema_limits=endpoint.schema_limits).endpoint_id)
    return FakeProvider(lambda request: "").endpoint_id if endpoint.provider == "fake" else None


def _hits(endpoint: EndpointSettings, cache_path: Path | None, requests: Sequence[ChatRequest]) -> set[str]:
    """Cache keys of ``requests`` (under this endpoint's identity) the response cache answers."""
    identity = endpoint_identity(endpoint)
    if identity is None:
        return set()
    return cached_keys(cache_path or default_cache_path(), [r.cache_key(identity) for r in requests])


class _Sizes:
    """Token counts of many prompts, counted in one pass (the server's tokenizer sees a sample)."""

    def __init__(self, counter, groups: Mapping[str, Sequence[ChatRequest]]) -> None:
        texts: dict[str, int] = {}
        self._texts = {name: [prompt_text(r.messages) for r in requests] for name, requests in groups.items()}
        for group in self._texts.values():
            for t in group:
                texts.setdefault(t, len(texts))
        ordered = list(texts)
        counts, self.source = counter(ordered)
        self._count = dict(zip(ordered, counts))
        self.chars_per_token = (sum(map(len, ordered)) / max(1, sum(counts))) if ordered else CHARS_PER_TOKEN

    def mean(self, name: str) -> float:
        """Mean prompt tokens of the requests of group ``name`` (0 for none)."""
        group = self._texts[name]
        return sum(self._count[t] for t in group) / len(group) if group else 0.0

    def shared_share(self, name: str, base: str) -> float:
        """Share (0..1) of group ``name``'s prompt characters that are a prefix of some prompt of
        group ``base`` with the same opening (the part a warm prefix cache can serve)."""
        group, bases = self._texts[name], self._texts[base]
        if not group or not bases:
            return 0.0
        by_head: dict[str, list[str]] = {}
        for b in bases:
            by_head.setdefault(_opening(b), []).append(b)
        best: dict[str, int] = {}  # per distinct text: a group repeats its prompts (seeds, repeats)
        for text in group:
            if text not in best:
                best[text] = max((_common_prefix_length(text, b) for b in by_head.get(_opening(text), ())), default=0)
        total = sum(map(len, group))
        return sum(best[t] for t in group) / total if total else 0.0


def _common_prefix_length(a: str, b: str) -> int:
    """Length of the longest common prefix of ``a`` and ``b`` (a bisection over slice
    comparisons, each done in C: prompts run to thousands of characters)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def _opening(text: str) -> str:
    """What finds the prompts ``text`` may share a prefix with: a judge prompt's protocol, case
    and target (everything before its criterion), else its first 400 characters."""
    head, sep, _ = text.rpartition("\nCRITERION: ")
    return head if sep else text[:400]


def _reply_tokens(free_chars: int, chars_per_token: float) -> tuple[float, float]:
    """``(low, high)`` completion tokens of a structured reply whose free text may reach
    ``free_chars`` characters: a quarter of the limit used, or all of it."""
    return ((free_chars / 4 + REPLY_OVERHEAD_CHARS) / chars_per_token,
            (free_chars + REPLY_OVERHEAD_CHARS) / chars_per_token)


def plan_calibration_run(config: CalibrationConfig, *, resume: bool = False, counter=None) -> CallPlan:
    """The calls of ``evolve calibrate`` by phase, with their tokens, before any call.

    Phases (summed over the criteria; see :func:`evolve.calibration.calibration_calls` for each
    count): initial evaluation, evolution, mutation, finalists (robust selection), re-evaluation,
    then the drift audit (``config.audit``) and the held-out scoring (``config.evaluate_holdout``).

    Args:
        config: The resolved configuration (as the run would use it).
        resume: The run folder exists and would be resumed; the plan is still the whole run's
            (its finished calls would come from the response cache, free).
        counter: ``texts -> (tokens, source)``; default :func:`token_counter` of the endpoint.

    Returns:
        The plan (render it with :meth:`CallPlan.render`).

    Raises:
        As :func:`evolve.calibration.plan_calibration` (invalid inputs, a folder that exists
        without ``resume``).
    """
    plan = plan_calibration(config, resume=resume)
    judge = Judge(plan.rubric, plan.protocol, config.judge, schema_limits=config.endpoint.schema_limits)
    per_criterion = calibration_calls(config, plan, judge)
    journal = CalibrationFolder(config.run_dir).journal_path
    events = list(Journal(journal).events()) if resume and journal.is_file() else []
    left_notes: list[str] = []
    if events:  # the calls left; the finished phases replay from the response cache
        per_criterion, left_notes = calls_left(config, plan, judge, events)
    finished = {e.get("event") for e in events}
    per_criterion, cached_initial = _without_cached_initial(config, per_criterion)
    groups: dict[str, Sequence[ChatRequest]] = {}
    for crit in per_criterion:
        for phase in crit.phases:
            groups[f"{crit.criterion}/{phase.phase}"] = _distinct(phase.requests)
        train, _ = plan.items[crit.criterion]
        groups[f"{crit.criterion}/none"] = _distinct(
            judge.request(it.case, it.target, plan.rubric.criterion(crit.criterion), None, 0) for it in train)
    audit_requests = _audit_requests(config, plan) if config.audit else []
    groups["audit"] = audit_requests
    holdout = _holdout(config, plan, judge)
    groups["holdout"] = [r for _, r in holdout]
    sizes = _Sizes(counter or token_counter(config.endpoint), groups)
    judge_reply = _reply_tokens(config.judge.rationale_max_chars, sizes.chars_per_token)
    mutation_reply = _reply_tokens(400 + MAX_GUIDANCE_CHARS, sizes.chars_per_token)  # MutationReply's limits
    completion_source = (f"estimated from the reply schemas: a quarter to all of the judge's rationale limit "
                         f"({config.judge.rationale_max_chars} characters) per judge call; reasoning tokens of a "
                         f"thinking model come on top")
    measured = _measured_replies(CalibrationFolder(config.run_dir).journal_path) if resume else {}
    if "judge" in measured:  # what this run's judge really answered beats the schema's estimate
        judge_reply = (measured["judge"], measured["judge"])
        mutation_reply = (measured["mutation"],) * 2 if "mutation" in measured else mutation_reply
        completion_source = "measured in this run: " + ", ".join(f"{n:,.0f} per {tag} call" for tag, n in measured.items())
    phases: list[PhasePlan] = []
    for name in ("initial evaluation", "racing noise", "evolution", "mutation", "finalists", "re-evaluation"):
        parts = [(c.criterion, p) for c in per_criterion for p in c.phases if p.phase == name]
        if not parts:
            continue
        reply = mutation_reply if name == "mutation" else judge_reply
        phases.append(_summed(name, parts, sizes, reply))
    if config.audit and "audit_finished" not in finished:
        n_init = sum(len(plan.initial[c.criterion_id]) for c in plan.criteria)
        n_crit = len(plan.criteria)
        phases.append(PhasePlan.of_calls(
            "drift audit", n_init + 1, n_init + n_crit + 1, prompt_tokens_per_call=sizes.mean("audit"),
            completion_tokens_per_call=_reply_tokens(DRIFT_RATIONALE_MAX_CHARS, sizes.chars_per_token), batchable=True,
            note="one LLM check per initial prompt and mutant winner, and one embeddings request"))
    if holdout and not _finished(config.run_dir / CalibrationFolder.HOLDOUT / ScoringFolder.JOURNAL):
        phases.append(PhasePlan.of_calls(
            "held-out scoring", len(holdout), len(holdout), prompt_tokens_per_call=sizes.mean("holdout"),
            completion_tokens_per_call=judge_reply, batchable=True,
            note="the winner (sized as an initial prompt) and no guidance on every held-out target"))
    if cached_initial:
        left_notes.append(f"{cached_initial:,} initial-evaluation calls are already in the response cache (an earlier "
                          "run with the same seeds): free, not counted")
    counted = ("the calls left: phases its journal records as finished (done) replay from the response cache, "
               "free; a phase under way is counted whole (an evolution less its attempts made), though its finished "
               "calls will come free too: an upper bound" if events else "the whole run" + (", less the initial-evaluation calls the cache already "
                                                           "holds (below)" if cached_initial else ""))
    notes = [f"Calls a resumed or repeated run already made come from the response cache, free; the plan counts "
             f"{counted}. Failed calls are retried (up to {config.endpoint.max_retries} times each): retries are not "
             f"counted.", *(f"  {n}" for n in left_notes), *(f"warning: {w}" for w in plan.warnings)]
    return CallPlan(
        command="evolve calibrate --resume (the calls left)" if events else "evolve calibrate", phases=tuple(phases), token_source=sizes.source,
        completion_source=completion_source, notes=tuple(notes),
    )


def _without_cached_initial(config: CalibrationConfig, per_criterion: list) -> tuple[list, int]:
    """``per_criterion`` with the initial evaluation's calls that the response cache already
    answers taken off (their requests are known exactly), and how many those are."""
    out, total = [], 0
    for crit in per_criterion:
        phases = []
        for p in crit.phases:
            if p.phase == "initial evaluation" and p.high:
                hits = len(_hits(config.endpoint, config.cache_path, p.requests))
                total += hits
                p = dataclasses.replace(p, low=max(0, p.low - hits), high=max(0, p.high - hits))
            phases.append(p)
        out.append(dataclasses.replace(crit, phases=tuple(phases)))
    return out, total


def _finished(journal_path: Path) -> bool:
    """Whether a scoring run's journal records its end (``run_finished``)."""
    return journal_path.is_file() and any(e.get("event") == "run_finished" for e in Journal(journal_path).events())


def _measured_replies(journal_path: Path) -> dict[str, float]:
    """Mean completion tokens per paid call of the judge and the mutation model in a run's
    journal (tags with no paid call left out; nothing when there is no journal)."""
    if not journal_path.is_file():
        return {}
    usage = run_usage(Journal(journal_path))
    return {tag: usage[tag]["billed_completion_tokens"] / usage[tag]["calls"] for tag in ("judge", "mutation")
            if usage.get(tag, {}).get("calls") and "billed_completion_tokens" in usage[tag]}


def _distinct(requests) -> list[ChatRequest]:
    """One request per distinct prompt text (seeds do not change a prompt's size)."""
    seen: dict[str, ChatRequest] = {}
    for r in requests:
        seen.setdefault(prompt_text(r.messages), r)
    return list(seen.values())


def _summed(name: str, parts: list, sizes: _Sizes, reply: tuple[float, float]) -> PhasePlan:
    """One phase over every criterion: calls summed, tokens at each criterion's mean size."""
    low = sum(p.low for _, p in parts)
    high = sum(p.high for _, p in parts)
    prompt_low = sum(p.low * sizes.mean(f"{c}/{name}") for c, p in parts)
    prompt_high = sum(p.high * sizes.mean(f"{c}/{name}") for c, p in parts)
    share = 0.0
    if name != "mutation" and prompt_high:
        share = sum(p.high * sizes.mean(f"{c}/{name}") * sizes.shared_share(f"{c}/{name}", f"{c}/none")
                    for c, p in parts) / prompt_high
    notes = sorted({p.note for _, p in parts if p.note})
    return PhasePlan(
        phase=name, calls_low=low, calls_high=high, prompt_tokens_low=round(prompt_low),
        prompt_tokens_high=round(prompt_high), completion_tokens_low=round(low * reply[0]),
        completion_tokens_high=round(high * reply[1]), cached_prompt_tokens_low=int(prompt_low * share),
        cached_prompt_tokens_high=int(prompt_high * share), batchable=all(p.batchable for _, p in parts),
        note="; ".join(notes) if len(parts) == 1 or len(notes) == 1 else (notes[0] + " (per criterion)" if notes else ""),
    )


def _audit_requests(config: CalibrationConfig, plan) -> list[ChatRequest]:
    """The drift audit's LLM checks of the initial prompts (a mutant winner's is sized alike)."""
    check = DriftCheckSettings()
    model = check.model or config.endpoint.model
    seed = check.seed if check.seed is not None else config.seed
    return [drift_request(plan.protocol, c, text, model=model, seed=seed, max_tokens=check.max_tokens)
            for c in plan.criteria for _, text in plan.initial[c.criterion_id]]


def _holdout(config: CalibrationConfig, plan, judge: Judge) -> list[tuple[str, ChatRequest]]:
    """``(kind, request)`` of the held-out scoring (``evaluate_holdout``), the winner stood in
    for by the first initial prompt; empty when off or the split holds no held-out case."""
    if not config.evaluate_holdout:
        return []
    holdout = set(plan.splits.holdout)
    targets = [t for t in plan.pack.targets if t.case_id in holdout
               and (plan.conditions is None or t.condition in plan.conditions)]
    out = []
    for c in plan.criteria:
        winner = next((text for _, text in plan.initial[c.criterion_id]), "")
        for t in targets:
            if t.component not in c.components:
                continue
            case = plan.pack.case(t.case_id)
            for kind, text in (("winner", winner), ("no-guidance", "")):
                for r in range(config.budget.reeval_repeats):
                    seed = derive_seed(config.seed, "reeval", c.criterion_id, r)
                    out.append((kind, judge.request(case, t, c, text or None, seed)))
    return out


def plan_judge_run(options, *, counter=None) -> CallPlan:
    """The calls of ``evolve judge`` (:class:`~evolve.workflows.JudgeRunOptions`), before any.

    Calls: for every criterion, every applicable target and every repeat of the judge file's
    seed policy, the winner's request, and for rated targets the no-guidance request too
    (identical requests counted once).

    Args:
        options: The run's options (targets, judge file, criteria, endpoint, model).
        counter: ``texts -> (tokens, source)``; default :func:`token_counter` of the endpoint.

    Raises:
        RunError, PackError, ConfigError: As :func:`evolve.workflows.run_judge` before it calls.
    """
    from evolve.runs import ScoringFolder
    from evolve.scoring import check_scoring_resume
    from evolve.workflows._judge import judge_targets, scoring_config

    judge = load_judge_file(options.judge)
    targets = judge_targets(options, judge)
    folder = ScoringFolder(options.folder())
    check_scoring_resume(folder.path, scoring_config(options, judge, targets, folder), options.resume)  # as the run
    pairs = scoring_requests(judge, targets, criteria=options.criteria, model=options.model,
                             schema_limits=options.endpoint.schema_limits)
    unique: dict[str, tuple[str, ChatRequest]] = {}
    for kind, req in pairs:
        unique.setdefault(req.cache_key("plan"), (kind, req))
    endpoint = options.endpoint
    if options.model is not None or "model" not in endpoint.model_fields_set:
        endpoint = endpoint.model_copy(update={"model": options.model or judge.judge.model})
    groups = {kind: [r for k, r in unique.values() if k == kind] for kind in ("winner", "no-guidance")}
    cache_path = options.cache_path or default_cache_path()
    hits = _hits(endpoint, cache_path, [r for _, r in unique.values()])
    identity = endpoint_identity(endpoint) or ""
    paid = {kind: sum(r.cache_key(identity) not in hits for r in reqs) for kind, reqs in groups.items()}
    sizes = _Sizes(counter or token_counter(endpoint), groups)
    reply = _reply_tokens(judge.judge.rationale_max_chars, sizes.chars_per_token)
    labels = {"winner": "judging (winner)", "no-guidance": "judging (no guidance, rated targets)"}
    phases = tuple(
        PhasePlan.of_calls(labels[kind], paid[kind], paid[kind], prompt_tokens_per_call=sizes.mean(kind),
                           completion_tokens_per_call=reply, batchable=True,
                           cached_share=sizes.shared_share(kind, "no-guidance") if kind == "winner" else 0.0)
        for kind, reqs in groups.items() if reqs)
    repeats = judge.seed_policy.repeats
    note = (f"{len(targets.pack.targets)} targets x {len(chosen_criteria(judge, options.criteria))} criteria (applicable "
            f"pairs only) x {repeats} repeats{' x 2 (winner and no guidance)' if targets.rated else ''}; "
            f"{len(pairs) - len(unique)} repeated requests counted once; {len(hits):,} of {len(unique):,} requests are "
            f"already in the response cache ({cache_path}: e.g. targets the calibration scored with these seeds), "
            "free, and not counted.")
    return CallPlan(command="evolve judge", phases=phases, token_source=sizes.source,
                    completion_source=(f"estimated: a quarter to all of the rationale limit "
                                       f"({judge.judge.rationale_max_chars} characters) per call"),
                    notes=(note,))


def run_folder_journal(kind: str, run_dir: Path) -> Path:
    """The journal of a run folder (calibration or scoring), for its measured throughput."""
    folder = CalibrationFolder(run_dir) if kind == "calibration" else ScoringFolder(run_dir)
    return folder.journal_path

