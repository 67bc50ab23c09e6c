"""A stand-in for the ``llama-server`` binary (run as a script by the tests, never imported).

It answers ``GET /health`` and ``POST /v1/chat/completions`` like llama-server, requires the
bearer key from ``LLAMA_API_KEY`` when that is set (as the real server does), and fails on
demand. ``FAKE_LLAMA_MODE`` picks the behaviour:

* ``ok``: serve; every completion's content is ``FAKE_LLAMA_CONTENT``;
* ``sigill``: kill itself with SIGILL at start (a build using refused CPU instructions);
* ``missing_lib``: print the dynamic loader's error and exit 127;
* ``bind_once``: fail to bind the first time (``FAKE_LLAMA_MARKER`` remembers), then serve;
* ``die``: print a model-loading error and exit 3;
* ``ignore_term``: serve and ignore SIGTERM;
* ``die_after``: answer ``FAKE_LLAMA_ANSWERS`` completions, then SIGKILL itself mid-request.
"""

import json
import os
import signal
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

args = sys.argv[1:]
port = int(args[args.index("--port") + 1])
mode = os.environ.get("FAKE_LLAMA_MODE", "ok")
key = os.environ.get("LLAMA_API_KEY")
print("fake llama-server", " ".join(args), flush=True)
print("api key from environment:", key is not None, flush=True)
if mode == "sigill":
    os.kill(os.getpid(), signal.SIGILL)
if mode == "missing_lib":
    print(f"{sys.argv[0]}: error while loading shared libraries: libllama-common.so.0: cannot open shared "
          "object file: No such file or directory", flush=True)
    sys.exit(127)
if mode == "bind_once" and not os.path.exists(os.environ["FAKE_LLAMA_MARKER"]):
    open(os.environ["FAKE_LLAMA_MARKER"], "w").close()
    print("E srv  start: couldn't bind HTTP server socket", flush=True)
    sys.exit(1)
if mode == "die":
    print("error: failed to load model (simulated)", flush=True)
    sys.exit(3)
if mode == "ignore_term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
answers_left = int(os.environ.get("FAKE_LLAMA_ANSWERS", "1000000"))
content = os.environ.get("FAKE_LLAMA_CONTENT", '{"answer": "yes"}')


class Handler(BaseHTTPRequestHandler):
    def _send(self, status, payload):
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # noqa: N802
        self._send(200 if self.path == "/health" else 404, {"status": "ok"})

    def do_POST(self):  # noqa: N802
        global answers_left
        self.rfile.read(int(self.headers.get("content-length", 0)))
        if key is not None and self.headers.get("authorization") != f"Bearer {key}":
            self._send(401, {"error": {"message": "Invalid API Key"}})
            return
        if mode == "die_after" and answers_left <= 0:
            os.kill(os.getpid(), signal.SIGKILL)
        answers_left -= 1
        self._send(200, {
            "id": "x", "object": "chat.completion", "created": 0, "model": "stand-in",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13},
            "timings": {"prompt_per_second": 100.0, "predicted_per_second": 10.0},
        })

    def log_message(self, *a):
        pass


HTTPServer(("127.0.0.1", port), Handler).serve_forever()
