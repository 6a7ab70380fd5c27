"""lab/diagnosis/typed_steps.py: a typed expression's steps, halt step included, as the records number them."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lab/diagnosis"))  # the screens import their shared loop from their folder
import typed_steps  # noqa: E402

from caef_bench.machines import run  # noqa: E402


def test_every_step_up_to_the_halt_is_a_case():
    rows = typed_steps.cases("5000000000-4999999999=")
    assert [label for label, _, _ in rows] == [f"5000000000-4999999999= step {i}" for i in range(1, 6)]
    assert rows[-1][2].startswith("SUB, qH,") and rows[-1][2].endswith("Halt state.")
    # each step's input is the machine's own state, not an earlier output of the model
    machine_run = run("sub", 5000000000, 4999999999)
    assert [(source, target) for _, source, target in rows] == machine_run.transitions()


def test_an_executor_without_calls_gets_its_own_steps():
    rows = typed_steps.cases("7777777777<7777777778=")
    assert len(rows) == len(run("lt", 7777777777, 7777777778)) and rows[0][1].startswith("LESS_THAN, q0")
