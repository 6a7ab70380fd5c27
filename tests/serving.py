"""Helpers of the serving tests: a `caef-bench serve` app under a real uvicorn in a thread of the test
process (no new interpreter to start), and models to put behind it."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import urllib.request

from caef_bench.runtime.oracle import OracleModel


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_health(process, url: str, seconds: float, what: str) -> None:
    """Until `url` answers 200; RuntimeError with the server's last words if it dies or takes too long."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as reply:
                if reply.status == 200:
                    return
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start: {process.stderr.read()[-2000:]}")
        time.sleep(1)


@contextlib.contextmanager
def uvicorn_thread(app):
    """Serve `app` on 127.0.0.1 until the block ends; yields the address (http://127.0.0.1:PORT)."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


class SlowOracle(OracleModel):
    """The oracle, taking `delay` seconds per call: problems stay in flight long enough to be left."""

    def __init__(self, delay: float = 0.02):
        super().__init__()
        self.delay = delay

    def generate(self, prompts, adapter):
        time.sleep(self.delay)
        return super().generate(prompts, adapter)


class GatedOracle(OracleModel):
    """The oracle, whose first call waits until `gate` is set: requests pile up behind a round in flight."""

    def __init__(self):
        super().__init__()
        self.gate = threading.Event()
        self.waiting = threading.Event()

    def generate(self, prompts, adapter):
        if not self.calls:
            self.waiting.set()
            self.gate.wait(30)
        return super().generate(prompts, adapter)


class BrokenMul(OracleModel):
    """The oracle, whose mul executor raises on every call."""

    def generate(self, prompts, adapter):
        if adapter == "executor_mul":
            raise RuntimeError("the mul adapter is broken")
        return super().generate(prompts, adapter)
