"""Helpers of the serving tests: a `caef-bench serve` app under a real uvicorn in a thread of the test
process, `caef-bench serve` itself as a process, models to put behind them, and waiting for events.

No test here waits a guessed time: each waits for something to happen (a call at a gate, a count in
/health), with a deadline no working machine misses, and fails naming what did not happen."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from caef_bench.runtime.oracle import OracleModel

REPO = Path(__file__).resolve().parents[1]
DEADLINE_S = 300  # for anything the tests wait for: minutes, where it takes milliseconds to seconds
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(condition, what: str, seconds: float = DEADLINE_S) -> None:
    """Poll `condition()` until it is true; AssertionError saying `what` did not happen in time."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not so after {seconds:.0f} s")
        time.sleep(0.01)


def popen_logged(command: list[str], **options) -> subprocess.Popen:
    """A server process whose stderr goes to a temporary file (a pipe nobody reads would fill and stall it);
    `last_words(process)` reads it."""
    log = tempfile.TemporaryFile("w+")
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log, text=True, **options)
    process.log = log
    return process


def last_words(process: subprocess.Popen) -> str:
    process.log.seek(0)
    return process.log.read()[-3000:]


def wait_for_health(process: subprocess.Popen, url: str, seconds: float, what: str) -> None:
    """Until `url` answers 200; RuntimeError with the server's last words if it dies or takes too long."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=30) as reply:
                if reply.status == 200:
                    return
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            if process.poll() is None:
                process.kill()
                process.wait()
            raise RuntimeError(f"{what} did not start: {last_words(process)}")
        time.sleep(0.1)


def post(url: str, body: dict, timeout: float = DEADLINE_S) -> tuple[int, dict]:
    """(status, JSON body) of a POST, error statuses included."""
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def request_bytes(body: bytes, path: str = "/v1/completions") -> bytes:
    """An HTTP/1.1 POST as it goes over the wire."""
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def connect(base: str) -> socket.socket:
    host, port = base.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=DEADLINE_S)


def sent_whole(base: str, expr: str) -> socket.socket:
    """A client that has sent a whole problem, to hang up (close the socket) before the answer."""
    sock = connect(base)
    sock.sendall(request_bytes(json.dumps({"model": "caef-tiny", "prompt": expr}).encode()))
    return sock


def health(base: str) -> dict:
    with urllib.request.urlopen(base + "/health", timeout=60) as reply:
        return json.loads(reply.read())


@contextlib.contextmanager
def uvicorn_thread(app):
    """Serve `app` on 127.0.0.1 until the block ends; yields the address (http://127.0.0.1:PORT)."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started or not thread.is_alive(), "uvicorn started")
    if not thread.is_alive():
        raise RuntimeError("uvicorn did not start")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(60)


def caef_bench_command() -> list[str]:
    """`caef-bench` as a user runs it: the console script beside this Python, else the module."""
    script = Path(sys.executable).parent / "caef-bench"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "caef_bench"]


def start_serve(*options: str, cwd: Path = REPO, tries: int = 3) -> tuple[subprocess.Popen, str]:
    """`caef-bench serve OPTIONS` on a free port, once /health answers: (the process, its address). A port
    taken between choosing and binding it (another process's) is tried again on another."""
    for attempt in range(tries):
        port = free_port()
        process = popen_logged([*caef_bench_command(), "serve", "--port", str(port), *options], cwd=cwd, env=ENV)
        base = f"http://127.0.0.1:{port}"
        try:
            wait_for_health(process, base + "/health", DEADLINE_S, "caef-bench serve")
            return process, base
        except RuntimeError as error:
            if "address already in use" not in str(error) or attempt + 1 == tries:
                raise
    raise AssertionError("unreachable")


def stop_serve(process: subprocess.Popen) -> int:
    """SIGTERM, as `kill PID` or a service manager stops it; its exit code."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=DEADLINE_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.log.close()


class GatedOracle(OracleModel):
    """The oracle, whose calls wait while `gate` is closed (every call, until the test sets it; clear it to
    close it again): requests pile up behind a round in flight. `waiting` is set once a call waits there."""

    def __init__(self):
        super().__init__()
        self.gate = threading.Event()
        self.waiting = threading.Event()
        self.prompts: list[tuple[str, str]] = []  # (adapter, prompt) of every call, in order

    def generate(self, prompts, adapter):
        if not self.gate.is_set():
            self.waiting.set()
            if not self.gate.wait(DEADLINE_S):
                raise RuntimeError("the test never opened the gate")
        self.prompts += [(adapter, prompt) for prompt in prompts]
        return super().generate(prompts, adapter)


class BrokenMul(OracleModel):
    """The oracle, whose mul executor raises on every call."""

    def generate(self, prompts, adapter):
        if adapter == "executor_mul":
            raise RuntimeError("the mul adapter is broken")
        return super().generate(prompts, adapter)
