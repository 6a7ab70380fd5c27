"""Scripted OpenAI-compatible servers for drilling faults, each an http.server in a thread of the test.

`FakeChatServer` (lm-eval's chat client, tests/test_endpoints.py) answers each problem's first request with a
fault (429, 500, no reply until the client's own timeout makes it hang up, a malformed body) and later ones
with the right answer (a wrong one for the expressions in `wrong`), and can die after a number of answers.
`FakeCompletionsServer` (the endpoint backend, tests/test_endpoint_backend.py) answers /v1/completions with
the oracle after the faults a test scripts. Every request is logged."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from caef_bench.machines import parse_expression, result
from caef_bench.runtime.oracle import OracleModel

FAULTS = ("429", "500", "timeout", "malformed")
_EXPRESSION = re.compile(r"The expression is:? (\S+=)")


class ThreadedServer:
    """`handler` served on 127.0.0.1 in a thread from entering a `with` block to leaving it."""

    def _serve(self, handler) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def send(request, status: int, body: bytes, content_type: str = "application/json", headers: dict | None = None):
    """A whole reply, unless the client has gone (its timeout)."""
    try:
        request.send_response(status)
        request.send_header("Content-Type", content_type)
        request.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            request.send_header(name, value)
        request.end_headers()
        request.wfile.write(body)
    except (BrokenPipeError, ConnectionResetError):  # the client gave up (its timeout)
        pass


def wait_for_hang_up(request, bound_s: float = 600) -> None:
    """Hold the request until the client closes its connection (its timeout ran out), at most `bound_s`."""
    request.close_connection = True
    sock = request.connection
    sock.settimeout(bound_s)
    try:
        sock.recv(1, socket.MSG_PEEK)  # b"" once the client has closed; data if it sends anything more
    except OSError:  # reset by the client, or the bound
        pass


class FakeChatServer(ThreadedServer):
    def __init__(self, faults: bool = True, die_after: int | None = None, wrong: frozenset[str] = frozenset()):
        self.faults, self.die_after, self.wrong = faults, die_after, wrong
        self.log: list[tuple[str, str]] = []  # (expression, what was sent back)
        self.attempts: dict[str, int] = {}
        self.answered = 0
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep the test output clean
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                expr = _EXPRESSION.search(json.dumps(body["messages"])).group(1)
                server.handle(self, expr)

        self._serve(Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/chat/completions"

    def handle(self, request, expr: str) -> None:
        with self.lock:
            attempt = self.attempts[expr] = self.attempts.get(expr, 0) + 1
            dead = self.die_after is not None and self.answered >= self.die_after
            fault = FAULTS[(sum(map(ord, expr))) % len(FAULTS)] if self.faults and attempt == 1 else None
            if not dead and fault is None:
                self.answered += 1
        if dead:  # the server is gone: the connection closes with no reply
            self.log.append((expr, "dead"))
            request.close_connection = True
            request.connection.close()
            return
        if fault in ("429", "500"):
            self.log.append((expr, fault))
            send(request, int(fault), b'{"error": "try again"}')
        elif fault == "timeout":  # no reply at all: whatever the client's timeout, it runs out
            self.log.append((expr, "timeout"))
            wait_for_hang_up(request)
        elif fault == "malformed":
            self.log.append((expr, "malformed"))
            send(request, 200, b'{"choices": [{"message": ')
        else:
            self.log.append((expr, "answer"))
            send(request, 200, self._reply(expr, expr in self.wrong))

    @staticmethod
    def _reply(expr: str, wrong: bool = False) -> bytes:
        """The right answer after "Answer:", or with `wrong` the other verdict or the answer plus one."""
        parsed = parse_expression(expr)
        answer = result(parsed.op, parsed.a, parsed.b)
        if wrong:
            answer = (not answer) if isinstance(answer, bool) else answer + 1
        content = f"Let me compute.\nAnswer: {str(answer).lower() if isinstance(answer, bool) else answer}"
        return json.dumps({"id": "x", "object": "chat.completion", "model": "fake",
                           "choices": [{"index": 0, "finish_reason": "stop",
                                        "message": {"role": "assistant", "content": content}}]}).encode()


class FakeCompletionsServer(ThreadedServer):
    """/v1/completions answered by the oracle, except that each request takes the next fault of `faults`
    (consumed in order, shared by concurrent requests) while any is left; `always` answers every request
    with that fault. /v1/models lists `listed`. `log` holds (time, fault or "answer", model, Authorization).

    Faults: "503" (with `retry_after`), "400" (both with `reason`), "drop" (the connection closes with no
    reply), "cut" (a 200 whose JSON stops half-way), "midway" (the connection closes half-way through a
    reply that said its length), "html" (a proxy's page where the answer should be), "silent" (no reply
    until the client's timeout makes it hang up)."""

    def __init__(self, faults=(), always: str | None = None, retry_after: str = "1", reason: str = "busy",
                 listed=("aligner_add", "executor_add")):
        self.faults, self.always, self.retry_after, self.reason = list(faults), always, retry_after, reason
        self.listed, self.oracle = listed, OracleModel()
        self.log: list[tuple[float, str, str, str | None]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the client pools its connections
            disable_nagle_algorithm = True  # headers and body go in two writes: no delayed-ACK wait between

            def log_message(self, *args):
                pass

            def do_GET(self):
                send(self, 200, json.dumps({"object": "list", "data": [{"id": name, "object": "model"}
                                                                       for name in server.listed]}).encode())

            def do_POST(self):
                server.handle(self, json.loads(self.rfile.read(int(self.headers["Content-Length"]))))

        self._serve(Handler)
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def seen(self, what: str) -> list[float]:
        """When each request answered with `what` ("answer" or a fault) came."""
        return [at for at, fault, _, _ in self.log if fault == what]

    def handle(self, request, body: dict) -> None:
        with self.lock:
            fault = self.always or (self.faults.pop(0) if self.faults else "answer")
            self.log.append((time.monotonic(), fault, body["model"], request.headers.get("Authorization")))
        prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
        if fault == "answer":
            choices = [{"index": i, "text": text, "finish_reason": "stop"}
                       for i, text in enumerate(self.oracle.generate(prompts, body["model"]))]
            send(request, 200, json.dumps({"object": "text_completion", "model": body["model"],
                                           "choices": choices}).encode())
        elif fault in ("503", "400"):
            error = json.dumps({"error": {"message": self.reason, "type": "invalid_request_error"}}).encode()
            send(request, int(fault), error, headers={"Retry-After": self.retry_after} if fault == "503" else None)
        elif fault in ("drop", "midway"):
            if fault == "midway":
                request.send_response(200)
                request.send_header("Content-Type", "application/json")
                request.send_header("Content-Length", "4096")
                request.end_headers()
                request.wfile.write(b'{"choices": [{"index"')
                request.wfile.flush()
            request.close_connection = True
            request.connection.shutdown(socket.SHUT_RDWR)
        elif fault == "cut":
            send(request, 200, b'{"object": "text_completion", "choices": [{"index": 0, "te')
        elif fault == "html":
            send(request, 200, b"<html><body>upstream is warming up</body></html>", "text/html")
        elif fault == "silent":
            wait_for_hang_up(request)
        else:
            raise ValueError(f"unknown fault {fault!r}")
