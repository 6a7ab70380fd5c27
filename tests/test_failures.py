"""The failure classifier of the repeated-digit analysis: one constructed failure per class, made by
editing the machines' own texts (or answers) the way a model gets them wrong."""

import math

import pytest

from caef_bench.evaluate.failures import (
    WHAT,
    WHERE,
    classify_answer,
    classify_record,
    classify_sequence,
    classify_step,
    mark_difference,
    record_failures,
)
from caef_bench.evaluate.scoring import fisher_exact, is_correct
from caef_bench.machines import run
from caef_bench.runtime import Problem, reference_steps, solve_batch
from caef_bench.runtime.records import ProblemRecord

# 4848484842 + 9393939395: both operands repeat a two-digit unit (tape order |2|4|8|4|8…, |5|9|3|9|3…)
ADD = run("add", 4848484842, 9393939395)
ADD_START = ADD.start_text()
STEP_IN, STEP_OUT = ADD.transition(3)


def test_every_named_class_is_what_the_classifier_gives_one_constructed_failure():
    """WHAT and WHERE list each class once, in order, and each is the classifier's verdict on a failure made here."""
    before_halt, halt = ADD.transition(len(ADD) - 1)
    head_moved = STEP_OUT.replace("|2|4|8[HEAD1]|4|8", "|2|4|8|4[HEAD1]|8")
    stopped = {"id": "p", "mode": "traced", "first_divergence": None, "correct": False, "truth": "112",
               "expr": "45+67=", "answer": None}
    crashed = classify_record({**stopped, "outcome": "error", "detail": "RuntimeError: out of memory"})
    whats = [
        classify_answer("4848484842+0=", "4848484842", "484848484842"),
        classify_answer("4848484842+0=", "4848484842", "48484842"),
        classify_answer("1999999993+0=", "1999999993", "9999999993"),
        classify_answer("4949494949494949494949497+0=", "4949494949494949494949497", "49494949494949"),
        classify_answer("123456+0=", "123456", "1233456"),
        classify_answer("123456+0=", "123456", "12456"),
        classify_answer("1999+1=", "2000", "1000"),
        classify_answer("123456+0=", "123456", "128456"),
        classify_step("executor_add", STEP_OUT, head_moved),
        classify_step("executor_add", before_halt, halt),
        classify_step("executor_add", halt, before_halt),
        classify_answer("55555>55545=", "True", "False"),
        classify_answer("1999+1=", "2000", None),
        crashed,
    ]
    assert [failure.what for failure in whats] == list(WHAT)
    wheres = [
        classify_step("aligner_add", ADD_START, ADD_START.replace("|5|9|3|9", "|5|9"), direction="I"),
        classify_step("executor_add", STEP_OUT, head_moved),
        classify_step("aligner_eq", "12==12=True", "12==12=False", direction="O"),
        classify_record({**stopped, "outcome": "no_halt", "detail": "no halt state after 9 steps"}),
        classify_answer("1999+1=", "2000", None),
        classify_record({**stopped, "outcome": "unparseable", "detail": "step 3 (executor_sub): [CALL] ADD"}),
        crashed,
        classify_answer("1999+1=", "2000", "2070"),
    ]
    assert [failure.where for failure in wheres] == list(WHERE)


# --------------------------------------------------------------------------- digit sequences


@pytest.mark.parametrize("expected, got, what, position, units", [
    # the common prefix is taken as long as it goes: a copy inserted in a run stands at the run's end
    ("4848484842", "484848484842", "extra_repetition", 9, 1),     # one more "48" (seen as "84" at 9)
    ("4848484842", "48484842", "missing_repetition", 7, 1),       # one "48" fewer
    ("1999999992", "19999999992", "extra_repetition", 9, 1),      # a run of 9s one longer
    ("4567456745", "45674567456745", None, None, None),           # period 4: not one of 1-3 (other)
    ("123456", "1233456", "duplicated_digit", 3, None),           # a single digit copied, no run
    ("123456", "12456", "dropped_digit", 2, None),
    ("123456", "128456", "wrong_digit", 2, None),
    ("4772", "47772", "duplicated_digit", 3, None),               # two 7s are no run of a single digit
    ("47772", "477772", "extra_repetition", 4, 1),                # three are
    ("484842", "48484848484842", "extra_repetition", 5, 4),       # four units at once
    # a run going on over the digits after it, the length kept (tape order: random digits, then the run)
    ("887091489959309717778888", "887091488888888888888888", "pattern_overwrite", 8, None),
    ("1999999993", "9999999993", "pattern_overwrite", 0, None),    # the run started one digit early
    ("1999999993", "5999999993", "wrong_digit", 0, None),
    ("4949494949494949494949497", "494949494949497", "missing_repetition", 14, 5),
    ("4949494949494949494949497", "49494949494949", "truncated", 14, None),  # the run cut, its top digit too
])
def test_sequences(expected, got, what, position, units):
    found = classify_sequence(expected, got)
    if what is None:
        assert found.what == "other"
        return
    assert (found.what, found.position, found.units) == (what, position, units)


def test_an_adders_digit_off_by_one_is_a_carry_error_a_copied_one_is_not():
    # 199 + 1 = 200; the carry not propagated into the hundreds gives 100: digit 0 off by one
    assert classify_sequence("200", "100", arithmetic=True).what == "carry_error"
    assert classify_sequence("200", "100", arithmetic=False).what == "wrong_digit"
    # a carry chain through a run: 10000 for 9999 + 1 answered 9000 + ... every changed digit off by one
    assert classify_sequence("10000", "10990", arithmetic=True).what == "carry_error"
    assert classify_sequence("200", "500", arithmetic=True).what == "wrong_digit"


def test_no_difference_is_no_failure():
    assert classify_sequence("123", "123") is None
    assert classify_step("executor_add", STEP_OUT, STEP_OUT) is None
    assert classify_answer("1+2=", "3", "3") is None


# --------------------------------------------------------------------------- steps


def test_aligner_input_that_drops_one_period_of_b():
    # b's tape |5|9|3|9|3|9|3|9|3|9 written with one "|3|9" fewer: the paper's missing repetition
    got = ADD_START.replace("|5|9|3|9|3|9|3|9|3|9", "|5|9|3|9|3|9|3|9")
    failure = classify_step("aligner_add", ADD_START, got, direction="I")
    assert (failure.where, failure.what, failure.tape, failure.units) == ("aligner (I)", "missing_repetition", "HEAD2", 1)
    assert failure.position == 8  # tape order: the first 8 cells are right, then a "39" is missing
    assert failure.machine is None


def test_executor_extra_repetition_on_the_first_tape():
    got = STEP_OUT.replace("|2|4|8[HEAD1]|4|8|4|8|4|8|4", "|2|4|8[HEAD1]|4|8|4|8|4|8|4|8|4")
    failure = classify_step("executor_add", STEP_OUT, got)
    assert (failure.where, failure.machine, failure.tape, failure.what) == ("executor", "ADD", "HEAD1", "extra_repetition")


def test_executor_head_one_cell_off():
    got = STEP_OUT.replace("|2|4|8[HEAD1]|4|8", "|2|4|8|4[HEAD1]|8")
    failure = classify_step("executor_add", STEP_OUT, got)
    assert (failure.tape, failure.what, failure.expected, failure.got) == ("HEAD1", "head_off_by_one", "4", "5")


def test_executor_head_move_left_out_of_the_command():
    got = STEP_OUT.replace(", [HEAD2] RIGHT, q1", ", q1")
    assert classify_step("executor_add", STEP_OUT, got).what == "head_off_by_one"


def test_executor_carry_register_and_carry_digit():
    assert "[C]1 " in STEP_OUT
    failure = classify_step("executor_add", STEP_OUT, STEP_OUT.replace("[C]1 ", "[C]0 "))
    assert (failure.tape, failure.what) == ("C", "carry_error")
    # the next digit written: 4 (8+5+1 = 14) written as 3, the carry-in left out
    assert "[OUTPUT] 4," in STEP_OUT
    failure = classify_step("executor_add", STEP_OUT, STEP_OUT.replace("[OUTPUT] 4,", "[OUTPUT] 3,"))
    assert (failure.tape, failure.what) == ("command", "carry_error")
    failure = classify_step("executor_add", STEP_OUT, STEP_OUT.replace("[OUTPUT] 4,", "[OUTPUT] 7,"))
    assert failure.what == "wrong_digit"


def test_executor_output_tape_digit_dropped():
    got = STEP_OUT.replace("|7|3|2[OUTPUT]", "|7|2[OUTPUT]")
    failure = classify_step("executor_add", STEP_OUT, got)
    assert (failure.tape, failure.what, failure.position) == ("OUTPUT", "dropped_digit", 1)


def test_early_and_late_halt():
    last_in, halt = ADD.transition(len(ADD) - 1)
    assert "qH" in halt and "Halt state" in halt
    late = last_in  # the step before the halt, written again: the model goes on where the machine halts
    assert classify_step("executor_add", halt, late).what == "late_halt"
    # one step sooner: the machine's output is `last_in` (still running), the model writes the halt
    assert classify_step("executor_add", last_in, halt).what == "early_halt"


def test_a_command_that_goes_on_where_the_machine_moves_into_its_halt_state_is_a_late_halt():
    mask = run("left_mask", 10)
    steps = [mask.transition(i) for i in range(len(mask))]
    into_halt = next(out for _, out in steps if out.endswith("CMD qH"))
    going_on = into_halt.replace("CMD qH", "CMD [OUTPUT] LEFT, q2")
    failure = classify_step("executor_left_mask", into_halt, going_on)
    assert (failure.tape, failure.what) == ("command", "late_halt")
    assert (failure.expected, failure.got) == ("CMD qH", "CMD [OUTPUT] LEFT, q2")  # as the machine writes them
    assert classify_step("executor_left_mask", going_on, into_halt).what == "early_halt"


def test_comparison_verdict():
    gt = run("gt", 55555, 55545)
    halt = gt.text(-1)
    flipped = halt.replace("True", "False") if "True" in halt else halt.replace("False", "True")
    assert classify_step("executor_gt", halt, flipped).what == "wrong_verdict"
    assert classify_answer("55555>55545=", "True", "False").what == "wrong_verdict"


def test_unparseable_text_is_malformed_unless_digit_cells_explain_it():
    garbage = "ADD, q0, [HEAD1] , [HEAD2] [C] [C],, [HEAD1]  |2"
    failure = classify_step("aligner_add", ADD_START, garbage, direction="I")
    assert (failure.where, failure.what, failure.tape, failure.position) == ("aligner (I)", "malformed", "HEAD1", 0)
    # the text departs in b's tape, at its fourth cell
    broken = ADD_START.replace("|5|9|3|9|3|9", "|5|9|3|9, [C] [C]")
    failure = classify_step("aligner_add", ADD_START, broken, direction="I")
    assert (failure.what, failure.tape, failure.position) == ("malformed", "HEAD2", 4)
    broken = ADD_START.replace("CMD: [C] 0,", "CMD: [C] [C] 0 0,")
    assert classify_step("aligner_add", ADD_START, broken, direction="I").tape == "command"
    # a cell inserted where the parser then fails (a digit after the halt line's place): still a repetition
    extra = ADD_START.replace("|5|9|3|9|3|9|3|9|3|9 [C]", "|5|9|3|9|3|9|3|9|3|9|3|9 [C]").replace("[C] [OUTPUT]", "[C] |[OUTPUT]")
    assert classify_step("aligner_add", ADD_START, extra, direction="I").what == "malformed"


def test_composer_callee_lines():
    sub = run("sub", 99999, 12345)
    _, out = sub.transition(1)
    assert "ADD, q0, [HEAD1] |9|9|9|9|9[HEAD2]" in out
    got = out.replace("ADD, q0, [HEAD1] |9|9|9|9|9[HEAD2]", "ADD, q0, [HEAD1] |9|9|9|9[HEAD2]")
    failure = classify_step("executor_sub", out, got)
    assert (failure.machine, failure.tape, failure.what) == ("SUB", "call HEAD1", "missing_repetition")


def test_aligner_output_fields():
    expected = "4848484842+9393939395=14242424237"
    failure = classify_step("aligner_add", expected, "4848484842+93939395=14242424237", direction="O")
    assert (failure.where, failure.tape, failure.what) == ("aligner (O)", "HEAD2", "missing_repetition")
    failure = classify_step("aligner_eq", "12==12=True", "12==12=False", direction="O")
    assert (failure.tape, failure.what) == ("OUTPUT", "wrong_verdict")


# --------------------------------------------------------------------------- records and answers


class _Scripted:
    """Answers each prompt of a correct run of `expr` as the machine does (runtime.reference_steps), except
    that aligner (I)'s output goes through `edit`; a prompt off that run gets the empty (unparseable) text."""

    def __init__(self, expr, edit=lambda text: text):
        self.answers = {(step.adapter, step.input): step.output for step in reference_steps(expr)}
        self.edit = edit

    def generate(self, prompts, adapter):
        outputs = [self.answers.get((adapter, prompt), "") for prompt in prompts]
        if adapter.startswith("aligner") and prompts[0].endswith("="):
            return [self.edit(text) for text in outputs]
        return outputs


def test_a_traced_record_is_classified_at_its_first_divergence():
    expr = "4848484842+9393939395="
    miscopying = _Scripted(expr, lambda text: text.replace("|5|9|3|9|3|9|3|9|3|9", "|5|9|3|9|3|9|3|9"))
    record = solve_batch([Problem("p", expr, "14242424237")], miscopying, mode="traced")[0]
    assert not is_correct(record)
    failure = classify_record(record)
    assert (failure.where, failure.what, failure.step, failure.depth) == ("aligner (I)", "missing_repetition", 0, 0)
    assert failure.error_class == "wrong_digit" and not failure.answer_correct
    assert classify_record(record.to_dict()) == failure  # the JSON record gives the same


class _SlipInCall(_Scripted):
    """The machine's run, but executor_add (inside sub's call, depth 1) writes one wrong carry once."""

    def generate(self, prompts, adapter):
        outputs = super().generate(prompts, adapter)
        if adapter == "executor_add" and not getattr(self, "slipped", False):
            self.slipped = True
            outputs = [outputs[0].replace("[C] 0", "[C] 1", 1) if "[C] 0" in outputs[0]
                       else outputs[0].replace("[C] 1", "[C] 0", 1)] + outputs[1:]
        return outputs


def test_a_records_first_divergence_keeps_its_depth_and_step_count_when_the_steps_are_emptied():
    """Packed records drop the step texts (results/records/*.tgz); the failure read
    from one still says the slip was inside a composer's call, and how many model calls the run made."""
    expr = "1000000-1="
    record = solve_batch([Problem("p", expr, "999999")], _SlipInCall(expr), mode="traced")[0]
    full = classify_record(record)
    assert full.depth == 1 and full.where == "executor" and full.machine == "ADD"
    packed = {**record.to_dict(), "steps": []}
    assert classify_record(packed) == full
    entry = record_failures([ProblemRecord.from_dict(packed)])[0]
    assert entry["n_steps"] == record.n_steps > 0 and entry["depth"] == 1


def test_a_right_run_is_no_failure_and_a_stopped_run_names_the_run():
    record = solve_batch([Problem("p", "45+67=", "112")], _Scripted("45+67="), mode="traced")[0]
    assert classify_record(record) is None
    stopped = {"id": "p", "mode": "traced", "first_divergence": None, "correct": False, "outcome": "no_halt", "detail": "no halt state after 9 steps",
               "truth": "112", "expr": "45+67=", "answer": None}
    assert classify_record(stopped).where == "no halt"
    called = {**stopped, "outcome": "unparseable", "detail": "step 3 (executor_sub): [CALL] ADD but the callee lines are GREATER_THAN"}
    assert classify_record(called).where == "wrong call"


def test_baseline_answers():
    assert classify_answer("1999+1=", "2000", None).where == "unparseable output"
    failure = classify_answer("4848484842+9393939395=", "14242424237", "142424237")
    assert (failure.where, failure.what) == ("answer", "missing_repetition")
    assert classify_answer("1999+1=", "2000", "1000").what == "carry_error"
    assert classify_answer("1999+1=", "2000", "2100").what == "carry_error"
    assert classify_answer("1999+1=", "2000", "2070").what == "wrong_digit"
    # an answer that goes on past its end, or stops short, unless a repetition explains it
    assert classify_answer("4567+1=", "4568", "45681234").what == "late_halt"
    assert classify_answer("4567+1=", "4568", "45").what == "truncated"
    assert classify_answer("1999+1=", "2000", "20000").what == "extra_repetition"


def test_marked_difference():
    assert mark_difference("1248484842", "12484842", context=3) == ("…484⟦84⟧2", "…484⟦⟧2")


# --------------------------------------------------------------------------- Fisher's exact test


def test_fisher_exact_by_hand_and_against_scipy():
    # 0 of 8 against 8 of 8: only the observed table is as extreme on each side: 2 / C(16, 8)
    assert fisher_exact(0, 8, 8, 8) == pytest.approx(2 / math.comb(16, 8))
    assert fisher_exact(3, 10, 3, 10) == pytest.approx(1.0)
    assert fisher_exact(0, 0, 1, 5) == 1.0
    import scipy.stats as scipy_stats  # (what fisher_exact calls: the call's table and the p it keeps)
    # (the last two: a whole repeated-digit evaluation's pooled sizes, weights beyond a float's range)
    for table in ((1, 9, 11, 3), (7, 12, 2, 10), (0, 200, 5, 200), (4, 4, 0, 30), (72, 1678, 1, 349), (500, 2385, 2, 548)):
        k1, n1, k2, n2 = table[0], table[0] + table[1], table[2], table[2] + table[3]
        expected = scipy_stats.fisher_exact([[k1, n1 - k1], [k2, n2 - k2]]).pvalue
        assert fisher_exact(k1, n1, k2, n2) == pytest.approx(expected, rel=1e-9)


def test_fisher_exact_at_the_full_evaluations_sizes_where_the_weights_pass_a_floats_range():
    # a whole repeated-digit evaluation pools thousands of problems: C(4250, 250) is about 1e441
    assert 0 < fisher_exact(72, 1750, 1, 350) < 1e-3
    assert 0 < fisher_exact(500, 2885, 2, 550) < 1e-30  # (scipy: 3.78e-38)
    assert fisher_exact(200, 4000, 50, 1000) == pytest.approx(1.0)
    assert fisher_exact(150, 3000, 20, 1000) == pytest.approx(fisher_exact(20, 1000, 150, 3000))


@pytest.mark.parametrize("op, a, b", [("reflection", 99999, 99123), ("long_mul", 946, 15)])
def test_a_head_moved_left_out_of_the_command_is_a_head_off_by_one(op, a, b):
    """REFLECTION's output head and LONG_MUL's HEAD2 move LEFT: a command that leaves the move out is the head
    error it is, not an unclassified command."""
    from caef_bench.machines import run

    machine_run = run(op, a, b)
    step = next(i for i in range(len(machine_run)) if " LEFT" in machine_run.transition(i)[1].splitlines()[1])
    target = machine_run.transition(step)[1]
    got = target.replace(", [OUTPUT] LEFT", "").replace("[OUTPUT] LEFT, ", "").replace(", [HEAD2] LEFT", "")
    assert got != target
    assert classify_step(f"executor_{op}", target, got).what == "head_off_by_one"
