"""Run infrastructure: what every long job of `evolve` stands on.

A *run* is a folder under ``archives/`` that a calibration, a drift audit or a benchmark fills.
This package owns what they share, and imports nothing above the LLM client and the embedded
server:

* :class:`Journal` - the append-only event log of a run (``journal.jsonl``, one fsynced JSON
  line per :class:`Event`), in the spirit of optuna's journal storage; a resumed run adds only
  what its replay did not reproduce, and :func:`run_usage` adds up the calls and tokens of
  every process that worked on the run;
* :class:`ProgressHook` - how engines report progress (:class:`NoProgress` draws nothing;
  :func:`on_call` feeds it from a client's calls); :class:`CallMeter` - calls, tokens and USD
  of a phase (what a progress line shows, priced by a :class:`Price`);
* :class:`CallPlan` - what a run would send, phase by phase (:class:`PhasePlan`: calls,
  prompt and completion tokens as a range), priced and timed before anything is paid
  (``--plan``); :func:`count_tokens` counts prompts with the server's tokenizer or estimates;
* :func:`check_resumable`, :func:`check_same_settings` - the one resume check;
* :func:`owned_client` - the client of a run from its :class:`EndpointSettings`, starting the
  embedded server if asked, and releasing both on any exit (calls in flight cancelled after an
  interrupt); with ``endpoint.batch`` its batchable phases go through the Batch API, each batch
  journaled before it is polled (:class:`JournalBatchLedger`) so a resume never pays twice;
* :class:`CalibrationFolder`, :class:`BenchFolder`, :class:`OtbFolder`, :class:`ScoringFolder`,
  :class:`ComparisonFolder` - where each file of a run (or of a cross-run report under
  ``reports/``) lives, never a file name written out elsewhere; :func:`folder_kind` - which
  kind of run a folder holds (:data:`KINDS`), so no command reads or writes one as another;
  :func:`atomic_write` - every file a run writes appears whole or not at all;
* :meth:`RunFolder.exclusive` (:func:`run_lock`) - one writing process per run folder: an
  operating-system lock the kernel releases when its holder dies, so ``kill -9`` never leaves a
  stale lock; a second writer gets :class:`~evolve.errors.RunLockedError` naming the holder.

The floors of the package, each importing only its own floor or the ones below it (checked by
``tests/architecture/test_floors.py``, which walks every import)::

    8  cli                          thin commands: parse, call one workflow, exit code
    7  workflows, report            calibrate -> audit -> report; bench run -> judge -> report
    6  calibration, consilium,      engines: never import a reporter or a workflow
       audit, otb, scoring
    5  config, calibrated,          calibration settings, presets, layering; judge files and
       outputs                      the candidates of finished runs; typed, versioned run
                                 outputs and read_run - all read below the engines
    4  judge, splits                judge prompts and outcomes; case-disjoint splits
    3  data, archive                rating packs and cases; MAP-Elites archives and emitter
    2  runs, rubric, testing        run infrastructure; criteria; test helpers
    1  llm, local, stats,           model client; embedded server; statistics; escaping
       markdown                     the text a report quotes
    0  errors, records, layering,   one error tree; the one base of records (frozen, no extra
       lazy                         fields); settings layered from preset, file, environment,
                                    options; package members loaded on first use
"""

from typing import TYPE_CHECKING

from evolve.lazy import lazy_members
from evolve.runs._endpoint import EndpointSettings, context_window, output_limit_problem
from evolve.runs._files import atomic_write, holds_interrupt, replace_folder
from evolve.runs._folder import (
    KINDS,
    BenchFolder,
    CalibrationFolder,
    ComparisonFolder,
    OtbFolder,
    RunFolder,
    ScoringFolder,
    distinct_slugs,
    folder_kind,
    model_slug,
)
from evolve.runs._journal import (
    CALL_COUNTS,
    JOURNAL_VERSION,
    REPLAYED_EVENTS,
    RESUME_EVENTS,
    Event,
    Journal,
    run_endpoint_usage,
    run_usage,
    run_warnings,
)
from evolve.runs._lock import lock_holder, locks_run, run_lock
from evolve.runs._progress import CallMeter, NoProgress, Price, ProgressHook, on_call, price_of, report_step
from evolve.runs._resume import check_resumable, check_same_settings

# The model client (httpx, the embedded server's code) loads only when one of these is first
# used, so commands that need no model - ``--help``, ``report``, ``compare`` - start fast.
_LAZY = {
    **dict.fromkeys(("JournalBatchLedger", "run_batch_options"), "evolve.runs._batches"),
    **dict.fromkeys(("default_cache_path", "default_models", "open_client", "owned_client", "with_cache_path"),
                    "evolve.runs._client"),
    **dict.fromkeys(("CHARS_PER_TOKEN", "CallPlan", "PhasePlan", "cached_keys", "count_tokens", "estimate_tokens",
                     "measured_calls_per_hour", "prompt_text", "tokenize_url"), "evolve.runs._plan"),
}

if TYPE_CHECKING:  # pragma: no cover - the same names, for type checkers and readers
    from evolve.runs._batches import JournalBatchLedger, run_batch_options
    from evolve.runs._client import (
        default_cache_path,
        default_models,
        open_client,
        owned_client,
        with_cache_path,
    )
    from evolve.runs._plan import (
        CHARS_PER_TOKEN,
        CallPlan,
        PhasePlan,
        cached_keys,
        count_tokens,
        estimate_tokens,
        measured_calls_per_hour,
        prompt_text,
        tokenize_url,
    )


__getattr__ = lazy_members(__name__, _LAZY, globals())


__all__ = [
    "CALL_COUNTS",
    "KINDS",
    "folder_kind",
    "run_warnings",
    "JournalBatchLedger",
    "run_batch_options",
    "CHARS_PER_TOKEN",
    "CallPlan",
    "PhasePlan",
    "cached_keys",
    "count_tokens",
    "estimate_tokens",
    "measured_calls_per_hour",
    "prompt_text",
    "tokenize_url",
    "JOURNAL_VERSION",
    "REPLAYED_EVENTS",
    "RESUME_EVENTS",
    "BenchFolder",
    "CalibrationFolder",
    "ComparisonFolder",
    "CallMeter",
    "EndpointSettings",
    "default_models",
    "Event",
    "Journal",
    "NoProgress",
    "OtbFolder",
    "Price",
    "ProgressHook",
    "RunFolder",
    "ScoringFolder",
    "atomic_write",
    "check_resumable",
    "check_same_settings",
    "context_window",
    "distinct_slugs",
    "default_cache_path",
    "holds_interrupt",
    "lock_holder",
    "locks_run",
    "model_slug",
    "replace_folder",
    "on_call",
    "open_client",
    "output_limit_problem",
    "owned_client",
    "price_of",
    "report_step",
    "run_lock",
    "run_endpoint_usage",
    "run_usage",
    "with_cache_path",
]
