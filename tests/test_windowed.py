"""Windowed execution (runtime.windowed): operands past a tier's fields of ids run a window of each state
at a time, the model writing every digit; the runtime only cuts and joins text."""

import random
import re
from dataclasses import replace

import pytest

from caef_bench.machines import parse, parse_expression, render, result, run
from caef_bench.machines.aligner import align_input, align_output
from caef_bench.machines.text import Snapshot
from caef_bench.runtime import Problem, solve_batch
from caef_bench.runtime.oracle import OracleModel
from caef_bench.models.limits import TIER_LIMITS
from caef_bench.runtime.windowed import (cut, input_chunks, join_answer, join_start, output_chunks, reference_calls,
                                         splice, window_of)

TINY = TIER_LIMITS["tiny"].windowing
BACK, CHUNK, WIDTH = TINY.back, TINY.chunk, TINY.width

RNG = random.Random(66)
# What a person pastes: round numbers, runs of nines, operands of two lengths, equal and near pairs
TYPED = [
    "1" + "0" * 999 + "+1=",
    "9" * 1000 + "+1=",
    "1+" + "9" * 1000 + "=",
    "5" * 500 + "+" + "5" * 500 + "=",
    f"{RNG.randrange(10 ** 999, 10 ** 1000)}+{RNG.randrange(10 ** 999, 10 ** 1000)}=",
    "7" * 300 + "==" + "7" * 300 + "=",
    "7" * 299 + "8" + "==" + "7" * 300 + "=",
    "100" * 70 + ">" + "99" * 105 + "=",
    "8" * 150 + "<" + "8" * 149 + "9=",
    "10" * 100 + "<" + "1" + "0" * 300 + "=",
]


class MachineWindows:
    """A step model answering each windowed call as the machines would (runtime.windowed.reference_calls)."""

    def __init__(self, exprs, corrupt=None, shape=TINY):
        self.table = {(adapter, prompt): output for expr in exprs for adapter, prompt, output in reference_calls(expr, shape)}
        self.corrupt = corrupt or (lambda adapter, prompt, output: output)
        self.prompts = []

    def generate(self, prompts, adapter):
        self.prompts += prompts
        return [self.corrupt(adapter, p, self._answer(adapter, p)) for p in prompts]

    def _answer(self, adapter, prompt):
        if (adapter, prompt) not in self.table and adapter.startswith("aligner"):  # a halt state off the course
            return OracleModel().complete(prompt, adapter)
        return self.table[(adapter, prompt)]


def truth(expr):
    expression = parse_expression(expr)
    return str(result(expression.op, expression.a, expression.b))


def test_typed_long_problems_run_windowed_to_the_right_answer_with_prompts_of_bounded_size():
    model = MachineWindows(TYPED)
    records = solve_batch([Problem(str(i), e) for i, e in enumerate(TYPED)], model, mode="traced", windowing=TINY)
    for expr, record in zip(TYPED, records):
        assert (record.outcome, record.answer, record.first_divergence) == ("answered", truth(expr), None), expr
        assert record.windowed == {"width": WIDTH, "back": BACK, "chunk": CHUNK}  # the record says how it ran
        assert record.final == expr + truth(expr)
    # every prompt is a window or a chunk: its length does not grow with the operands'
    assert max(len(p) for p in model.prompts) < 12 * max(WIDTH, CHUNK)


def test_operands_within_the_fields_still_run_on_whole_states():
    expr = "9" * 100 + "+1="
    record = solve_batch([Problem("p", expr)], OracleModel(), mode="traced", windowing=TINY)[0]
    assert record.answer == truth(expr) and record.steps[0].input == expr  # aligner (I) read the whole expression


def test_a_window_spliced_back_is_the_machines_next_state():
    machine_run = run("add", int("9" * 200), int("1" + "0" * 150))
    for i in range(len(machine_run)):
        whole, after = machine_run.snapshot(i), machine_run.snapshot(i + 1)
        shown, window = window_of(whole.state, TINY)
        assert max(len(t.digits) for t in shown.tapes) <= WIDTH and len(shown.output) <= BACK + 1
        written = cut(Snapshot(after.state), window).state  # what a correct model writes on the window
        assert splice(whole.state, window, written) == after.state


@pytest.mark.parametrize("expr", ["1" + "0" * 260 + "+" + "1" + "0" * 99 + "=", "20" * 80 + ">3=", "4" * 51 + "==4="])
def test_aligner_chunks_carry_a_sentinel_and_join_into_the_start_state(expr):
    prompts = input_chunks(expr, CHUNK)
    assert all(parse_expression(p) for p in prompts)  # expressions the aligner was trained on
    assert all(side.startswith("1") for p in prompts for side in p[:-1].replace("==", "+").replace(">", "+").split("+"))
    start = join_start(expr, prompts, [align_input(p) for p in prompts])
    assert render(start) + "\n" == align_input(expr)


def test_aligner_O_chunks_join_into_the_answer():
    for expr in TYPED:
        expression = parse_expression(expr)
        halt = run(expression.op, expression.a, expression.b).halt.state
        prompts = output_chunks(halt, CHUNK)
        assert join_answer(expr, prompts, [align_output(p) for p in prompts], halt.machine) == truth(expr)


def test_an_aligner_O_chunk_whose_result_is_not_its_halt_states_is_no_answer():
    from caef_bench.runtime.windowed import OffProblem

    expr = "9" * 120 + "+" + "1="
    halt = run("add", 10**120 - 1, 1).halt.state
    prompts = output_chunks(halt, CHUNK)
    written = [align_output(p) for p in prompts]
    written[1] = written[1][:-3] + written[1][-2:]  # a 0 of the run dropped, the expression kept
    with pytest.raises(OffProblem, match="chunk 1: aligner \\(O\\) wrote the result"):
        join_answer(expr, prompts, written, "ADD")
    written = [align_output(p) for p in prompts]
    written[0] = "3" + written[0][1:]  # the chunk's expression miscopied, its result kept
    with pytest.raises(OffProblem, match="chunk 0: aligner \\(O\\) wrote '3"):
        join_answer(expr, prompts, written, "ADD")


def test_a_sums_chunks_read_back_as_sums_whose_top_digits_add_up():
    """1<a's chunk>+1<b's chunk>=2<the sum's chunk>: with a 1 over the sum, a chunk of it beginning with 1
    read `=11…`, a run an aligner (O) lengthens; the top chunk keeps the carry out under the 2."""
    expr = "9" * 120 + "+" + "9" * 120 + "="
    halt = run("add", 10**120 - 1, 10**120 - 1).halt.state
    written = [align_output(p) for p in output_chunks(halt, CHUNK)]
    assert all(re.fullmatch(r"1\d+\+1\d+=2\d+", w) for w in written)
    assert written[-1].endswith("=21" + "9" * 20) and written[0].endswith("=2" + "9" * (CHUNK - 1) + "8")
    assert join_answer(expr, output_chunks(halt, CHUNK), written, "ADD") == truth(expr)


def test_a_wrong_digit_in_one_window_is_the_runs_first_divergence_and_a_wrong_answer():
    expr = "3" * 200 + "+" + "4" * 200 + "="

    def corrupt(adapter, prompt, output):  # the halting step writes one output cell of its window wrong
        if adapter == "executor_add" and output.endswith("Halt state."):
            state, rest = output.split(" [C]0 ", 1)
            return f"{state} [C]0 {rest.replace('|7', '|8', 1)}"
        return output

    record = solve_batch([Problem("p", expr)], MachineWindows([expr], corrupt), mode="traced", windowing=TINY)[0]
    assert record.outcome == "answered" and record.answer != truth(expr)
    assert [(x, y) for x, y in zip(record.answer, truth(expr)) if x != y] == [("8", "7")]  # that cell, nothing else
    assert (record.first_divergence.adapter, record.first_divergence.error_class) == ("executor_add", "wrong_digit")


def test_an_operand_rewritten_in_a_window_or_a_lost_sentinel_is_misaligned():
    expr = "3" * 200 + "+" + "4" * 200 + "="

    def rewrite(adapter, prompt, output):
        return output.replace("|3", "|2", 1) if adapter == "executor_add" else output

    record = solve_batch([Problem("p", expr)], MachineWindows([expr], rewrite), windowing=TINY)[0]
    assert record.outcome == "misaligned" and "rewrote operand a" in record.detail

    def drop_sentinel(adapter, prompt, output):
        return output.replace("=2", "=", 1) if adapter == "aligner_add" and "qH" in prompt else output  # aligner (O)

    record = solve_batch([Problem("p", expr)], MachineWindows([expr], drop_sentinel), windowing=TINY)[0]
    assert record.outcome == "misaligned" and "aligner (O) wrote the result" in record.detail


def test_a_model_that_takes_drafts_is_offered_the_machines_window():
    expr = "6" * 150 + "+" + "7" * 150 + "="
    table = MachineWindows([expr]).table
    offered = []

    class Drafted:
        def generate(self, prompts, adapter, drafts=None):
            offered.append((adapter, drafts))
            return [table[(adapter, p)] for p in prompts]

    record = solve_batch([Problem("p", expr)], Drafted(), windowing=TINY)[0]
    assert record.answer == truth(expr)
    executor_drafts = [drafts[0] for adapter, drafts in offered if adapter == "executor_add"]
    expected = [output for adapter, _, output in reference_calls(expr, TINY) if adapter == "executor_add"]
    assert executor_drafts == expected  # each window's draft is the machine's next window
    # the chunks are expressions and halt states, which the model's own drafter reads
    assert all(drafts is None for adapter, drafts in offered if adapter == "aligner_add")


def test_sub_runs_on_whole_states_where_a_tiers_windowing_leaves_it_out():
    expr = "5" * 15 + "-" + "4" * 15 + "="
    shape = TIER_LIMITS["smollm2-135m"].windowing  # its windowed sub is not measured: not among its ops
    record = solve_batch([Problem("p", expr)], OracleModel(), windowing=shape)[0]
    assert "sub" not in shape.ops and record.windowed is None
    assert record.steps[0].input == expr and record.answer == truth(expr)  # whole states, as before


def test_parsed_windows_render_back_to_the_same_text():
    expr = "12345" * 40 + "<" + "12346" * 40 + "="
    for adapter, prompt, output in reference_calls(expr, TINY):
        if adapter.startswith("executor"):
            assert render(parse(prompt)) == prompt and render(parse(output)) == output
            assert replace(parse(output), trailing_newline=False) == parse(output)


def test_the_server_and_the_caef_lm_eval_model_run_long_additions_windowed():
    from fastapi.testclient import TestClient
    from lm_eval.api.instance import Instance

    from caef_bench.evaluate.lm_eval_models import CaefLM
    from caef_bench.serve.app import create_app

    exprs = ["4" * 300 + "+" + "6" * 300 + "=", "1" * 250 + ">" + "1" * 249 + "2="]
    with TestClient(create_app(MachineWindows(exprs), "tiny")) as client:
        reply = client.post("/v1/completions", json={"model": "caef-tiny", "prompt": exprs[0]})
    assert reply.status_code == 200 and reply.json()["choices"][0]["text"] == truth(exprs[0])
    model = CaefLM(step_model=MachineWindows(exprs))
    requests = [Instance("generate_until", {}, (expr, {"until": ["\n"]}), idx=i) for i, expr in enumerate(exprs)]
    assert model.generate_until(requests) == [truth(expr) for expr in exprs]


def test_the_tiny_tier_solves_a_pasted_200_digit_addition(capsys):
    from caef_bench.cli import main

    a, b = "9" * 120 + "0" * 80, "1" + "0" * 130 + "7" * 69
    assert main(["solve", f"{a} + {b}"]) == 0  # exit 0: the machines' answer
    out, err = capsys.readouterr()
    assert out.strip() == f"{a}+{b}={int(a) + int(b)}"
    assert "a window at a time past 100 digits" in err


@pytest.mark.slow
def test_the_tiny_tier_solves_a_pasted_1000_digit_addition(capsys):
    from caef_bench.cli import main
    from caef_bench.data.testsets import load_cell

    row = load_cell("add_1000")[0]
    assert main(["solve", f"{row['a']} + {row['b']}"]) == 0
    assert capsys.readouterr().out.strip() == row["expr"] + row["answer"]


def test_a_whole_state_run_is_not_marked_windowed_and_its_record_reads_as_before():
    record = solve_batch([Problem("p", "45+67=")], OracleModel(), windowing=TINY)[0]
    assert record.windowed is None and "windowed" not in record.to_dict()


def test_smollm2_windows_and_chunks_stay_within_its_trained_10_digits():
    shape = TIER_LIMITS["smollm2-135m"].windowing
    for expr in ["6" * 60 + "+" + "7" * 45 + "=", "1" + "0" * 99 + ">" + "9" * 99 + "=", "123" * 20 + "==" + "123" * 20 + "="]:
        calls = list(reference_calls(expr, shape))
        for adapter, prompt, _ in calls:
            if adapter.startswith("executor"):
                state = parse(prompt).state
                assert all(len(tape.digits) <= 10 for tape in state.tapes), prompt
            elif "=" in prompt and "q" not in prompt:  # aligner (I): a chunk and its sentinel, two 10-digit numbers
                assert all(len(number) <= 10 for number in re.split(r"[^0-9]+", prompt) if number), prompt
        model = MachineWindows([expr], shape=shape)
        record = solve_batch([Problem("p", expr)], model, mode="traced", windowing=shape)[0]
        assert (record.outcome, record.answer) == ("answered", truth(expr))
