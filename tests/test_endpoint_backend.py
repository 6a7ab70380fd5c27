"""The endpoint backend (`--backend openai`, caef_bench/runtime/endpoint.py) drilled against a scripted
completions server (fake_openai_server.FakeCompletionsServer) that answers with the oracle after the faults
a test gives it: 503 with Retry-After, a connection dropped before the reply or half-way through it, JSON
cut short, an HTML page, no reply at all. Each fault is retried and the run's traces are the in-process
ones; a server that keeps failing, or refuses, is a one-line EndpointError with its own reason.
(tests/test_serve.py runs the backend against `caef-bench serve`; tests/test_endpoints.py drills lm-eval's
own client.)"""

from __future__ import annotations

import pytest

from caef_bench.runtime import Problem, solve_batch
from caef_bench.runtime.endpoint import EndpointError, EndpointStepModel
from caef_bench.runtime.oracle import OracleModel
from fake_openai_server import FakeCompletionsServer
from test_rounds import EVERY_OPERATOR

TIMEOUT_S = 5  # the backend's timeout here: what the no-reply fault costs; the oracle answers in milliseconds
PROBLEMS = [Problem(row["id"], row["expr"], row["answer"]) for row in EVERY_OPERATOR]


def _steps(records):
    return [[(s.adapter, s.input, s.output) for s in record.steps] for record in records]


def test_every_fault_is_retried_and_the_run_reproduces_in_process_traces():
    faults = ["503", "drop", "cut", "midway", "html", "silent"]
    here = solve_batch(PROBLEMS, OracleModel(), mode="traced")
    with FakeCompletionsServer(faults) as server:
        endpoint = EndpointStepModel(server.url, timeout=TIMEOUT_S, backoff=0.01)
        there = solve_batch(PROBLEMS, endpoint, mode="traced")
    assert [(r.answer, r.outcome, r.first_divergence) for r in there] == [(r.answer, "answered", None) for r in here]
    assert _steps(there) == _steps(here)
    assert [fault for _, fault, _, _ in server.log if fault != "answer"] == faults  # each fault was met
    assert server.log[0][2] == server.log[1][2]  # the 503's request was sent again, after its Retry-After
    assert server.log[1][0] - server.log[0][0] >= 0.95  # (1 s; the client's own first wait is at most 0.5 s)
    # one answered request per adapter and round, as in process; a retried request counts once
    rounds = OracleModel()
    solve_batch(PROBLEMS, rounds)
    assert endpoint.requests == len(server.seen("answer")) == len(rounds.calls)


def test_concurrent_requests_of_one_round_are_each_retried():
    prompts = [f"{a}+{b}=" for a, b in zip(range(10, 40), range(50, 80))]
    with FakeCompletionsServer(["503", "cut", "drop", "503"], retry_after="0.05") as server:
        endpoint = EndpointStepModel(server.url, timeout=TIMEOUT_S, backoff=0.01, batch=4)
        texts = [c.text for c in endpoint.generate(prompts, "aligner_add")]
    assert texts == OracleModel().generate(prompts, "aligner_add")
    assert endpoint.requests == len(server.seen("answer")) == 8  # 30 prompts, 4 a request


@pytest.mark.parametrize("fault, last", [
    ("503", "last: 503 the model is loading"),
    ("cut", "last: a body that is not JSON"),
    ("html", "last: a body that is not JSON: '<html><body>upstream is warming up"),
    ("drop", "last: RemoteProtocolError"),
])
def test_a_server_that_keeps_failing_is_a_one_line_error_after_every_try(fault, last):
    with FakeCompletionsServer(always=fault, retry_after="0.01", reason="the model is\nloading") as server:
        endpoint = EndpointStepModel(server.url, timeout=TIMEOUT_S, retries=3, backoff=0.01)
        with pytest.raises(EndpointError) as caught:
            endpoint.generate(["45+67="], "aligner_add")
    message = str(caught.value)
    assert f"POST {server.url}/completions: no answer after 3 tries; {last}" in message and "\n" not in message
    assert len(server.log) == 3


def test_no_reply_within_the_timeout_is_retried_then_named():
    with FakeCompletionsServer(always="silent") as server:
        endpoint = EndpointStepModel(server.url, timeout=0.5, retries=2, backoff=0.01)
        with pytest.raises(EndpointError, match=r"no answer after 2 tries; last: no reply within 0.5 s"):
            endpoint.generate(["45+67="], "aligner_add")
    assert len(server.log) == 2


def test_a_refusal_is_not_retried_and_says_the_servers_reason_on_one_line():
    with FakeCompletionsServer(always="400", reason="unknown model 'executor_pow':\nserved: aligner_add") as server:
        endpoint = EndpointStepModel(server.url, backoff=0.01)
        with pytest.raises(EndpointError) as caught:
            endpoint.generate(["1+1="], "executor_pow")
    assert str(caught.value) == (f"POST {server.url}/completions (executor_pow): "
                                 "400 unknown model 'executor_pow': served: aligner_add")
    assert len(server.log) == 1


def test_the_api_key_comes_from_the_argument_or_the_environment(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("CAEF_BENCH_API_KEY", "sk-from-env")
    with FakeCompletionsServer() as server:
        EndpointStepModel(server.url).generate(["1+1="], "aligner_add")
        EndpointStepModel(server.url, api_key="sk-given").generate(["1+1="], "aligner_add")
        monkeypatch.delenv("CAEF_BENCH_API_KEY")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
        EndpointStepModel(server.url).generate(["1+1="], "aligner_add")
        assert EndpointStepModel(server.url).available_adapters == {"aligner_add", "executor_add"}
    assert [auth for _, _, _, auth in server.log] == ["Bearer sk-from-env", "Bearer sk-given", "Bearer sk-openai"]


def test_the_command_line_says_an_endpoint_error_on_one_line(capsys):
    from caef_bench.cli import main

    with FakeCompletionsServer(always="400", reason="no adapters are loaded yet") as server:
        assert main(["solve", "45+67=", "--backend", "openai", "--base-url", server.url]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"caef-bench: POST {server.url}/completions (aligner_add): 400 no adapters are loaded yet"
