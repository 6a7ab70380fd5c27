"""The long route through the runtime: `a*b=` and `a//b=` answered by schoolbook multiplication and long
division (LONG_MUL, LONG_DIV; docs/long-mul-div.md) with the same Attempt/Rounds machinery as every
operator: aligner (I) -> composer steps -> [CALL] DIGIT_MUL / ADD / REFLECTION frames -> returns -> halt
-> aligner (O). The oracle step model stands in for trained adapters; broken variants of it check that a
wrong step is caught, not answered.
"""

from __future__ import annotations

import re

import pytest

from caef_bench.data.testsets import load_cell
from caef_bench.evaluate.scoring import is_correct
from caef_bench.machines import (EXECUTOR_OPS, ALIGNED_OPS, align_input, align_output, classify, next_text, parse,
                                 render, routed, run, start_misalignment, typed_expression)
from caef_bench.machines.long_calls import call_count
from caef_bench.models.names import adapter_name, executor_of_machine, operator_adapters, split_adapter_name
from caef_bench.runtime import Problem, load_records, reference_step_count, reference_steps, solve_batch
from caef_bench.runtime.oracle import OracleError, OracleModel
from caef_bench.runtime.records import ProblemRecord
from fault_models import BrokenModel, wrong_digit

# What a person types: long operands, runs of 9s, round numbers, b = 1, a < b, equal operands, one digit
# against twenty, zeros.
TYPED = [
    "12345678901234567890*98765432109876543210",
    "99999999999999999999 * 99999999999999999999",
    "100000000000000000000 * 1000000000",
    "7 * 12345678901234567890",
    "12345678901234567890 * 7",
    "31415926535897932384 * 1",
    "55555555555555555555*55555555555555555555",
    "123456789 * 0",
    "0 * 98765432109876543210",
    "12345678901234567890123456789012345678901234567890 // 98765432109876543210",
    "99999999999999999999999999999999999999999 // 9999999999",
    "100000000000000000000000000000 // 10",
    "98765432109876543210 // 1",
    "12345 // 98765432109876543210",
    "55555555555555555555 // 55555555555555555555",
    "98765432109876543210 // 7",
    "7 // 98765432109876543210",
    "0 // 5",
]


def _problem(text: str, index: int = 0) -> Problem:
    expr = typed_expression(text)
    a, symbol, b = expr[:-1].partition("//") if "//" in expr else expr[:-1].partition("*")
    answer = int(a) // int(b) if symbol == "//" else int(a) * int(b)
    return Problem(f"p{index}", expr, str(answer), route="long")


def _op_and_operands(expr: str) -> tuple[str, int, int]:
    if "//" in expr:
        a, _, b = expr[:-1].partition("//")
        return "long_div", int(a), int(b)
    a, _, b = expr[:-1].partition("*")
    return "long_mul", int(a), int(b)


def test_typed_problems_are_solved_right_end_to_end_traced():
    problems = [_problem(text, i) for i, text in enumerate(TYPED)]
    model = OracleModel()
    records = solve_batch(problems, model, mode="traced")
    for problem, record in zip(problems, records):
        op, a, b = _op_and_operands(problem.expr)
        assert (record.outcome, record.answer) == ("answered", problem.target), (problem.expr, record.detail)
        assert is_correct(record) and record.first_divergence is None
        assert record.route == "long"
        assert record.n_steps == call_count(op, a, b).total == reference_step_count(run(op, a, b))
        assert record.n_steps <= record.step_budget
        steps = record.steps
        assert steps[0].adapter == steps[-1].adapter == f"aligner_{op}"
        assert (steps[0].input, steps[-1].output) == (problem.expr, f"{problem.expr}{problem.target}")
        assert {s.adapter for s in steps} <= set(operator_adapters(op))
        assert all(s.error_class is None for s in steps)
        # the callees run one call deep, the composer and the aligners at the top
        assert {s.depth for s in steps if s.adapter.startswith("aligner_") or s.adapter == f"executor_{op}"} == {0}
        assert {s.depth for s in steps if s.adapter not in (f"aligner_{op}", f"executor_{op}")} <= {1}
    # every step is one prompt of a generate call; the problems in flight share their calls (one per adapter a round)
    assert sum(n for _, n in model.calls) == sum(r.n_steps for r in records) > len(model.calls)


def test_every_adapter_of_the_long_route_is_called():
    product = _problem("946 * 15")
    quotient = _problem("1000 // 7", 1)
    model = OracleModel()
    records = solve_batch([product, quotient], model, mode="traced")
    assert [r.answer for r in records] == ["14190", "142"]
    assert {adapter for adapter, _ in model.calls} == {
        "aligner_long_mul", "executor_long_mul", "executor_digit_mul", "executor_add",
        "aligner_long_div", "executor_long_div", "executor_reflection"}
    calls = [s.adapter for s in records[1].steps]
    # LONG_DIV makes b's complement once (REFLECTION, then ADD of 1), then only ADD calls
    assert calls.count("executor_reflection") == len(run("reflection", 99, 7))


@pytest.mark.parametrize("cell", ["mul_20x20", "mul_50x50", "div_40by20", "div_100by10"])
def test_a_problem_of_each_test_cell(cell):
    row = load_cell(cell)[0]
    (record,) = solve_batch([Problem(row["id"], row["expr"], row["answer"], route="long")], OracleModel(),
                            mode="traced", keep_steps=False)
    op = routed(row["op"], "long")
    assert (record.outcome, record.answer, record.first_divergence) == ("answered", row["answer"], None)
    assert record.n_steps == call_count(op, int(row["a"]), int(row["b"])).total


def test_teacher_forcing_and_free_mode_on_the_long_route():
    problem = _problem("98765432109876543210 // 12345")
    (forced,) = solve_batch([problem], OracleModel(), mode="traced", teacher_forcing=True)
    (free,) = solve_batch([problem], OracleModel(), mode="free")
    assert forced.answer == free.answer == problem.target
    assert forced.n_divergent_steps == 0 and forced.n_steps == free.n_steps
    assert [s.input for s in forced.steps] == [s.input for s in reference_steps(problem.expr, "long")]


def test_the_route_picks_the_machine_and_leaves_the_other_operators_alone():
    paper, long = solve_batch([Problem("a", "89*3=", "267"), Problem("b", "89*3=", "267", route="long")],
                              OracleModel(), mode="traced")
    assert paper.answer == long.answer == "267"
    assert paper.steps[0].adapter == "aligner_mul" and paper.steps[1].input.startswith("MUL, q0")
    assert long.steps[0].adapter == "aligner_long_mul" and long.steps[1].input.startswith("LONG_MUL, q0")
    assert paper.route is None and long.route == "long"
    (addition,) = solve_batch([Problem("c", "45+67=", "112", route="long")], OracleModel(), mode="traced")
    assert addition.answer == "112" and {s.adapter for s in addition.steps} == {"aligner_add", "executor_add"}
    (unknown,) = solve_batch([Problem("d", "45*67=", route="schoolbook")], OracleModel())
    assert unknown.outcome == "error" and "unknown route" in unknown.detail
    (by_zero,) = solve_batch([Problem("e", "45//0=", route="long")], OracleModel())
    assert by_zero.outcome == "error" and "division by zero" in by_zero.detail


def test_records_keep_the_route_and_read_back(tmp_path):
    from caef_bench.runtime import solve_to_file

    path = tmp_path / "records.jsonl"
    solve_to_file([_problem("946 * 15"), Problem("p1", "946*15=", "14190")], OracleModel(), path, mode="traced")
    long, paper = load_records(path)
    assert (long.route, paper.route) == ("long", None)
    assert "route" not in paper.to_dict()  # records of the paper's route are written as before
    assert ProblemRecord.from_dict(long.to_dict()) == long


# --------------------------------------------------------------------------- wrong model outputs


def _steps_of(expr: str, adapter: str) -> list[int]:
    return [k for k, step in enumerate(reference_steps(expr, "long")) if step.adapter == adapter]


def _trigger(expr: str, k: int):
    """Fires at step k of a correct run on expr (long route), problem by problem: a prompt can come back
    within one run (DIGIT_MUL(a, d) for each repeat of the digit d in b), so it counts the repeats."""
    reference = list(reference_steps(expr, "long"))
    step = reference[k]
    before = sum((s.adapter, s.input) == (step.adapter, step.input) for s in reference[:k])
    seen = []

    def fires(adapter: str, prompt: str) -> bool:
        if (adapter, prompt) != (step.adapter, step.input):
            return False
        seen.append(prompt)
        return len(seen) == before + 1

    return fires


def _digit_mul_steps(expr: str, halt: bool) -> list[int]:
    """The DIGIT_MUL steps of a correct run on expr whose output state ends in a product digit: a q1 state
    with the digit it wrote before [OUTPUT], or (halt) the halt state."""
    state_lines = [(k, step.output.split("\n")[0]) for k, step in enumerate(reference_steps(expr, "long"))
                   if step.adapter == "executor_digit_mul"]
    if halt:
        return [k for k, line in state_lines if line.startswith("DIGIT_MUL, qH")]
    return [k for k, line in state_lines if re.search(r"\|[0-9]\[OUTPUT\]$", line)]


@pytest.mark.parametrize("mode", ["traced", "free"])
@pytest.mark.parametrize("where", ["middle", "halt"])
def test_a_wrong_digit_mul_digit_is_a_divergence_not_a_right_answer(mode, where):
    """One DIGIT_MUL output digit one too high (in a step inside a partial product, or in the halt state
    that LONG_MUL then reads): traced mode records that step as the first divergence, and no mode
    reports the right answer."""
    problem = _problem("12345678901234567890*98765432109876543210")
    reference = list(reference_steps(problem.expr, "long"))
    candidates = _digit_mul_steps(problem.expr, halt=where == "halt")
    k = candidates[len(candidates) // 2]
    model = BrokenModel(wrong_digit, _trigger(problem.expr, k))
    (record,) = solve_batch([problem], model, mode=mode)
    assert model.faults == 1
    assert not is_correct(record) and record.answer != problem.target
    assert record.outcome != "answered"  # the oracle has no step off the machine's course: the run stops
    if mode == "traced":
        divergence = record.first_divergence
        assert (divergence.step, divergence.adapter, divergence.depth) == (k, "executor_digit_mul", 1)
        assert divergence.error_class == "wrong_digit" == classify(reference[k].output, divergence.got)
        assert divergence.expected == reference[k].output
        assert all(step.error_class is None for step in record.steps[:k])
    else:
        assert record.first_divergence is None


def test_the_halt_of_a_wrong_product_is_a_wrong_result_in_traced_mode():
    """A wrong digit in LONG_MUL's halt state reaches aligner (O), which reads it faithfully: the answer
    is wrong (not silently right), and traced mode names the composer's step."""
    problem = _problem("946 * 15")
    reference = list(reference_steps(problem.expr, "long"))
    k = len(reference) - 2  # the composer's step into qH
    assert reference[k].adapter == "executor_long_mul" and reference[k].output.startswith("LONG_MUL, qH")
    (record,) = solve_batch([problem], BrokenModel(wrong_digit, _trigger(problem.expr, k)), mode="traced")
    assert (record.outcome, record.answer) == ("answered", "24190")  # the product's top digit, one too high
    assert not is_correct(record)
    assert (record.first_divergence.step, record.first_divergence.error_class) == (k, "wrong_digit")


def test_an_aligner_that_starts_the_paper_machine_or_copies_an_operand_wrong_is_misaligned():
    problem = _problem("946 * 15")
    paper_start = align_input(problem.expr)  # MUL's start, for a problem on the long route
    model = BrokenModel(lambda prompt, output: paper_start,
                        lambda adapter, prompt: adapter == "aligner_long_mul" and prompt == problem.expr)
    (record,) = solve_batch([problem], model, mode="traced")
    assert record.outcome == "misaligned" and "started MUL for LONG_MUL" in record.detail
    long_start = align_input(problem.expr, route="long")
    assert start_misalignment(problem.expr, parse(long_start), "long") is None
    assert "operand a as 947" in start_misalignment(problem.expr, parse(long_start.replace("|6|4|9", "|7|4|9")),
                                                      "long")
    assert "started LONG_MUL for MUL" in start_misalignment(problem.expr, parse(long_start))


def test_a_digit_mul_step_that_rewrites_its_operand_is_misaligned():
    problem = _problem("946 * 15")
    reference = list(reference_steps(problem.expr, "long"))
    k = next(k for k, step in enumerate(reference) if step.output.startswith("DIGIT_MUL, q1,  [HEAD1]|6|4|9 "))
    rewrite = (lambda prompt, output: output.replace("|6|4|9", "|6|4|8", 1))
    (record,) = solve_batch([problem], BrokenModel(rewrite, _trigger(problem.expr, k)), mode="traced")
    assert record.outcome == "misaligned" and "rewrote operand a as 846" in record.detail
    assert record.first_divergence.adapter == "executor_digit_mul"


# --------------------------------------------------------------------------- names and the oracle


def test_adapter_names_of_the_long_route():
    assert [adapter_name("executor", op) for op in ("long_mul", "long_div", "digit_mul")] == [
        "executor_long_mul", "executor_long_div", "executor_digit_mul"]
    assert [adapter_name("aligner", op) for op in ("long_mul", "long_div")] == ["aligner_long_mul", "aligner_long_div"]
    assert split_adapter_name("executor_digit_mul") == ("executor", "digit_mul")
    assert executor_of_machine("DIGIT_MUL") == "executor_digit_mul"
    assert operator_adapters("long_mul") == ("aligner_long_mul", "executor_long_mul", "executor_digit_mul",
                                             "executor_add")
    assert operator_adapters("long_div") == ("aligner_long_div", "executor_long_div", "executor_reflection",
                                             "executor_add")
    for kind, op in (("aligner", "digit_mul"), ("direct", "long_mul")):
        with pytest.raises(ValueError):
            adapter_name(kind, op)
    # the paper's operator lists, which say what a tier trains and serves by default, stay as they are
    assert "long_mul" not in EXECUTOR_OPS and "long_mul" not in ALIGNED_OPS
    assert routed("mul", "long") == "long_mul" and routed("mul") == "mul" and routed("sub", "long") == "sub"


def test_the_oracle_answers_the_long_adapters():
    oracle = OracleModel()
    start = oracle.complete("946*15=", "aligner_long_mul")
    assert start == run("long_mul", 946, 15).start_text() == align_input("946*15=", route="long")
    assert oracle.complete("946*15=", "aligner_mul") == align_input("946*15=")  # the paper's route as before
    assert oracle.complete(run("long_div", 22, 5).text(-1), "aligner_long_div") == "22//5=4"
    step = run("digit_mul", 946, 7).transition(1)
    assert oracle.complete(step[0], "executor_digit_mul") == step[1]
    assert render(parse(step[1])) == step[1]
    for prompt, adapter in (("946//15=", "aligner_long_mul"), ("946*15=", "aligner_long_div"),
                            ("946*15=", "aligner_digit_mul"), (step[0], "executor_add")):
        with pytest.raises(OracleError):
            oracle.complete(prompt, adapter)
