"""`caef-bench run --suite long_mul_div` with no real model: CAEF answered by the machines (the oracle step model,
or a broken one) on a tiny tier given test-only long-route limits, the baselines' lm-eval samples faked. What
is checked is what the report says: a refusal is a cell not run with its reason (never a 0), a miss is classified
at its first divergence, resumed records are not solved again, intervals are Wilson's, and every number of a
cell recounts from the problem lines written beside it."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from fault_models import BrokenModel, wrong_digit

from caef_bench.cli import main
from caef_bench.data.testsets import load_cell
from caef_bench.evaluate import long_mul_div
from caef_bench.evaluate.long_mul_div import LongMulDivRequest, cell_summary, run_long_mul_div
from caef_bench.evaluate.scoring import wilson_interval
from caef_bench.evaluate.suites import cell_adapters
from caef_bench.evaluate.systems import System, load_systems
from caef_bench.evaluate.table1 import read_problem_lines
from caef_bench.machines.long_calls import call_count
from caef_bench.models.limits import TIER_LIMITS, long_route_adapters
from caef_bench.models.names import operator_adapters
from caef_bench.report.long_mul_div import long_mul_div_markdown, write_long_mul_div
from caef_bench.report.render import render_markdown
from caef_bench.runtime.oracle import OracleModel
from caef_bench.runtime.problem import reference_steps

LONG = {"long_mul_digits": 50, "long_div_digits": 100, "long_divisor_digits": 20, "long_measured": "a test's limits"}
PAPER_ADAPTERS = set(operator_adapters("mul")) | set(operator_adapters("div"))
LONG_ADAPTERS = set(long_route_adapters("mul")) | set(long_route_adapters("div"))


class Oracle(OracleModel):
    """The machines as a tier's step model: weights to name its records folder by, and every adapter."""

    fingerprint = "oracle000000"
    adapter_fingerprints = {name: "oracle" for name in LONG_ADAPTERS | PAPER_ADAPTERS}


class Broken(BrokenModel):
    fingerprint, adapter_fingerprints = Oracle.fingerprint, Oracle.adapter_fingerprints


class NeverCalled:
    fingerprint, adapter_fingerprints = Oracle.fingerprint, Oracle.adapter_fingerprints

    def generate(self, prompts, adapter):
        raise AssertionError("a problem held by the records was solved again")


@pytest.fixture
def long_tiny(monkeypatch):
    """The tiny tier with long-route limits (a test's: no tier ships them)."""
    monkeypatch.setitem(TIER_LIMITS, "tiny", replace(TIER_LIMITS["tiny"], **LONG))


@pytest.fixture
def caef(monkeypatch):
    """CAEF's model and adapters as a test sets them: `caef.adapters` (default every one, the long route's
    included) and `caef.model` (default the oracle), recording the ops each model was asked for."""
    class Caef:
        adapters = LONG_ADAPTERS | PAPER_ADAPTERS
        model = Oracle()
        asked: list = []

    monkeypatch.setattr(long_mul_div, "caef_adapters", lambda tier, checkpoints, args: Caef.adapters)

    def model(tier, checkpoints, args, request, ops):
        Caef.asked.append(ops)
        return Caef.model

    monkeypatch.setattr(long_mul_div, "caef_model", model)
    return Caef


def _request(tmp_path, names=("caef-tiny",), **fields) -> LongMulDivRequest:
    systems = load_systems()
    return LongMulDivRequest(command="caef-bench run --suite long_mul_div (a test)",
                             systems=tuple(systems[name] for name in names), work=tmp_path / "work",
                             records=tmp_path / "records", **fields)


def test_a_tier_without_a_long_route_is_not_run_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setattr(long_mul_div, "caef_model", lambda *args: pytest.fail("a model was loaded for refused cells"))
    document = run_long_mul_div(_request(tmp_path, limit=2), tmp_path / "out", say=lambda line: None)
    system = document["systems"]["caef-tiny"]
    assert system["cells"] == {} and "records" not in system and not (tmp_path / "out" / "records").exists()
    assert set(system["not_run"]) == {"mul_20x20", "mul_50x50", "div_40by20", "div_100by10"}
    assert system["not_run"]["mul_20x20"].startswith("the tiny tier supports mul with a of at most 10 digits and b "
                                                     "at most 15 (got a of 20 digits")
    assert "div with a divisor of at most 10 digits" in system["not_run"]["div_100by10"]
    text = long_mul_div_markdown(document)
    assert "| `caef-tiny` | mul_20x20 (20 x 20 digits)    | not run" in text and "0/" not in text
    assert f"- `caef-tiny`, mul_20x20: {system['not_run']['mul_20x20']}" in text
    assert "its tier's limits take no long route for them" in text and "--measure-long-route" in text


def test_without_the_long_routes_adapters_the_refusal_names_them(tmp_path, long_tiny, caef, monkeypatch):
    caef.adapters = PAPER_ADAPTERS
    monkeypatch.setattr(long_mul_div, "caef_model", lambda *args: pytest.fail("a model was loaded for refused cells"))
    document = run_long_mul_div(_request(tmp_path, cells=("mul_20x20", "div_40by20"), limit=1), tmp_path / "out",
                                say=lambda line: None)
    not_run = document["systems"]["caef-tiny"]["not_run"]
    assert "the long route calls aligner_long_mul, executor_long_mul, executor_digit_mul, which the model lacks" \
        in not_run["mul_20x20"]
    assert "the long route calls aligner_long_div, executor_long_div, executor_reflection" in not_run["div_40by20"]
    assert "the long route's adapters are missing. Next: train them" in long_mul_div_markdown(document)


def test_the_oracle_answers_every_long_cell_on_the_long_route_at_the_machines_count(tmp_path, long_tiny, caef):
    out = tmp_path / "out"
    document = run_long_mul_div(_request(tmp_path, limit=1), out, say=lambda line: None)
    system = document["systems"]["caef-tiny"]
    assert system["not_run"] == {} and caef.asked == [["long_div", "long_mul"]]
    assert system["routes"] == dict.fromkeys(["mul_20x20", "mul_50x50", "div_40by20", "div_100by10"], "long")
    assert system["weights"] == Oracle.fingerprint and system["records"] == "records/long_mul_div/caef-tiny.jsonl.gz"
    lines = read_problem_lines(out / system["records"])
    for cell, stats in system["cells"].items():
        (row,) = load_cell(cell)[:1]
        (line,) = [line for line in lines if line["cell"] == cell]
        assert (line["id"], line["reply"], line["correct"]) == (row["id"], row["answer"], True)
        assert line["caef"]["route"] == "long" and line["caef"]["steps"] == [] and line["caef"]["first_divergence"] is None
        op = "long_mul" if cell.startswith("mul") else "long_div"
        calls = call_count(op, int(row["a"]), int(row["b"])).total
        assert (stats["n"], stats["correct"], stats["exact_traces"], stats["failures"]) == (1, 1, 1, [])
        assert stats["model_calls_mean"] == stats["expected_calls_mean"] == calls
        assert stats["model_seconds_mean"] >= 0 and stats["outcomes"] == {"ok": 1}
        assert (stats["ci_low"], stats["ci_high"]) == pytest.approx(wilson_interval(1, 1))
        assert cell_summary([line]) == stats  # the report's numbers are its lines'
    # the report renders from its JSON alone, and says each run was measured against the machines' count
    paths = write_long_mul_div(document, out)
    assert [path.name for path in paths] == ["long_mul_div.md", "long_mul_div.json", "long_mul_div.png"]
    assert render_markdown(json.loads(paths[1].read_text())) == ("long_mul_div.md", paths[0].read_text())
    calls = call_count("long_mul", *map(int, (load_cell("mul_20x20")[0][k] for k in "ab"))).total
    row = next(line for line in paths[0].read_text().splitlines() if line.startswith("| `caef-tiny` | mul_20x20"))
    assert [cell.strip() for cell in row.split("|")[3:5]] == [
        f"100% [{100 * wilson_interval(1, 1)[0]:.1f}, 100.0] (1/1)", f"{calls:,}.0 ({calls:,}.0)"]


def _digit_mul_step(expr: str, k: int):
    """The k-th DIGIT_MUL call of a correct long-route run of expr (its prompt is unique in that run)."""
    return [step for step in reference_steps(expr, route="long") if step.adapter == "executor_digit_mul"][k]


def test_a_miss_is_classified_at_its_first_divergence(tmp_path, long_tiny, caef):
    first = load_cell("mul_20x20")[0]
    step = _digit_mul_step(first["expr"], 3)
    caef.model = Broken(wrong_digit, lambda adapter, prompt: adapter == step.adapter and prompt == step.input)
    document = run_long_mul_div(_request(tmp_path, cells=("mul_20x20",), limit=2), tmp_path / "out",
                                say=lambda line: None)
    stats = document["systems"]["caef-tiny"]["cells"]["mul_20x20"]
    assert (stats["n"], stats["correct"]) == (2, 1)
    assert (stats["accuracy"], stats["ci_low"], stats["ci_high"]) == pytest.approx((0.5, *wilson_interval(1, 2)))
    assert (round(stats["ci_low"], 3), round(stats["ci_high"], 3)) == (0.095, 0.905)
    (failure,) = stats["failures"]
    assert (failure["id"], failure["where"], failure["component"], failure["machine"], failure["what"]) == (
        first["id"], "executor", "executor_digit_mul", "DIGIT_MUL", "wrong_digit")
    assert failure["target"] == first["answer"] and "⟦" in failure["expected"]
    lines = read_problem_lines(tmp_path / "out" / document["systems"]["caef-tiny"]["records"])
    assert cell_summary(lines) == json.loads(json.dumps(stats))  # as the committed JSON would recount
    text = long_mul_div_markdown(document)
    assert "executor DIGIT_MUL: wrong_digit 1" in text and f"`{first['id']}`" in text  # counted, then listed
    assert "not shown: N=2 < 100" in text and "run the whole cells" in text
    # held to the standard at this N, the report names where the misses are and the next step
    document["standard"]["n"] = {**document["standard"]["n"], "mul_20x20": 2}
    text = long_mul_div_markdown(document)
    assert "short: 1 of 2" in text and "at `executor_digit_mul` (1 of 1)" in text and "--adapter-init" in text


def test_resumed_records_are_not_solved_again(tmp_path, long_tiny, caef):
    request = _request(tmp_path, cells=("mul_20x20",), limit=2)
    first = run_long_mul_div(request, tmp_path / "out", say=lambda line: None)
    assert first["systems"]["caef-tiny"]["resumed"] == {"mul_20x20": 0}
    caef.model = NeverCalled()
    again = run_long_mul_div(request, tmp_path / "again", say=lambda line: None)
    assert again["systems"]["caef-tiny"]["resumed"] == {"mul_20x20": 2}
    assert again["systems"]["caef-tiny"]["cells"] == first["systems"]["caef-tiny"]["cells"]
    caef.model = Oracle()  # one more problem: only it is solved (its two aligner calls, no other problem's)
    more = run_long_mul_div(replace(request, limit=3), tmp_path / "more", say=lambda line: None)
    assert more["systems"]["caef-tiny"]["resumed"] == {"mul_20x20": 2}
    assert sum(n for adapter, n in caef.model.calls if adapter == "aligner_long_mul") == 2
    assert more["systems"]["caef-tiny"]["cells"]["mul_20x20"]["correct"] == 3


def test_measuring_runs_the_long_route_past_the_tiers_limits_with_its_adapters(tmp_path, caef):
    request = _request(tmp_path, cells=("div_40by20",), limit=1, measure_long_route=True)
    document = run_long_mul_div(request, tmp_path / "out", say=lambda line: None)
    system = document["systems"]["caef-tiny"]
    assert system["routes"] == {"div_40by20": "long"} and system["cells"]["div_40by20"]["correct"] == 1
    assert "--measure-long-route" in system["measured_past_tier_limits"]
    assert "measured past the tier's limits" in long_mul_div_markdown(document)
    caef.adapters = PAPER_ADAPTERS  # measuring still needs the long route's adapters
    document = run_long_mul_div(request, tmp_path / "out", say=lambda line: None)
    assert "which the model lacks" in document["systems"]["caef-tiny"]["not_run"]["div_40by20"]


def _sample(row, reply):
    return {"doc": row, "filtered_resps": [reply], "exact_match": float(reply == row["answer"])}


def test_a_baselines_replies_are_scored_and_each_wrong_one_classified(tmp_path, monkeypatch):
    rows = load_cell("mul_20x20")[:3]
    off = rows[1]["answer"][:-1] + str((int(rows[1]["answer"][-1]) + 1) % 10)  # its last digit wrong
    samples = [_sample(rows[2], ""), _sample(rows[0], rows[0]["answer"]), _sample(rows[1], off)]  # (not in order)
    monkeypatch.setattr(long_mul_div, "why_not", lambda system, cells: None)
    monkeypatch.setattr(long_mul_div, "run_system", lambda system, cells, limit, work, say: {
        "command": "caef-bench lm-eval --model caef-direct ...", "limit": limit, "weights": "w0", "cells": {}})
    monkeypatch.setattr(long_mul_div, "read_samples", lambda folder, system, cells: {"mul_20x20": samples})
    out = tmp_path / "out"
    document = run_long_mul_div(_request(tmp_path, ("lora-direct-tiny-protocol",), cells=("mul_20x20",), limit=3),
                                out, say=lambda line: None)
    system = document["systems"]["lora-direct-tiny-protocol"]
    assert (system["kind"], system["style"], system["weights"]) == ("lm-eval", "direct", "w0")
    stats = system["cells"]["mul_20x20"]
    assert (stats["n"], stats["correct"]) == (3, 1)
    assert (stats["ci_low"], stats["ci_high"]) == pytest.approx(wilson_interval(1, 3))
    wrong, empty = stats["failures"]
    assert (wrong["id"], wrong["where"], wrong["what"]) == (rows[1]["id"], "answer", "wrong_digit")
    assert (empty["id"], empty["where"], empty["what"]) == (rows[2]["id"], "unparseable output", "malformed")
    lines = read_problem_lines(out / system["records"])
    assert [line["id"] for line in lines] == [row["id"] for row in rows]  # in the cell's order
    assert cell_summary(lines, "direct") == stats
    text = long_mul_div_markdown(document)
    assert "33.3% [" in text and "answer: wrong_digit 1; unparseable output: malformed 1" in text
    assert "1 reply" in text and "model seconds a problem" in text


def test_a_baseline_without_its_operators_adapters_is_not_run(tmp_path, monkeypatch):
    system = System(name="direct-here", model="caef-direct", tasks="caef_table1_direct",
                    model_args={"tier": "tiny", "checkpoints": str(tmp_path / "no-such-adapters")})
    monkeypatch.setattr(long_mul_div, "run_system", lambda *args: pytest.fail("lm-eval ran a cell it cannot"))
    request = LongMulDivRequest(command="(a test)", systems=(system,), cells=("div_40by20",), work=tmp_path)
    entry = run_long_mul_div(request, tmp_path / "out", say=lambda line: None)["systems"]["direct-here"]
    assert entry["cells"] == {} and "no-such-adapters" in entry["not_run"]["div_40by20"]


def test_a_long_cell_calls_the_long_routes_adapters():
    assert cell_adapters("mul_20x20") == set(long_route_adapters("mul"))
    assert cell_adapters("div_100by10") == set(long_route_adapters("div"))


def test_limits_are_one_n_per_system():
    with pytest.raises(ValueError, match="one N per system"):
        LongMulDivRequest(command="", systems=(), limits={"caef-tiny@mul_*": 2})
    request = LongMulDivRequest(command="", systems=(), limit=5, limits={"caef-tiny": 2})
    systems = load_systems()
    assert request.limit_of(systems["caef-tiny"]) == 2 and request.limit_of(systems["lora-direct-tiny"]) == 5
    assert LongMulDivRequest(command="", systems=()).limit_of(systems["caef-tiny"]) is None  # the whole cell


def test_the_command_writes_the_report_and_refuses_before_any_model(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(long_mul_div, "caef_model", lambda *args: pytest.fail("a model was loaded for refused cells"))
    assert main(["run", "--suite", "long_mul_div", "--systems", "caef-tiny", "--cells", "mul_*", "--limit", "1",
                 "--out", str(tmp_path), "--records", str(tmp_path / "records")]) == 0
    assert "wrote " + str(tmp_path / "long_mul_div.json") in capsys.readouterr().out
    document = json.loads((tmp_path / "long_mul_div.json").read_text())
    assert list(document["cells"]) == ["mul_20x20", "mul_50x50"] and document["command"].startswith("caef-bench run")
    assert set(document["systems"]["caef-tiny"]["not_run"]) == {"mul_20x20", "mul_50x50"}
    assert {anchor["arxiv"] for anchor in document["anchors"]} == {"2410.15787", "2311.14737", "2405.14838"}


def test_each_anchor_says_where_it_was_read():
    for anchor in long_mul_div.anchors():
        assert anchor["task"] == "multiplication" and anchor["a_digits"] and anchor["b_digits"]
        assert anchor["read_in"] and anchor["reach_read_in"]
        if "second-hand" in anchor["reach_read_in"]:  # a figure not found in the paper itself, so marked
            assert anchor["as_cited"]

