"""The runtime's rounds as a server drives them: problems join between rounds, and a failing model
call can cost only its own problems."""

import pytest

from caef_bench.data.testsets import load_cell
from caef_bench.evaluate.scoring import is_correct
from caef_bench.runtime import Problem, Rounds, solve_batch
from caef_bench.runtime.oracle import OracleModel
from serving import BrokenMul

# one test-set problem of every operator
EVERY_OPERATOR = [load_cell(cell)[0] for cell in ("add_5", "sub_5", "gt_5", "lt_5", "eq_5", "mul_1_10", "div_1_10")]


def test_problems_that_join_between_rounds_get_the_records_of_one_batch():
    problems = [Problem(row["id"], row["expr"], row["answer"]) for row in EVERY_OPERATOR]
    batch = solve_batch(problems, OracleModel(), mode="traced")
    rounds, records = Rounds(OracleModel(), "traced"), {}
    for problem in problems:  # one joins per round, while the others are half-way
        rounds.join(problem)
        records.update((r.id, r) for r in rounds.round())
    while rounds.active:
        records.update((r.id, r) for r in rounds.round())
    for alone in batch:
        joined = records[alone.id]
        assert (joined.answer, joined.outcome, [s.output for s in joined.steps]) == \
               (alone.answer, alone.outcome, [s.output for s in alone.steps])
        assert is_correct(joined)


def test_a_failing_call_costs_only_its_problems_when_errors_are_recorded():
    rounds = Rounds(BrokenMul(), model_errors="record")
    for expr in ("7*3=", "45+67="):
        rounds.join(Problem(expr, expr))
    records = {}
    while rounds.active:
        records.update((r.id, r) for r in rounds.round())
    assert records["7*3="].outcome == "error" and "the mul adapter is broken" in records["7*3="].detail
    assert records["45+67="].answer == "112"
    with pytest.raises(RuntimeError, match="broken"):  # a run (the default) stops instead
        solve_batch([Problem("p", "7*3=")], BrokenMul())
