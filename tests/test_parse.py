"""The parser: structured values, byte-exact round trips, and errors that name the offending token."""

import pytest

from caef_bench.machines import (
    HALT_LINE, Action, ComposerState, FormatError, Tape, classify, parse, render, trace,
)

ADD_STEP = "ADD, q1,  |5[HEAD1]|4 |7[HEAD2]|6 [C]1 |2[OUTPUT]\nCMD: [C] 1, [OUTPUT] 1, [OUTPUT] RIGHT, [HEAD1] RIGHT, [HEAD2] RIGHT, q1"


def test_executor_text_becomes_structure():
    snapshot = parse(ADD_STEP)
    state = snapshot.state
    assert (state.machine, state.q, state.carry, state.output) == ("ADD", "q1", "1", "2")
    assert state.tapes == (Tape("HEAD1", "54", 2), Tape("HEAD2", "76", 2))
    assert snapshot.command.actions[:2] == (Action("C", "1"), Action("OUTPUT", "1"))
    assert snapshot.command.next_q == "q1"
    assert render(snapshot) == ADD_STEP


def test_composer_text_with_callee_lines():
    source = trace("mul", 946, 15)[1][0]
    snapshot = parse(source)
    assert snapshot.state == ComposerState("MUL", "q1", "649", "51", "1", "649")
    assert snapshot.command.call == "LESS_THAN"
    assert snapshot.callee.state.machine == "LESS_THAN" and snapshot.callee.command.is_halt
    assert snapshot.trailing_newline
    assert render(snapshot) == source


@pytest.mark.parametrize("text", [
    "ADD, q0, [HEAD1] |5|4[HEAD2] |7|6 [C] [OUTPUT]",  # a state line alone
    "LEFT_MASK, qH,  |0|1[HEAD] 0\n" + HALT_LINE,
    "GREATER_THAN, q1,  [HEAD1]|5|4 [HEAD2]|7|6 [OUTPUT]False\nCMD [HEAD1] RIGHT, [HEAD2] RIGHT, q1",
    "SUB, q0, [HEAD1]|5|4 [HEAD2]|7|6 \nCMD q1\n",
    "DIV, q0, [HEAD1]|7 [HEAD2]|7 [COUNT] [OUTPUT]\nCMD [COUNT]|7, [OUTPUT] 0, q1\n",
])
def test_round_trip(text):
    assert render(parse(text)) == text


@pytest.mark.parametrize("text,token", [
    ("ADD, q1,  [HEAD1]|5|4 [HEAD2]|7|6 [C]0 [OUTPUT", "[OUTPUT"),
    ("FOO, q1, [HEAD1]|5", "FOO"),
    ("ADD, q1,  [HEAD1]|5|x [HEAD2]|7 [C]0 [OUTPUT]", "|"),
    ("ADD, q7x, ", "x"),
    ("ADD, q1,  [HEAD1]|5 [HEAD2]|7 [C]0 |2[OUTPUT]\nCMD: [D] 1, q1", "[D]"),
    ("ADD, q1,  [HEAD1]|5 [HEAD2]|7 [C]0 |2[OUTPUT]\nCMD [C] 1, q1", "CMD"),
    ("ADD, q1,  [HEAD1]|5 [HEAD2]|7 [C]0 |2[OUTPUT]\nCMD: [HEAD1] LEFT, q1", "LEFT"),
    ("ADD, qH,  |5[HEAD1] |7[HEAD2] [C]1 |2|1[OUTPUT]", "[OUTPUT]"),
    ("EQUAL, q1,  [HEAD1]|5 [HEAD2]|5 [OUTPUT]Maybe", "Maybe"),
    ("ADD, q1,  [HEAD1]|5 [HEAD2]|7 [C]0 [OUTPUT]\nCMD: [C] 1, [OUTPUT] 2, [OUTPUT] RIGHT", "<end of line>"),
    ("", "<end of line>"),
])
def test_malformed_text_names_the_first_offending_token(text, token):
    with pytest.raises(FormatError) as error:
        parse(text)
    assert error.value.token == token
    assert isinstance(error.value, ValueError)


def test_executor_text_cannot_carry_callee_lines():
    with pytest.raises(FormatError, match="no callee"):
        parse("ADD, q0, [HEAD1] |5[HEAD2] |7 [C] [OUTPUT]\nCMD: [C] 0, [HEAD1] RIGHT, [HEAD2] RIGHT, q1\nADD, q0, ")


@pytest.mark.parametrize("got,kind", [
    (ADD_STEP, None),
    (ADD_STEP.replace("q1,  |5", "q2,  |5"), "wrong_state"),
    (ADD_STEP.replace("|5[HEAD1]|4", "[HEAD1]|5|4"), "misplaced_head"),
    (ADD_STEP.replace("[C]1", "[C]0"), "wrong_carry"),
    (ADD_STEP.replace("|2[OUTPUT]", "|3[OUTPUT]"), "wrong_digit"),
    (ADD_STEP.replace("[OUTPUT] 1,", "[OUTPUT] 7,"), "wrong_command"),
    (ADD_STEP.replace("[OUTPUT]\n", "[OUTP\n"), "unparseable"),
])
def test_classify_names_the_error(got, kind):
    assert classify(ADD_STEP, got) == kind


def test_classify_looks_into_the_callee():
    expected = trace("sub", 4531, 1504)[1][1]
    got = expected.replace("ADD, q0, [HEAD1] |1|3|5|4", "ADD, q0, [HEAD1] |1|3|5|5")
    assert classify(expected, got) == "wrong_digit"
