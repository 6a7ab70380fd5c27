"""Every trace and aligner example of the reference implementation is reproduced byte for byte."""

import json

import pytest

from caef_bench.machines import OffCourse, align_input, align_output, lookup, next_text, split_step_end, trace
from conftest import caef_format_examples

EXECUTOR_FILES = {"add": "add", "equal": "eq", "greater_than": "gt", "less_than": "lt",
                  "reflection": "reflection", "left_mask": "left_mask"}
COMPOSER_FILES = {"sub": "sub", "mul": "mul", "div": "div"}


def _records(name):
    path = caef_format_examples() / f"{name}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _cases(files):
    return [pytest.param(op, rec, id=f"{name}-{i}") for name, op in files.items() for i, rec in enumerate(_records(name))]


@pytest.mark.parametrize("op,record", _cases(EXECUTOR_FILES))
def test_executor_trace_matches_reference(op, record):
    steps = [f"{state}\n{command}" for state, command in record["seq"]]
    expected = list(zip(steps, steps[1:]))
    assert trace(op, record["op1"], record.get("op2")) == expected


@pytest.mark.parametrize("op,record", _cases(COMPOSER_FILES))
def test_composer_trace_matches_reference(op, record):
    expected = [tuple(pair) for pair in record["seq"]]
    assert trace(op, record["op1"], record["op2"]) == expected


@pytest.mark.parametrize("record", _records("aligner_input"), ids=lambda r: r["expr"])
def test_aligner_input_matches_reference(record):
    assert align_input(record["expr"]) == record["tm"]


@pytest.mark.parametrize("record", _records("aligner_output"), ids=lambda r: r["text"])
def test_aligner_output_matches_reference(record):
    assert align_output(record["halt"]) == record["text"]


def test_every_example_file_is_covered():
    names = {p.stem for p in caef_format_examples().glob("*.jsonl")}
    assert names == set(EXECUTOR_FILES) | set(COMPOSER_FILES) | {"aligner_input", "aligner_output"}


@pytest.mark.parametrize("op,record", _cases(EXECUTOR_FILES) + _cases(COMPOSER_FILES))
def test_next_text_answers_every_reference_step_and_nothing_after_the_halt(op, record):
    transitions = trace(op, record["op1"], record.get("op2"))
    for before, after in transitions:
        assert next_text("executor", op, before) == after
    halt = transitions[-1][1]
    halt_as_input = halt + "\n" if op in COMPOSER_FILES.values() else halt  # a composer's inputs end with one
    with pytest.raises(OffCourse):
        next_text("executor", op, halt_as_input)
    if lookup(op).symbol:
        assert next_text("aligner", op, halt) == align_output(halt)


def _model_outputs(op, record):
    """Every text an executor writes on this example."""
    return [after for _, after in trace(op, record["op1"], record.get("op2"))]


@pytest.mark.parametrize("op,record", _cases(EXECUTOR_FILES) + _cases(COMPOSER_FILES))
@pytest.mark.parametrize("beyond", [", qH", ", qH, qH, qH", " [OUTPUT] 0, [OUTPUT], [C], qH", "\nCMD q1", "q",
                                    "\n\n"])
def test_a_step_ends_at_its_last_command_and_no_reference_output_is_cut(op, record, beyond):
    """split_step_end keeps every reference output whole and cuts off only what a model wrote past it
    (a missed end-of-text token: 'CMD: ..., qH, qH, ...')."""
    for output in _model_outputs(op, record):
        assert split_step_end(output) == (output, "")
        newline = beyond.startswith("\n")  # one trailing newline stays with the step, as parse() allows
        assert split_step_end(output + beyond) == (output + "\n" * newline, beyond[newline:])


@pytest.mark.parametrize("record", _records("aligner_input"), ids=lambda r: r["expr"])
def test_aligner_input_start_texts_are_never_cut(record):
    assert split_step_end(record["tm"]) == (record["tm"], "")
    assert split_step_end(record["tm"] + "CMD q1") == (record["tm"], "CMD q1")


@pytest.mark.parametrize("text", ["ADD, q1, |5[HEAD1]\nCMD: [C] 1, [OUTPUT]", "ADD, q1, |5[HEAD1]",
                                  "SUB, q1, [HEAD1]|1 [HEAD2]|4 \nCMD [CALL] REFLECTION, q2",
                                  "SUB, q1, [HEAD1]|1 [HEAD2]|4 \nCMD [CALL] REFLECTION, q2\nREFLECTION, q0, [HEAD1]",
                                  "garbage, qH, qH"])
def test_a_text_without_a_complete_command_is_left_whole(text):
    assert split_step_end(text) == (text, "")
