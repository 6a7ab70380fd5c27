"""The numbers a person types first, solved end to end on the shipped tiny tier: round numbers,
runs of one digit, equal operands and near-equal ones, 5 to 20 digits, every operator. The weights before
printed other operands for `1000000000000000+1=` and no answer for `1000000+1000000=`."""

import pytest

from caef_bench.machines import parse_expression, result

TYPED = [
    "1000000000000000+1=",
    "99999999999999+1=",
    "1000000+1000000=",
    "55555555555555555555+44444444444444444445=",
    "10000000000-1=",
    "77777777777777777777-7777777777=",
    "10000000*7=",
    "99999999990//9999999999=",
    "9999999999<10000000000=",
    "10000000000000000000>9999999999999999999=",
    "12121212121212121212==12121212121212121212=",
]


@pytest.fixture(scope="module")
def shipped():
    from caef_bench.runtime.hf import load_step_model

    return load_step_model("tiny", device="cpu")


@pytest.mark.parametrize("expr", TYPED)
def test_the_shipped_tier_solves_what_a_person_types(shipped, expr):
    from caef_bench.evaluate.suites import solve_expression

    expression = parse_expression(expr)
    record, correct = solve_expression(shipped, expr)
    assert (record.outcome, record.final) == ("answered", f"{expr}{result(expression.op, expression.a, expression.b)}")
    assert correct and record.first_divergence is None  # every step the machine's, not a lucky answer


def test_solve_prints_the_asked_expression_with_its_answer(capsys):
    from caef_bench.cli import main

    assert main(["solve", "1000000+1000000=", "--device", "cpu"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "1000000+1000000=2000000"
