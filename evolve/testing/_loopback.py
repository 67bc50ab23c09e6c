"""A real OpenAI-compatible HTTP endpoint on 127.0.0.1, scripted by a function, for tests."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Union

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


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that gave up (a timeout, a cancelled call) is part of the test, not an error to print."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


class LoopbackChatServer:
    """Serves ``POST /v1/chat/completions`` on 127.0.0.1 from a function (a thread, no network).

    Exercises the whole client stack - the ``openai`` package, its HTTP transport, status
    codes - whatever transport library the installed ``openai`` uses, which in-process HTTP
    mocks cannot always intercept.

    Args:
        respond: ``respond(body) -> reply`` where ``body`` is the parsed request JSON and the
            reply is a ``str`` (sent as a 200 completion with that content),
            ``(status, json_body)``, or :data:`DROP` (the connection closes unanswered).

    Attributes:
        base_url: ``http://127.0.0.1:<port>/v1``.
        bodies: Every request body received, in order.
        authorizations: The ``Authorization`` header of every request, in order.
    """

    def __init__(self, respond: Callable[[dict], Reply]) -> None:
        self.bodies: list[dict] = []
        self.authorizations: list[str | None] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
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

    def close(self) -> None:
        """Stop serving and release the port."""
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> LoopbackChatServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
