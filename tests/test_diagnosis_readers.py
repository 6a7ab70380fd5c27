"""The diagnosis tools that read the gate's and the evaluation's output back (lab/diagnosis/): the
docs' tables of wrong steps and of two weights' records side by side are printed by them, so what they
count must be what the gate and the tables count."""

import importlib.util
from pathlib import Path

import pytest

from caef_bench.machines import run
from caef_bench.runtime import ProblemRecord

ROOT = Path(__file__).resolve().parents[1]


def _module(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "lab/diagnosis" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


STEPS = _module("wrong_steps")
COMPARE = _module("compare_records")


def _miss(transition, output=None, where="p call 0 step 0"):
    prompt, expected = transition
    return {"checkpoints": "t", "cell": "gt_5", "where": where, "input": prompt, "expected": expected,
            "output": expected if output is None else output}


def test_a_misread_verdict_counts_as_overwritten_only_where_a_later_step_writes_one():
    # 351 > 331, read from the top: the start writes False (1 = 1), the tens write True (5 > 3), then halt
    transitions = run("gt", 351, 331).transitions()
    outputs = [out for _, out in transitions]
    equal_tops = _miss(transitions[0], outputs[0].replace("RIGHT, q1", "RIGHT, [OUTPUT] True, q1"))
    assert STEPS.step_effect(equal_tops, outputs[1:]) == "overwritten later"
    assert "[OUTPUT] True" in outputs[1]
    deciding = _miss(transitions[1], outputs[1].replace("[OUTPUT] True", "[OUTPUT] False"))
    # after the deciding write only the halting `CMD [OUTPUT], qH` is left, and it writes no verdict
    assert "CMD [OUTPUT], qH" in outputs[3] and not STEPS.writes_output(outputs[3])
    assert STEPS.step_effect(deciding, outputs[2:]) == "decides the answer"


def test_a_wrong_state_line_and_a_rewrite_of_the_held_verdict_are_told_apart():
    transitions = run("gt", 351, 331).transitions()
    _, expected = transitions[2]  # the state holds True, the next command writes nothing
    assert "[OUTPUT]True" in expected.split("\n")[0] and not STEPS.writes_output(expected)
    no_op = _miss(transitions[2], expected.replace("RIGHT, q1", "RIGHT, [OUTPUT] True, q1"))
    assert STEPS.step_effect(no_op, []) == "no-op"
    moved = _miss(transitions[2], expected.replace("|1|5[HEAD1]|3", "|1[HEAD1]|5|3"))
    assert STEPS.step_effect(moved, []) == "state line wrong"


def test_the_gate_table_counts_problems_and_steps_per_cell_with_zeros():
    misses = [{"checkpoints": "a", "cell": "x", "where": "x-1 call 0 step 3"},
              {"checkpoints": "a", "cell": "x", "where": "x-1 call 1 step 9"},
              {"checkpoints": "a", "cell": "x", "where": "x-2 call 0 step 3"}]
    assert STEPS.gate_table(misses, ["x", "y"]) == {"a": {"x": (2, 3), "y": (0, 0)}}


def _records(folder, cell, verdicts):
    folder.mkdir(parents=True, exist_ok=True)
    lines = [ProblemRecord(f"{cell}-{i:04d}", "2>1=", "free", "True", "True" if right else "False",
                           outcome="answered", detail=None if right else "step 3 (executor_gt)").to_json()
             for i, right in enumerate(verdicts)]
    (folder / f"caef_{cell}.jsonl").write_text("".join(line + "\n" for line in lines))


def test_two_records_folders_are_compared_on_the_candidates_problems(tmp_path):
    _records(tmp_path / "tiny-new", "gt_5", [True, False, True])
    _records(tmp_path / "tiny-old", "gt_5", [False, False, True, False])  # one more problem: not compared
    _records(tmp_path / "tiny-new", "lt_5", [])  # a cell not reached
    table = COMPARE.compare(tmp_path / "tiny-new", tmp_path / "tiny-old")
    assert list(table["cell"]) == ["gt_5", "total"]
    row = table.iloc[0]
    assert (row["problems (the same ids)"], row["tiny-old right"], row["tiny-new right"]) == (3, 1, 2)
    assert row["tiny-new wrong (first wrong step's adapter)"] == "gt_5-0001 (executor_gt)"


def test_a_reference_without_the_candidates_problems_is_refused(tmp_path):
    _records(tmp_path / "tiny-new", "gt_5", [True, True])
    _records(tmp_path / "tiny-old", "gt_5", [True])
    with pytest.raises(SystemExit, match="same problems"):
        COMPARE.compare(tmp_path / "tiny-new", tmp_path / "tiny-old")


PROGRESS = _module("training_progress")


def test_a_wrong_step_is_placed_in_the_state_or_in_the_command_by_where_it_first_differs():
    prompt, expected = run("add", 45, 67).transitions()[1]
    state, command = expected.split("\n", 1)
    wrong_digit = next(c for c in "0123456789" if c != command.split("[OUTPUT] ")[1][0])
    wrong_command = state + "\n" + command.replace("[OUTPUT] " + command.split("[OUTPUT] ")[1][0],
                                                   "[OUTPUT] " + wrong_digit, 1)
    assert PROGRESS.miss_part(expected, wrong_command) == "command"
    assert PROGRESS.miss_part(expected, state[:5] + "X") == "state"
    # a miss on the newline itself is still the state's (its line ended too early or too late)
    assert PROGRESS.miss_part(expected, state + " ") == "state"
