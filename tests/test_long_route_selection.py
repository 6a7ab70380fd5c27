"""Which route `solve`, `serve` and the lm-eval `caef` model run a mul/div problem on (docs/long-mul-div.md):
the paper's within its limits; the long route (LONG_MUL, LONG_DIV) past them, where a tier's limits give the
long route's lengths and the model has its adapters; otherwise the one-line refusal naming the limit.

No shipped tier has long-route limits (nothing is trained), so these tests give the tiny tier test-only ones
(`long_tiny`) and answer with the oracle step model."""

from dataclasses import replace
from pathlib import Path

import pytest
from lm_eval.api.instance import Instance

from caef_bench.cli import main
from caef_bench.data.testsets import load_cell
from caef_bench.evaluate.lm_eval_models import CaefLM
from caef_bench.machines import parse_expression
from caef_bench.machines.long_calls import call_count
from caef_bench.models.limits import (TIER_LIMITS, BeyondTierError, _limits, check_lengths, long_route_adapters,
                                      route_within_tier, supported_problem)
from caef_bench.models.names import operator_adapters
from caef_bench.models.tiers import TierFile
from caef_bench.runtime import load_records
from caef_bench.runtime.oracle import OracleModel

MUL_20 = "12345678901234567890*98765432109876543210="
DIV_40 = "1234567890123456789012345678901234567890//98765432109876543210="
LONG = {"long_mul_digits": 50, "long_div_digits": 100, "long_divisor_digits": 20, "long_measured": "a test's limits"}
PAPER_ADAPTERS = set(operator_adapters("mul")) | set(operator_adapters("div"))
LONG_ADAPTERS = set(long_route_adapters("mul")) | set(long_route_adapters("div"))


@pytest.fixture
def long_tiny(monkeypatch):
    """The tiny tier with long-route limits (a test's: no tier ships them)."""
    limits = replace(TIER_LIMITS["tiny"], **LONG)
    monkeypatch.setitem(TIER_LIMITS, "tiny", limits)
    return limits


class NeverCalled:
    fingerprint = "none"

    def __init__(self, adapters=None):
        self.available_adapters = adapters

    def generate(self, prompts, adapter):
        raise AssertionError("a model call was made for an expression the tier cannot run")


class Counting(OracleModel):
    def __init__(self, adapters=None):
        super().__init__()
        self.available_adapters = adapters


class SolveOracle(OracleModel):
    """The oracle as `solve` reports an endpoint's cost."""
    requests, root = 0, "the oracle"


def _requests(contexts):
    return [Instance("generate_until", {}, (context, {"until": ["\n"]}), idx=i) for i, context in enumerate(contexts)]


def test_no_shipped_tier_has_a_long_route_yet():
    for tier, limits in TIER_LIMITS.items():
        assert limits.long_digits("mul") is None and limits.long_digits("div") is None, tier
        with pytest.raises(BeyondTierError, match=f"the {tier} tier supports mul with a of at most"):
            supported_problem(tier, MUL_20)
        info = CaefLM(tier=tier, step_model=NeverCalled()).get_model_info()
        assert "long" not in info["caef_routes"] and info["caef_routes"]["paper"]["mul"]["b_at_most"] == 15


def test_the_adapters_each_operator_calls_on_the_long_route():
    assert long_route_adapters("mul") == ("aligner_long_mul", "executor_long_mul", "executor_digit_mul", "executor_add")
    assert long_route_adapters("div") == ("aligner_long_div", "executor_long_div", "executor_reflection",
                                          "executor_add")


def test_the_route_is_the_papers_within_its_limits_and_the_long_one_past_them(long_tiny):
    def route(expr, adapters=None):
        return route_within_tier("tiny", parse_expression(expr), adapters=adapters)

    for expr in ["45+67=", "9999999999*15=", "149999999985//9999999999=", "0*0=", "7//9="]:
        assert route(expr, adapters=set()) == "paper", expr  # the long route's adapters are not even asked for
    for expr in [MUL_20, "1" * 50 + "*" + "9" * 50 + "=", "12345678901*3=", "5*16=", DIV_40, "1000//7=",
                 "9" * 100 + "//" + "7" * 20 + "="]:
        assert route(expr) == "long", expr  # a bare base (None) answers every call
        assert route(expr, adapters=LONG_ADAPTERS) == "long", expr
        assert route(expr, adapters=lambda: LONG_ADAPTERS | PAPER_ADAPTERS) == "long", expr


@pytest.mark.parametrize("expr, named", [
    ("1" * 51 + "*3=", "mul with a of at most 10 digits and b at most 15, or on the long route factors of at most 50 "
                       "digits each (got a of 51 digits and b of 1 digit)"),
    ("3*" + "1" * 51 + "=", "(got a of 1 digit and b of 51 digits)"),
    ("1" * 101 + "//3=", "div with a divisor of at most 10 digits and a quotient at most 15, or on the long route a "
                         "dividend of at most 100 digits over a divisor of at most 20 (got a of 101 digits and a "
                         "divisor of 1 digit)"),
    ("1" * 40 + "//" + "3" * 21 + "=", "a divisor of at most 20 (got a of 40 digits and a divisor of 21 digits)"),
])
def test_past_both_routes_the_refusal_names_both_limits(long_tiny, expr, named):
    with pytest.raises(BeyondTierError, match="the tiny tier supports") as error:
        route_within_tier("tiny", parse_expression(expr), adapters=LONG_ADAPTERS)
    assert named in str(error.value) and "the long route as measured (a test's limits)" in str(error.value)
    assert "\n" not in str(error.value)


def test_without_the_long_routes_adapters_the_papers_limit_is_the_refusal_and_names_them(long_tiny):
    with pytest.raises(BeyondTierError, match="or on the long route factors of at most 50 digits") as error:
        route_within_tier("tiny", parse_expression(MUL_20), adapters=PAPER_ADAPTERS)
    assert "the long route calls aligner_long_mul, executor_long_mul, executor_digit_mul, which the model lacks" \
        in str(error.value)
    with pytest.raises(BeyondTierError, match="aligner_long_div, executor_long_div, executor_reflection, which"):
        route_within_tier("tiny", parse_expression(DIV_40), adapters=PAPER_ADAPTERS)


def test_operands_longer_than_python_reads_name_the_long_routes_length(long_tiny):
    with pytest.raises(BeyondTierError, match=r"div operands of at most 100 digits \(got 4400\)"):
        check_lengths("tiny", "9" * 4400 + "//7=")


def test_a_tier_file_gives_the_long_routes_limits_and_they_are_checked(tmp_path):
    tiny = TierFile("tiny", tmp_path / "t.yaml", 1, {}, {}, "float32", "recorded", "", {})
    limits = _limits(replace(tiny, limits={**LONG, "long_div_digits": 40}))
    assert (limits.long_digits("mul"), limits.long_digits("div")) == ((50, 50), (40, 20))
    assert _limits(tiny).long_digits("mul") is None  # absent: no long route
    for bad, named in [({"long_mul_digits": 1001, "long_measured": "x"}, "0 \\(none\\) to 1000 digits"),
                       ({"long_div_digits": 40, "long_measured": "x"}, "go together"),
                       ({"long_mul_digits": 20}, "long_measured")]:
        with pytest.raises(ValueError, match=named):
            _limits(replace(tiny, limits=bad))


def test_solve_runs_a_20_digit_product_on_the_long_route(long_tiny, monkeypatch, capsys):
    import caef_bench.commands.common as common
    import caef_bench.commands.solve as solve

    asked = {}

    def oracle(args, ops=None):
        asked["ops"] = ops
        return SolveOracle()

    monkeypatch.setattr(common, "step_model", oracle)
    monkeypatch.setattr(solve, "_adapters", lambda args: LONG_ADAPTERS | PAPER_ADAPTERS)
    assert main(["solve", MUL_20.replace("*", " * ").rstrip("=")]) == 0
    out = capsys.readouterr()
    assert out.out.strip() == MUL_20 + str(12345678901234567890 * 98765432109876543210)
    calls = call_count("long_mul", 12345678901234567890, 98765432109876543210).total  # a correct run's
    assert asked["ops"] == ["long_mul"] and out.err.startswith(f"{calls} model calls, 0 requests")
    assert main(["solve", "45*12="]) == 0 and asked["ops"] == ["mul"]  # within the paper's limits: its route
    assert capsys.readouterr().out.strip() == "45*12=540"


def test_solve_refuses_on_a_tier_whose_adapters_lack_the_long_routes(long_tiny, monkeypatch, capsys):
    import caef_bench.commands.common as common
    import caef_bench.commands.solve as solve

    monkeypatch.setattr(common, "step_model", lambda args, ops=None: NeverCalled())
    monkeypatch.setattr(solve, "_adapters", lambda args: PAPER_ADAPTERS)
    assert main(["solve", DIV_40]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the long route calls aligner_long_div" in err


def test_the_shipped_tiny_adapters_lack_the_long_routes(long_tiny, capsys):
    """With long limits but the shipped folder's adapters (none of the long route's): the paper's refusal, exit 2,
    before the base loads."""
    if not Path("checkpoints/tiny/executors").is_dir():
        pytest.skip("no shipped tiny adapters here")
    assert main(["solve", MUL_20]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the long route calls aligner_long_mul" in err


def test_the_caef_lm_eval_model_takes_the_long_route_and_records_it(long_tiny, tmp_path):
    rows = load_cell("mul_20x20")[:1] + load_cell("div_40by20")[:1]
    oracle = Counting(LONG_ADAPTERS | PAPER_ADAPTERS)
    model = CaefLM(step_model=oracle, records=str(tmp_path))
    answers = model.generate_until(_requests([row["expr"] for row in rows] + ["45*12="]))
    assert answers == [row["answer"] for row in rows] + ["540"]
    records = {record.expr: record for record in load_records(model.records)}
    assert [records[row["expr"]].route for row in rows] == ["long", "long"] and records["45*12="].route is None
    assert {"executor_long_mul", "executor_digit_mul", "executor_long_div"} <= {adapter for adapter, _ in oracle.calls}
    routes = model.get_model_info()["caef_routes"]
    assert routes["long"] == {"mul": {"a_digits": 50, "b_digits": 50, "measured_to": "a test's limits"},
                              "div": {"a_digits": 100, "b_digits": 20, "measured_to": "a test's limits"}}


def test_the_caef_lm_eval_model_without_the_long_adapters_refuses_before_any_call(long_tiny):
    model = CaefLM(step_model=NeverCalled(PAPER_ADAPTERS | {"aligner_long_mul"}))
    assert "long" not in model.get_model_info()["caef_routes"]
    with pytest.raises(BeyondTierError, match="the long route calls executor_long_mul, executor_digit_mul, which"):
        model.generate_until(_requests(["45*12=", MUL_20]))


def test_serve_answers_a_long_route_problem_and_refuses_past_it(long_tiny):
    from fastapi.testclient import TestClient

    from caef_bench.serve.app import create_app

    with TestClient(create_app(OracleModel(), "tiny")) as client:
        reply = client.post("/v1/completions", json={"model": "caef-tiny", "prompt": [MUL_20, "45*12="]})
        assert reply.status_code == 200, reply.text
        texts = [choice["text"] for choice in reply.json()["choices"]]
        assert texts == [str(12345678901234567890 * 98765432109876543210), "540"]
        chat = client.post("/v1/chat/completions", json={
            "model": "caef-tiny", "messages": [{"role": "user", "content": f"The expression is: {DIV_40}."}]})
        assert chat.status_code == 200, chat.text
        assert chat.json()["choices"][0]["message"]["content"].endswith(
            f"Answer: {1234567890123456789012345678901234567890 // 98765432109876543210}")
        refused = client.post("/v1/completions", json={"model": "caef-tiny", "prompt": "1" * 51 + "*3="})
        assert refused.status_code == 400 and "or on the long route factors of at most 50" in refused.text
