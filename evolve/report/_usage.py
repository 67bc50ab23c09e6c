"""The calls and tokens a run paid for, read from its journal (every process, every step)."""

from __future__ import annotations

from evolve.runs import Journal, run_usage

__all__ = ["render_usage", "usage_report"]

_FIELDS = ("calls", "cache_hits", "failures", "retries", "prompt_tokens", "completion_tokens")


def usage_report(journal: Journal) -> dict:
    """``{"by_tag": {tag: counts}, "total": counts}`` over every process of the run.

    Counts are those of :class:`evolve.llm.Usage`: ``calls`` answered by the endpoint,
    ``cache_hits``, ``failures`` (after retries), ``retries`` (extra attempts, paid or not),
    ``prompt_tokens``/``completion_tokens`` (cache hits included: the cost the run represents).
    Tags name the step: ``judge``, ``mutation``, ``audit``, ``audit_embedding`` and the bench
    stages.
    """
    by_tag = run_usage(journal)
    total = {name: sum(c.get(name, 0) for c in by_tag.values()) for name in _FIELDS}
    return {"by_tag": dict(sorted(by_tag.items())), "total": total}


def render_usage(usage: dict | None) -> list[str]:
    """Markdown: one row per tag, then the total; a line saying so when nothing was journaled."""
    out = ["## Calls and tokens", ""]
    if not usage or not usage.get("by_tag"):
        return out + ["No usage in `journal.jsonl` (a run made before evolve journaled it, or killed before its "
                      "first usage record).", ""]
    out += ["Every model call of the run, over all its processes (a resumed run adds the calls of each resumption; "
            "cache hits cost nothing new). Retries are extra attempts of calls that were retried.", "",
            "| step | calls | cache hits | failures | retries | prompt tokens | completion tokens |",
            "|---|---|---|---|---|---|---|"]
    rows = [*usage["by_tag"].items(), ("**total**", usage["total"])]
    for tag, c in rows:
        out.append(f"| {tag} | " + " | ".join(str(int(c.get(name, 0))) for name in _FIELDS) + " |")
    return out + [""]
