"""Cases the reference examples do not show, pinned to the rules read off them."""

import pytest

from caef_bench.machines import HALT_LINE, align_output, parse, run, trace


def commands(op, a, b=None):
    return [parse(source).command for source, _ in trace(op, a, b)]


def command_lines(op, a, b=None):
    return [source.split("\n")[1] for source, _ in trace(op, a, b)]


def halt(op, a, b=None):
    return trace(op, a, b)[-1][1]


# ---------------------------------------------------------------- ADD
def test_add_carry_runs_through_the_longer_operand():
    assert halt("add", 1, 99999) == "ADD, qH,  |1[HEAD1] |9|9|9|9|9[HEAD2] [C]1 |0|0|0|0|0|1\n" + HALT_LINE
    lines = command_lines("add", 1, 99999)
    assert lines[1] == "CMD: [C] 1, [OUTPUT] 0, [OUTPUT] RIGHT, [HEAD1] RIGHT, [HEAD2] RIGHT, q1"
    assert lines[2:6] == ["CMD: [C] 1, [OUTPUT] 0, [OUTPUT] RIGHT, [HEAD2] RIGHT, q1"] * 4
    assert lines[6] == "CMD: [OUTPUT] 1, [OUTPUT], [C], qH"


def test_add_without_final_carry_writes_no_top_digit():
    assert halt("add", 123, 0) == "ADD, qH,  |3|2|1[HEAD1] |0[HEAD2] [C]0 |3|2|1\n" + HALT_LINE


@pytest.mark.parametrize("digits", [1, 7, 100, 150, 301])
def test_add_step_count_is_width_plus_two(digits):
    a = 10**digits - 1
    assert len(trace("add", a, 1)) == digits + 2
    assert align_output(halt("add", a, 1)) == f"{a}+1={a + 1}"


# ---------------------------------------------------------------- comparisons
def test_comparison_writes_only_when_digits_differ_and_the_top_difference_wins():
    lines = command_lines("gt", 1000, 1001)
    assert lines[1] == "CMD [HEAD1] RIGHT, [HEAD2] RIGHT, [OUTPUT] False, q1"  # 0 vs 1
    assert lines[2:5] == ["CMD [HEAD1] RIGHT, [HEAD2] RIGHT, q1"] * 3  # equal digits keep the verdict
    assert lines[5] == "CMD [OUTPUT], qH"
    assert align_output(halt("gt", 1000, 1001)) == "1000>1001=False"
    assert command_lines("gt", 2001, 1009)[-2] == "CMD [HEAD1] RIGHT, [HEAD2] RIGHT, [OUTPUT] True, q1"
    assert align_output(halt("gt", 2001, 1009)) == "2001>1009=True"


def test_shorter_operand_decides_even_when_the_verdict_is_unchanged():
    # 1 < 15: the digit scan already says True; running out of digits writes it again.
    assert command_lines("lt", 1, 15)[-1] == "CMD [OUTPUT] True, [OUTPUT], qH"
    assert halt("lt", 1, 15) == "LESS_THAN, qH,  |1[HEAD1] |5[HEAD2]|1 True\n" + HALT_LINE


def test_equal_with_matching_prefix_but_different_lengths():
    steps = trace("eq", 5, 55)
    assert steps[1][0].split("\n")[1] == "CMD [HEAD1] RIGHT, [HEAD2] RIGHT, q1"
    assert steps[-1][0] == "EQUAL, q1,  |5[HEAD1] |5[HEAD2]|5 [OUTPUT]True\nCMD [OUTPUT] False, [OUTPUT], qH"
    assert steps[-1][1] == "EQUAL, qH,  |5[HEAD1] |5[HEAD2]|5 False\n" + HALT_LINE


@pytest.mark.parametrize("op,expected", [("gt", "False"), ("lt", "False"), ("eq", "True")])
def test_equal_hundred_digit_operands(op, expected):
    a = int("7" * 120)
    assert align_output(halt(op, a, a)).endswith("=" + expected)
    assert command_lines(op, a, a)[-1] == "CMD [OUTPUT], qH"


# ---------------------------------------------------------------- auxiliary machines
def test_reflection_with_a_shorter_subtrahend_reflects_zeros_to_nines():
    lines = command_lines("reflection", 999, 1)
    assert lines[1] == "CMD [HEAD1] RIGHT, [HEAD2] RIGHT, [OUTPUT] 8, [OUTPUT] RIGHT, q1"
    assert lines[2:4] == ["CMD [HEAD1] RIGHT, [OUTPUT] 9, [OUTPUT] RIGHT, q1"] * 2
    assert lines[4:] == ["CMD q2", "CMD [OUTPUT], qH"]
    assert halt("reflection", 999, 1) == "REFLECTION, qH,  |9|9|9[HEAD1] |1[HEAD2] |8|9|9\n" + HALT_LINE


@pytest.mark.parametrize("a,shown", [(7, "0"), (10, "0"), (13027, "|7|2|0|3"), (90000000001, "|1")])
def test_left_mask_erases_the_top_digit_and_the_zeros_it_exposes(a, shown):
    assert halt("left_mask", a).split("\n")[0].endswith("[HEAD] " + shown)


# ---------------------------------------------------------------- composers
def test_sub_with_a_borrow_chain_across_every_digit():
    a = 10**100
    steps = trace("sub", a, 1)
    assert len(steps) == 5
    assert steps[-1][1] == f"SUB, qH, [HEAD1]{'|0' * 100}|1 [HEAD2]|1 {'|9' * 100}\n" + HALT_LINE
    # The callee halts inside SUB show "[C]0" whatever the carry (reference behaviour).
    assert "[C]0 " in steps[2][0] and "[C]0 " in steps[3][0]


def test_sub_equal_operands_keeps_the_zeros_in_the_left_mask_halt():
    steps = trace("sub", 12, 12)
    assert steps[-1][0].endswith("LEFT_MASK, qH,  |0|0|1[HEAD] |0|0\n" + HALT_LINE + "\n")
    assert align_output(steps[-1][1]) == "12-12=0"


def test_mul_by_zero_operand_and_by_one():
    assert align_output(halt("mul", 0, 15)) == "0*15=0"
    assert len(trace("mul", 123456789, 1)) == 2


def test_mul_less_than_halt_writes_the_count_in_natural_order():
    sources = [source for source, _ in trace("mul", 3, 12)]
    lt_halts = [s.split("\n")[2] for s in sources if s.split("\n")[2:3] and s.split("\n")[2].startswith("LESS_THAN, qH")]
    assert lt_halts[9] == "LESS_THAN, qH,  |1|0[HEAD1] |2|1[HEAD2] True"  # count 10, b 12
    assert lt_halts[10] == "LESS_THAN, qH,  |1|1[HEAD1] |2|1[HEAD2] True"


@pytest.mark.parametrize("a,b", [(3, 7), (0, 5), (7, 7), (10**10 - 1, 10**9 - 7)])
def test_div_counts_until_the_multiple_exceeds_a(a, b):
    steps = trace("div", a, b)
    assert len(steps) == 3 * (a // b) + 2
    assert align_output(steps[-1][1]) == f"{a}//{b}={a // b}"


def test_composer_inputs_end_with_a_newline_and_outputs_do_not():
    for source, target in trace("div", 22, 5):
        assert source.endswith("\n") and not target.endswith("\n")


def test_run_gives_any_step_by_index():
    machine = run("add", 45, 67)
    assert machine.n_steps == 5 and len(machine) == 4
    assert machine.text(-1) == machine.text(4)
    with pytest.raises(IndexError):
        machine.text(5)
