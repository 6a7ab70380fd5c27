"""The machines' checks that an aligner's or an executor's text belongs to the asked problem (the runtime's
`misaligned`)."""

import pytest

from caef_bench.evaluate.failures import classify_record
from caef_bench.machines import (
    ExecutorState,
    align_input,
    align_output,
    answer_misalignment,
    answer_miscopy,
    call_miscopy,
    composer_miscopy,
    composer_view,
    parse,
    parse_expression,
    rewritten_operand,
    run,
    start_misalignment,
    start_operands,
)
from caef_bench.machines.display import events
from caef_bench.runtime import ProblemRecord

EXPRESSIONS = ["1000000000000000+1=", "1000000+1000000=", "0+0=", "1000-1=", "7-7=", "99999*12=", "10000000*7=",
               "99999999990//9999999999=", "0//1=", "100000000000000000000>99999999999999999999=", "5555==5555=",
               "0<0="]


@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_the_machines_start_state_holds_the_asked_operands(expr):
    body = expr[:-1]
    snapshot = parse(align_input(expr))
    assert "".join(start_operands(snapshot)) == "".join(ch for ch in body if ch.isdigit())
    assert start_misalignment(expr, snapshot) is None


def test_a_start_state_of_another_problem_names_the_operand():
    other = parse(align_input("1000000000000001+1="))
    assert start_misalignment("1000000000000000+1=", other) == \
        "aligner (I) copied operand a as 1000000000000001 (asked 1000000000000000)"
    both = parse(align_input("46+68="))
    assert start_misalignment("45+67=", both) == "aligner (I) copied operand a as 46 (asked 45) and operand b as 68 (asked 67)"
    assert "started SUB for ADD" in start_misalignment("45+67=", parse(align_input("45-6=")))


@pytest.mark.parametrize("final, wrong", [("45+67=112", False), ("45+67=0", False), ("45+68=112", True),
                                          ("45+67", True), ("", True), ("45+67==112", True)])
def test_an_answer_must_write_back_the_asked_expression(final, wrong):
    assert (answer_misalignment("45+67=", final) is not None) is wrong


@pytest.mark.parametrize("expr", ["9999999999+1=", "45+67=", "1000-1=", "7-7=", "12345*7=", "1000//7=", "99999>100000=",
                                  "5555==5555=", "0<0="])
def test_an_answer_must_hold_the_result_its_halt_state_holds(expr):
    asked = parse_expression(expr)
    halt = run(asked.op, asked.a, asked.b).text(-1)
    written = align_output(halt)
    assert answer_miscopy(halt, written) is None
    result = written.rpartition("=")[2]
    other = result[:-1] if len(result) > 1 else ("True" if result == "False" else "False" if result == "True" else "1")
    assert answer_miscopy(halt, expr + other) == \
        f"aligner (O) wrote the result {other!r} where the halt state holds {result!r}"


def test_a_run_whose_aligner_O_miscopies_its_result_gives_no_answer():
    # 9999999999+1=: a 0 of the sum's run dropped (SmolLM2's aligner_add wrote 1000000000) was a silent wrong answer
    from caef_bench.runtime import Problem, solve_batch
    from fault_models import BrokenModel

    drop_a_zero = BrokenModel(lambda prompt, output: output[:-1],  # aligner (O): its prompt is the halt state
                              lambda adapter, prompt: adapter == "aligner_add" and "Halt state" in prompt)
    (record,) = solve_batch([Problem("p", "9999999999+1=", "10000000000")], drop_a_zero, mode="free")
    assert (record.outcome, record.answer) == ("misaligned", None)
    assert record.detail == "aligner (O) wrote the result '1000000000' where the halt state holds '10000000000'"
    assert classify_record(record).where == "aligner (O)"


def test_an_untraced_misaligned_run_is_classified_at_its_aligner():
    record = ProblemRecord(id="p", expr="1000000+1000000=", mode="free", target="2000000", outcome="misaligned",
                           detail="aligner (I) copied operand b as 100000 (asked 1000000)")
    failure = classify_record(record)
    assert (failure.where, failure.what) == ("aligner (I)", "wrong_digit")
    record.detail = "aligner (O) wrote '45+68=' for the asked '45+67='"
    assert classify_record(record).where == "aligner (O)"


@pytest.mark.parametrize("expr", EXPRESSIONS + ["67-45=", "0-0=", "100-1=", "9999999999*9=", "1000//7="])
def test_no_state_of_a_machines_run_rewrites_its_executors_operand_tapes(expr):
    """Every executor, called at the top or by a composer, only reads its operand tapes: each state it
    writes keeps its start state's digits (what the runtime's check relies on)."""
    asked = parse_expression(expr)
    starts = {}
    checked = 0
    for event in events(run(asked.op, asked.a, asked.b)):
        for text in (event.input, event.output):
            state = parse(text).state
            if not isinstance(state, ExecutorState):
                continue
            if state.q == "q0":
                starts[event.depth] = state
            assert rewritten_operand(starts[event.depth], state) is None
            checked += 1
    assert checked


def test_a_state_with_other_operand_digits_names_the_operand_and_both_values():
    states = [parse(text).state for text, _ in run("add", 45, 67).transitions()]
    longer = parse("ADD, q1,  |5[HEAD1]|4 |7[HEAD2]|6|6 [C]1 |2[OUTPUT]\nCMD: [C] 1, [OUTPUT] 1, [OUTPUT] RIGHT, "
                   "[HEAD1] RIGHT, [HEAD2] RIGHT, q1").state
    assert rewritten_operand(states[0], states[2]) is None  # heads, carry and output move; the digits stay
    assert rewritten_operand(states[0], longer) == "rewrote operand b as 667 (started as 67)"
    gt = [parse(text).state for text, _ in run("gt", 1000, 999).transitions()]
    flipped = parse(run("gt", 1000, 998).text(2)).state
    assert rewritten_operand(gt[0], flipped) == "rewrote operand b as 998 (started as 999)"


def test_an_untraced_run_whose_executor_rewrote_an_operand_is_classified_at_that_executor():
    record = ProblemRecord(id="p", expr="99999+1=", mode="free", target="100000", outcome="misaligned",
                           detail="executor_add rewrote operand a as 999999 (started as 99999) at step 2")
    failure = classify_record(record)
    assert (failure.where, failure.what, failure.component) == ("executor", "wrong_digit", "executor_add")


@pytest.mark.parametrize("expr", ["4531-1504=", "1000-1=", "7-7=", "99999*12=", "10000000*7=", "123*1=", "0*5=",
                                  "99999999990//9999999999=", "0//1=", "137//4=", "66471854667//6478030270="])
def test_every_call_a_composer_makes_copies_its_operands_from_the_composers_state(expr):
    asked = parse_expression(expr)
    composer = run(asked.op, asked.a, asked.b)
    calls = [(phase.state, phase.callee) for phase in composer.phases if phase.callee is not None]
    assert calls and all(call_miscopy(state, callee.snapshot(0).state) is None for state, callee in calls)


@pytest.mark.parametrize("expr", ["4531-1504=", "1000-1=", "7-7=", "10-9=", "99999*12=", "123*1=", "0*5=", "0//1=",
                                  "137//4=", "99999999990//9999999999=", "5//7="])
def test_every_composer_state_keeps_its_operands_and_takes_each_result_where_the_machine_does(expr):
    """The checks the runtime makes of a composer's steps hold on every step of the machine's own runs: a and b
    kept, each callee's result (as the composer's texts show it) in its register or SUB's next call, the rest
    as the calling state held it."""
    asked = parse_expression(expr)
    phases = run(asked.op, asked.a, asked.b).phases
    start, calling, returned, checked = phases[0].state, None, None, 0
    for phase in phases[1:]:
        assert composer_miscopy(start, phase.state, calling, returned) is None
        if phase.callee is not None:
            assert call_miscopy(phase.state, phase.callee.snapshot(0).state, returned) is None
            view = composer_view(phase.state.machine, phase.callee.halt, phase.callee.snapshot(0))
            calling, returned = phase.state, view.state.output
            checked += 1
    assert checked


def test_a_call_on_other_operands_than_its_composers_names_them():
    """DIV's ADD of b to its count, with one digit of the count written twice (SmolLM2's executor_div did, and
    answered 66471854667//6478030270= with 1)."""
    composer = run("div", 137, 40)
    state, callee = next((phase.state, phase.callee) for phase in composer.phases if phase.state.q == "q3")
    wrong = parse(callee.text(0).replace("[HEAD2] |0|4 ", "[HEAD2] |0|4|4 ")).state
    assert call_miscopy(state, wrong) == "copied operand b as 440 (its DIV state holds 40)"
