"""A real OpenAI-compatible HTTP endpoint on 127.0.0.1, scripted by a function, for tests."""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, Union
from urllib.parse import parse_qs

Reply = Union[str, tuple[int, dict], None]

DROP = None
"""A reply that closes the connection without answering (an endpoint that died mid-request)."""


def chat_completion(
    text: str,
    *,
    prompt_tokens: int = 50,
    completion_tokens: int = 10,
    cached_tokens: int | None = None,
    finish_reason: str = "stop",
    model: str = "loopback",
) -> dict:
    """The JSON body of a ``/v1/chat/completions`` answer carrying ``text``."""
    usage: dict = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if cached_tokens is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    return {
        "id": "loopback", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "finish_reason": finish_reason, "message": {"role": "assistant", "content": text}}],
        "usage": usage,
    }


@dataclass
class BatchScript:
    """How the fake Batch API of a :class:`LoopbackChatServer` behaves (change it while it runs).

    A batch is created ``validating``; each ``GET /v1/batches/{id}`` then answers
    ``in_progress`` for ``polls_in_progress`` polls (forever while ``hold`` is True), and the
    next poll ends it with ``outcome``, answering its lines with the server's ``respond``.

    Attributes:
        polls_in_progress: Polls answered ``in_progress`` before the batch ends.
        hold: Every poll answers ``in_progress`` while True (a test releases the batch).
        outcome: ``completed`` (every line answered, or failed by ``fail``), ``expired`` (the
            first ``answered_before_expiry`` lines answered, the rest in the error file as
            ``batch_expired``), ``failed`` (nothing answered: the batch failed validation) or
            ``cancelled`` (like ``expired``, code ``batch_cancelled``).
        fail: ``fail(body) -> bool``: lines answered in the error file with HTTP 500 instead.
        answered_before_expiry: See ``outcome``.
        served: False: every Batch API route answers HTTP 404 (an endpoint without one).
    """

    polls_in_progress: int = 1
    hold: bool = False
    outcome: Literal["completed", "expired", "failed", "cancelled"] = "completed"
    fail: Callable[[dict], bool] | None = None
    answered_before_expiry: int = 0
    served: bool = True


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # many clients connecting at once on busy cores are queued, not refused

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that gave up (a timeout, a cancelled call) is part of the test, not an error to print."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


class LoopbackChatServer:
    """Serves ``POST /v1/chat/completions`` on 127.0.0.1 from a function (a thread, no network).

    Exercises the whole client stack - the ``openai`` package, its HTTP transport, status
    codes - whatever transport library the installed ``openai`` uses, which in-process HTTP
    mocks cannot always intercept.

    It also serves a fake OpenAI Batch API (``POST /v1/files``, ``GET /v1/files/{id}/content``,
    ``POST /v1/batches``, ``GET /v1/batches/{id}``, ``GET /v1/batches`` newest first with
    ``limit`` and ``after``) whose lines are answered by the same
    ``respond``, in the states :attr:`batch_script` says (:class:`BatchScript`).

    Args:
        respond: ``respond(body) -> reply`` where ``body`` is the parsed request JSON and the
            reply is a ``str`` (sent as a 200 completion with that content),
            ``(status, json_body)``, or :data:`DROP` (the connection closes unanswered).
        batch_script: How the fake Batch API behaves (default: one ``in_progress`` poll,
            then every line answered).
        tokenize: ``tokenize(content) -> token ids``: serves ``POST /tokenize`` at the server
            root as llama.cpp does (``{"tokens": [...]}``); None answers that route 404.
        keep_alive: Keep each client connection open between calls (HTTP/1.1, the default);
            False closes it after every answer (HTTP/1.0), as some proxies do.

    Attributes:
        base_url: ``http://127.0.0.1:<port>/v1``.
        bodies: Every request body received, in order (Batch API requests not included).
        authorizations: The ``Authorization`` header of every request, in order.
        batch_script: See the argument; tests change it while the server runs.
        batches: Every batch created, by id (the Batch API's batch objects, as last served).
        batch_lines: Every line of every batch input file, in order of creation.
        batch_answered: ``custom_id`` of every batch line answered through ``respond`` (a line
            answered twice, i.e. paid twice, appears twice).
        tokenized: The ``content`` of every ``POST /tokenize`` request, in order.
        open_connections: Client connections open now; :meth:`close` drops them, as a server
            that dies would.
    """

    def __init__(self, respond: Callable[[dict], Reply], batch_script: BatchScript | None = None,
                 tokenize: Callable[[str], list[int]] | None = None, keep_alive: bool = True) -> None:
        self.bodies: list[dict] = []
        self.tokenized: list[str] = []
        self.authorizations: list[str | None] = []
        self.batch_script = batch_script or BatchScript()
        self.batches: dict[str, dict] = {}
        self.batch_lines: list[dict] = []
        self.batch_answered: list[str] = []
        self._files: dict[str, bytes] = {}
        self._polls: dict[str, int] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._respond = respond
        self._connections: set[socket.socket] = set()  # open (kept-alive) client connections
        outer = self

        class Handler(BaseHTTPRequestHandler):
            # HTTP/1.1 keeps connections alive between calls, as real servers do; HTTP/1.0 closes each
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"
            disable_nagle_algorithm = True  # headers and body go out at once, not 40 ms apart

            def setup(self) -> None:
                super().setup()
                with outer._lock:
                    outer._connections.add(self.connection)

            def finish(self) -> None:
                with outer._lock:
                    outer._connections.discard(self.connection)
                super().finish()

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                outer._send(self, *outer._batch_get(self.path))

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                if self.path.startswith(("/v1/files", "/v1/batches")):
                    outer._send(self, *outer._batch_post(self.path, self.headers.get("content-type", ""), raw))
                    return
                if self.path.rstrip("/") == "/tokenize":
                    content = str(json.loads(raw).get("content", ""))
                    with outer._lock:
                        outer.tokenized.append(content)
                    outer._send(self, *((404, {"error": "no tokenizer"}) if tokenize is None
                                        else (200, {"tokens": tokenize(content)})))
                    return
                body = json.loads(raw)
                with outer._lock:
                    outer.bodies.append(body)
                    outer.authorizations.append(self.headers.get("authorization"))
                reply = respond(body)
                if reply is DROP:
                    self.close_connection = True  # no status line: the client sees a dropped connection
                    return
                status, payload = (200, chat_completion(reply)) if isinstance(reply, str) else reply
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self._httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    # -- the fake Batch API ----------------------------------------------------------------
    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, payload: Any, content_type: str = "application/json") -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("content-type", content_type)
        handler.send_header("content-length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids)}"

    def _batch_post(self, path: str, content_type: str, raw: bytes) -> tuple[int, Any]:
        """``POST /v1/files`` (multipart upload) and ``POST /v1/batches``."""
        with self._lock:
            if not self.batch_script.served:
                pass
            elif path.rstrip("/") == "/v1/files":
                message = BytesParser(policy=HTTP).parsebytes(f"content-type: {content_type}\r\n\r\n".encode() + raw)
                fields: dict[Any, Any] = {part.get_param("name", header="content-disposition"):
                                          part.get_payload(decode=True) for part in message.iter_parts()}
                file_id = self._new_id("file")
                self._files[file_id] = fields.get("file") or b""
                return 200, {"id": file_id, "object": "file", "bytes": len(self._files[file_id]), "created_at": 0,
                             "filename": "batch.jsonl", "purpose": (fields.get("purpose") or b"").decode(),
                             "status": "processed"}
            if path.rstrip("/") == "/v1/batches":
                request = json.loads(raw)
                if request.get("input_file_id") not in self._files:
                    return 404, {"error": {"message": f"no file {request.get('input_file_id')!r}", "type": "invalid_request_error"}}
                lines = [json.loads(x) for x in self._files[request["input_file_id"]].decode().splitlines() if x.strip()]
                self.batch_lines += lines
                batch_id = self._new_id("batch")
                self.batches[batch_id] = {
                    "id": batch_id, "object": "batch", "endpoint": request.get("endpoint"), "errors": None,
                    "input_file_id": request["input_file_id"], "completion_window": request.get("completion_window"),
                    "status": "validating", "output_file_id": None, "error_file_id": None, "created_at": 0,
                    "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
                }
                self._polls[batch_id] = 0
                return 200, self.batches[batch_id]
        return 404, {"error": {"message": f"no route {path}", "type": "invalid_request_error"}}

    def _batch_get(self, path: str) -> tuple[int, Any] | tuple[int, bytes, str]:
        """``GET /v1/batches/{id}`` (advancing its state), ``GET /v1/batches`` (the list, newest
        first) and ``GET /v1/files/{id}/content``."""
        path, _, query = path.partition("?")
        parts = path.strip("/").split("/")
        with self._lock:
            if not self.batch_script.served:
                pass
            elif parts == ["v1", "batches"]:
                return 200, self._batch_list(parse_qs(query))
            elif parts[:2] == ["v1", "batches"] and len(parts) == 3 and parts[2] in self.batches:
                return 200, self._advance(parts[2])
            if parts[:2] == ["v1", "files"] and len(parts) == 4 and parts[3] == "content" and parts[2] in self._files:
                return 200, self._files[parts[2]], "application/octet-stream"
        return 404, {"error": {"message": f"no such object: {path}", "type": "invalid_request_error"}}

    def _batch_list(self, query: dict[str, list[str]]) -> dict:
        """One page of the batches, newest first (``limit``, default 20; ``after``: a batch id)."""
        newest_first = list(reversed(self.batches.values()))
        after = query.get("after", [None])[0]
        if after is not None:
            ids = [b["id"] for b in newest_first]
            newest_first = newest_first[ids.index(after) + 1:] if after in ids else []
        limit = int(query.get("limit", ["20"])[0])
        page = newest_first[:limit]
        return {"object": "list", "data": page, "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None, "has_more": len(newest_first) > limit}

    def _advance(self, batch_id: str) -> dict:
        """One poll of a batch: in progress, or (once) its end per :attr:`batch_script`."""
        batch, script = self.batches[batch_id], self.batch_script
        if batch["status"] not in ("validating", "in_progress"):
            return batch
        self._polls[batch_id] += 1
        if script.hold or self._polls[batch_id] <= script.polls_in_progress:
            batch["status"] = "in_progress"
            return batch
        lines = [json.loads(x) for x in self._files[batch["input_file_id"]].decode().splitlines() if x.strip()]
        if script.outcome == "failed":
            batch.update(status="failed", errors={"object": "list", "data": [
                {"code": "invalid_request", "message": "the fake batch failed validation", "line": 1}]})
            return batch
        answered = len(lines) if script.outcome == "completed" else script.answered_before_expiry
        out: list[dict] = []
        errors: list[dict] = []
        for i, line in enumerate(lines):
            if i >= answered:
                code = "batch_expired" if script.outcome == "expired" else "batch_cancelled"
                errors.append({"id": f"req-{i}", "custom_id": line["custom_id"], "response": None,
                               "error": {"code": code, "message": f"the line was not answered: {code}"}})
                continue
            (out if (status := self._answer(line))[0] == 200 else errors).append(
                {"id": f"req-{i}", "custom_id": line["custom_id"], "error": None,
                 "response": {"status_code": status[0], "request_id": f"req-{i}", "body": status[1]}})
        status_name = {"completed": "completed", "expired": "expired", "cancelled": "cancelled"}[script.outcome]
        batch.update(status=status_name, request_counts={"total": len(lines), "completed": len(out), "failed": len(errors)})
        for name, rows in (("output_file_id", out), ("error_file_id", errors)):
            if rows:
                file_id = self._new_id("file")
                self._files[file_id] = "".join(json.dumps(r) + "\n" for r in rows).encode()
                batch[name] = file_id
        return batch

    def _answer(self, line: dict) -> tuple[int, dict]:
        """A batch line answered through ``respond`` (``fail``: an HTTP 500 line instead)."""
        script = self.batch_script
        if script.fail is not None and script.fail(line["body"]):
            return 500, {"error": {"message": "the fake batch failed this line", "type": "server_error"}}
        self.batch_answered.append(line["custom_id"])
        reply = self._respond(line["body"])
        if reply is DROP:
            return 500, {"error": {"message": "dropped", "type": "server_error"}}
        return (200, chat_completion(reply)) if isinstance(reply, str) else reply

    @property
    def open_connections(self) -> int:
        """Client connections open now (HTTP/1.1: a client keeps its connections between calls)."""
        with self._lock:
            return len(self._connections)

    def close(self) -> None:
        """Stop serving, drop every open connection (as a server that dies would) and release the port."""
        self._httpd.shutdown()
        self._httpd.server_close()
        with self._lock:
            connections, self._connections = list(self._connections), set()
        for connection in connections:
            with contextlib.suppress(OSError):  # the client hung up already
                connection.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> LoopbackChatServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
