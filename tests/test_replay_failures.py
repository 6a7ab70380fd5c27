"""lab/diagnosis/replay_failures.py --all-steps: every step an adapter took on the machine's course is asked
again, a wrong run's up to and with its first divergence, each with the machine's own output to compare with."""

import importlib.util
import sys
from pathlib import Path

import pytest

from caef_bench.runtime import Problem, reference_steps, solve_batch
from caef_bench.runtime.oracle import OracleModel
from caef_bench.runtime.records import Divergence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lab/diagnosis"))  # the script imports its neighbours by name
_spec = importlib.util.spec_from_file_location("replay_failures", ROOT / "lab/diagnosis/replay_failures.py")
replay_failures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(replay_failures)


def _runs():
    return solve_batch([Problem("a", "45+67=", "112"), Problem("b", "20-3=", "17")], OracleModel(), mode="traced")


def test_every_step_of_an_adapter_on_the_machines_course_with_the_machines_output():
    right, wrong = _runs()
    adds = [i for i, step in enumerate(wrong.steps) if step.adapter == "executor_add"]
    wrong.first_divergence = Divergence(adds[1], "executor_add", "wrong_digit", "expected", "got", 0)
    rows = replay_failures.every_step_of([right, wrong], "executor_add")
    mine = [(f"a@{i}", i) for i, step in enumerate(right.steps) if step.adapter == "executor_add"]
    assert [pid for pid, _, _ in rows] == [pid for pid, _ in mine] + [f"b@{adds[0]}", f"b@{adds[1]}"]
    machine = list(reference_steps("45+67="))
    for (pid, prompt, expected), (_, index) in zip(rows, mine):
        assert (prompt, expected) == (machine[index].input, machine[index].output)
    assert replay_failures.every_step_of([right], "aligner_sub") == []


def test_a_record_not_made_on_this_machine_text_is_refused():
    right, _ = _runs()
    right.steps[1].input = right.steps[1].input.replace("q", "p", 1)
    with pytest.raises(ValueError, match="not the machine's"):
        replay_failures.every_step_of([right], right.steps[1].adapter)
