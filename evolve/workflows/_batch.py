"""Batch files for offline runners: the requests of a run's batchable phases written as Batch API
JSONL (vLLM's ``run_batch`` reads the same lines), and their answers read back into the
response cache, so the run that follows pays nothing for them."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from evolve.calibration import calibration_calls, plan_calibration
from evolve.config import CalibrationConfig
from evolve.errors import ConfigError, RunError
from evolve.judge import Judge
from evolve.llm import (
    ChatRequest,
    OpenAICompatibleProvider,
    OutputLine,
    ResponseCache,
    batch_line,
    body_problem,
    read_output_lines,
)
from evolve.runs import EndpointSettings, atomic_write, default_cache_path

__all__ = ["BATCH_PHASES", "BatchExport", "ImportSummary", "calibration_batch_requests", "export_batch", "import_batch",
           "judge_batch_requests"]

BATCH_PHASES = ("initial evaluation", "racing noise", "finalists", "re-evaluation")
"""The calibration phases whose requests are known before the run: the initial prompts on the
training targets (evolution seeds; and, where they are judged, re-evaluation seeds), the
no-guidance baseline and the initial prompts on training and validation targets. The mutants'
calls (their text is not known yet) and a mutant winner's re-evaluation are not among them."""


def calibration_batch_requests(config: CalibrationConfig, *, resume: bool = False) -> list[ChatRequest]:
    """The judge requests of a calibration known before it runs (:data:`BATCH_PHASES`), one
    per distinct request, built as the engine builds them (so their cache keys are the ones the
    run will look up).

    Args:
        config: The run's configuration.
        resume: The run folder exists (its stored settings are checked against ``config``).

    Raises:
        As :func:`evolve.calibration.plan_calibration`.
    """
    plan = plan_calibration(config, resume=resume)
    judge = Judge(plan.rubric, plan.protocol, config.judge, schema_limits=config.endpoint.schema_limits)
    requests = [req for crit in calibration_calls(config, plan, judge) for phase in crit.phases
                if phase.phase in BATCH_PHASES for req in phase.requests]
    return _distinct(requests)


def judge_batch_requests(options) -> list[ChatRequest]:
    """Every request ``evolve judge`` would send for ``options``
    (:class:`~evolve.workflows.JudgeRunOptions`), one per distinct request."""
    from evolve.calibrated import load_judge_file
    from evolve.scoring import scoring_requests
    from evolve.workflows._judge import judge_targets

    judge = load_judge_file(options.judge)
    targets = judge_targets(options, judge)  # as the run reads them (layout, --skip-empty)
    model = options.model or (options.endpoint.model if "model" in options.endpoint.model_fields_set else None)
    pairs = scoring_requests(judge, targets, criteria=options.criteria, model=model,
                             schema_limits=options.endpoint.schema_limits)
    return _distinct([req for _, req in pairs])


def _distinct(requests: Sequence[ChatRequest]) -> list[ChatRequest]:
    seen: dict[str, ChatRequest] = {}
    for req in requests:
        seen.setdefault(req.cache_key(""), req)
    return list(seen.values())


def _provider(endpoint: EndpointSettings) -> OpenAICompatibleProvider:
    """A provider with the run's endpoint identity and body rules (it makes no call).

    Raises:
        ConfigError: The embedded server or the fake provider (no identity a batch file can
            be answered for: give the ``--base-url`` the run will use).
    """
    if endpoint.provider != "openai_compatible" or not endpoint.urls:
        raise ConfigError("a batch file is written for the endpoint the run will then use: give its --base-url (e.g. "
                          "the vLLM server, http://HOST:8000/v1) and --model; the embedded server has no batch "
                          "runner")
    identity = endpoint.cache_identity() if endpoint.is_group else None
    return OpenAICompatibleProvider(endpoint.urls[0], endpoint_id=identity, schema_limits=endpoint.schema_limits)


@dataclass(frozen=True)
class BatchExport:
    """What :func:`export_batch` wrote.

    Attributes:
        written: Request lines written (the requests the run would pay for).
        cached: Requests left out because the response cache already answers them as the run
            would accept them (complete, fitting the schema sent): the run takes those from the
            cache, so answering them offline would be paid twice.
    """

    written: int
    cached: int


def export_batch(requests: Sequence[ChatRequest], endpoint: EndpointSettings, path: Path, *,
                 cache_path: Path | None = None) -> BatchExport:
    """Write Batch API input lines for the ``requests`` the response cache does not answer to
    ``path`` (JSONL, atomically; nothing is written when the cache answers them all): each
    line's ``custom_id`` is the request's cache key at ``endpoint`` and its body the one the
    endpoint would get interactively.

    Args:
        requests: The requests, one per distinct request.
        endpoint: The endpoint the run will use (its identity keys the cache).
        path: The JSONL file to write.
        cache_path: The run's response cache (default :func:`evolve.runs.default_cache_path`).

    Raises:
        ConfigError: As :func:`_provider`.
    """
    provider = _provider(endpoint)
    lines = [batch_line(provider, req) for req in requests]
    cache_file = Path(cache_path or default_cache_path())
    if cache_file.is_file():
        with contextlib.closing(ResponseCache(cache_file)) as cache:
            lines = [line for line in lines if not _answered(cache, line)]
    if lines:
        atomic_write(Path(path), "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))
    return BatchExport(written=len(lines), cached=len(requests) - len(lines))


def _answered(cache: ResponseCache, line: dict) -> bool:
    """Whether the cache holds an answer to a request line that the run would take."""
    hit = cache.get(line["custom_id"])
    return hit is not None and body_problem(line["body"], hit) is None


@dataclass(frozen=True)
class ImportSummary:
    """What :func:`import_batch` did with an output file's lines.

    Every line that is not blank is counted once: ``cached + already + refused + failed +
    unreadable + unknown`` is the file's line count.

    Attributes:
        cached: Answers stored in the response cache (the run will not pay for them).
        already: Answers the cache held already (left as they were).
        refused: Answers the interactive path would not cache (cut, or outside the schema sent).
        failed: Lines that carry an error instead of an answer.
        unreadable: Lines that are not a JSON object with a ``custom_id`` (nothing is read from them).
        unknown: Lines whose ``custom_id`` is not in the request file.
        unanswered: Requests of the request file that no line of the output answers.
        problems: The first few refused, failed or unreadable lines, each named by file and line.
    """

    cached: int
    already: int
    refused: int
    failed: int
    unreadable: int
    unknown: int
    unanswered: int
    problems: tuple[str, ...]

    def describe(self) -> str:
        """What happened, for the terminal: the counts, then the problems named."""
        lines = [f"{self.cached} answer(s) cached, {self.already} already in the cache, {self.refused} refused (cut or "
                 f"outside the schema sent: asked again by the run), {self.failed} failed line(s), {self.unreadable} "
                 f"unreadable line(s), {self.unknown} line(s) not in the request file"]
        if self.unanswered:
            lines.append(f"{self.unanswered} request(s) of the request file have no answer in this file: the run sends "
                         "them (or import the file that answers them)")
        shown = len(self.problems)
        total = self.refused + self.failed + self.unreadable
        lines += [f"  {problem}" for problem in self.problems]
        if total > shown:
            lines.append(f"  ... and {total - shown} more")
        return "\n".join(lines)


def import_batch(output: Path, requests: Path, *, cache_path: Path | None = None) -> ImportSummary:
    """Store the answers of a batch output file (OpenAI's, or vLLM ``run_batch``'s) in the
    response cache under their ``custom_id`` (the cache key :func:`export_batch` wrote), each
    checked as the interactive path checks it (:func:`evolve.llm.body_problem`: ``stop``, and a
    JSON object fitting the schema sent for a structured request). A run that then sends those
    requests finds them cached and pays nothing for them.

    Args:
        output: The output (or error) JSONL file.
        requests: The request JSONL file it answers (from :func:`export_batch`).
        cache_path: The response cache (default :func:`evolve.runs.default_cache_path`).

    Raises:
        RunError: A file is missing, the request file holds no request line, or the output file
            holds no line that answers anything (empty, or no line a JSON object with a
            ``custom_id``): nothing is stored then.
    """
    bodies = _request_bodies(Path(requests))
    try:
        text = Path(output).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RunError(f"cannot read the batch output {output}: {getattr(exc, 'strerror', None) or exc}") from None
    lines = list(read_output_lines(text))
    if not any(line.custom_id for line in lines):
        first = next((f" (line {line.number}: {line.error})" for line in lines), "")
        raise RunError(f"{output} holds no batch output line{first}: nothing was imported. Give the output file of "
                       "the batch runner (vLLM run_batch's -o file, or a Batch API output or error file), one JSON "
                       "object with a custom_id per line.")
    reader = OpenAICompatibleProvider("http://127.0.0.1:9/v1")  # parses answers only; never calls
    counts = {"cached": 0, "already": 0, "refused": 0, "failed": 0, "unreadable": 0, "unknown": 0}
    problems: list[str] = []
    with contextlib.closing(ResponseCache(cache_path or default_cache_path())) as cache:
        for line in lines:
            outcome, problem = _import_line(line, bodies, cache, reader)
            counts[outcome] += 1
            if problem is not None and len(problems) < 5:
                problems.append(f"{output}, line {line.number}: {problem}"[:300])
    answered = {line.custom_id for line in lines}
    return ImportSummary(**counts, unanswered=len(bodies.keys() - answered), problems=tuple(problems))


def _import_line(line: OutputLine, bodies: dict[str, dict], cache: ResponseCache,
                 reader: OpenAICompatibleProvider) -> tuple[str, str | None]:
    """What :func:`import_batch` does with one line: ``(outcome, problem in words or None)``,
    storing the answer when it is one the interactive path would cache (``reader`` parses
    the answer; it makes no call)."""
    if not line.custom_id:
        return "unreadable", line.error
    body = bodies.get(line.custom_id)
    if body is None:
        return "unknown", None
    if line.body is None:
        return "failed", line.error
    try:
        response = reader.response_of(line.body)
        problem = body_problem(body, response)
    except Exception as exc:  # noqa: BLE001 - a malformed answer is refused, named
        return "refused", f"not a chat completion ({exc})"
    if problem is not None:
        return "refused", problem
    if cache.get(line.custom_id) is not None:
        return "already", None
    cache.put(line.custom_id, response)
    return "cached", None


def _request_bodies(path: Path) -> dict[str, dict]:
    """``custom_id -> body`` of a request JSONL file."""
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RunError(f"cannot read the batch request file {path}: {exc.strerror or exc}") from None
    bodies = {}
    for number, text in enumerate(raw.splitlines(), 1):
        if not text.strip():
            continue
        try:
            line = json.loads(text)
        except json.JSONDecodeError as exc:
            raise RunError(f"{path}, line {number}: not JSON ({exc.msg}); give the request file `evolve ... "
                           "--export-batch` wrote") from None
        if isinstance(line, dict) and isinstance(line.get("custom_id"), str) and isinstance(line.get("body"), dict):
            bodies[line["custom_id"]] = line["body"]
    if not bodies:
        raise RunError(f"{path} holds no batch request line (custom_id and body); give the request file "
                       "`evolve ... --export-batch` wrote")
    return bodies
