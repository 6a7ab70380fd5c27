"""`caef-bench serve` as a user runs it: a process on a free port, scored by plain `lm_eval`, and drilled
under abuse.

Plain lm-eval scores the tiny tier through it. The abuse drills put a `caef-bench serve` process in front
of a gated oracle served in this process (`serve --backend openai`: its steps go there), so each drill
decides when problems move on and every count is exact: clients that hang up mid-request, 10 MB bodies,
hundreds of idle connections, SIGTERM while requests are in flight. Nothing waits a guessed time.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from caef_bench.data.testsets import load_cell
from caef_bench.serve.app import MAX_BODY_BYTES, MAX_PROMPT_CHARS, create_app
from serving import (DEADLINE_S, ENV, REPO, GatedOracle, connect, health, post, request_bytes, sent_whole,
                     start_serve, stop_serve, uvicorn_thread, wait_until)


def _lm_eval() -> str:
    found = shutil.which("lm_eval", path=str(Path(sys.executable).parent)) or shutil.which("lm_eval")
    assert found, "lm_eval is not installed (pip install -e '.[eval]')"
    return found


def _samples(folder: Path, task: str = "caef_add_5") -> list[dict]:
    log = sorted(folder.rglob(f"samples_{task}_*.jsonl"))[-1]
    return sorted((json.loads(line) for line in log.read_text().splitlines()), key=lambda s: s["doc_id"])


# --------------------------------------------------------------------------- plain lm_eval against the tiny tier


@pytest.fixture(scope="module")
def caef_serve():
    """`caef-bench serve` on the tiny tier, started as a user starts it."""
    process, base = start_serve()
    try:
        yield base
    finally:
        stop_serve(process)


def _plain_lm_eval(base: str, limit: int, out: Path) -> subprocess.CompletedProcess:
    """The README's command: `lm_eval --model local-completions` with nothing of caef-bench loaded in it."""
    run = subprocess.run(
        [_lm_eval(), "--model", "local-completions", "--model_args",
         f"model=caef-tiny,base_url={base}/v1/completions,tokenized_requests=False",
         "--tasks", "caef_add_5", "--include_path", str(REPO / "tasks"), "--limit", str(limit),
         "--log_samples", "--output_path", str(out)],
        cwd=out.parent, env=ENV, capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, run.stderr[-3000:]
    return run


def test_plain_lm_eval_scores_caef_through_caef_bench_serve(caef_serve, tmp_path):
    _plain_lm_eval(caef_serve, 2, tmp_path / "out")
    samples, rows = _samples(tmp_path / "out"), load_cell("add_5")[:2]
    assert [s["doc"]["expr"] for s in samples] == [row["expr"] for row in rows]
    assert [s["filtered_resps"][0] for s in samples] == [row["answer"] for row in rows]
    assert [s["exact_match"] for s in samples] == [1.0, 1.0]
    assert health(caef_serve)["in_flight"] == 0


@pytest.mark.slow
def test_plain_lm_eval_scores_caef_through_serve_as_caef_bench_lm_eval_does(caef_serve, tmp_path):
    served = _plain_lm_eval(caef_serve, 5, tmp_path / "served")
    row = next(line for line in served.stdout.splitlines() if "exact_match" in line)
    assert "|1|" in row.replace(" ", "").replace("1.0000", "1")  # exact_match 1.0, as lm-eval prints it
    direct = subprocess.run(
        [sys.executable, "-m", "caef_bench", "lm-eval", "--model", "caef", "--tasks", "caef_add_5", "--limit", "5",
         "--log_samples", "--output_path", str(tmp_path / "direct")],
        cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=1800)
    assert direct.returncode == 0, direct.stderr[-3000:]
    ours, theirs = _samples(tmp_path / "served"), _samples(tmp_path / "direct")
    assert [s["filtered_resps"] for s in ours] == [s["filtered_resps"] for s in theirs]
    assert [s["exact_match"] for s in ours] == [1.0] * 5


@pytest.mark.slow
def test_a_drill_of_64_clients_on_the_tiny_tier_some_leaving(caef_serve):
    """The tiny tier itself under 64 concurrent clients, 8 of which hang up as soon as they have asked:
    whether the server finished or dropped theirs, every other client gets its right answer and the
    server ends with nothing in flight."""
    rows = load_cell("add_10")[:64]
    leaving = set(range(3, 64, 8))
    before = health(caef_serve)

    def client(i):
        if i in leaving:
            sent_whole(caef_serve, rows[i]["expr"]).close()
            return None
        return post(caef_serve + "/v1/completions", {"model": "caef-tiny", "prompt": rows[i]["expr"]})

    with ThreadPoolExecutor(64) as pool:
        replies = list(pool.map(client, range(64)))
    answered = {i: body for i, reply in enumerate(replies) if reply for status, body in [reply] if status == 200}
    assert len(answered) == 64 - len(leaving)
    assert all(body["choices"][0]["text"] == rows[i]["answer"] for i, body in answered.items())
    wait_until(lambda: health(caef_serve)["in_flight"] == 0, "no problem left in flight")
    state = health(caef_serve)
    assert state["status"] == "ok" and state["dropped"] - before["dropped"] <= state["left"] - before["left"] <= 8


# --------------------------------------------------------------------------- abuse, in front of a gated oracle


@dataclass
class Fronted:
    base: str  # the `caef-bench serve` process
    model: GatedOracle  # what answers its steps, in this process
    process: subprocess.Popen

    def solve(self, expr: str) -> tuple[int, dict]:
        return post(self.base + "/v1/completions", {"model": "caef-tiny", "prompt": expr})

    def close_gate(self) -> None:
        self.model.gate.clear()
        self.model.waiting.clear()

    def asked(self) -> list[str]:
        """The expressions aligner (I) was asked, in order: each problem once, unless one was solved twice."""
        return [prompt for adapter, prompt in self.model.prompts if adapter.startswith("aligner_") and prompt.endswith("=")]


@contextlib.contextmanager
def _fronted():
    """`caef-bench serve --backend openai` as a process, its steps answered by a gated oracle in this one."""
    model = GatedOracle()
    model.gate.set()
    with uvicorn_thread(create_app(model, "tiny")) as backend:
        process, base = start_serve("--backend", "openai", "--base-url", backend + "/v1")
        try:
            yield Fronted(base, model, process)
        finally:
            model.gate.set()
            stop_serve(process)


@pytest.fixture(scope="module")
def fronted():
    with _fronted() as front:
        yield front


def test_clients_that_hang_up_mid_request_cost_nothing_and_the_others_are_answered(fronted):
    rows = load_cell("add_10")[:8]
    before, asked_before = health(fronted.base), len(fronted.asked())
    fronted.close_gate()
    with ThreadPoolExecutor(8) as pool:
        first = pool.submit(fronted.solve, "99999+1=")
        assert fronted.model.waiting.wait(DEADLINE_S)  # its first round waits at the gate
        after_asking = [sent_whole(fronted.base, row["expr"]) for row in rows[:4]]
        mid_body = []
        for row in rows[4:6]:  # hang up half-way through sending the body
            body = json.dumps({"model": "caef-tiny", "prompt": row["expr"]}).encode()
            sock = connect(fronted.base)
            sock.sendall(request_bytes(body)[:-len(body) // 2])
            mid_body.append(sock)
        staying = {row["expr"]: pool.submit(fronted.solve, row["expr"]) for row in rows[6:]}
        wait_until(lambda: health(fronted.base)["queued"] == 6, "the 6 whole requests arrived")  # 4 to leave, 2 to stay
        for sock in after_asking + mid_body:
            sock.close()
        wait_until(lambda: health(fronted.base)["left"] - before["left"] == 4, "the server saw the 4 that had asked leave")
        fronted.model.gate.set()
        replies = {expr: future.result() for expr, future in staying.items()}
        assert first.result()[1]["choices"][0]["text"] == "100000"
    answers = {row["expr"]: row["answer"] for row in rows}
    assert {expr: (status, body["choices"][0]["text"]) for expr, (status, body) in replies.items()} == \
        {expr: (200, answers[expr]) for expr in staying}
    wait_until(lambda: health(fronted.base)["in_flight"] == 0, "no problem left in flight")
    state = health(fronted.base)
    assert state["status"] == "ok" and (state["left"] - before["left"], state["dropped"] - before["dropped"]) == (4, 4)
    # the 4 that left cost no call, and no problem ran twice
    assert sorted(fronted.asked()[asked_before:]) == sorted(["99999+1=", *staying])
    assert fronted.solve("12 + 34")[1]["choices"][0]["text"] == "46"  # and the server goes on


def _raw_reply(sock: socket.socket) -> tuple[int, dict]:
    """The status and JSON body of the one reply on a raw connection (the server closes it or says its length)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"the connection closed before a reply: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "the connection closed in the middle of the reply"
        body += chunk
    return int(head.split(b" ")[1]), json.loads(body)


def test_ten_megabyte_bodies_and_bodies_past_the_limit_are_400s_with_reasons(fronted):
    ten_mb = 10 * 1024 * 1024
    status, body = post(fronted.base + "/v1/completions", {"model": "caef-tiny", "prompt": "1" * ten_mb + "+1="})
    assert status == 400 and f"has {ten_mb + 3} characters; at most {MAX_PROMPT_CHARS}" in body["error"]["message"]
    with connect(fronted.base) as sock:  # 10 MB that are not JSON
        sock.sendall(request_bytes(os.urandom(ten_mb)))
        status, body = _raw_reply(sock)
    assert status == 400 and body["error"]["message"] == "the body is not JSON"
    with connect(fronted.base) as sock:  # a length past the limit is refused before a byte of the body is read
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     + f"Content-Length: {MAX_BODY_BYTES + 1}\r\n\r\n".encode())
        status, body = _raw_reply(sock)
    assert status == 400 and f"at most {MAX_BODY_BYTES}" in body["error"]["message"]
    status, body = fronted.solve("45+67=")  # the server goes on
    assert (status, body["choices"][0]["text"]) == (200, "112") and health(fronted.base)["status"] == "ok"


def test_hundreds_of_idle_connections_keep_nobody_out(fronted):
    idle = []
    try:
        for i in range(400):
            sock = connect(fronted.base)
            if i % 2:  # half of them start a request and never finish its headers
                sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Le")
            idle.append(sock)
        status, body = fronted.solve("12345+67890=")
        assert (status, body["choices"][0]["text"]) == (200, "80235")
        assert health(fronted.base)["status"] == "ok"
    finally:
        for sock in idle:
            sock.close()
    assert fronted.solve("99+1=")[1]["choices"][0]["text"] == "100"


def _refused(base: str) -> bool:
    try:
        connect(base).close()
    except (ConnectionRefusedError, ConnectionResetError):
        # a reset is a connection that reached the backlog as the listening socket closed: not taken either
        return True
    return False


def test_sigterm_while_requests_are_in_flight_finishes_them_refuses_new_ones_and_exits():
    with _fronted() as fronted:
        _sigterm_drill(fronted)


def _sigterm_drill(fronted: Fronted) -> None:
    rows = load_cell("add_10")[:3]
    fronted.close_gate()
    with ThreadPoolExecutor(3) as pool:
        first = pool.submit(fronted.solve, rows[0]["expr"])
        assert fronted.model.waiting.wait(DEADLINE_S)
        later = [pool.submit(fronted.solve, row["expr"]) for row in rows[1:]]
        wait_until(lambda: health(fronted.base)["queued"] == 2, "all three requests arrived")
        fronted.process.send_signal(signal.SIGTERM)  # `kill PID`, a service manager's stop
        wait_until(lambda: _refused(fronted.base), "the server stopped taking new connections")
        fronted.model.gate.set()  # the requests already in go on to their answers
        replies = [future.result() for future in (first, *later)]
    assert [(status, body["choices"][0]["text"]) for status, body in replies] == [(200, row["answer"]) for row in rows]
    assert fronted.process.wait(DEADLINE_S) == -signal.SIGTERM  # uvicorn ends by the signal it was stopped with
    assert sorted(fronted.asked()) == sorted(row["expr"] for row in rows)  # each problem solved once
