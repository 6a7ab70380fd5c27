"""The every-step gate (lab/diagnosis/long_sum_tops.py): which steps of which runs it asks an executor.
The one-step gate passed adapters that broke end to end, so this gate decides what ships; a step it
skipped would pass unseen."""

import importlib.util
from pathlib import Path

import pytest

from caef_bench.machines import run

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("long_sum_tops", ROOT / "lab/diagnosis/long_sum_tops.py")
GATE = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(GATE)


def test_runs_of_finds_an_executors_runs_at_every_depth_of_the_calls():
    subtraction = run("sub", 1000, 1)
    assert [r.machine for r in GATE.runs_of(subtraction, "left_mask")] == ["LEFT_MASK"]
    assert GATE.runs_of(subtraction, "sub") == [subtraction]
    division = run("div", 99999999990, 9999999999)
    comparisons = GATE.runs_of(division, "gt")
    assert comparisons and all(r.machine == "GREATER_THAN" for r in comparisons)
    assert len(GATE.runs_of(division, "add")) >= len(comparisons) - 1
    assert GATE.runs_of(run("gt", 5, 3), "add") == []


def test_every_step_of_every_run_is_asked_with_last_zero_and_only_the_tops_otherwise():
    every = GATE.top_steps(["repeated_gt_10_p1"], 3, 0, seed=1, executor="gt")
    problems = GATE.held_out_problems("repeated_gt_10_p1", 3, 1)
    expected = [step for p in problems for r in GATE.runs_of(run("gt", int(p["a"]), int(p["b"])), "gt")
                for step in r.transitions()]
    assert [(inp, out) for _, _, inp, out in every] == expected
    tops = GATE.top_steps(["repeated_gt_10_p1"], 3, 2, seed=1, executor="gt")
    first_run = GATE.runs_of(run("gt", int(problems[0]["a"]), int(problems[0]["b"])), "gt")[0]
    assert len(tops) == 6
    assert [(inp, out) for _, _, inp, out in tops[:2]] == first_run.transitions()[-2:]


def test_a_cell_whose_problems_never_run_the_executor_is_refused():
    with pytest.raises(SystemExit, match="runs a left_mask"):
        GATE.top_steps(["gt_10"], 1, 0, seed=1, executor="left_mask")


def test_a_composer_cell_asks_the_calls_of_the_problems_that_make_them():
    # MUL calls no ADD where b is 1: the problems that call it have their ADD runs asked, the rest are skipped
    problems = GATE.held_out_problems("mul_1_10", 20, 1)
    calling = [p for p in problems if GATE.runs_of(run("mul", int(p["a"]), int(p["b"])), "add")]
    assert 0 < len(calling) < len(problems)
    cases = GATE.top_steps(["mul_1_10"], 20, 0, seed=1, executor="add")
    assert {where.split(" ")[0] for _, where, _, _ in cases} == {p["id"] for p in calling}


def test_test_set_problems_can_be_named_by_id():
    from caef_bench.data.testsets import load_cell

    named = [p["id"] for p in load_cell("mul_1_10")[5:7]]
    cases = GATE.top_steps(["mul_1_10"], 1, 0, seed=None, executor="add", ids=set(named))
    assert {where.split(" ")[0] for _, where, _, _ in cases} == set(named)
