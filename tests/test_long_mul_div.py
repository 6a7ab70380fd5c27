"""Schoolbook multiplication (LONG_MUL), long division (LONG_DIV) and DIGIT_MUL: exact against Python on
operands up to 60 digits and on typed cases, every text parses and renders back byte for byte, each
step is next_text's answer to the one before (as the runtime steps through them), and the committed
golden traces (tests/reference/long-mul-div/) are what the machines write, byte for byte.

    python tests/test_long_mul_div.py --write     # rewrite the golden traces after a deliberate change
"""

import json
import random
import re
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from caef_bench.machines import (ALIGNED_OPS, BY_MACHINE, EXECUTOR_OPS, OffCourse, classify, composer_view, next_text,
                                 parse, render, result, run, split_step_end)
from caef_bench.machines.long_calls import TABLE_CELLS, call_count, call_table
from caef_bench.machines.text import COMPOSERS, FORMAT_WORDS, Snapshot
from caef_bench.runtime.problem import reference_step_count
from test_machines_properties import numbers

GOLDEN = Path(__file__).resolve().parent / "reference" / "long-mul-div"
GOLDEN_PROBLEMS = {
    "long_mul": [(946, 15), (120, 305), (99999, 999), (7, 0), (0, 123), (1, 5), (123456789, 1000000001)],
    "long_div": [(22, 5), (3, 7), (1000, 10), (999999, 99), (12345678, 1), (0, 4), (987654321, 987654321)],
    "digit_mul": [(946, 7), (99, 9), (0, 9), (5, 1), (123, 0), (1, 2)],
}
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PAPER_EXECUTOR_OPS = ("add", "sub", "mul", "div", "gt", "lt", "eq", "reflection", "left_mask")


def golden_lines(op: str) -> list[str]:
    """The golden file's lines: composers as mul.jsonl ([input, output] per transition), DIGIT_MUL as
    add.jsonl ([state line, command line] per step)."""
    lines = []
    for a, b in GOLDEN_PROBLEMS[op]:
        machine_run = run(op, a, b)
        if op == "digit_mul":
            seq = [machine_run.text(i).split("\n") for i in range(machine_run.n_steps)]
        else:
            seq = [list(pair) for pair in machine_run.transitions()]
        lines.append(json.dumps({"op1": a, "op2": b, "seq": seq}))
    return lines


@pytest.mark.parametrize("op", sorted(GOLDEN_PROBLEMS))
def test_golden_traces_are_what_the_machines_write(op):
    committed = (GOLDEN / f"{op}.jsonl").read_text().splitlines()
    assert committed == golden_lines(op), f"regenerate with: python {Path(__file__).name} --write (if meant)"


def test_every_golden_file_is_checked():
    assert {p.stem for p in GOLDEN.glob("*.jsonl")} == set(GOLDEN_PROBLEMS)


# --------------------------------------------------------------------------- exact on every problem


def _drive(op, a, b):
    """Run op(a, b) the way the runtime does (runtime.problem.FreeRunning), with next_text as the model:
    a [CALL] pushes the callee from the callee's start lines, whose halt comes back through
    composer_view as the composer's extra input lines. Returns the texts written and the halt text."""
    snapshot = parse(run(op, a, b).start_text())
    stack, written = [{"machine": snapshot.machine, "start": snapshot}], []
    while True:
        frame = stack[-1]
        if snapshot.command.is_halt:
            stack.pop()
            halt = Snapshot(snapshot.state, snapshot.command)
            if not stack:
                return written, render(halt)
            caller = stack[-1]
            view = composer_view(caller["machine"], halt, frame["start"])
            assert view == halt  # the long composers see their callees' halts as the callees write them
            caller["input"] = render(Snapshot(caller["waiting"].state, caller["waiting"].command, view, True))
        elif snapshot.command.call:
            frame["waiting"] = Snapshot(snapshot.state, snapshot.command)
            stack.append({"machine": snapshot.callee.machine, "start": snapshot.callee, "input": render(snapshot.callee)})
        else:
            frame["input"] = render(Snapshot(snapshot.state, snapshot.command, None, frame["machine"] in COMPOSERS))
        frame = stack[-1]
        output = next_text("executor", BY_MACHINE[frame["machine"]].name, frame["input"])
        assert render(parse(output)) == output and split_step_end(output) == (output, "")
        written.append(output)
        snapshot = parse(output)


def _check_exact(op, a, b, every_text=True):
    machine_run = run(op, a, b)
    halt = parse(machine_run.text(-1))
    assert halt.state.halted and halt.command.is_halt
    assert int(halt.state.output[::-1]) == result(op, a, b) == (a * b if op != "long_div" else a // b)
    assert halt.state.output == str(result(op, a, b))[::-1]  # no top zeros
    if op == "long_div":
        assert int(halt.state.rem[::-1]) == a % b
    for source, target in machine_run.transitions():
        assert render(parse(source)) == source and render(parse(target)) == target
        assert next_text("executor", op, source) == target and classify(target, target) is None
    if every_text:
        for _, callee in machine_run.calls():
            for source, target in callee.transitions():
                assert render(parse(target)) == target
    count = call_count(op, a, b)
    assert count.total == reference_step_count(machine_run)


@st.composite
def long_problems(draw):
    op = draw(st.sampled_from(["long_mul", "long_div"]))
    a, b = draw(numbers(60)), draw(numbers(60))
    if op == "long_div":
        b = max(b, 1)
    return op, a, b


@SETTINGS
@given(long_problems())
def test_long_machines_are_exact_up_to_sixty_digits(problem):
    _check_exact(*problem, every_text=False)


@SETTINGS
@given(numbers(60), st.integers(0, 9))
def test_digit_mul_is_exact_in_one_pass(a, d):
    machine_run = run("digit_mul", a, d)
    assert machine_run.n_steps == len(str(a)) + 3
    halt = parse(machine_run.text(-1)).state
    assert int(halt.output[::-1]) == a * d
    for source, target in machine_run.transitions():
        assert render(parse(source)) == source and render(parse(target)) == target
        assert next_text("executor", "digit_mul", source) == target


NINES, ROUND = 10**50 - 1, 10**49
TYPED = [
    (ROUND, ROUND), (1000, 100), (120, 305), (NINES, NINES), (99, 99999), (NINES, 1), (1, NINES), (NINES, 0),
    (0, NINES), (0, 0), (12345, 12345), (7, 10**49 + 3), (10**49 + 3, 7), (9, NINES), (NINES, 9), (5, 2),
]
TYPED_DIV = [
    (ROUND, ROUND), (ROUND, 10), (NINES, 1), (NINES, NINES), (NINES, 9), (9, NINES), (3, 7), (10**30, 10**30 + 1),
    (12345, 12345), (7, 10**49 + 3), (10**49 + 3, 7), (0, 1), (0, NINES), (10**20, 3), (99999, 100), (100, 99999),
]


@pytest.mark.parametrize("a,b", TYPED)
def test_long_mul_typed_cases(a, b):
    _check_exact("long_mul", a, b)


def _long_mul_pairs() -> list[tuple[int, int]]:
    """Random and edge pairs: 0 and 1 on either side, runs of 9s, b with zeros inside and at the bottom,
    a of one digit, 50 x 50 digits."""
    rng = random.Random(91)
    nines = [10**n - 1 for n in (1, 2, 7, 20, 50)]
    zeros = [10**n for n in (1, 3, 20)] + [105, 1002003, 50050, 9000000009, 12 * 10**30 + 7 * 10**10]
    edges = [0, 1, 2, 9, 10, *nines, *zeros, 12345678901234567890]
    pairs = [(a, b) for a in edges for b in edges]
    pairs += [(rng.randrange(10), rng.randrange(10**rng.randint(1, 50))) for _ in range(60)]
    pairs += [(rng.randrange(10**49, 10**50), rng.randrange(10**49, 10**50)) for _ in range(6)]
    pairs += [(rng.randrange(10**rng.randint(1, 30)), rng.randrange(10**rng.randint(1, 30))) for _ in range(200)]
    return pairs


def test_long_mul_gives_a_times_b_on_every_kind_of_pair():
    for a, b in _long_mul_pairs():
        machine_run = run("long_mul", a, b)
        halt = machine_run.phases[-1].state
        assert halt.halted and halt.output == str(a * b)[::-1], (a, b)


def test_long_mul_copies_every_register_at_a_fixed_cell_offset():
    """Horner's layout: a callee's start copies P one cell up (10*P) and the partial product cell for cell,
    and its return puts the sum (or the first partial product) in P cell for cell; P never has a top zero
    and a digit of 0 writes a 0 under P. What the design is for: under coupled ids these are fixed offsets."""
    for a, b in _long_mul_pairs()[::7]:
        phases = run("long_mul", a, b).phases
        partial = None
        for phase, after in zip(phases, phases[1:]):
            product, callee = phase.state.output, phase.callee
            assert not product.endswith("0")  # no top zero (tape order: the top digit is the last cell)
            if callee is not None and callee.machine == "DIGIT_MUL":
                digit = phase.state.b[phase.state.head - 2]
                assert callee.snapshot(0).state.tapes[1].digits == digit != "0" and a > 0
                partial = callee.halt.state.output
                assert after.state.output == (partial if not product else product)
            elif callee is not None:
                start = callee.snapshot(0).state
                assert (start.tapes[0].digits, start.tapes[1].digits) == ("0" + product, partial)
                assert after.state.output == callee.halt.state.output
            elif phase.state.q == "q1" and phase.state.head > 1:
                assert after.state.output == ("0" + product if product else "")
            if phase.state.q in ("q1", "q2") and not after.state.halted:
                assert after.state.head == phase.state.head - (after.state.q == "q1" and phase.state.q != "q0")


@pytest.mark.parametrize("a,b", TYPED_DIV)
def test_long_div_typed_cases(a, b):
    _check_exact("long_div", a, b)


@pytest.mark.parametrize("op,a,b", [("long_mul", 946, 15), ("long_mul", 120, 305), ("long_mul", 0, 123),
                                    ("long_div", 22, 5), ("long_div", 999999, 99), ("long_div", 3, 7)])
def test_the_runtime_protocol_steps_through_a_whole_problem(op, a, b):
    """From the start text to the halt, every call the way the runtime makes it; the written texts are
    exactly the machine's own, callees' included."""
    written, halt = _drive(op, a, b)
    machine_run = run(op, a, b)
    assert halt == machine_run.text(-1)
    assert len(written) == reference_step_count(machine_run) - 2  # all but the two aligner calls


def test_a_halt_has_no_next_step_and_other_problems_are_off_course():
    machine_run = run("long_mul", 946, 15)
    with pytest.raises(OffCourse):
        next_text("executor", "long_mul", machine_run.text(-1) + "\n")
    wrong = machine_run.transition(2)[0].replace("[OUTPUT]|6|4|9", "[OUTPUT]|6|4|8")
    assert wrong != machine_run.transition(2)[0]
    with pytest.raises(OffCourse):
        next_text("executor", "long_mul", wrong)


def test_classify_names_a_misplaced_head_and_a_wrong_register():
    text = run("long_div", 22, 5).text(3)
    assert "[REM]|2|0" in text and " |2[HEAD1]|2" in text
    assert classify(text, text.replace("|2[HEAD1]|2", "[HEAD1]|2|2")) == "misplaced_head"
    assert classify(text, text.replace("[REM]|2|0", "[REM]|3|0", 1)) == "wrong_digit"
    product = run("long_mul", 946, 15).text(2)
    assert " |5[HEAD2]|1 [OUTPUT]|6|4|9" in product
    assert classify(product, product.replace("|5[HEAD2]|1", "|5|1[HEAD2]", 1)) == "misplaced_head"
    assert classify(product, product.replace("[OUTPUT]|6|4|9", "[OUTPUT]|6|4|8", 1)) == "wrong_digit"


def test_domains():
    with pytest.raises(ValueError, match="division by zero"):
        run("long_div", 5, 0)
    with pytest.raises(ValueError, match="one digit"):
        run("digit_mul", 5, 10)


def test_the_paper_operators_and_the_vocabulary_stay_as_they_are():
    """The new machines are reachable through run() but not listed with the paper's operators, which
    name the adapters trained, served and evaluated; the tiny tier's vocabulary keeps its words."""
    assert EXECUTOR_OPS == PAPER_EXECUTOR_OPS
    assert ALIGNED_OPS == ("add", "sub", "mul", "div", "gt", "lt", "eq")
    assert not any(m in FORMAT_WORDS for m in ("DIGIT_MUL", "LONG_MUL", "LONG_DIV", "[REM]", "[NEG]"))


def test_call_counts_grow_with_length_not_value():
    small, large = call_count("long_mul", 10**9, 10**9 + 1), call_count("long_mul", 9 * 10**9, 9 * 10**9 + 8)
    assert small.total < large.total < 400
    division = call_count("long_div", 10**39 + 7, 10**19 + 3)
    assert division.callees.keys() == {"REFLECTION", "ADD"} and division.windowed > 0
    assert call_count("long_div", 10**99, 10**9 + 1).windowed == 0  # every ADD is 11 cells wide
    assert [cell[0] for cell in TABLE_CELLS] == ["long_mul"] * 3 + ["long_div"] * 2
    table = call_table(problems=2)
    assert table.count("\n") == 1 + len(TABLE_CELLS)


def test_the_design_doc_quotes_the_machines_own_lines():
    """Every state and command line that docs/long-mul-div.md shows is one the machines write."""
    doc = (Path(__file__).resolve().parent.parent / "docs" / "long-mul-div.md").read_text()
    written = {line for op, a, b in [("digit_mul", 946, 7), ("long_mul", 946, 15), ("long_div", 22, 5)]
               for pair in run(op, a, b).transitions() for text in pair for line in text.splitlines()}
    quoted = [re.split(r" {4,}", line)[0] for line in doc.splitlines()
              if line.startswith(("DIGIT_MUL, ", "LONG_MUL, ", "LONG_DIV, ", "ADD, ", "CMD", "No command"))]
    assert len(quoted) > 30 and not [line for line in quoted if line not in written]


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for name in GOLDEN_PROBLEMS:
        (GOLDEN / f"{name}.jsonl").write_text("\n".join(golden_lines(name)) + "\n")
        print(f"wrote {GOLDEN / name}.jsonl")
