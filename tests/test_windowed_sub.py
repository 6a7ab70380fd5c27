"""Windowed subtraction (runtime.windowed): SUB's composer steps run in chunks with their top cells, its
callees (REFLECTION, ADD twice, LEFT_MASK) on windows; every copy the composer writes is checked."""

import random

import pytest

from caef_bench.machines import parse, render
from caef_bench.runtime import Problem, solve_batch
from caef_bench.runtime.windowed import SUB_TOPS, input_chunks, reference_calls
from test_windowed import CHUNK, TINY, WIDTH, MachineWindows, truth

RNG = random.Random(89)
A, B = sorted((RNG.randrange(10 ** 999, 10 ** 1000) for _ in range(2)), reverse=True)
# What a person pastes: a round number minus 1, nines, equal operands, a 1-digit b, a last-digit difference
TYPED = [
    "1" + "0" * 999 + "-1=",
    "9" * 1000 + "-1=",
    "9" * 1000 + "-" + "9" * 1000 + "=",
    "4" * 300 + "-" + "4" * 300 + "=",
    f"{A}-7=",
    f"{A}-{A - 3}=",
    f"{A}-{B}=",
    f"{A}-{B // 10 ** 400}=",
    "1" + "0" * 250 + "-" + "9" * 250 + "=",
]


def test_typed_long_subtractions_run_windowed_to_the_right_answer_within_the_windows_and_chunks():
    model = MachineWindows(TYPED)
    records = solve_batch([Problem(str(i), e) for i, e in enumerate(TYPED)], model, mode="traced", windowing=TINY)
    for expr, record in zip(TYPED, records):
        assert (record.outcome, record.answer, record.first_divergence) == ("answered", truth(expr), None), expr
        assert record.final == expr + truth(expr)
    for prompt in model.prompts:
        if "=" in prompt and "," not in prompt:  # aligner (I): two numbers of a chunk and its sentinel
            assert all(len(n) <= CHUNK + 1 for n in prompt[:-1].split("-")), prompt
            continue
        snapshot = parse(prompt)
        states = [snapshot.state] + ([snapshot.callee.state] if snapshot.callee else [])
        tapes = [t.digits for s in states for t in getattr(s, "tapes", ())] + \
            [d for s in states for d in (getattr(s, "a", ""), getattr(s, "b", ""), s.output) if d.isdigit()]
        executor = snapshot.machine != "SUB"
        # an executor's window: WIDTH cells a tape; a chunk: CHUNK digits and its top cells (two for a + reflection's)
        assert max(map(len, tapes)) <= (WIDTH if executor else CHUNK + 2), prompt


def test_each_chunk_of_a_composer_step_is_a_state_of_a_short_subtraction():
    expr = f"{A}-{B}="
    composer = [(p, o) for adapter, p, o in reference_calls(expr, TINY) if adapter == "executor_sub"]
    count = len(input_chunks(expr, CHUNK))
    assert len(composer) == 5 * count  # five composer steps, every one in chunks
    first, last = parse(composer[0][1]), parse(composer[-1][1])
    assert first.callee.state.tapes[0].digits == "9" * (CHUNK + 1)  # REFLECTION's nines, its top cell a 9 too
    assert (first.state.a[-1], first.state.b[-1]) == ("2", "1")  # 2<a's chunk> - 1<b's chunk>: a >= b
    assert last.state.output.endswith("1")  # the difference keeps a 1 on top
    assert set(SUB_TOPS) == {("q1", "REFLECTION"), ("q2", "ADD"), ("q3", "ADD"), ("q4", "LEFT_MASK")}
    for prompt, output in composer:
        assert render(parse(prompt)) == prompt and prompt.endswith("\n") and render(parse(output)) == output


def _corrupt_once(match, change):
    done = []

    def corrupt(adapter, prompt, output):
        if not done and match(adapter, prompt, output):
            done.append(prompt)
            return change(output)
        return output
    return corrupt


def _composer_chunks(expr: str, q: str) -> list:
    """The composer's chunk prompts at state q (its callee's halt shown), parsed, lowest chunk first."""
    chunks = [parse(p) for adapter, p, _ in reference_calls(expr, TINY) if adapter == "executor_sub"]
    return [s for s in chunks if s.state.q == q and s.callee is not None]


@pytest.mark.parametrize("expr", [f"{A}-{A - 10 ** 997}=", "9" * 120 + "1" * 80 + "-" + "9" * 120 + "0" * 80 + "=",
                                  "1" + "0" * 200 + "-" + "9" * 200 + "="])
def test_a_difference_with_top_zeros_shows_every_chunk_as_one_that_fills_its_columns(expr):
    # LEFT_MASK's tape is cut where its result ends: the zeros it erased never sit under a chunk's sentinel
    # (the composer, dropping only the tape's top cell, copied them as digits: `…=103918…` for `…=13918…`)
    for snapshot in _composer_chunks(expr, "q4"):
        tape, result = snapshot.callee.state.tapes[0].digits, snapshot.callee.state.output
        assert tape == result[:-1] + "11" and result.endswith("1"), render(snapshot)[-300:]


@pytest.mark.parametrize("expr", ["9" + "5" * 199 + "-" + "9" + "4" * 199 + "=", "9" * 200 + "-" + "9" * 200 + "=",
                                  "99" + "7" * 298 + "-" + "99" + "7" * 297 + "6="])
def test_reflections_result_stands_as_high_as_a_where_it_erased_top_zeros(expr):
    # b's top digits 9s: REFLECTION erases the 0s on top of the whole result; in each chunk's own subtraction
    # 2<a> - 1<b> they lie under its 8, so its chunk and the first ADD's second tape are shown with them
    for q, cells in (("q1", lambda s: s.callee.state.output), ("q2", lambda s: s.callee.state.tapes[1].digits)):
        for snapshot in _composer_chunks(expr, q):
            assert len(cells(snapshot)) == len(snapshot.state.a) and cells(snapshot).endswith("8"), q


@pytest.mark.parametrize("what, match, change, outcome, detail", [
    ("a copied tape", lambda a, p, o: a == "executor_sub" and "ADD, q0" in o and "q2," in o,
     lambda o: o.replace("[HEAD1] |", "[HEAD1] |3|", 1), "misaligned", "wrote ADD's tape 1"),
    ("a top cell", lambda a, p, o: a == "executor_sub" and "REFLECTION, q0" in o,
     lambda o: o.replace("|1 [OUTPUT]", " [OUTPUT]", 1), "misaligned", "its top cell lost"),
    ("the composer's operands", lambda a, p, o: a == "executor_sub" and "LEFT_MASK, q0" in o,
     lambda o: o.replace("[HEAD2]|", "[HEAD2]|5|", 1), "misaligned", "rewrote its operands"),
    ("the difference", lambda a, p, o: a == "executor_sub" and o.startswith("SUB, qH"),
     lambda o: o.replace(" |", " |4|", 1).replace("[HEAD2]|4|", "[HEAD2]|", 1), "misaligned", "copied the difference"),
    ("the composer's program", lambda a, p, o: a == "executor_sub" and "ADD, q4" in o,
     lambda o: o.replace("ADD, q4", "ADD, qH", 1), "unparseable", "not SUB's next step"),
    ("an operand in a callee's window", lambda a, p, o: a == "executor_reflection" and "q1" in o,
     lambda o: o.replace("|9", "|8", 1), "misaligned", "rewrote operand a"),
])
def test_a_corrupted_composer_chunk_or_window_is_caught_not_answered(what, match, change, outcome, detail):
    expr = "6" * 150 + "3-" + "5" * 149 + "=" if what != "the difference" else "6" * 151 + "-" + "5" * 149 + "="
    model = MachineWindows([expr], _corrupt_once(match, change))
    record = solve_batch([Problem("p", expr)], model, mode="traced", windowing=TINY)[0]
    assert (record.outcome, record.answer) == (outcome, None), (what, record.detail)
    assert detail in record.detail
    assert record.first_divergence is not None and record.first_divergence.step == record.n_steps - 1


def test_a_wrong_digit_in_a_callees_window_is_the_runs_first_divergence():
    expr = "7" * 200 + "-" + "3" * 200 + "="
    corrupt = _corrupt_once(lambda a, p, o: a == "executor_add" and "|4[OUTPUT]" in o,
                            lambda o: o.replace("|4[OUTPUT]", "|5[OUTPUT]"))

    class OffCourse(MachineWindows):  # past the wrong digit: no step of the machine's
        def _answer(self, adapter, prompt):
            return self.table.get((adapter, prompt), "off the machine's course")

    record = solve_batch([Problem("p", expr)], OffCourse([expr], corrupt), mode="traced", windowing=TINY)[0]
    assert record.answer != truth(expr)  # no right answer from a wrong sum digit
    assert (record.first_divergence.adapter, record.first_divergence.error_class) == ("executor_add", "wrong_digit")


@pytest.mark.slow
def test_the_tiny_tier_solves_a_pasted_200_digit_subtraction(capsys):
    # (a pasted 1,000-digit one is right too, ~4,200 model calls: ~16 minutes on 2 shared cores, too long for
    # CI's slow checks; 200 digits is ~850 calls, under a minute, through every windowed path of SUB)
    from caef_bench.cli import main
    from caef_bench.data.testsets import load_cell

    row = load_cell("sub_200")[0]
    assert main(["solve", f"{row['a']} - {row['b']}"]) == 0
    assert capsys.readouterr().out.strip() == row["expr"] + row["answer"]


def test_every_call_of_a_correct_windowed_subtraction_is_drafted_with_its_answer():
    """Each composer chunk is offered the chunk SUB's program asks for, as each callee window is offered the
    machine's next window: on the machine's course every call is one verify pass (speculative decoding keeps
    the model's own tokens, so a draft saves passes and changes no answer)."""
    expr = "6" * 150 + "3-" + "5" * 149 + "="
    offered = []

    class Drafted(MachineWindows):
        def generate(self, prompts, adapter, drafts=None):
            outputs = super().generate(prompts, adapter)
            offered.extend((adapter, draft, output) for draft, output in zip(drafts or [None] * len(prompts), outputs))
            return outputs

    record = solve_batch([Problem("p", expr)], Drafted([expr]), mode="traced", windowing=TINY)[0]
    assert record.answer == truth(expr)
    executor_calls = [(adapter, draft, output) for adapter, draft, output in offered if adapter.startswith("executor")]
    assert {adapter for adapter, _, _ in executor_calls} >= {"executor_sub", "executor_add", "executor_reflection"}
    assert all(draft == output for _, draft, output in executor_calls)
