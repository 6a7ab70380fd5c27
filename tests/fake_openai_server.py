"""A scripted OpenAI-compatible chat server for drilling faults: it answers each problem's first
request with a fault (429, 500, no reply until the client's own timeout makes it hang up, a malformed body) and
later ones with the right answer (a wrong one for the expressions in `wrong`), and can die after a number of
answers. Every request is logged."""

from __future__ import annotations

import json
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from caef_bench.machines import parse_expression, result

FAULTS = ("429", "500", "timeout", "malformed")
_EXPRESSION = re.compile(r"The expression is:? (\S+=)")


class FakeChatServer:
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

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/chat/completions"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

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
            self._send(request, int(fault), b'{"error": "try again"}')
        elif fault == "timeout":  # no reply at all: whatever the client's timeout, it runs out
            self.log.append((expr, "timeout"))
            self._wait_for_hang_up(request)
        elif fault == "malformed":
            self.log.append((expr, "malformed"))
            self._send(request, 200, b'{"choices": [{"message": ')
        else:
            self.log.append((expr, "answer"))
            self._send(request, 200, self._reply(expr, expr in self.wrong))

    @staticmethod
    def _wait_for_hang_up(request, bound_s: float = 600) -> None:
        """Hold the request until the client closes its connection (its timeout ran out), at most `bound_s`."""
        request.close_connection = True
        sock = request.connection
        sock.settimeout(bound_s)
        try:
            sock.recv(1, socket.MSG_PEEK)  # b"" once the client has closed; data if it sends anything more
        except OSError:  # reset by the client, or the bound
            pass

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

    @staticmethod
    def _send(request, status: int, body: bytes) -> None:
        try:
            request.send_response(status)
            request.send_header("Content-Type", "application/json")
            request.send_header("Content-Length", str(len(body)))
            request.end_headers()
            request.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (its timeout)
            pass
