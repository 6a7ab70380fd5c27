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


# --------------------------------------------------------------------------- REFLECTION and SUB's leading zeros


@st.composite
def subtractions(draw):
    """a >= b, adversarial for REFLECTION: b with a run of top 9s at a's length (its complement has leading
    zeros), a == b (an all-zero complement), b == 0, one digit, 100 digits, or random."""
    shape = draw(st.sampled_from(["nines_on_top", "equal", "zero", "one_digit", "hundred", "random"]))
    if shape == "one_digit":
        a = draw(st.integers(0, 9))
        return a, draw(st.integers(0, a))
    length = 100 if shape == "hundred" else draw(st.integers(1, 120))
    if shape == "nines_on_top":
        nines = draw(st.integers(1, length))
        rest = draw(st.integers(0, 10 ** (length - nines) - 1)) if length > nines else 0
        b = int("9" * nines + str(rest).zfill(length - nines)) if length > nines else int("9" * nines)
        return max(b, draw(numbers(length))) if draw(st.booleans()) else 10**length - 1, b
    a = draw(numbers(length))
    if shape == "equal":
        return a, a
    if shape == "zero":
        return a, 0
    b = draw(numbers(length))
    return max(a, b), min(a, b)


@SETTINGS
@given(subtractions())
def test_reflection_drops_its_leading_zeros_and_sub_stays_right(pair):
    a, b = pair
    nines = 10 ** len(str(a)) - 1
    reflection = run("reflection", nines, b)
    transitions = _checked_texts(reflection)
    halt = parse(transitions[-1][1]).state
    complement = nines - b
    assert halt.output == str(complement)[::-1]  # no leading zeros; an all-zero result is "0"
    # One q2 step per dropped zero, plus the one that halts.
    q2_steps = [parse(source).state for source, _ in transitions if parse(source).state.q == "q2"]
    assert len(q2_steps) == len(str(a)) - len(str(complement).lstrip("0")) + 1
    assert [len(s.output) for s in q2_steps] == list(range(len(str(a)), len(str(a)) - len(q2_steps), -1))

    sub = run("sub", a, b)
    _checked_texts(sub)
    assert align_output(sub.transitions()[-1][1]) == f"{a}-{b}={a - b}"
    # SUB's first ADD adds the complement as the reflection left it, zeros dropped.
    first_add = sub.phases[2].callee
    assert (first_add.a, first_add.b) == (str(a)[::-1], str(complement)[::-1])
    for _, callee in sub.calls():
        _assert_next_states(callee)
        for i in range(callee.n_steps):
            assert callee.step_of(callee.state(i)) == i


def test_an_all_zero_reflection_empties_its_tape_then_halts_as_zero():
    texts = [source for source, _ in run("reflection", 999, 999).transitions()]
    q2 = [t.split("\n")[0] for t in texts if ", q2, " in t]
    assert [line.rsplit(" ", 1)[1] for line in q2] == ["|0|0|0[OUTPUT]", "|0|0[OUTPUT]", "|0[OUTPUT]", "|[OUTPUT]"]
    assert run("reflection", 999, 999).text(-1).split("\n")[0].endswith(" |0")


def test_a_reflection_q2_tape_emptied_without_its_cell_boundary_does_not_parse():
    import pytest

    from caef_bench.machines import FormatError

    with pytest.raises(FormatError, match=r"\|\[OUTPUT\]"):
        parse("REFLECTION, q2,  |9|9[HEAD1] |9|9[HEAD2] [OUTPUT]\nCMD [OUTPUT], qH")
