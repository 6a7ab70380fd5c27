"""Property tests with operands up to 300 digits: every machine halts with Python's answer,
and every text it writes parses and renders back byte for byte."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from caef_bench.machines import align_output, parse, render, result, run

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def numbers(draw, max_digits=300):
    """Uniform digit counts; half the time a repeated period, which makes long carry and borrow chains."""
    length = draw(st.integers(1, max_digits))
    if draw(st.booleans()):
        period = draw(st.text("0123456789", min_size=1, max_size=3))
        digits = (period * length)[:length]
        digits = draw(st.sampled_from("123456789")) + digits[1:] if length > 1 else digits
        return int(digits)
    low = 10 ** (length - 1) if length > 1 else 0
    return draw(st.integers(low, 10**length - 1))


@st.composite
def problems(draw):
    op = draw(st.sampled_from(["add", "sub", "mul", "div", "gt", "lt", "eq", "reflection", "left_mask"]))
    a, b = draw(numbers()), draw(numbers())
    if op == "sub" and a < b:
        a, b = b, a
    elif op == "mul":
        b = draw(st.integers(1, 15))
    elif op == "div":
        b = max(b, 1)
        a = b * draw(st.integers(0, 15)) + draw(st.integers(0, b - 1))
    elif op == "eq" and draw(st.booleans()):
        b = a
    elif op == "reflection":
        a = 10 ** max(len(str(a)), len(str(b))) - 1
    elif op == "left_mask":
        b = None
    return op, a, b


def _checked_texts(machine_run):
    transitions = machine_run.transitions()
    for source, target in transitions:
        for text in (source, target):
            assert render(parse(text)) == text
    return transitions


@SETTINGS
@given(problems())
def test_every_machine_halts_with_pythons_answer(problem):
    op, a, b = problem
    machine_run = run(op, a, b)
    transitions = _checked_texts(machine_run)
    halt = parse(transitions[-1][1])
    assert halt.state.halted and halt.command.is_halt
    assert not any(parse(target).state.halted for _, target in transitions[:-1])
    if op in ("reflection", "left_mask"):
        assert int(halt.state.output[::-1] or "0") == result(op, a, b)
    else:
        assert align_output(transitions[-1][1]).rsplit("=", 1)[1] == str(result(op, a, b))


@SETTINGS
@given(problems())
def test_each_executor_command_names_the_next_state(problem):
    op, a, b = problem
    machine_run = run(op, a, b)
    if op in ("sub", "mul", "div"):
        for _, callee in machine_run.calls():
            _assert_next_states(callee)
    else:
        _assert_next_states(machine_run)


def _assert_next_states(machine_run):
    for i in range(len(machine_run)):
        assert machine_run.command(i).next_q == machine_run.state(i + 1).q


@SETTINGS
@given(problems())
def test_fast_text_path_equals_the_generic_renderer(problem):
    op, a, b = problem
    machine_run = run(op, a, b)
    for i in range(machine_run.n_steps):
        assert machine_run.text(i) == render(machine_run.snapshot(i))
