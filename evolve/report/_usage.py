"""The calls and tokens a run paid for, read from its journal (every process, every step)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pandas as pd

from evolve.markdown import md_code
from evolve.outputs import CallCounts, Usage
from evolve.report._spend import render_spend, spend_report
from evolve.runs import Journal, run_endpoint_usage, run_usage

__all__ = ["prefix_cached_share", "render_endpoint_usage", "render_prefix_share", "render_usage", "usage_report"]

_FIELDS = ("calls", "cache_hits", "failures", "retries", "prompt_tokens", "completion_tokens", "in_flight",
           "cached_prompt_tokens", "billed_prompt_tokens", "billed_completion_tokens")


def usage_report(journal: Journal) -> dict:
    """``{"by_tag": {tag: counts}, "total": counts}`` over every process of the run.

    Counts are those of :class:`evolve.llm.Usage` - ``calls`` answered by the endpoint,
    ``cache_hits``, ``failures`` (after retries), ``retries`` (extra attempts, paid or not),
    ``prompt_tokens``/``completion_tokens`` (cache hits included: the cost the run represents) -
    plus ``calls_made`` = ``calls + failures``: every call sent to the endpoint, failed ones
    included (cache hits are not calls made) - and ``in_flight``: requests sent by a process
    that ended (killed, interrupted) before their answer was counted; they may have been paid
    and are not in ``calls_made``. Tags name the step: ``judge``, ``mutation``, ``audit``,
    ``audit_embedding``, the bench stages, ``otb_judge`` ...

    A run with a spending limit or prices also has ``"spend"`` (:func:`~evolve.report.spend_report`:
    the limit, what was paid in calls, tokens, prefix-cached tokens and USD, stops at the limit).
    A run routed over several replicas also has ``"by_endpoint"``: ``{replica URL: counts}``
    (:func:`~evolve.runs.run_endpoint_usage`: paid calls, their tokens, ``failed_attempts`` and
    ``taken_out``).
    """
    by_tag = {tag: {**c, "calls_made": int(c.get("calls", 0)) + int(c.get("failures", 0))}
              for tag, c in run_usage(journal).items()}
    total = {name: sum(c.get(name, 0) for c in by_tag.values()) for name in ("calls_made", *_FIELDS)}
    out: dict = {"by_tag": dict(sorted(by_tag.items())), "total": total}
    if by_endpoint := run_endpoint_usage(journal):
        out["by_endpoint"] = dict(sorted(by_endpoint.items()))
    if spend := spend_report(journal):  # a spending limit or prices: what was spent against them
        out["spend"] = spend
    return out


def render_usage(usage: Usage | Mapping | None) -> list[str]:
    """Markdown: one row per tag, then the total; a line saying so when nothing was journaled.

    Args:
        usage: A report's ``usage`` (:class:`~evolve.outputs.Usage`, or the mapping
            :func:`usage_report` returns while a report is built).
    """
    out = ["## Calls and tokens", ""]
    if isinstance(usage, Mapping):
        usage = Usage.model_validate(usage)
    if usage is None or not usage.by_tag:
        return out + ["No usage in `journal.jsonl` (a run made before evolve journaled it, or killed before its "
                      "first usage record).", ""]
    paid = _paid_tokens_known(usage.total)
    out += ["Every model call of the run, over all its processes (a resumed run adds the calls of each resumption; "
            "cache hits cost nothing new). Calls = answered + failed (after their retries); retries are extra "
            "attempts of calls that were retried. An answer the judge then refuses (not JSON, a score off the "
            "scale) is an answered call here and a model failure where the report counts outcomes. Cache hits are "
            "requests the response cache answered, counted apart from the calls; the progress line shown during a "
            "run counts both together (its \"N calls (M cached)\"), and on a resume also the work read back from "
            "the run folder as cached. "
            + ("Tokens are those of the calls sent (paid); with the cache hits' the run represents "
               f"{usage.total.prompt_tokens} prompt and {usage.total.completion_tokens} completion tokens."
               if paid else "Tokens include the cache hits' (a run journaled before paid tokens were counted apart)."),
            "",
            f"| step | calls | answered | failed | cache hits | retries | {'paid ' if paid else ''}prompt tokens | "
            f"{'paid ' if paid else ''}completion tokens |",
            "|---|---|---|---|---|---|---|---|"]
    for tag, c in [*usage.by_tag.items(), ("**total**", usage.total)]:
        tokens = (c.billed_prompt_tokens, c.billed_completion_tokens) if paid else (c.prompt_tokens, c.completion_tokens)
        cells = [c.calls + c.failures, c.calls, c.failures, c.cache_hits, c.retries, *tokens]
        out.append(f"| {tag} | " + " | ".join(str(v) for v in cells) + " |")
    if (in_flight := usage.total.in_flight) > 0:
        out += ["", f"{in_flight} more call{'s were' if in_flight != 1 else ' was'} in flight when a process of the run "
                "was interrupted or killed: sent, never counted as answered, possibly paid (a resume asks "
                f"{'them' if in_flight != 1 else 'it'} again)."]
    return out + [""] + render_spend(usage.spend) + render_endpoint_usage(usage.by_endpoint)


def _paid_tokens_known(total: CallCounts) -> bool:
    """Whether the journal counted paid tokens apart (runs journaled before it did have calls
    with tokens but no paid tokens; a run served wholly from the cache has neither)."""
    return total.billed_prompt_tokens > 0 or total.calls == 0 or total.prompt_tokens == 0


def render_endpoint_usage(by_endpoint: Mapping[str, Mapping] | None) -> list[str]:
    """Markdown: the calls and tokens each replica answered (a run over several endpoints; none
    otherwise): its share of the answered calls, failed attempts (connection errors, HTTP 5xx),
    times taken out, and the share of its prompt tokens served from its prefix cache."""
    if not by_endpoint:
        return []
    answered = sum(int(c.get("calls", 0)) for c in by_endpoint.values())
    out = ["### Calls per endpoint", "",
           "Calls answered by each replica (calls with one routing key - for the judges, one case - go to the same "
           "replica; cache hits belong to none). Counted from each process's last usage record, so a process killed "
           "outright may miss its last 30 s here.", "",
           "| endpoint | answered | share | failed attempts | taken out | prompt tokens | prefix-cached | "
           "completion tokens |",
           "|---|---|---|---|---|---|---|---|"]
    for name, c in by_endpoint.items():
        calls, prompt = int(c.get("calls", 0)), int(c.get("billed_prompt_tokens", c.get("prompt_tokens", 0)))
        cached = int(c.get("cached_prompt_tokens", 0))
        share = f"{calls / answered:.0%}" if answered else "-"
        prefix = f"{cached / prompt:.0%}" if prompt and cached else "-"
        out.append(f"| {md_code(name)} | {calls} | {share} | {int(c.get('failed_attempts', 0))} | {int(c.get('taken_out', 0))} "
                   f"| {prompt} | {prefix} | {int(c.get('billed_completion_tokens', c.get('completion_tokens', 0)))} |")
    if out_ := [name for name, c in by_endpoint.items() if int(c.get("taken_out", 0)) > 0]:
        out += ["", f"Taken out during the run (its calls went to the next replica; the journal's warnings say when "
                f"and why): {', '.join(md_code(n) for n in out_)}."]
    return out + [""]


def prefix_cached_share(calls: pd.DataFrame | Iterable[Mapping]) -> float | None:
    """Share of the prompt tokens sent to the endpoint that its server served from its prefix cache.

    Args:
        calls: One row per model call (a scores file as a DataFrame, or its records) with
            ``prompt_tokens``, ``cached_prompt_tokens`` (tokens the server reported as
            ``usage.prompt_tokens_details.cached_tokens``) and ``cached`` (answered by the local
            response cache: no call sent, left out).

    Returns:
        ``cached_prompt_tokens / prompt_tokens`` over the calls sent, in [0, 1]; None when no
        call reported cached tokens (a file written before the column existed, an endpoint that
        does not report them) or no prompt token was sent.
    """
    frame = calls if isinstance(calls, pd.DataFrame) else pd.DataFrame(list(calls))
    if "cached_prompt_tokens" not in frame or "prompt_tokens" not in frame:
        return None
    sent = frame[~frame["cached"].astype(str).eq("True")] if "cached" in frame else frame
    prompt = pd.to_numeric(sent["prompt_tokens"], errors="coerce").sum()
    cached = pd.to_numeric(sent["cached_prompt_tokens"], errors="coerce").sum()
    return float(cached / prompt) if prompt and cached else None


def render_prefix_share(share: float | None, source: str) -> list[str]:
    """Markdown: one sentence giving :func:`prefix_cached_share` (``source``: the file it is read
    from, e.g. ``judge_scores.csv``); none when the share is unknown."""
    if share is None:
        return []
    return [f"The server's prefix cache served {share:.0%} of the prompt tokens sent to the endpoint "
            f"(`cached_prompt_tokens` per call in `{source}`; calls answered from the response cache "
            "are left out).", ""]
