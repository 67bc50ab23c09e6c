"""The Batch API path: many requests sent as one file, answered within a window, at batch prices.

OpenAI's Batch API (and servers that copy it) takes a JSONL file of requests, one per line
(``custom_id``, ``method``, ``url``, ``body``), answers them within a completion window
(``24h``) at about half the interactive price, and hands back an output file (one answer per
line, matched by ``custom_id``) and an error file. vLLM's offline ``run_batch`` entry point reads
and writes the same line format.

Here a line's ``custom_id`` is the request's response-cache key and its ``body`` is exactly what
the provider would send interactively (:meth:`OpenAICompatibleProvider.chat_body`), so an answer
read back goes through the same checks as an interactive one (the schema sent, ``finish_reason``,
secrets scrubbed) and lands in the response cache under the same key: a later interactive run,
or a resume, finds it there and pays nothing.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from evolve.errors import EndpointError, EndpointUnreachableError, SpendLimitReachedError, UnsupportedFeatureError
from evolve.llm._budget import request_chars
from evolve.llm._types import CallFailure, ChatRequest, ChatResponse

if TYPE_CHECKING:
    from evolve.llm._client import Client, Result

__all__ = [
    "BATCH_TAG_SUFFIX",
    "CHAT_COMPLETIONS_URL",
    "MAX_BATCH_BYTES",
    "MAX_BATCH_LINES",
    "BatchLedger",
    "BatchOptions",
    "BatchRunner",
    "MemoryBatchLedger",
    "OutputLine",
    "batch_line",
    "batch_tag",
    "body_problem",
    "is_batch_tag",
    "read_output_lines",
    "request_lines",
]

CHAT_COMPLETIONS_URL = "/v1/chat/completions"
"""The ``url`` of every line (the route the body is for)."""

MAX_BATCH_LINES = 50_000
"""Most requests in one batch (the OpenAI Batch API's limit); more go as several batches."""

MAX_BATCH_BYTES = 200 * 1024 * 1024
"""Largest input file of one batch, bytes (the OpenAI Batch API's 200 MB)."""

BATCH_TAG_SUFFIX = " (batch)"
"""Appended to a request's tag where its usage is counted when it was answered through a
batch (``judge`` -> ``judge (batch)``), so the journal, the report and the money spent
(:class:`evolve.runs.Price` with ``batch=True``) keep batch calls apart."""


def batch_tag(tag: str) -> str:
    """The usage tag of calls of ``tag`` answered through a batch."""
    return tag + BATCH_TAG_SUFFIX


def is_batch_tag(tag: str) -> bool:
    """Whether a usage tag counts batch calls (priced at batch prices)."""
    return tag.endswith(BATCH_TAG_SUFFIX)


def batch_line(provider: Any, request: ChatRequest, custom_id: str | None = None) -> dict[str, Any]:
    """One Batch API input line for ``request``.

    Args:
        provider: An :class:`~evolve.llm.OpenAICompatibleProvider` (anything with ``chat_body``
            and ``endpoint_id``): the body is the one it sends interactively.
        request: The request.
        custom_id: The line's id; default its cache key at ``provider`` (what the answer is
            cached under).

    Raises:
        UnsupportedFeatureError: The provider builds no HTTP body (the fake provider).
    """
    chat_body = getattr(provider, "chat_body", None)
    if chat_body is None:
        raise UnsupportedFeatureError(f"{provider.endpoint_id}: this provider sends no HTTP requests and has no Batch "
                                      "API; use an OpenAI-compatible endpoint (--base-url)")
    return {"custom_id": custom_id or request.cache_key(provider.endpoint_id), "method": "POST",
            "url": CHAT_COMPLETIONS_URL, "body": chat_body(request)}


def request_lines(provider: Any, requests: Iterable[ChatRequest]) -> list[dict[str, Any]]:
    """Batch input lines for ``requests``, one per distinct request (same cache key, one line)."""
    lines: dict[str, dict[str, Any]] = {}
    for request in requests:
        key = request.cache_key(provider.endpoint_id)
        if key not in lines:
            lines[key] = batch_line(provider, request, key)
    return list(lines.values())


@dataclass(frozen=True)
class OutputLine:
    """One line of a batch's output or error file.

    Attributes:
        custom_id: The input line it answers; ``""`` for a line that names none (not JSON, or
            not an object with a ``custom_id``).
        body: The chat completion (JSON) when the line was answered with HTTP 200, else None.
        error: Why it was not (the line's error, its HTTP status and message, or why it could
            not be read), else ``""``.
        number: The line's number in the file (from 1).
    """

    custom_id: str
    body: dict[str, Any] | None
    error: str = ""
    number: int = 0


def read_output_lines(text: str) -> Iterator[OutputLine]:
    """Parse a Batch API output or error file (also vLLM ``run_batch`` output), line by line.

    Blank lines are skipped. A line that is not a JSON object with a ``custom_id`` is yielded
    with ``custom_id`` ``""`` and the reason in ``error``, so a caller can name it.

    Args:
        text: The file's text (JSONL).
    """
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except json.JSONDecodeError as exc:
            yield OutputLine("", None, f"not JSON ({exc.msg} at character {exc.pos + 1})", number)
            continue
        if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str):
            yield OutputLine("", None, "not a JSON object with a custom_id", number)
            continue
        yield dataclasses.replace(_output_line(line), number=number)


def _output_line(line: dict[str, Any]) -> OutputLine:
    cid = line["custom_id"]
    error, response = line.get("error"), line.get("response")
    if error:
        message = error.get("message") or error.get("code") if isinstance(error, dict) else str(error)
        code = error.get("code", "") if isinstance(error, dict) else ""
        return OutputLine(cid, None, f"{code}: {message}" if code and code != message else str(message))
    if not isinstance(response, dict):
        return OutputLine(cid, None, "the line has neither a response nor an error")
    status, body = response.get("status_code"), response.get("body")
    if status != 200 or not isinstance(body, dict):
        detail = body.get("error", body) if isinstance(body, dict) else body
        if isinstance(detail, dict):
            detail = detail.get("message", detail)
        return OutputLine(cid, None, f"HTTP {status}: {detail}")
    return OutputLine(cid, body)


def body_problem(body: dict[str, Any], response: ChatResponse) -> str | None:
    """Why an answer to a request ``body`` (as sent) would not be cached by the interactive
    path, or None when it would: a ``finish_reason`` other than ``stop``, or, for a structured
    request, a reply that is not a JSON object fitting the schema as sent."""
    from evolve.llm._schema import schema_violation
    from evolve.llm._structured import parse_json_object

    if response.finish_reason != "stop":
        return f"finish_reason {response.finish_reason!r} (a cut answer)"
    fmt = body.get("response_format")
    schema = (fmt.get("json_schema") or {}).get("schema") if isinstance(fmt, dict) else None
    if not isinstance(fmt, dict):
        return None
    try:
        value = parse_json_object(response.text)
    except ValueError as exc:
        return f"not a JSON object ({exc})"
    return schema_violation(value, schema) if isinstance(schema, dict) else None


class BatchLedger(Protocol):
    """Where submitted batches are remembered, so that a killed run's resume polls them instead
    of paying again (a run's journal: :class:`evolve.runs.JournalBatchLedger`).

    An input file is recorded when uploaded, before its batch is created; a batch when the
    endpoint has created it. A file without a batch (:meth:`unclaimed`) is what a process killed
    while the endpoint created the batch leaves behind: the next run looks the batch up by its
    input file instead of paying for its lines again.
    """

    def uploaded(self, file_id: str, custom_ids: Sequence[str]) -> None:
        """Record an input file just uploaded (before its batch is created), with its lines' ids."""
        ...

    def submitted(self, batch_id: str, custom_ids: Sequence[str], file_id: str = "") -> None:
        """Record a batch just created (before it is polled), with its lines' ids and input file."""
        ...

    def finished(self, batch_id: str, *, status: str, answered: int, failed: int) -> None:
        """Record a batch whose answers were read (or that is lost)."""
        ...

    def pending(self) -> list[tuple[str, frozenset[str]]]:
        """Batches submitted and not finished: ``(batch_id, custom_ids)``."""
        ...

    def unclaimed(self) -> list[tuple[str, frozenset[str]]]:
        """Input files uploaded whose batch was never recorded: ``(file_id, custom_ids)``."""
        ...


class MemoryBatchLedger:
    """A :class:`BatchLedger` in memory (one process; tests and library use)."""

    def __init__(self) -> None:
        self.files: dict[str, frozenset[str]] = {}
        self.batches: dict[str, frozenset[str]] = {}
        self.batch_files: set[str] = set()
        self.done: dict[str, str] = {}

    def uploaded(self, file_id: str, custom_ids: Sequence[str]) -> None:
        self.files[file_id] = frozenset(custom_ids)

    def submitted(self, batch_id: str, custom_ids: Sequence[str], file_id: str = "") -> None:
        self.batches[batch_id] = frozenset(custom_ids)
        self.batch_files.add(file_id)

    def finished(self, batch_id: str, *, status: str, answered: int, failed: int) -> None:
        self.done[batch_id] = status

    def pending(self) -> list[tuple[str, frozenset[str]]]:
        return [(b, ids) for b, ids in self.batches.items() if b not in self.done]

    def unclaimed(self) -> list[tuple[str, frozenset[str]]]:
        return [(f, ids) for f, ids in self.files.items() if f not in self.batch_files]


@dataclass
class BatchOptions:
    """How a client sends batchable requests through a Batch API (:attr:`Client.batch`).

    Attributes:
        ledger: Remembers submitted batches (a run's journal); None: :class:`MemoryBatchLedger`
            (a killed process's batches are then forgotten and paid again).
        poll_initial_s: Wait before the second status poll, seconds (the first is at once);
            each later wait is 1.5 times longer, up to ``poll_max_s``.
        poll_max_s: Longest wait between polls, seconds.
        completion_window: The window asked for (the OpenAI Batch API offers ``24h``).
        max_lines: Most lines per batch (:data:`MAX_BATCH_LINES`).
        max_bytes: Largest input file per batch, bytes (:data:`MAX_BATCH_BYTES`).
        on_note: Receives a line per event (submitted, status changes, lines retried).
        submit: False: only the batches the ledger holds (submitted by a process that was
            killed) are polled; requests none of them holds go interactively (a run resumed
            without ``--batch`` still reads what it already paid for).
    """

    ledger: BatchLedger | None = None
    poll_initial_s: float = 10.0
    poll_max_s: float = 600.0
    completion_window: str = "24h"
    max_lines: int = MAX_BATCH_LINES
    max_bytes: int = MAX_BATCH_BYTES
    on_note: Callable[[str], None] | None = None
    submit: bool = True
    _memory: MemoryBatchLedger = field(default_factory=MemoryBatchLedger, repr=False)

    @property
    def the_ledger(self) -> BatchLedger:
        """:attr:`ledger`, or one in memory."""
        return self.ledger if self.ledger is not None else self._memory


_TERMINAL = ("completed", "failed", "expired", "cancelled")
_TRANSPORT_ATTEMPTS = 6
_CLAIM_SCAN = 1000  # the endpoint's most recent batches searched for one made from an unclaimed file


class BatchRunner:
    """Completes a list of requests through a Batch API over a :class:`~evolve.llm.Client`.

    Requests the response cache answers are never sent; of the rest, identical requests go as
    one line, in batches of at most ``max_lines`` lines and ``max_bytes`` bytes. A batch is
    recorded in the ledger as soon as it exists, before it is polled, so a process killed while
    it waits leaves it behind: the next run of the same requests (a resume) polls that batch
    instead of submitting again; its input file is recorded before the batch is created, so a
    process killed while the endpoint creates the batch leaves a file whose batch the next run
    finds by listing the endpoint's batches (:meth:`BatchLedger.unclaimed`). Answers are
    checked like interactive ones and cached under the request's key; their usage is counted under :func:`batch_tag`. Lines that failed, expired,
    were cancelled or are missing are asked again interactively (:meth:`Client.acomplete`).
    An endpoint without a Batch API (HTTP 404/405/501 on upload or create) gets every request
    interactively, with a note. Under a client's :attr:`~evolve.llm.Client.spend_limit`, every
    line of a batch is reserved (at batch prices) before the batch is created: a batch that
    could pass the limit is not sent (:class:`~evolve.errors.SpendLimitReachedError` stops the
    run, resumable), and each answer read replaces its line's estimate by what it cost.

    Args:
        client: The client (cache, usage, retries, interactive fallback).
        options: Polling, limits and the ledger.
    """

    def __init__(self, client: Client, options: BatchOptions) -> None:
        self.client = client
        self.options = options
        self.provider = client.provider
        self.ledger = options.the_ledger
        self._tickets: dict[str, Any] = {}  # custom_id -> its spend-limit reservation

    # -- the whole run ---------------------------------------------------------------------
    async def run(self, requests: Sequence[ChatRequest], on_result: Callable[[int, Result], None] | None = None
                  ) -> list[Result]:
        """Complete ``requests`` (results in order; see :meth:`Client.map`)."""
        results: list[Result | None] = [None] * len(requests)
        todo: dict[str, list[int]] = {}
        for i, request in enumerate(requests):
            key = request.cache_key(self.client.endpoint_id)
            hit = self.client.cached_answer(request, key)
            if hit is not None:
                results[i] = hit
                if on_result is not None:
                    on_result(i, hit)
            else:
                todo.setdefault(key, []).append(i)
        if todo:
            await self._answer(requests, todo, results, on_result)
        return results  # type: ignore[return-value]

    async def _answer(self, requests: Sequence[ChatRequest], todo: dict[str, list[int]],
                      results: list[Result | None], on_result: Callable[[int, Result], None] | None) -> None:
        """Poll the pending batches holding some of ``todo``, submit the rest, then retry
        interactively whatever no batch answered."""
        left: dict[str, list[int]] = dict(todo)

        def settle(key: str, answer: Result) -> None:
            for n, i in enumerate(left.pop(key, ())):
                one = answer if n == 0 or isinstance(answer, CallFailure) else self._shared(requests[i], answer)
                results[i] = one
                if on_result is not None:
                    on_result(i, one)

        try:
            await self._claim(requests, left)
        except UnsupportedFeatureError as exc:
            self._note(f"could not look up the batches of unclaimed input files ({exc})")
        pending = [(b, ids) for b, ids in self.ledger.pending() if ids & left.keys()]
        submitted: list[tuple[str, frozenset[str]]] = []
        fresh = [k for k in left if not any(k in ids for _, ids in pending)]
        if fresh and self.options.submit:
            try:
                submitted = await self._submit(requests, {k: left[k] for k in fresh})
            except UnsupportedFeatureError as exc:
                self._note(f"no Batch API at {self.client.endpoint_id} ({exc}); sending {len(fresh)} requests one by one")
        async with anyio.create_task_group() as tg:
            for batch_id, ids in [*pending, *submitted]:
                tg.start_soon(self._collect, batch_id, ids, requests, left, settle)
        await self._interactive(requests, left, settle)

    async def _interactive(self, requests: Sequence[ChatRequest], left: dict[str, list[int]],
                           settle: Callable[[str, Result], None]) -> None:
        """Ask interactively what no batch answered (failed, expired or missing lines)."""
        if not left:
            return
        self._note(f"{len(left)} request(s) no batch answered go one by one")

        async def one(key: str) -> None:
            settle(key, await self.client.acomplete(requests[left[key][0]]))

        async with anyio.create_task_group() as tg:
            for key in list(left):
                tg.start_soon(one, key)

    def _shared(self, request: ChatRequest, answer: ChatResponse) -> ChatResponse:
        """A copy of ``answer`` for an identical request: a cache hit (counted as one)."""
        shared = answer.model_copy(update={"cached": True, "latency_s": 0.0})
        self.client.count_answer(request.tag, shared)
        return shared

    # -- submitting ------------------------------------------------------------------------
    async def _submit(self, requests: Sequence[ChatRequest], todo: dict[str, list[int]]
                      ) -> list[tuple[str, frozenset[str]]]:
        """Create batches for ``todo`` (recorded in the ledger at once); returns them."""
        lines = [(key, json.dumps(batch_line(self.provider, requests[idx[0]], key), ensure_ascii=False))
                 for key, idx in todo.items()]
        made = []
        for chunk in _chunks(lines, self.options.max_lines, self.options.max_bytes):
            data = "".join(text + "\n" for _, text in chunk).encode("utf-8")
            ids = frozenset(key for key, _ in chunk)
            with self._reserved([(key, requests[todo[key][0]]) for key, _ in chunk]):
                file_id = await self._upload(data, ids)
                batch_id = await self._create(file_id)
            self.ledger.submitted(batch_id, sorted(ids), file_id)
            self._note(f"batch {batch_id} submitted: {len(ids)} request(s), window {self.options.completion_window}")
            made.append((batch_id, ids))
        return made

    async def _upload(self, data: bytes, ids: frozenset[str]) -> str:
        """Upload one input file, record it in the ledger; returns the file id."""
        api = self._api()
        uploaded = await self._transport(lambda: api.files.create(file=("batch.jsonl", data, "application/jsonl"),
                                                                  purpose="batch"), "upload the batch file")
        self.ledger.uploaded(str(uploaded.id), sorted(ids))
        return str(uploaded.id)

    async def _create(self, file_id: str) -> str:
        """Create the batch of an uploaded input file; returns the batch id."""
        api = self._api()
        batch = await self._transport(lambda: api.batches.create(
            input_file_id=file_id, endpoint=CHAT_COMPLETIONS_URL, completion_window=self.options.completion_window,
        ), "create the batch")
        return str(batch.id)

    async def _claim(self, requests: Sequence[ChatRequest], left: dict[str, list[int]]) -> None:
        """Record the batch of every unclaimed input file holding some of ``left``.

        The endpoint's batches (newest first, at most :data:`_CLAIM_SCAN` of them) are searched
        for one made from the file: found, it is recorded as submitted and polled like any
        other; not found (the process died before the endpoint created it), the batch is
        created from the file now when submitting is allowed (the lines are reserved under the
        spending limit first), else its lines go the ordinary way.
        """
        files = [(f, ids) for f, ids in self.ledger.unclaimed() if ids & left.keys()]
        if not files:
            return
        made = await self._batches_by_file({f for f, _ in files})
        for file_id, ids in files:
            batch_id = made.get(file_id)
            if batch_id is None and self.options.submit:
                with self._reserved([(k, requests[left[k][0]]) for k in ids if k in left]):
                    batch_id = await self._create(file_id)
            if batch_id is not None:
                self.ledger.submitted(batch_id, sorted(ids), file_id)
                self._note(f"batch {batch_id} of input file {file_id} recorded after an interruption: polled, not paid again")

    async def _batches_by_file(self, file_ids: set[str]) -> dict[str, str]:
        """The endpoint's batch made from each of ``file_ids`` (input file id -> batch id)."""
        api = self._api()
        found: dict[str, str] = {}
        after: str | None = None
        seen = 0
        while len(found) < len(file_ids) and seen < _CLAIM_SCAN:
            page = await self._transport(functools.partial(api.batches.list, limit=100, **({} if after is None else {"after": after})),
                                         "list the batches")
            rows = list(page.data)
            for batch in rows:
                if batch.input_file_id in file_ids:
                    found.setdefault(str(batch.input_file_id), str(batch.id))
            seen += len(rows)
            if not rows or not getattr(page, "has_more", False):
                break
            after = str(rows[-1].id)
        return found

    def _api(self) -> Any:
        batch_api = getattr(self.provider, "batch_api", None)
        if batch_api is None:
            raise UnsupportedFeatureError("this provider has no Batch API")
        return batch_api()

    # -- polling and reading ---------------------------------------------------------------
    async def _collect(self, batch_id: str, ids: frozenset[str], requests: Sequence[ChatRequest],
                       left: dict[str, list[int]], settle: Callable[[str, Result], None]) -> None:
        """Poll one batch until it ends; settle the requests its output answers."""
        # a batch a killed process submitted: its lines count against the limit as they are read
        self._reserve([(k, requests[left[k][0]]) for k in ids if k in left and k not in self._tickets], strict=False)
        try:
            await self._read(batch_id, ids, requests, left, settle)
        finally:
            self._release(ids)  # lines not answered cost nothing

    async def _read(self, batch_id: str, ids: frozenset[str], requests: Sequence[ChatRequest],
                    left: dict[str, list[int]], settle: Callable[[str, Result], None]) -> None:
        batch = await self._poll(batch_id)
        if batch is None:  # the endpoint does not know it (another server, or purged): its lines are asked again
            self.ledger.finished(batch_id, status="lost", answered=0, failed=len(ids))
            return
        answered = failed = 0
        api = self._api()
        for file_id in (getattr(batch, "output_file_id", None), getattr(batch, "error_file_id", None)):
            if not file_id:
                continue
            content = await self._transport(functools.partial(api.files.content, file_id), "download a batch file")
            for line in read_output_lines(content.text):
                if line.custom_id not in left or line.body is None:
                    failed += line.body is None
                    continue
                answer = self._accept(requests[left[line.custom_id][0]], line)
                if isinstance(answer, ChatResponse):
                    answered += 1
                    settle(line.custom_id, answer)
                else:
                    failed += 1
        status = str(batch.status)
        self.ledger.finished(batch_id, status=status, answered=answered, failed=failed)
        missing = len(ids & left.keys())
        self._note(f"batch {batch_id} {status}: {answered} answered"
                   + (f", {missing} to ask again one by one" if missing else ""))

    def _accept(self, request: ChatRequest, line: OutputLine) -> Result:
        """An answered line as a response (checked, cached, counted as a batch call), or a
        failure when its body is not a chat completion."""
        try:
            response = getattr(self.provider, "response_of")(line.body)  # noqa: B009 - not every Provider has it
        except Exception as exc:  # noqa: BLE001 - a malformed body is a failed line, asked again
            return CallFailure(error=f"{self.client.endpoint_id}: batch line {line.custom_id}: {exc}"[:2000])
        answer = self.client.accept_batch_answer(request, line.custom_id, response.model_copy(update={"batch": True}))
        self._settle(line.custom_id, answer)
        return answer

    # -- the spending limit ----------------------------------------------------------------
    def _reserve(self, lines: Sequence[tuple[str, ChatRequest]], *, strict: bool) -> None:
        """Reserve each line at the client's spending limit (batch prices). ``strict``: refuse
        the whole batch when one line could pass the limit (nothing reserved stays); else (a
        batch already paid for) a refusal only marks the limit reached, and the run stops at
        its next interactive call.

        Raises:
            SpendLimitReachedError: ``strict`` and the lines could pass the limit.
        """
        limit = self.client.spend_limit
        if limit is None:
            return
        taken = []
        try:
            for key, request in lines:
                self._tickets[key] = limit.reserve(request_chars(request), request.max_tokens, batch=True)
                taken.append(key)
        except SpendLimitReachedError:
            if strict:
                self._release(taken)
                raise

    @contextmanager
    def _reserved(self, lines: Sequence[tuple[str, ChatRequest]]) -> Iterator[None]:
        """Reserve ``lines`` under the spending limit for a batch about to be created; released
        again if creating it fails or is interrupted."""
        self._reserve(lines, strict=True)
        try:
            yield
        except BaseException:
            self._release(key for key, _ in lines)
            raise

    def _settle(self, key: str, answer: ChatResponse) -> None:
        ticket = self._tickets.pop(key, None)
        if ticket is not None and self.client.spend_limit is not None:
            self.client.spend_limit.settle(ticket, prompt_tokens=answer.prompt_tokens,
                                           completion_tokens=answer.completion_tokens,
                                           cached_prompt_tokens=answer.cached_prompt_tokens)

    def _release(self, keys: Iterable[str]) -> None:
        """Drop the reservations of lines that were not answered (they cost nothing)."""
        limit = self.client.spend_limit
        for key in list(keys):
            ticket = self._tickets.pop(key, None)
            if ticket is not None and limit is not None:
                limit.settle(ticket, answered=False)

    async def _poll(self, batch_id: str) -> Any:
        """Retrieve the batch until it is in a final state (at once, then with growing waits);
        None when the endpoint does not know the batch."""
        wait, last = self.options.poll_initial_s, ""
        api = self._api()
        while True:
            try:
                batch = await self._transport(lambda: api.batches.retrieve(batch_id), f"poll batch {batch_id}")
            except EndpointError as exc:
                if "HTTP 404" in str(exc):
                    self._note(f"batch {batch_id} is unknown to {self.client.endpoint_id}; its requests are asked again")
                    return None
                raise
            status = str(batch.status)
            if status != last:
                counts = getattr(batch, "request_counts", None)
                done = f" ({counts.completed} of {counts.total} done)" if counts is not None and counts.total else ""
                self._note(f"batch {batch_id}: {status}{done}")
                last = status
            if status in _TERMINAL:
                return batch
            await anyio.sleep(wait)
            wait = min(self.options.poll_max_s, wait * 1.5)

    async def _transport(self, call: Callable[[], Any], what: str) -> Any:
        """One Batch API request, retried on connection errors, 429 and 5xx with backoff.

        Raises:
            EndpointUnreachableError: Still failing after the retries (the run stops; the
                batches already submitted are in the ledger, and a resume polls them).
            UnsupportedFeatureError: HTTP 404/405/501 on an upload or create (no Batch API).
            EndpointError: Any other refusal.
        """
        import openai

        delay = self.client.backoff_initial
        for attempt in range(1, _TRANSPORT_ATTEMPTS + 1):
            try:
                return await call()
            except (openai.APIConnectionError, openai.APIStatusError) as exc:
                status = getattr(exc, "status_code", None)
                text = self.client.scrub_text(str(exc))
                if status is not None and status not in (408, 409, 425, 429) and status < 500:
                    if status in (404, 405, 501) and what in ("upload the batch file", "create the batch", "list the batches"):
                        raise UnsupportedFeatureError(f"HTTP {status} to {what}: {text}") from None
                    raise EndpointError(f"{self.client.endpoint_id}: could not {what}: HTTP {status}: {text}") from None
                if attempt == _TRANSPORT_ATTEMPTS:
                    raise EndpointUnreachableError(
                        f"could not {what} at {self.client.endpoint_id} after {attempt} attempts (last error: {text}); "
                        "the batches already submitted are journaled, and a resume polls them instead of paying "
                        "again") from None
            await anyio.sleep(delay)
            delay = min(delay * 2, self.client.backoff_max)
        raise AssertionError("unreachable")  # pragma: no cover

    def _note(self, text: str) -> None:
        if self.options.on_note is not None:
            self.options.on_note(text)


def _chunks(lines: list[tuple[str, str]], max_lines: int, max_bytes: int) -> Iterator[list[tuple[str, str]]]:
    """Split ``(key, json line)`` pairs into batches of at most ``max_lines`` lines and
    ``max_bytes`` bytes (a single line larger than ``max_bytes`` goes alone)."""
    chunk: list[tuple[str, str]] = []
    size = 0
    for key, text in lines:
        n = len(text.encode("utf-8")) + 1
        if chunk and (len(chunk) >= max_lines or size + n > max_bytes):
            yield chunk
            chunk, size = [], 0
        chunk.append((key, text))
        size += n
    if chunk:
        yield chunk
