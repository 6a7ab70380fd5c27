"""The whole-problem check (lab/diagnosis/fresh_problems.py): the cases it asks an adapter are every
call CAEF makes to it on a problem, so a problem it scores right is one end to end gets right from it."""

import importlib.util
import sys
from pathlib import Path

from caef_bench.data.testsets import render_expr, solve
from caef_bench.machines import run

DIAGNOSIS = Path(__file__).resolve().parents[1] / "lab/diagnosis"
sys.path.insert(0, str(DIAGNOSIS))  # it reads adapters as training_progress.py does, from beside it
_spec = importlib.util.spec_from_file_location("fresh_problems", DIAGNOSIS / "fresh_problems.py")
FRESH = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(FRESH)


def test_an_executor_is_asked_every_transition_of_the_run_in_order():
    machine_run = run("add", 9999999999, 1)
    cases = FRESH.problem_cases("executor", "add", 9999999999, 1)
    assert len(cases) == len(machine_run) == 12
    assert cases == [machine_run.transition(step) for step in range(len(machine_run))]
    # each case's completion is the next case's prompt: the trace a greedy run follows when every step is right
    assert all(cases[k][1] == cases[k + 1][0] for k in range(len(cases) - 1))


def test_an_aligner_is_asked_both_conversions():
    machine_run = run("gt", 4443631561, 3786311604)
    expr = render_expr("gt", 4443631561, 3786311604)
    assert FRESH.problem_cases("aligner", "gt", 4443631561, 3786311604) == [
        (expr, machine_run.start_text()), (machine_run.text(-1), expr + solve("gt", 4443631561, 3786311604))]
    assert solve("gt", 4443631561, 3786311604) == "True"
