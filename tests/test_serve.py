"""`caef-bench serve` and the endpoint backend: new doors onto the one runtime.

The server's step loop (problems joining the runtime's rounds as they come, dropped when their
clients go), its OpenAI API (models, completions, chat, 400s with reasons), the endpoint backend
reproducing in-process traces through it, and lm-eval's API models scoring CAEF through it. These
put the machines' oracle (or the tiny tier on one problem) behind a real uvicorn in this process;
tests/test_serve_drills.py starts `caef-bench serve` and plain `lm_eval` as a user would.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from caef_bench.data.testsets import load_cell
from caef_bench.evaluate.scoring import is_correct, score
from caef_bench.runtime import Problem, solve_batch
from caef_bench.runtime.endpoint import EndpointError, EndpointStepModel, api_root
from caef_bench.runtime.oracle import OracleModel
from caef_bench.serve.app import create_app, every_adapter
from caef_bench.serve.scheduler import Scheduler
from serving import DEADLINE_S, BrokenMul, GatedOracle, health, post, sent_whole, uvicorn_thread, wait_until
from test_rounds import EVERY_OPERATOR

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture()
def client():
    from fastapi.testclient import TestClient

    with TestClient(create_app(OracleModel(), "tiny")) as test_client:
        yield test_client


# --------------------------------------------------------------------------- the rounds the server feeds


def test_requests_that_arrive_while_a_round_runs_join_the_next_one():
    model = GatedOracle()
    scheduler = Scheduler(model).start()
    try:
        first = scheduler.solve("12+34=")
        assert model.waiting.wait(DEADLINE_S)  # its aligner call is in flight ...
        later = [scheduler.solve("45+67="), scheduler.solve("99+1=")]  # ... when two more arrive
        model.gate.set()
        records = [job.future.result(30) for job in (first, *later)]
    finally:
        scheduler.stop()
    assert [r.answer for r in records] == ["46", "112", "100"]
    assert scheduler.widest_round == 3
    # the latecomers' executor steps share calls with the first problem's, one round behind it
    assert ("executor_add", 3) in model.calls


def test_a_problem_whose_client_left_is_dropped_before_the_next_round():
    model = GatedOracle()
    scheduler = Scheduler(model)
    kept, left = scheduler.solve("12345+67890="), scheduler.solve("99999+1=")  # both in the first round
    scheduler.start()
    try:
        assert model.waiting.wait(DEADLINE_S)  # that round's aligner call is under way ...
        scheduler.cancel(left)  # ... when one client leaves
        model.gate.set()
        assert kept.future.result(DEADLINE_S).answer == "80235"
    finally:
        scheduler.stop()
    assert model.calls[0] == ("aligner_add", 2)
    assert (scheduler.left, scheduler.dropped) == (1, 1) and not scheduler.rounds.active
    executor_calls = [n for adapter, n in model.calls if adapter == "executor_add"]
    assert executor_calls[-1] == 1  # the kept problem finished alone


# --------------------------------------------------------------------------- the OpenAI API


def test_models_lists_the_whole_problem_and_every_adapter(client):
    ids = [entry["id"] for entry in client.get("/v1/models").json()["data"]]
    assert ids[0] == "caef-tiny" and sorted(ids[1:]) == sorted(every_adapter()) and len(ids) == 17


def test_completions_answer_whole_problems_and_single_steps(client):
    rows = EVERY_OPERATOR
    reply = client.post("/v1/completions", json={"model": "caef-tiny", "prompt": [r["expr"] for r in rows],
                                                 "temperature": 0, "max_tokens": 256, "stop": ["\n"]}).json()
    assert [c["index"] for c in reply["choices"]] == list(range(len(rows)))
    assert [c["text"] for c in reply["choices"]] == [r["answer"] for r in rows]
    one = client.post("/v1/completions", json={"model": "caef-tiny", "prompt": "45+67="}).json()
    assert one["choices"][0]["text"] == "112" and one["object"] == "text_completion"
    step = client.post("/v1/completions", json={"model": "aligner_add", "prompt": "45+67="}).json()
    assert step["choices"][0]["text"] == OracleModel().complete("45+67=", "aligner_add")


def test_chat_replies_are_read_by_the_chat_tasks_scorer(client):
    from caef_bench.data.direct import chat_prompt

    for row in EVERY_OPERATOR:
        messages = [{"role": "system", "content": "You are helpful."},
                    {"role": "user", "content": chat_prompt(row["expr"], row["op"])}]
        reply = client.post("/v1/chat/completions", json={"model": "caef-tiny", "messages": messages}).json()
        content = reply["choices"][0]["message"]["content"]
        assert content.splitlines()[-1].startswith("Answer: ")
        assert score(content, row["answer"], row["op"], "chat"), content


@pytest.mark.parametrize("body, reason", [
    ({"model": "caef-tiny", "prompt": "hello"}, "not an expression such as 45+67="),
    ({"model": "caef-tiny", "prompt": ["1+1=", "2+"]}, "prompt 1 is not an expression"),
    ({"model": "caef-tiny", "prompt": "3" * 1001 + "-1="}, "at most 1000 digits run a window at a time (got 1001)"),
    ({"model": "caef-tiny", "prompt": "1" * 1001 + "+1="}, "at most 1000 digits run a window at a time (got 1001)"),
    # past the digits Python reads as a number: still the tier's limit, not the interpreter's
    ({"model": "caef-tiny", "prompt": "7" * 5000 + "-1="}, "sub operands of at most 1000 digits run a window at a time (got 5000)"),
    ({"model": "caef-tiny", "prompt": "7" * 5000 + "*1="}, "mul operands of at most 10 digits (got 5000)"),
    ({"model": "caef-tiny", "prompt": "12345678901*3="}, "a of at most 10 digits and b at most 15"),
    ({"model": "caef-tiny", "prompt": "5*16="}, "b=16"),
    ({"model": "caef-tiny", "prompt": "3-5="}, "subtraction needs a >= b"),
    ({"model": "caef-tiny", "prompt": "7//0="}, "division by zero"),
    ({"model": "gpt-4o", "prompt": "1+1="}, "unknown model 'gpt-4o'"),
    ({"prompt": "1+1="}, "unknown model None"),
    ({"model": "caef-tiny", "prompt": "1+1=", "temperature": 0.7}, "greedy decoding only: temperature=0.7"),
    ({"model": "caef-tiny", "prompt": "1+1=", "top_p": 0.9}, "greedy decoding only: top_p=0.9"),
    ({"model": "caef-tiny", "prompt": "1+1=", "n": 3}, "greedy decoding only: n=3"),
    ({"model": "caef-tiny", "prompt": "1+1=", "stream": True}, "streaming is not supported"),
    ({"model": "caef-tiny", "prompt": "1+1=", "logprobs": 1}, "logprobs are not supported"),
    ({"model": "caef-tiny", "prompt": [[16, 10, 16]]}, "not token ids"),
    ({"model": "caef-tiny", "prompt": []}, "non-empty list"),
    ({"model": "caef-tiny", "prompt": "1+1=", "max_tokens": -1}, "max_tokens must be a positive integer"),
])
def test_bad_input_is_a_400_with_its_reason(client, body, reason):
    reply = client.post("/v1/completions", json=body)
    assert reply.status_code == 400
    message = reply.json()["error"]["message"]
    assert reason in message and "\n" not in message


@pytest.mark.parametrize("body, reason", [
    ({"model": "caef-tiny", "messages": [{"role": "user", "content": "What is two plus two?"}]},
     "no expression such as 45+67= in the last user message"),
    ({"model": "caef-tiny", "messages": []}, "messages must be a non-empty list"),
    ({"model": "executor_add", "messages": [{"role": "user", "content": "1+1="}]}, "send its state text to /v1/completions"),
    ({"model": "caef-tiny", "messages": [{"role": "user", "content": "1+1="}], "temperature": 1}, "greedy decoding only"),
])
def test_bad_chat_input_is_a_400_with_its_reason(client, body, reason):
    reply = client.post("/v1/chat/completions", json=body)
    assert reply.status_code == 400 and reason in reply.json()["error"]["message"]


def test_a_failing_model_call_is_a_500_for_its_own_problems_only():
    from fastapi.testclient import TestClient

    with TestClient(create_app(BrokenMul(), "tiny")) as broken:
        failed = broken.post("/v1/completions", json={"model": "caef-tiny", "prompt": "7*3="})
        step = broken.post("/v1/completions", json={"model": "executor_mul", "prompt": "MUL, q0"})
        fine = broken.post("/v1/completions", json={"model": "caef-tiny", "prompt": "45+67="})
    assert failed.status_code == 500 and "the mul adapter is broken" in failed.json()["error"]["message"]
    assert step.status_code == 500 and "the mul adapter is broken" in step.json()["error"]["message"]
    assert fine.status_code == 200 and fine.json()["choices"][0]["text"] == "112"


def test_bodies_that_are_not_requests_are_400s_and_the_server_goes_on(client):
    for raw in (b"{not json", b"[1, 2]", b"", b"\xff\xfe", b'{"model": "caef-tiny", "prompt": {"a": 1}}'):
        reply = client.post("/v1/completions", content=raw, headers={"Content-Type": "application/json"})
        assert reply.status_code == 400, raw
    assert client.post("/v1/completions", json={"model": "caef-tiny", "prompt": "2+2="}).json()["choices"][0]["text"] == "4"


# --------------------------------------------------------------------------- over real HTTP


def test_64_concurrent_clients_some_leaving_every_answer_right_and_the_server_alive():
    """Gated: a first problem's round waits until 64 more requests are in and 8 of their clients have hung
    up, so every count is exact: the 8 are dropped before they cost a call, the other 56 join the first
    one's next round together, and each is answered right."""
    rows = load_cell("add_10")[:64]
    leaving = set(range(0, 64, 8))
    model = GatedOracle()
    app = create_app(model, "tiny")
    scheduler = app.state.scheduler
    with uvicorn_thread(app) as base, ThreadPoolExecutor(65) as pool:
        def solve(expr):
            return post(base + "/v1/completions", {"model": "caef-tiny", "prompt": expr}, DEADLINE_S)

        first = pool.submit(solve, "99999+1=")
        assert model.waiting.wait(DEADLINE_S)  # its first round is under way, alone
        sockets = [sent_whole(base, rows[i]["expr"]) for i in leaving]
        staying = {i: pool.submit(solve, rows[i]["expr"]) for i in range(64) if i not in leaving}
        wait_until(lambda: scheduler.queued == 64, "all 64 problems arrived")
        for sock in sockets:
            sock.close()  # hang up before the answer
        wait_until(lambda: scheduler.left == 8, "the server saw the 8 clients leave")
        model.gate.set()
        replies = {i: future.result() for i, future in staying.items()}
        assert first.result()[1]["choices"][0]["text"] == "100000"
        wait_until(lambda: not scheduler.rounds.active, "no problem left in flight")
        status, after = solve("123+877=")
        state = health(base)
    assert all(status == 200 for status, _ in replies.values())
    assert all(body["choices"][0]["text"] == rows[i]["answer"] for i, (_, body) in replies.items())
    assert (status, after["choices"][0]["text"]) == (200, "1000")
    assert state["status"] == "ok" and state["in_flight"] == 0 and state["queued"] == 0
    assert (state["left"], state["dropped"]) == (8, 8)
    assert state["widest_round"] == 57  # the 56 staying problems joined the first one's second round
    asked = [prompt for adapter, prompt in model.prompts if adapter == "aligner_add" and prompt.endswith("=")]
    assert sorted(asked) == sorted(["99999+1=", "123+877="] + [rows[i]["expr"] for i in staying])  # none twice


def test_the_endpoint_backend_reproduces_in_process_traces_through_serve():
    problems = [Problem(row["id"], row["expr"], row["answer"]) for row in EVERY_OPERATOR]
    here = solve_batch(problems, OracleModel(), mode="traced")
    with uvicorn_thread(create_app(OracleModel(), "tiny")) as base:
        endpoint = EndpointStepModel(base + "/v1/completions")
        there = solve_batch(problems, endpoint, mode="traced")
        assert endpoint.fingerprint.startswith("endpoint-") and endpoint.adapter_fingerprints == {}
    for a, b in zip(here, there):
        assert (b.answer, b.outcome, b.first_divergence) == (a.answer, a.outcome, None)
        assert [(s.adapter, s.input, s.output) for s in b.steps] == [(s.adapter, s.input, s.output) for s in a.steps]
    # one request per adapter and round, every prompt of the round in it
    assert endpoint.requests == sum(1 for _ in _rounds_by_adapter(problems))


def _rounds_by_adapter(problems):
    counter = OracleModel()
    solve_batch(problems, counter)
    return counter.calls


def test_the_endpoint_backend_on_the_tiny_tier_matches_in_process_decoding():
    from caef_bench.runtime.hf import load_step_model

    problem = [Problem("p", "12+34=", "46")]
    local = load_step_model("tiny")
    here = solve_batch(problem, local, mode="traced")[0]
    with uvicorn_thread(create_app(local, "tiny")) as base:  # from now on only the server's loop calls it
        endpoint = EndpointStepModel(base + "/v1")
        there = solve_batch(problem, endpoint, mode="traced")[0]
        assert endpoint.fingerprint == local.fingerprint  # the server names its weights: records go together
        assert endpoint.adapter_fingerprints == local.adapter_fingerprints
    assert there.final == here.final == "12+34=46"
    assert [s.output for s in there.steps] == [s.output for s in here.steps]


def test_the_endpoint_backend_says_what_went_wrong():
    with uvicorn_thread(create_app(OracleModel(), "tiny")) as base:
        endpoint = EndpointStepModel(base + "/v1", retries=2, backoff=0.01)
        with pytest.raises(EndpointError, match="400 unknown model 'executor_pow'"):
            endpoint.generate(["1+1="], "executor_pow")
    gone = EndpointStepModel(base + "/v1", retries=2, backoff=0.01)  # the server has stopped
    with pytest.raises(EndpointError, match="no answer after 2 tries"):
        gone.generate(["1+1="], "aligner_add")
    assert api_root("http://h:1/v1/completions/") == api_root("http://h:1") == "http://h:1/v1"


# --------------------------------------------------------------------------- plain lm-eval as the client


def _lm_eval_samples(model, model_args: str | None, limit: int = 5, task: str = "caef_add_5", **options) -> list[dict]:
    import lm_eval
    from lm_eval.tasks import TaskManager

    from caef_bench.paths import TASKS_DIR

    out = lm_eval.simple_evaluate(model=model, model_args=model_args, tasks=[task], limit=limit,
                                  task_manager=TaskManager(include_path=str(TASKS_DIR)), log_samples=True, **options)
    return sorted(out["samples"][task], key=lambda s: s["doc_id"])


def test_lm_evals_local_completions_scores_through_serve_what_caef_scores():
    from caef_bench.evaluate.lm_eval_models import CaefLM
    from caef_bench.serve.server import tier_tokenizer

    app = create_app(OracleModel(), "tiny", tokenizer=tier_tokenizer("tiny"))
    with uvicorn_thread(app) as base:
        served = _lm_eval_samples("local-completions",
                                  f"model=caef-tiny,base_url={base}/v1/completions,tokenized_requests=False")
        chat = _lm_eval_samples("local-chat-completions",
                                f"model=caef-tiny,base_url={base}/v1/chat/completions,tokenizer_backend=None",
                                task="caef_add_5_chat", apply_chat_template=True)
    assert [s["exact_match"] for s in chat] == [1.0] * 5
    direct = _lm_eval_samples(CaefLM(step_model=OracleModel()), None)
    assert [s["filtered_resps"] for s in served] == [s["filtered_resps"] for s in direct]
    assert [s["exact_match"] for s in served] == [1.0] * 5


@pytest.mark.slow
def test_the_endpoint_backend_reproduces_in_process_traces_of_every_operator_on_the_tiny_tier():
    from caef_bench.runtime.hf import load_step_model

    problems = [Problem(row["id"], row["expr"], row["answer"]) for row in EVERY_OPERATOR]
    local = load_step_model("tiny")
    here = solve_batch(problems, local, mode="traced")
    with uvicorn_thread(create_app(local, "tiny")) as base:
        there = solve_batch(problems, EndpointStepModel(base + "/v1"), mode="traced")
    for a, b in zip(here, there):
        assert (b.answer, b.outcome, b.first_divergence) == (a.answer, a.outcome, a.first_divergence)
        assert [(s.adapter, s.input, s.output) for s in b.steps] == [(s.adapter, s.input, s.output) for s in a.steps]
    assert all(is_correct(record) for record in here)


def test_the_caef_lm_eval_model_runs_on_an_endpoint(tmp_path):
    from lm_eval.api.instance import Instance

    from caef_bench.evaluate.lm_eval_models import CaefLM

    with uvicorn_thread(create_app(OracleModel(), "tiny")) as base:
        model = CaefLM(backend="openai", base_url=base + "/v1", records=str(tmp_path))
        requests = [Instance("generate_until", {}, (expr, {"until": ["\n"]}), idx=i)
                    for i, expr in enumerate(["45+67=", "7*3=", "12<3="])]
        assert model.generate_until(requests) == ["112", "21", "False"]
    assert model.records.parent.name.startswith("tiny-endpoint-")  # records of a server are kept apart


def test_the_vllm_system_runs_caef_here_and_its_steps_on_the_server(monkeypatch, tmp_path):
    from caef_bench.evaluate.systems import load_systems
    from caef_bench.evaluate.table1 import system_weights

    system = load_systems()["caef-llama-3.1-8b-vllm"]
    monkeypatch.delenv("CAEF_VLLM_BASE_URL", raising=False)
    assert system.unavailable() == "needs CAEF_VLLM_BASE_URL set" and system_weights(system) is None
    monkeypatch.setenv("CAEF_VLLM_BASE_URL", "http://gpu-host:8000/v1")
    argv = system.lm_eval_argv(["add_5"], 5, tmp_path, None)
    assert argv[:2] == ["--model", "caef"]
    assert "backend=openai,base_url=http://gpu-host:8000/v1" in argv[3] and "tier=llama-3.1-8b" in argv[3]


@pytest.mark.parametrize("argv, reason", [
    (["solve", "1+1=", "--backend", "openai"], "--backend openai needs --base-url"),
    (["solve", "1+1=", "--base-url", "http://h:1/v1"], "--base-url is for --backend openai"),
    (["solve", "1+1=", "--backend", "openai", "--base-url", "h:1"], "must be an http(s) address"),
    (["solve", "1+1=", "--backend", "openai", "--base-url", "http://h:1/v1", "--dtype", "bfloat16"],
     "--dtype is for the local backend"),
    (["run", "--suite", "table1", "--backend", "openai", "--base-url", "http://h:1/v1"], "not options of `caef-bench run table1`"),
])
def test_backend_options_that_do_not_fit_are_one_line_errors(argv, reason, capsys):
    from caef_bench.cli import main

    try:
        code = main(argv)
    except SystemExit as stop:  # argparse's own one-line error: options the suite's subcommand does not take
        code = stop.code
    assert code == 2
    err = capsys.readouterr().err
    assert reason in err and len(err.strip().splitlines()[-1]) < 300


def test_solve_through_serve_prints_the_answer(capsys):
    from caef_bench.cli import main

    with uvicorn_thread(create_app(OracleModel(), "tiny")) as base:
        assert main(["solve", "123-45=", "--backend", "openai", "--base-url", base + "/v1", "--trace"]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines()[-1] == "123-45=78" and "executor_reflection" in captured.out
    assert "requests to " + base + "/v1" in captured.err


def test_the_tokenizer_endpoints_lm_eval_asks_for(client):
    from fastapi.testclient import TestClient

    from caef_bench.serve.server import tier_tokenizer

    assert client.get("/tokenizer_info").status_code == 404  # a server made without one says so
    with TestClient(create_app(OracleModel(), "tiny", tokenizer=tier_tokenizer("tiny"))) as served:
        assert served.get("/tokenizer_info").json()["eos_token"] == "</s>"
        tokens = served.post("/tokenize", json={"prompt": "45+67=", "add_special_tokens": False}).json()["tokens"]
        assert served.post("/detokenize", json={"tokens": tokens}).json()["prompt"] == "45+67="
        assert served.post("/tokenize", content=b"{oops").status_code == 400
        assert served.post("/detokenize", json={"tokens": "12"}).status_code == 400


def test_run_solves_a_suite_through_serve(tmp_path):
    from caef_bench.cli import main

    with uvicorn_thread(create_app(OracleModel(), "tiny")) as base:
        assert main(["run", "--suite", "caef", "--cells", "add_5,mul_1_10", "--limit", "2", "--backend", "openai",
                     "--base-url", base + "/v1", "--out", str(tmp_path / "out"),
                     "--records", str(tmp_path / "records")]) == 0
    result = json.loads((tmp_path / "out" / "table1_caef.json").read_text())
    assert result["weights"].startswith("endpoint-")  # the oracle names no weights: records of this address
    assert all(cell["end_to_end"]["accuracy"] == 1.0 for cell in result["results"].values())
