"""What a paper-scale consilium calibration costs: the paper's protocol paid naively against evolve's defaults.

Usage::

    python bench/cost.py                               # 110 cases, 3 roles, the nine evolved criteria, 6 worlds (hours)
    python bench/cost.py --criteria 1 --worlds 3       # what the README reports (22 minutes on 2 shared cores)
    python bench/cost.py --cases 30 --criteria 2 --worlds 2 --accepted 4 --attempts 8   # a smoke run (minutes)

The world (all INVENTED, no model, no network): a consilium-shaped rating pack - 110 cases, each
with three specialist roles (reasoning and closing opinion each), a final report and the panel
(``case``), rated by two physicians on the shipped ``consilium`` rubric's nine evolved criteria
(each on the components the rubric says: seven targets per case for criteria 1, 2, 4 and 8, four
for 3, 5, 6 and 7, one for 9). The split keeps 80 training, 20 validation and 10 held-out cases,
the paper's 80 training cases. Case and target texts are filler of stated lengths (case 1,500
words, a role's reasoning 700, its opinion 250, the final report 1,200, the panel 150), so a judge
prompt holds the few thousand tokens a real one does. The judge and the mutator are
``bench/racing.py``'s simulated endpoint (imported, not copied: its :class:`World` per
(target, criterion) pair), so the true validation MAE of any guidance is known.

Two protocols run on the same worlds:

* **naive** - the paper's protocol (``bench/racing.py``'s ``paper``: ``--racing off --selection
  paper``, two training seeds) on the ``paper`` preset's budget (25 accepted of <= 320 attempts
  shared by the criteria), every call interactive, no response cache (a repeated request is paid
  again: every row of ``scores.csv`` is a call) and no credit for the endpoint's prefix cache;
* **default** - evolve's defaults (racing, robust selection and ``bench/racing.py``'s ``default``
  settings, whatever they are when this runs) on the same budget, with the response cache, the
  non-interactive phases (the initial prompts' evaluation, finalist re-judging, re-evaluation)
  at Batch API prices, and the prompt tokens a prefix-caching endpoint serves from its cache at
  the cached-input price in the interactive phases (racing and mutation). Batch lines get no
  cache credit (a cached-input discount inside a batch is not assumed).

The prefix cache is simulated from the order the calls reach the endpoint, as a server with one
slot per request in flight (``--concurrency``) that keeps only the last prompt of each slot: call
``i`` finds free the slot call ``i - concurrency`` used and reports as cached the prefix it shares
with that prompt, in 128-token blocks and nothing under 1,024 tokens (OpenAI's rule). Hosted
endpoints keep more (recent prefixes for minutes), so the credit is a lower bound. A prompt's
tokens are counted as its whitespace-separated words (a stated estimate: a BPE tokenizer counts
about a third more on English text, so every USD figure is low by as much, the ratios not), a
completion's as a stated ``--judge-output``/``--mutation-output`` per call.

Prices: OpenAI ``gpt-4.1-mini`` list prices as published in March-April 2026 (checked on
2026-12-02 in third-party copies of OpenAI's pricing page): input 0.40, cached input 0.10, output
1.60 USD per million tokens; Batch API 50% off (0.20 / 0.80). ``evolve.runs.Price`` prices the
calls. The last lines check issue 25's target: the default at <= 1/5 of the naive cost at equal
true validation MAE (paired by world: the default not shown worse).

A full-size world (110 cases, nine criteria) makes ~10^5 naive judge calls through the real engine:
minutes per world on one core. ``--criteria K`` runs the first K criteria only (the others
are the same machinery on other targets) and says so in its first line.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))

from racing import INITIAL, PROTOCOLS, World, guidance_text  # noqa: E402

from evolve.calibration import calibrate  # noqa: E402
from evolve.config import resolve_config  # noqa: E402
from evolve.data import Case, PackManifest, Rating, RatingPack, RubricRef, Target, load_pack, write_pack  # noqa: E402
from evolve.llm import ChatRequest, ChatResponse, Client, FakeProvider, Message, ResponseCache  # noqa: E402
from evolve.rubric import load_rubric  # noqa: E402
from evolve.runs import Price  # noqa: E402
from evolve.splits import make_splits, write_splits  # noqa: E402

ROLES = ("medical oncologist", "surgeon", "radiologist")  # invented panel
WORDS = {"case": 1500, "reasoning": 700, "opinion": 250, "final": 1200, "panel": 150}
PRICE = Price(0.40, 1.60, cached_input_usd_per_m=0.10, batch_input_usd_per_m=0.20, batch_output_usd_per_m=0.80)
PRICE_NAME = "OpenAI gpt-4.1-mini list prices (March-April 2026): input 0.40, cached input 0.10, output 1.60 USD/M; Batch 0.20 / 0.80"
_VOCAB = ("patient", "reported", "scan", "showed", "lesion", "with", "margin", "therapy", "after", "the", "of",
          "was", "stable", "follow-up", "biopsy", "result", "plan", "dose", "week", "review", "and", "no", "new")


def filler(n_words: int, seed: str) -> str:
    """``n_words`` invented words (deterministic in ``seed``), in sentences of ten."""
    rng = np.random.default_rng(int.from_bytes(hashlib.blake2b(seed.encode(), digest_size=8).digest(), "big"))
    words = rng.choice(_VOCAB, size=n_words)
    return " ".join(" ".join(words[i:i + 10]) + "." for i in range(0, n_words, 10))


# -- the world ------------------------------------------------------------------------------------------
@dataclass
class ConsiliumWorld:
    """A consilium-shaped pack over ``bench/racing.py``'s simulated judge: one racing-world target
    per (pack target, criterion) pair, so each pair has its own truth, ratings and judge accuracy."""

    n_cases: int
    criteria: list  # evolve.rubric.Criterion
    inner: World
    pairs: dict[tuple[str, str], str] = field(default_factory=dict)  # (marker, criterion id) -> racing key
    by_name: dict[str, str] = field(default_factory=dict)  # criterion name -> id

    @classmethod
    def make(cls, seed: int, n_cases: int, noise: str, criteria: Sequence) -> ConsiliumWorld:
        pairs = {}
        for marker, component in cls._targets(n_cases):
            for crit in criteria:
                if component in crit.components:
                    pairs[(marker, crit.criterion_id)] = f"T{len(pairs):03d}"
        return cls(n_cases, list(criteria), World.make(seed, len(pairs), noise), pairs,
                   {c.name: c.criterion_id for c in criteria})

    @staticmethod
    def _targets(n_cases: int) -> list[tuple[str, str]]:
        """``(marker, component)`` of every target, in pack order; the marker ``X<case><k>``
        is in the target's text, so the simulated judge knows what it reads."""
        out = []
        for i in range(n_cases):
            comps = [c for _ in ROLES for c in ("reasoning", "opinion")] + ["final", "case"]
            out += [(f"X{i:03d}{k}", comp) for k, comp in enumerate(comps)]
        return out

    def pack(self) -> RatingPack:
        cases, targets, ratings = [], [], []
        for marker, component in self._targets(self.n_cases):
            cid, k = f"case-{marker[1:4]}", int(marker[4:])
            if k == 0:
                cases.append(Case(case_id=cid, title=f"Invented case {marker[1:4]}", text=filler(WORDS["case"], cid),
                                  reference_answer="Invented reference plan."))
            role = ROLES[k // 2] if component in ("reasoning", "opinion") else ""
            size = WORDS["panel" if component == "case" else component]
            targets.append(Target(target_id=marker, case_id=cid, component=component, role=role, model="simulated",
                                  condition="structured", text=f"[{marker}] " + filler(size, marker)))
            for crit in self.criteria:
                key = self.pairs.get((marker, crit.criterion_id))
                for r, score in enumerate(self.inner.ratings[key] if key else []):
                    ratings.append(Rating(case_id=cid, target_id=marker, rater_id=f"physician-{r + 1}",
                                          criterion=crit.criterion_id, score=score))
        manifest = PackManifest(name="consilium-simulated", description="INVENTED data for bench/cost.py",
                                rubric=RubricRef(id="consilium", version="1"))
        return RatingPack(path=None, manifest=manifest, cases=tuple(cases), targets=tuple(targets), ratings=tuple(ratings))

    def respond(self, request: ChatRequest) -> str:
        """The racing world's answer, with the pack target's marker replaced by its racing key."""
        if request.tag == "judge":
            user = request.messages[-1].content
            marker = re.search(r"\[(X\d+)\]", user).group(1)  # type: ignore[union-attr]
            crit = self.by_name[re.search(r"^CRITERION: (.+)$", user, re.M).group(1)]  # type: ignore[union-attr]
            user = user.replace(f"[{marker}]", f"[{self.pairs[(marker, crit)]}]")
            request = request.model_copy(update={"messages": (*request.messages[:-1], Message(role="user", content=user))})
        return self.inner.respond(request)

    def true_mae(self, text: str, criterion: str, markers: Sequence[str]) -> float:
        keys = [self.pairs[(m, criterion)] for m in markers if (m, criterion) in self.pairs]
        return self.inner.true_mae(text, keys)


# -- the endpoint: token counts and a simulated prefix cache ----------------------------------------------
class PrefixCache:
    """A server with ``slots`` slots, each keeping the last prompt it served (as 128-token block
    hashes). With ``slots`` calls in flight the slot a call finds free is the one the call
    ``slots`` places earlier used, so call ``i`` goes to slot ``i % slots`` and reports as cached
    the prefix it shares with that slot's last prompt, in whole blocks, nothing under ``minimum``
    tokens (OpenAI's rule: 1,024 tokens, then 128-token steps)."""

    def __init__(self, slots: int, block: int = 128, minimum: int = 1024) -> None:
        self.slots: list[list[int]] = [[] for _ in range(slots)]
        self.block, self.minimum, self.calls = block, minimum, 0

    def _blocks(self, tokens: list[str]) -> list[int]:
        out, h = [], 0
        for start in range(0, len(tokens) - self.block + 1, self.block):
            h = hash((h, tuple(tokens[start:start + self.block])))
            out.append(h)
        return out

    def serve(self, tokens: list[str]) -> int:
        blocks = self._blocks(tokens)
        slot = self.calls % len(self.slots)
        self.calls += 1
        last = self.slots[slot]
        shared = next((i for i, (a, b) in enumerate(zip(blocks, last)) if a != b), min(len(blocks), len(last)))
        self.slots[slot] = blocks
        cached = shared * self.block
        return cached if cached >= self.minimum else 0


def endpoint(world: ConsiliumWorld, slots: int, judge_out: int, mutation_out: int):
    """The simulated endpoint's answer function for :class:`FakeProvider`: the racing world's
    text, the prompt's tokens, a stated completion size and the simulated prefix cache."""
    cache = PrefixCache(slots)

    def answer(request: ChatRequest) -> ChatResponse:
        tokens = [t for m in request.messages for t in (f"<{m.role}>", *m.content.split())]
        return ChatResponse(text=world.respond(request), prompt_tokens=len(tokens),
                            completion_tokens=judge_out if request.tag == "judge" else mutation_out,
                            cached_prompt_tokens=cache.serve(tokens))
    return answer


# -- one run ----------------------------------------------------------------------------------------------
def protocols() -> dict[str, dict]:
    """naive = bench/racing.py's ``paper``; default = evolve's racing and selection defaults under
    bench/racing.py's ``default`` settings (read when this runs: they follow h-race's defaults)."""
    default: dict = {"racing": {"enabled": True}, "selection": {"rule": "robust"}}
    for section, values in PROTOCOLS["default"].items():
        default[section] = {**default.get(section, {}), **values}
    return {"naive": PROTOCOLS["paper"], "default": default}


def prompts_root(tmp: Path, criteria: Sequence) -> Path:
    """A copy of judge_prompts whose consilium initial guidance carries the racing world's tips."""
    root = tmp / "judge_prompts"
    shutil.copytree(ROOT / "judge_prompts", root)
    for crit in criteria:
        for name, tips in INITIAL.items():
            (root / "consilium" / "guidance" / crit.criterion_id / f"{name}.md").write_text(guidance_text(tips) + "\n")
    return root


def run_once(world: ConsiliumWorld, folder: Path, prompts: Path, seed: int, protocol: dict, args) -> dict:
    write_pack(world.pack(), folder / "pack")
    pack = load_pack(folder / "pack")
    splits = make_splits(pack, holdout_fraction=10 / 110, validation_fraction=0.2, seed=seed)
    write_splits(splits, folder / "splits")
    budget = {"accepted": args.accepted, "max_attempts": args.attempts, "shared_attempts": args.attempts,
              "max_train_targets": 10**6, "max_validation_targets": 10**6}
    overrides = {"run_id": "run", "pack": folder / "pack", "splits": folder / "splits", "archives_dir": folder,
                 "seed": seed, "prompts_root": prompts, "audit": False, "evaluate_holdout": False,
                 "parallel_criteria": 1, "criteria": [c.criterion_id for c in world.criteria],
                 **protocol, "budget": {**budget, **protocol.get("budget", {})}}
    config = resolve_config(preset="paper", overrides=overrides, environ={})
    provider = FakeProvider(endpoint(world, args.concurrency, args.judge_output, args.mutation_output))
    with Client(provider, cache=ResponseCache(":memory:"), max_concurrency=args.concurrency) as client:
        calibrate(config, client=client)
        mutation = client.usage["mutation"]
    scores = pd.read_csv(folder / "run" / "scores.csv", usecols=["candidate_id", "criterion", "phase", "cached",
                                                                 "prompt_tokens", "completion_tokens", "cached_prompt_tokens"])
    cands = pd.read_csv(folder / "run" / "candidates.csv", keep_default_na=False, dtype=str)
    validation = set(splits.validation)
    markers = [t.target_id for t in pack.targets if t.case_id in validation]
    winners = cands[cands["selected"] == "True"]
    true = [world.true_mae(w["text"], w["criterion"], markers) for _, w in winners.iterrows()]
    initial = set(cands.loc[cands["origin"] == "initial", "candidate_id"])
    scores["batchable"] = (scores["phase"] != "evolution") | scores["candidate_id"].isin(initial)
    accepted = set(cands.loc[(cands["origin"] == "mutation") & (cands["status"] == "accepted"), "candidate_id"])
    return {"scores": scores, "mutation": mutation, "true_mae": float(np.mean(true)), "criteria": len(true),
            "accepted": accepted}


def _all_cached(frame: pd.DataFrame) -> float:
    """USD of ``frame``'s calls at interactive prices with every prompt token at the cached-input price."""
    return PRICE.usd(frame["prompt_tokens"].sum(), frame["completion_tokens"].sum(),
                     cached_prompt_tokens=frame["prompt_tokens"].sum())


def costs(run: dict, naive: bool) -> dict:
    """Calls, tokens and USD of one run under its protocol's pricing (see the module docstring);
    ``usd_cache_credited``: the same calls with the simulated prefix cache credited everywhere
    (what a naive user of an endpoint that caches on its own would pay)."""
    s, m = run["scores"], run["mutation"]
    paid = s if naive else s[~s["cached"].astype(bool)]
    inter = paid if naive else paid[~paid["batchable"]]
    batch = paid[:0] if naive else paid[paid["batchable"]]

    def usd(frame: pd.DataFrame, *, credit: bool, batch_prices: bool = False) -> float:
        return PRICE.usd(frame["prompt_tokens"].sum(), frame["completion_tokens"].sum(), batch=batch_prices,
                         cached_prompt_tokens=frame["cached_prompt_tokens"].sum() if credit else 0)

    mutation = PRICE.usd(m.prompt_tokens, m.completion_tokens, cached_prompt_tokens=0 if naive else m.cached_prompt_tokens)
    parts = {"usd_racing": usd(inter, credit=not naive), "usd_batch": usd(batch, credit=False, batch_prices=True),
             "usd_mutation": mutation}
    sent = s[~s["cached"].astype(bool)]
    return {
        "judge_calls": len(paid), "batch_calls": len(batch), "mutation_calls": m.calls,
        "accepted_mutants": len(run["accepted"]),
        "prompt_mtok": (paid["prompt_tokens"].sum() + m.prompt_tokens) / 1e6,
        "completion_mtok": (paid["completion_tokens"].sum() + m.completion_tokens) / 1e6,
        "cached_share": sent["cached_prompt_tokens"].sum() / max(1, sent["prompt_tokens"].sum()),
        "usd": sum(parts.values()), **parts,
        # lower bounds: every interactive prompt token at the cached-input price (a perfect prefix cache)
        "usd_floor": _all_cached(inter) + parts["usd_batch"]
        + parts["usd_mutation"],
        "usd_floor_accepted": _all_cached(inter[inter["candidate_id"].isin(run["accepted"])]) if not naive else 0.0,
        "usd_cache_credited": usd(paid, credit=True) + PRICE.usd(m.prompt_tokens, m.completion_tokens,
                                                                   cached_prompt_tokens=m.cached_prompt_tokens),
        "true_val_mae": run["true_mae"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worlds", type=int, default=6, help="worlds (and run seeds); paired by world")
    ap.add_argument("--first-world", type=int, default=0, help="number of the first world (more worlds in another run)")
    ap.add_argument("--cases", type=int, default=110)
    ap.add_argument("--criteria", type=int, default=9, help="the first K of the nine evolved consilium criteria")
    ap.add_argument("--noise", choices=("low", "high"), default="high")
    ap.add_argument("--accepted", type=int, default=25, help="accepted mutants per criterion (paper preset: 25)")
    ap.add_argument("--attempts", type=int, default=320, help="mutation attempts shared by the criteria (paper: 320)")
    ap.add_argument("--concurrency", type=int, default=4, help="requests in flight = simulated server slots")
    ap.add_argument("--judge-output", type=int, default=200, help="completion tokens per judge call (stated)")
    ap.add_argument("--mutation-output", type=int, default=400, help="completion tokens per mutation call (stated)")
    ap.add_argument("--out", type=Path, default=None, help="also write the per-world rows to this CSV")
    ap.add_argument("--summarize", type=Path, nargs="+", default=None, metavar="CSV",
                    help="print the summary of --out files (worlds pooled; give the run's other options again)")
    args = ap.parse_args()
    start = time.perf_counter()
    if args.summarize:
        frame = pd.concat([pd.read_csv(f) for f in args.summarize], ignore_index=True)
        args.worlds = frame["world"].nunique()
        summarize(frame, args, time.perf_counter() - start)
        return
    rubric = load_rubric("consilium")
    criteria = [c for c in rubric.criteria if c.evolve and c.judged][: args.criteria]
    rows = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        prompts = prompts_root(tmp, criteria)
        for w in range(args.first_world, args.first_world + args.worlds):
            world = ConsiliumWorld.make(2000 + w, args.cases, args.noise, criteria)
            for name, protocol in protocols().items():
                run = run_once(world, tmp / f"{name}-{w}", prompts, w, protocol, args)
                rows.append({"protocol": name, "world": w, **costs(run, naive=name == "naive")})
    frame = pd.DataFrame(rows)
    if args.out is not None:
        frame.to_csv(args.out, index=False)
    summarize(frame, args, time.perf_counter() - start)


def summarize(frame: pd.DataFrame, args: argparse.Namespace, seconds: float) -> None:
    """Print the per-protocol means, the cost ratio, its lower bounds and issue 25's target."""
    criteria = range(args.criteria)
    print(f"bench/cost.py: {args.worlds} worlds x 2 protocols, {args.cases} cases x {len(ROLES)} roles, "
          f"{len(criteria)} of 9 criteria{'' if len(criteria) == 9 else ' (a reduction: the others are not run)'}, "
          f"noise {args.noise}, {args.accepted} accepted of <= {args.attempts} attempts; "
          f"{seconds:.0f} s")
    print(f"prices: {PRICE_NAME}")
    summary = frame.groupby("protocol", sort=False).mean(numeric_only=True).drop(columns="world")
    print(summary.to_string(float_format=lambda x: f"{x:,.3f}"))
    paired = frame.pivot(index="world", columns="protocol", values=["usd", "true_val_mae"])
    ratio = paired["usd"]["default"] / paired["usd"]["naive"]
    diff = (paired["true_val_mae"]["default"] - paired["true_val_mae"]["naive"]).to_numpy()
    rng = np.random.default_rng(0)
    boots = [diff[rng.integers(0, len(diff), len(diff))].mean() for _ in range(2000)]
    low, high = np.percentile(boots, [2.5, 97.5])
    print(f"cost, default / naive: {ratio.mean():.3f} of the naive USD (per world {ratio.min():.3f}-{ratio.max():.3f}); "
          f"default {summary.loc['default', 'usd']:,.2f} USD against naive {summary.loc['naive', 'usd']:,.2f} USD per run")
    d = summary.loc["default"]
    print(f"default's USD: racing (interactive judge calls) {d.usd_racing:,.2f}, batch phases {d.usd_batch:,.2f}, "
          f"mutation {d.usd_mutation:,.2f}; its completions {d.completion_mtok:,.2f}M tokens")
    naive_usd = frame[frame.protocol == "naive"].set_index("world")["usd"]
    floor = (frame[frame.protocol == "default"].set_index("world")["usd_floor"] / naive_usd).mean()
    floor_accepted = (frame[frame.protocol == "default"].set_index("world")["usd_floor_accepted"] / naive_usd).mean()
    print(f"lower bounds, as a share of the naive USD: the default's own calls with every interactive prompt token "
          f"served from the prefix cache {floor:.3f}; its {d.accepted_mutants:.1f} accepted mutants' training calls "
          f"alone, the same way {floor_accepted:.3f} (judging the accepted budget once on every training target "
          "costs this much before any initial prompt, finalist or validation call)")
    credited = (paired["usd"]["default"] / frame[frame.protocol == "naive"].set_index("world")["usd_cache_credited"]).mean()
    print(f"against the naive protocol with the endpoint's own prefix caching credited "
          f"({summary.loc['naive', 'cached_share']:.0%} of its prompt tokens): default {credited:.3f} of its USD")
    print(f"true validation MAE, default - naive (paired by world): {diff.mean():+.4f} [{low:+.4f}, {high:+.4f}] "
          "(bootstrap over worlds, 95%)" + ("; too few worlds for an interval" if len(diff) < 5 else ""))
    cheap = ratio.mean() <= 0.2
    equal = diff.mean() <= 0 or low < 0
    print("issue 25 target, default protocol:")
    print(f"  <= 1/5 of the naive cost: {ratio.mean():.3f} - {'met' if cheap else 'NOT met'}")
    print(f"  at equal true validation MAE (not shown worse): {diff.mean():+.4f}, 95% upper bound {high:+.4f} - "
          f"{'met' if equal else 'NOT met'}")


if __name__ == "__main__":
    main()
