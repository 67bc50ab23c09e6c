"""Prefix reuse of the judge's call order on the embedded server: the earlier order against today's.

Usage::

    python bench/prefix_order.py --pack ratings/kqa            # 8 targets x 3 guidance x 2 seeds per order
    python bench/prefix_order.py --pack ratings/kqa --items 4 --cases 2 --max-tokens 4   # a loaded machine

A calibration's re-evaluation in miniature: every candidate guidance (``initial_1``,
``initial_2`` of the pack's rubric, and none) on ``--items`` targets of the pack, ``--seeds``
judge seeds each, judged by the real :class:`evolve.judge.Judge` prompts with the ``quick``
preset's judge settings, ``--concurrency`` calls in flight (the embedded server's two slots). The
same calls go out twice, each time to a fresh embedded server (so neither order inherits the
other's cache):

* ``groups`` - the earlier order: the items in groups of ``concurrency``, every candidate and
  seed of the group in turn (call k and call k + concurrency on the same item);
* ``lanes`` - :func:`evolve.calibration._order.lane_runs` and ``interleave``, what
  ``CriterionRun._judge_many`` sends today: the items grouped by case and cut into
  ``concurrency`` runs, each item's calls together.

It prints, per order, the prompt tokens sent, those the server reported from its prefix cache
(``usage.prompt_tokens_details.cached_tokens``) and their share, and the wall time. The targets
are a seeded sample of the pack's targets (``--cases``: drawn from that many cases, as a
calibration's training sample draws several targets of one case), so results depend on the
sample; timings depend on whatever else runs on the machine.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evolve.calibration._order import interleave, lane_runs  # noqa: E402
from evolve.config import resolve_config  # noqa: E402
from evolve.data import load_pack  # noqa: E402
from evolve.judge import Judge, derive_seed  # noqa: E402
from evolve.llm import ChatRequest, ChatResponse, Client, OpenAICompatibleProvider  # noqa: E402
from evolve.local import LocalServer  # noqa: E402
from evolve.rubric import load_initial_guidance, load_protocol, load_rubric  # noqa: E402


def groups_order(items: list, cands: list, seeds: list[int], lanes: int) -> list[tuple]:
    """The order ``_judge_many`` used before: items in groups of ``lanes``, interleaved."""
    return [(it, cand, seed) for start in range(0, len(items), lanes) for cand in cands for seed in seeds
            for it in items[start:start + lanes]]


def lanes_order(items: list, cands: list, seeds: list[int], lanes: int) -> list[tuple]:
    """Today's order (:mod:`evolve.calibration._order`)."""
    runs = [[(items[i], cand, seed) for i in run for cand in cands for seed in seeds]
            for run in lane_runs([t.case_id for t in items], lanes)]
    return interleave(runs)


def measure(requests: list[ChatRequest], concurrency: int) -> dict:
    """Send ``requests`` to a fresh embedded server; tokens sent and served from its prefix cache."""
    start = time.perf_counter()
    with LocalServer(parallel=concurrency) as server:
        provider = OpenAICompatibleProvider(server.base_url, api_key="local")
        with Client(provider, cache=None, max_concurrency=concurrency) as client:
            results = client.map(requests)
    answered = [r for r in results if isinstance(r, ChatResponse)]
    prompt = sum(r.prompt_tokens for r in answered)
    cached = sum(r.cached_prompt_tokens for r in answered)
    return {"calls": len(requests), "answered": len(answered), "prompt_tokens": prompt, "cached_prompt_tokens": cached,
            "share": cached / prompt if prompt else float("nan"), "seconds": time.perf_counter() - start}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pack", type=Path, default=ROOT / "ratings" / "kqa")
    ap.add_argument("--items", type=int, default=8, help="targets judged")
    ap.add_argument("--cases", type=int, default=5, help="cases they are drawn from")
    ap.add_argument("--seeds", type=int, default=2, help="judge seeds per candidate (re-evaluation: 2)")
    ap.add_argument("--concurrency", type=int, default=2, help="calls in flight = server slots (embedded: 2)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-tokens", type=int, default=None,
                    help="judge max_tokens (default: the quick preset's); a few tokens make a slow machine's "
                         "run short - the replies are cut, the prompts and their caching are the same")
    args = ap.parse_args()
    pack = load_pack(args.pack)
    rubric = load_rubric(pack.manifest.rubric.id, version=pack.manifest.rubric.version)
    criterion = next(c for c in rubric.criteria if c.judged and c.evolve)
    config = resolve_config(preset="quick", overrides={"run_id": "x", "pack": args.pack, "splits": args.pack}, environ={})
    settings = config.judge if args.max_tokens is None else config.judge.model_copy(update={"max_tokens": args.max_tokens})
    judge = Judge(rubric, load_protocol(rubric.id), settings)
    cands = [text for _, text in load_initial_guidance(rubric.id, criterion.criterion_id)] + [None]
    rng = np.random.default_rng(args.seed)
    case_ids = [c.case_id for c in pack.cases]
    chosen = set(rng.choice(case_ids, size=min(args.cases, len(case_ids)), replace=False).tolist())
    pool = [t for t in pack.targets if t.case_id in chosen and t.component in criterion.components]
    items = [pool[i] for i in sorted(rng.choice(len(pool), size=min(args.items, len(pool)), replace=False))]
    seeds = [derive_seed(args.seed, "reeval", criterion.criterion_id, r) for r in range(args.seeds)]
    print(f"bench/prefix_order.py: {len(items)} targets of {len(chosen)} cases x {len(cands)} guidance x "
          f"{len(seeds)} seeds, {args.concurrency} in flight, criterion {criterion.criterion_id}")
    for name, order in (("groups (before)", groups_order), ("lanes (today)", lanes_order)):
        requests = [judge.request(pack.case(t.case_id), t, criterion, cand, seed)
                    for t, cand, seed in order(items, cands, seeds, args.concurrency)]
        m = measure(requests, args.concurrency)
        print(f"{name}: {m['answered']}/{m['calls']} answered, {m['cached_prompt_tokens']:,} of {m['prompt_tokens']:,} "
              f"prompt tokens from the prefix cache = {m['share']:.1%}; {m['seconds']:.0f} s")


if __name__ == "__main__":
    main()
