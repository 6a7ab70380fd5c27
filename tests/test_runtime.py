"""The CAEF runtime: call stack, batching, step budget, tracing, malformed outputs and resume.

The models are stand-ins: the oracle (caef_bench.runtime.oracle), which answers
from the machines, and broken variants of it (fault_models).
"""

from __future__ import annotations

import json
import random

import pytest

from caef_bench.machines import (
    HALT_LINE,
    ComposerRun,
    align_input,
    classify,
    composer_view_of_halt,
    parse,
    parse_expression,
    render,
    result,
    run,
)
from caef_bench.evaluate.scoring import is_correct, verdict
from caef_bench.runtime import (
    Completion,
    Problem,
    ProblemRecord,
    RecordWriter,
    load_records,
    reference_steps,
    repair,
    resume,
    solve_batch,
    solve_to_file,
    to_composer_view,
)
from caef_bench.runtime.oracle import OracleError, OracleModel
from fault_models import (
    BrokenModel,
    DiesAfter,
    Interrupted,
    Recording,
    at_step,
    drop_callee_lines,
    echo,
    empty,
    garbled,
    on_adapter,
    on_executors,
    replace_text,
    wrong_digit,
)


def number(rng: random.Random, digits: int) -> int:
    return rng.randint(10 ** (digits - 1) if digits > 1 else 0, 10**digits - 1)


def sample_expressions(seed: int = 7) -> list[str]:
    """Every operator, short and long operands, and the edge cases of each machine."""
    rng = random.Random(seed)
    exprs = ["0+0=", "9+1=", "99999+1=", "45+67=", "4531-1504=", "1000-1=", "9-9=", "10-10=", "100-99=",
             "89*2=", "7*1=", "0*15=", "99*15=", "100//7=", "5//9=", "9//9=", "0//3=",
             "123>45=", "45>123=", "12<12=", "7==7=", "7==8=", "10==1=", "5<50="]
    for digits in (1, 5, 50, 100):
        a, b = number(rng, digits), number(rng, digits)
        exprs.append(f"{a}+{b}=")
        exprs.append(f"{max(a, b)}-{min(a, b)}=")
        exprs.append(f"{a}>{b}=")
        exprs.append(f"{a}<{b}=")
        exprs.append(f"{a}=={a if digits % 2 else b}=")
    exprs.append(f"{number(rng, 100)}-{number(rng, 37)}=")  # operands of different lengths
    exprs.append(f"{10**99}-{10**99 - 1}=")  # a long borrow chain and a one-digit difference
    for digits in (1, 4, 10):
        for b in (1, 2, 9, 15):
            exprs.append(f"{number(rng, digits)}*{b}=")
        divisor = number(rng, digits) or 1
        for quotient in (1, 8, 15):
            exprs.append(f"{divisor * quotient + rng.randrange(divisor)}//{divisor}=")
    return exprs


def machine_calls(machine_run, depth: int = 0) -> list[tuple[int, str, str]]:
    """(depth, input, output) of every executor transition, read off the machines directly:
    a composer's transition is followed by the whole run of the callee it calls."""
    calls = []
    for i in range(len(machine_run)):
        calls.append((depth, *machine_run.transition(i)))
        if isinstance(machine_run, ComposerRun) and machine_run.phases[i + 1].callee is not None:
            calls.extend(machine_calls(machine_run.phases[i + 1].callee, depth + 1))
    return calls


def _target(expr: str) -> str | None:
    try:
        expression = parse_expression(expr)
        return str(result(expression.op, expression.a, expression.b))
    except ValueError:
        return None


def problems_of(exprs: list[str]) -> list[Problem]:
    """Problems as a dataset gives them, each with the machines' answer as its target."""
    return [Problem(f"p{i:03d}", expr, _target(expr)) for i, expr in enumerate(exprs)]


# --------------------------------------------------------------------------- composer view of a callee's halt


@pytest.mark.parametrize("seed", range(3))
def test_composer_view_reproduces_the_machines_texts(seed):
    rng = random.Random(seed)
    problems = [("sub", 4531, 1504), ("sub", 1000, 1), ("sub", 10, 10), ("sub", 5, 0), ("mul", 7, 12),
                ("mul", 89, 15), ("div", 100, 7), ("div", 99, 99)]
    for _ in range(30):
        a, b = number(rng, rng.randint(1, 30)), number(rng, rng.randint(1, 30))
        problems.append(("sub", max(a, b), min(a, b)))
        problems.append(("mul", a % 10**10, rng.randint(1, 15)))
        divisor = number(rng, rng.randint(1, 10)) or 1
        problems.append(("div", divisor * rng.randint(0, 15) + rng.randrange(divisor), divisor))
    converted = 0
    for op, a, b in problems:
        machine_run = run(op, a, b)
        for step, callee in machine_run.calls():
            view = to_composer_view(machine_run.machine, callee.text(-1), callee.text(0))
            assert view == render(composer_view_of_halt(machine_run.machine, callee))
            # ... which is the callee's part of the composer's next input, byte for byte.
            composer_input = machine_run.transition(step)[0]
            assert composer_input == "\n".join(composer_input.split("\n")[:2]) + "\n" + view + "\n"
            converted += view != callee.text(-1)
    assert converted > 0  # the quirks occur, so the conversion is not vacuous


def test_composer_view_quirks():
    left_mask_halt = "LEFT_MASK, qH,  |1|0|0[HEAD] 0\nNo command to execute. Halt state."
    left_mask_start = "LEFT_MASK, q0, [HEAD] |1|0|0 [OUTPUT]\nCMD [HEAD] RIGHT, q1"
    assert to_composer_view("SUB", left_mask_halt, left_mask_start).split("\n")[0] == "LEFT_MASK, qH,  |1|0|0[HEAD] |1|0"
    lt_halt = "LESS_THAN, qH,  |2|1[HEAD1] |5|1[HEAD2] True\nNo command to execute. Halt state."
    lt_start = "LESS_THAN, q0, [HEAD1] |2|1[HEAD2] |5|1 [OUTPUT]\nCMD [HEAD1] RIGHT, [HEAD2] RIGHT, [OUTPUT] False, q1"
    assert to_composer_view("MUL", lt_halt, lt_start).startswith("LESS_THAN, qH,  |1|2[HEAD1] |5|1[HEAD2] True")
    assert to_composer_view("DIV", lt_halt, lt_start) == lt_halt  # only MUL reverses the count


# --------------------------------------------------------------------------- the oracle solves everything


def test_oracle_solves_every_operator_with_the_machines_steps():
    exprs = sample_expressions()
    records = solve_batch(problems_of(exprs), OracleModel(), mode="traced")
    for expr, record in zip(exprs, records):
        expression = parse_expression(expr)
        machine_run = run(expression.op, expression.a, expression.b)
        assert (record.outcome, verdict(record), record.first_divergence) == ("answered", "ok", None), (expr, record.detail)
        assert record.final == expr + record.target
        steps = record.steps
        assert [(s.adapter, s.input, s.output) for s in steps[:1]] == [(f"aligner_{expression.op}", expr, align_input(expr))]
        assert [(s.depth, s.input, s.output) for s in steps[1:-1]] == machine_calls(machine_run)
        assert (steps[-1].input, steps[-1].output) == (machine_run.text(-1), expr + record.target)
        assert record.n_steps == len(steps) == len(list(reference_steps(expr)))


def test_free_mode_reports_the_final_answer_only():
    records = solve_batch(problems_of(["45+67=", "4531-1504=", "3==3="]), OracleModel())
    assert [(r.answer, is_correct(r), r.mode, r.first_divergence) for r in records] == [
        ("112", True, "free", None), ("3027", True, "free", None), ("True", True, "free", None)]
    assert all(s.error_class is None for r in records for s in r.steps)


def test_the_runtime_reports_answers_and_never_reads_the_target():
    # No target, a wrong one, the right one: the same run, the same record but for the target.
    problems = [Problem("none", "45+67="), Problem("wrong", "45+67=", "113"), Problem("right", "45+67=", "112")]
    records = solve_batch(problems, OracleModel(), mode="traced")
    assert [(r.outcome, r.answer, r.target) for r in records] == [
        ("answered", "112", None), ("answered", "112", "113"), ("answered", "112", "112")]
    assert [s.output for s in records[0].steps] == [s.output for s in records[2].steps]
    assert [verdict(r) for r in records[1:]] == ["wrong_answer", "ok"]
    with pytest.raises(ValueError, match="no target"):
        is_correct(records[0])


def test_records_of_the_runtime_that_judged_answers_still_read():
    # Written before the runtime stopped scoring: `truth`, `correct`, outcomes ok / wrong_answer.
    old = {"id": "p", "expr": "45+67=", "mode": "traced", "truth": "112", "answer": "212", "final": "45+67=212",
           "correct": False, "outcome": "wrong_answer", "detail": None, "n_steps": 5, "steps": []}
    record = ProblemRecord.from_dict(old)
    assert (record.target, record.outcome, verdict(record)) == ("112", "answered", "wrong_answer")
    assert verdict(ProblemRecord.from_dict({**old, "answer": "112", "correct": True, "outcome": "ok"})) == "ok"
    assert ProblemRecord.from_dict({**old, "outcome": "no_halt"}).outcome == "no_halt"


def _adapter_runs(record) -> list[tuple[str, int]]:
    """The record's (adapter, depth) sequence with consecutive repeats collapsed."""
    runs = []
    for step in record.steps:
        if not runs or runs[-1] != (step.adapter, step.depth):
            runs.append((step.adapter, step.depth))
    return runs


def test_sub_calls_reflection_add_add_left_mask():
    (record,) = solve_batch(problems_of(["4531-1504="]), OracleModel())
    sub = ("executor_sub", 0)
    assert _adapter_runs(record) == [
        ("aligner_sub", 0), sub, ("executor_reflection", 1), sub, ("executor_add", 1), sub, ("executor_add", 1),
        sub, ("executor_left_mask", 1), sub, ("aligner_sub", 0)]


def test_mul_alternates_less_than_and_two_additions():
    (record,) = solve_batch(problems_of(["89*3="]), OracleModel())
    mul, lt, add = ("executor_mul", 0), ("executor_lt", 1), ("executor_add", 1)
    loop = [mul, lt, mul, add, mul, add]
    assert _adapter_runs(record) == [("aligner_mul", 0), *loop * 2, mul, lt, mul, ("aligner_mul", 0)]
    assert record.answer == "267"


# --------------------------------------------------------------------------- batching


def test_a_batch_of_additions_makes_one_call_per_round():
    rng = random.Random(1)
    exprs = [f"{number(rng, 100)}+{number(rng, 100)}=" for _ in range(40)]
    model = OracleModel()
    records = solve_batch(problems_of(exprs), model)
    assert all(map(is_correct, records))
    # aligner (I), q0 and one step per column (100) and the carry step, aligner (O)
    assert model.calls == [("aligner_add", 40)] + [("executor_add", 40)] * 102 + [("aligner_add", 40)]


def test_mixed_batches_call_each_adapter_once_per_round():
    exprs = ["45+67=", "4531-1504=", "89*3=", "100//7=", "123>45=", "1+2=", "9-9=", "12<12=", "5*2="]
    model = OracleModel()
    assert all(map(is_correct, solve_batch(problems_of(exprs), model)))
    # A correct run makes the machine's calls, one per round: round r groups the r-th call of every
    # problem still running, by adapter, in the order the problems were given.
    plans = [[step.adapter for step in reference_steps(expr)] for expr in exprs]
    expected = []
    for r in range(max(map(len, plans))):
        groups: dict[str, int] = {}
        for plan in plans:
            if r < len(plan):
                groups[plan[r]] = groups.get(plan[r], 0) + 1
        expected.extend(groups.items())
    assert model.calls == expected


def test_batch_size_caps_the_prompts_of_a_call():
    model = OracleModel()
    solve_batch(problems_of([f"{n}+{n}=" for n in range(10, 20)]), model, batch_size=4)
    assert model.calls[:3] == [("aligner_add", 4), ("aligner_add", 4), ("aligner_add", 2)]
    assert {size for _, size in model.calls} == {4, 2}


def test_a_model_must_answer_every_prompt():
    class Short(OracleModel):
        def generate(self, prompts, adapter):
            return super().generate(prompts, adapter)[:-1]

    with pytest.raises(ValueError, match="2 prompts"):
        solve_batch(problems_of(["1+1=", "2+2="]), Short())


def test_token_counts_are_recorded_when_the_model_gives_them():
    class Counting(OracleModel):
        def generate(self, prompts, adapter):
            return [Completion(text, len(text)) for text in super().generate(prompts, adapter)]

    (record,) = solve_batch(problems_of(["45+67="]), Counting())
    assert is_correct(record) and [s.tokens for s in record.steps] == [len(s.output) for s in record.steps]


# --------------------------------------------------------------------------- step budget


@pytest.mark.parametrize("expr", ["45+67=", "4531-1504=", "89*3=", "123<45="])
def test_a_model_that_never_halts_is_stopped_by_the_budget(expr):
    model = BrokenModel(echo, on_executors)
    (record,) = solve_batch(problems_of([expr]), model, mode="traced")
    assert record.outcome == "no_halt" and not is_correct(record) and record.answer is None
    assert record.n_steps == record.step_budget == 2 * len(list(reference_steps(expr))) + 20
    assert "step budget" in record.detail
    assert record.first_divergence.error_class is not None


def test_an_explicit_step_budget():
    records = solve_batch(problems_of(["45+67=", "1+1="]), BrokenModel(echo, on_executors), step_budget=7)
    assert [(r.outcome, r.n_steps) for r in records] == [("no_halt", 7), ("no_halt", 7)]
    # A correct model within the budget still finishes: aligner (O) runs once the machine halts.
    (record,) = solve_batch(problems_of(["1+1="]), OracleModel(), step_budget=4)
    assert (verdict(record), record.n_steps) == ("ok", 5)


# --------------------------------------------------------------------------- tracing


@pytest.mark.parametrize("expr, k", [
    ("45+67=", 2),  # an ADD column
    ("4531-1504=", 5),  # inside the REFLECTION callee
    ("4531-1504=", 9),  # the SUB composer between two calls: a digit of its [HEAD2] operand
    ("4531-1504=", 11),  # inside the first ADD callee
    ("89*3=", 1),  # the MUL composer: the [OUTPUT] register
    ("100//7=", 20),
])
def test_traced_mode_records_the_first_divergence(expr, k):
    reference = list(reference_steps(expr))
    model = BrokenModel(wrong_digit, at_step(expr, k))
    (record,) = solve_batch(problems_of([expr]), model, mode="traced")
    divergence = record.first_divergence
    assert model.faults == 1
    assert (divergence.step, divergence.adapter) == (k, reference[k].adapter)
    assert divergence.expected == reference[k].output
    assert divergence.got == wrong_digit("", reference[k].output)
    assert divergence.error_class == "wrong_digit" == classify(divergence.expected, divergence.got)
    assert record.steps[k].error_class == "wrong_digit" and record.steps[k].expected == reference[k].output
    assert all(s.error_class is None for s in record.steps[:k])
    assert not is_correct(record)  # the oracle has no answer off the machine's course


def test_a_wrong_digit_in_the_halt_state_gives_a_wrong_answer():
    expr = "45+67="
    halt_step = len(list(reference_steps(expr))) - 2  # the last executor step writes the halt state
    for mode in ("free", "traced"):
        (record,) = solve_batch(problems_of([expr]), BrokenModel(wrong_digit, at_step(expr, halt_step)), mode=mode)
        assert (record.outcome, record.answer, record.final) == ("answered", "212", "45+67=212")
        assert verdict(record) == "wrong_answer"
        if mode == "traced":
            assert (record.first_divergence.step, record.first_divergence.error_class) == (halt_step, "wrong_digit")
        else:
            assert record.first_divergence is None


@pytest.mark.parametrize("old, new, error_class", [
    ("[C]1", "[C]0", "wrong_carry"),
    (" |5[HEAD1]", "[HEAD1] |5", "misplaced_head"),
    ("q1", "q2", "wrong_state"),
    ("[OUTPUT] 2,", "[OUTPUT] 3,", "wrong_command"),
])
def test_error_classes_of_divergences(old, new, error_class):
    expr = "45+67="  # step 2's output: ADD, q1,  |5[HEAD1]|4 |7[HEAD2]|6 [C]1 |2[OUTPUT] / CMD: [C] 1, [OUTPUT] 1 ...
    step = 2 if old != "[OUTPUT] 2," else 1
    (record,) = solve_batch(problems_of([expr]), BrokenModel(replace_text(old, new), at_step(expr, step)),
                            mode="traced")
    assert (record.first_divergence.step, record.first_divergence.error_class) == (step, error_class)


def test_aligner_output_divergence_is_a_wrong_result_and_no_answer():
    # aligner (O) wrote a result its halt state does not hold: the runtime does not answer with it
    model = BrokenModel(lambda prompt, output: output + "0", on_adapter("aligner_add"))
    model.trigger = lambda adapter, prompt: adapter == "aligner_add" and "\n" in prompt  # aligner (O) only
    (record,) = solve_batch(problems_of(["45+67="]), model, mode="traced")
    assert (verdict(record), record.answer, record.final) == ("misaligned", None, "45+67=1120")
    assert (record.first_divergence.error_class, record.first_divergence.step) == ("wrong_result", record.n_steps - 1)


def test_teacher_forcing_compares_every_step():
    expr = "4531-1504="
    reference = list(reference_steps(expr))
    (record,) = solve_batch(problems_of([expr]), BrokenModel(wrong_digit, at_step(expr, 11)),
                            mode="traced", teacher_forcing=True)
    # The machine's texts are fed after the fault, so the run goes on and ends right.
    assert (record.mode, verdict(record), record.n_divergent_steps) == ("teacher_forcing", "ok", 1)
    assert [s.input for s in record.steps] == [s.input for s in reference]
    assert [s.error_class for s in record.steps].count("wrong_digit") == 1

    # A model that only echoes its input misses every executor step; the aligners are still right.
    (record,) = solve_batch(problems_of([expr]), BrokenModel(echo, on_executors), mode="traced", teacher_forcing=True)
    executor_steps = sum(step.kind == "execute" for step in reference)
    assert record.n_steps == len(reference) and record.n_divergent_steps == executor_steps
    assert record.first_divergence.step == 1 and verdict(record) == "ok"


@pytest.mark.parametrize("mode, teacher_forcing", [("traced", False), ("traced", True), ("free", False)])
def test_a_step_that_runs_on_past_its_command_is_cut_there_and_the_cut_recorded(mode, teacher_forcing):
    """A model that writes the right command and then misses its end-of-text ('..., qH, qH') is cut at the
    command's last word, as a stop string would: the run goes on, and the record keeps what was cut."""
    expr = "99999999999999+1="
    halting = [step for step in reference_steps(expr) if step.output.endswith(", qH")]
    model = BrokenModel(lambda prompt, output: output + ", qH, qH, qH",
                        lambda adapter, prompt: any(prompt == step.input for step in halting))
    (record,) = solve_batch(problems_of([expr]), model, mode=mode, teacher_forcing=teacher_forcing)
    assert verdict(record) == "ok" and record.n_steps_cut == 1 == model.faults
    (cut,) = [step for step in record.steps if step.beyond]
    assert cut.beyond == ", qH, qH, qH" and cut.output == halting[0].output and cut.error_class is None
    read = ProblemRecord.from_dict(json.loads(record.to_json()))
    assert read.n_steps_cut == 1 and [step.beyond for step in read.steps] == [step.beyond for step in record.steps]


def test_aligner_output_is_never_cut():
    """Aligner (O) writes an expression, not a command: text after it is the answer's, and judged so."""
    expr = "45+67="
    last = len(list(reference_steps(expr))) - 1
    (record,) = solve_batch(problems_of([expr]), BrokenModel(lambda prompt, output: output + ", qH", at_step(expr, last)))
    assert record.n_steps_cut == 0 and record.final == "45+67=112, qH" and not is_correct(record)


def test_teacher_forcing_needs_traced_mode():
    with pytest.raises(ValueError, match="traced"):
        solve_batch(problems_of(["1+1="]), OracleModel(), teacher_forcing=True)
    with pytest.raises(ValueError, match="mode"):
        solve_batch(problems_of(["1+1="]), OracleModel(), mode="greedy")


# --------------------------------------------------------------------------- malformed outputs


@pytest.mark.parametrize("expr, k, fault, detail", [
    ("45+67=", 3, garbled, "not CAEF format"),
    ("45+67=", 0, empty, "not CAEF format"),  # aligner (I)
    ("4531-1504=", 1, replace_text("[CALL] REFLECTION", "[CALL] NOPE"), "not CAEF format"),
    ("4531-1504=", 1, replace_text("[CALL] REFLECTION", "[CALL] ADD"), "callee lines are REFLECTION"),
    ("4531-1504=", 1, drop_callee_lines, "without the callee's start"),
    ("89*3=", 1, replace_text("[CALL] LESS_THAN", "[CALL] SUB"), "callee lines are LESS_THAN"),
    ("123>45=", 2, replace_text("GREATER_THAN", "LESS_THAN"), "expected a GREATER_THAN state"),
    ("45+67=", 3, lambda prompt, output: output.split("\n")[0] + "\n" + HALT_LINE, "q1 with the halt line"),
    ("45+67=", 2, lambda prompt, output: output.split("\n")[0], "without its command line"),
])
def test_malformed_outputs_stop_the_problem_without_crashing(expr, k, fault, detail):
    exprs = [expr, "1+1=", "20-3="]  # the other problems of the batch are unaffected
    model = BrokenModel(fault, at_step(expr, k))
    records = solve_batch(problems_of(exprs), model, mode="traced")
    record = records[0]
    assert record.outcome == "unparseable" and not is_correct(record)
    assert record.n_steps == k + 1 and f"step {k}" in record.detail and detail in record.detail
    assert record.steps[-1].output == fault(record.steps[-1].input, list(reference_steps(expr))[k].output)
    assert record.first_divergence.step == k
    assert [verdict(r) for r in records[1:]] == ["ok", "ok"]


@pytest.mark.parametrize("expr, fault, detail", [
    ("1000000000000000+1=", replace_text("[HEAD2] |1 ", "[HEAD2] |0 "), "operand b as 0 (asked 1)"),
    ("99999999999999+1=", replace_text("|9[HEAD2]", "|8[HEAD2]"), "operand a as 89999999999999 (asked 99999999999999)"),
    ("4531-1504=", replace_text("|1|3|5|4", "|1|3|5|5"), "operand a as 5531 (asked 4531)"),
    ("89*3=", replace_text("[HEAD2]|3", "[HEAD2]|4"), "operand b as 4 (asked 3)"),
    ("1234//56=", replace_text("|6|5", "|6|5|1", ), "operand b as 156 (asked 56)"),
    ("123>45=", replace_text("GREATER_THAN", "EQUAL"), "started EQUAL for GREATER_THAN"),
])
def test_a_start_state_with_other_operands_ends_misaligned_before_any_executor_call(expr, fault, detail):
    """The runtime executes only the problem it was asked: aligner (I)'s start state must hold its operands."""
    exprs = [expr, "1+1=", "20-3="]
    model = BrokenModel(fault, at_step(expr, 0))
    records = solve_batch(problems_of(exprs), model, mode="traced")
    record = records[0]
    assert record.outcome == "misaligned" and not is_correct(record) and record.answer is None
    assert record.n_steps == 1 and detail in record.detail and record.detail.startswith("aligner (I)")
    assert [verdict(r) for r in records[1:]] == ["ok", "ok"]


@pytest.mark.parametrize("expr, written", [("45+67=", "45+68=112"), ("5555==5555=", "5555==5554=True"),
                                           ("1000000+1000000=", "100000+1000000=2000000"), ("12-3=", "9")])
def test_an_answer_written_for_other_operands_is_no_answer(expr, written):
    """Aligner (O) must write back the asked expression: a right result under other operands is not an answer."""
    last = len(list(reference_steps(expr))) - 1
    (record,) = solve_batch(problems_of([expr]), BrokenModel(lambda prompt, output: written, at_step(expr, last)))
    assert record.outcome == "misaligned" and record.answer is None and not is_correct(record)
    assert record.final == written and record.detail.startswith("aligner (O)") and repr(expr) in record.detail


@pytest.mark.parametrize("expr, k, fault, detail", [
    # a run of 9s copied one cell too long (what SmolLM2's executor_add does on 99999+1=)
    ("99999+1=", 2, replace_text("|9[HEAD1]|9|9|9|9", "|9[HEAD1]|9|9|9|9|9"), "executor_add rewrote operand a as "
                                                                              "999999 (started as 99999) at step 2"),
    ("45+67=", 3, replace_text("|7|6[HEAD2]", "|7|7[HEAD2]"), "executor_add rewrote operand b as 77 (started as 67)"),
    ("1000>999=", 1, replace_text("|9|9|9", "|9|9|8"), "executor_gt rewrote operand b as 899 (started as 999)"),
    # inside a composer: the REFLECTION that SUB calls keeps its own start state's tapes
    ("4531-1504=", 3, replace_text("|0|5|1 |5[OUTPUT]", "|0|5|2 |5[OUTPUT]"), "executor_reflection rewrote operand b "
                                                                              "as 2504 (started as 1504)"),
])
def test_an_executor_state_with_other_operands_ends_misaligned_at_that_step(expr, k, fault, detail):
    """An executor only reads its operand tapes: a state that changes them computes another problem, so the run
    stops there with no answer (before, a wrong answer that aligner (O) could write back as the asked one)."""
    exprs = [expr, "1+1=", "20-3="]
    records = solve_batch(problems_of(exprs), BrokenModel(fault, at_step(expr, k)), mode="traced")
    record = records[0]
    assert record.outcome == "misaligned" and record.answer is None and not is_correct(record)
    assert detail in record.detail and record.n_steps == k + 1 and record.first_divergence.step == k
    assert [verdict(r) for r in records[1:]] == ["ok", "ok"]


@pytest.mark.parametrize("expr, composer, call, fault, detail", [
    ("137//40=", "executor_div", "[CALL] ADD, q1", replace_text("[HEAD2] |0|4 [C]", "[HEAD2] |0|4|4 [C]"),
     "DIV's call to ADD copied operand b as 440 (its DIV state holds 40)"),
    ("12*3=", "executor_mul", "[CALL] ADD, q3", replace_text("[HEAD1] |2|1[HEAD2]", "[HEAD1] |2|2[HEAD2]"),
     "MUL's call to ADD copied operand a as 22 (its MUL state holds 12)"),
])
def test_a_call_on_operands_its_composer_does_not_hold_ends_misaligned_at_that_step(expr, composer, call, fault,
                                                                                    detail):
    """A composer copies a call's operands from its own tapes: a call on other digits computes another problem
    (an answer aligner (O) would then write back as the asked one's), so the run stops there with no answer."""
    k = next(i for i, step in enumerate(reference_steps(expr)) if step.adapter == composer and call in step.output)
    records = solve_batch(problems_of([expr, "1+1="]), BrokenModel(fault, at_step(expr, k)), mode="traced")
    assert records[0].outcome == "misaligned" and records[0].answer is None and detail in records[0].detail
    assert records[0].n_steps == k + 1 and verdict(records[1]) == "ok"


@pytest.mark.parametrize("expr, k, fault, detail", [
    # SmolLM2's executor_sub (a round not taken) copied LEFT_MASK's result five digits short into SUB's halt state
    ("9762844519-9061809544=", 59, replace_text("|5|7|9|4|3|0|1|0|7\n", "|5|7|9|4|3\n"),
     "executor_sub wrote out as 34975 (the call returned 0701034975) at step 59"),
    ("12*3=", 10, replace_text("[OUTPUT]|4|2\nCMD", "[OUTPUT]|5|2\nCMD"),
     "executor_mul wrote out as 25 (the call returned 24)"),
    ("12*3=", 5, replace_text("[COUNT]|1 [OUTPUT]|2|1\nCMD [CALL] ADD", "[COUNT]|2 [OUTPUT]|2|1\nCMD [CALL] ADD"),
     "executor_mul wrote count as 2 (it held 1)"),
    # SmolLM2's executor_mul rewrote a cell of a in 14850800*14= and went on computing another product
    ("12*3=", 14, replace_text("MUL, q1, [HEAD1]|2|1 ", "MUL, q1, [HEAD1]|2|2 "),
     "executor_mul rewrote operand a as 22 (started as 12)"),
    ("9762844519-9061809544=", 29, replace_text("[HEAD1] |4|7|9|4|3|0|1|0|7|0|1[HEAD2]", "[HEAD1] |4|7|9|4|3|0|1|0|7|1[HEAD2]"),
     "SUB's call to ADD copied operand a as 1701034974 (its SUB state and the last result hold 10701034974)"),
])
def test_a_composer_step_off_its_operands_or_its_callees_result_ends_misaligned_at_that_step(expr, k, fault, detail):
    """A composer only reads a and b, takes a callee's result into one register (or, in SUB, into its next call)
    and keeps the others: a step that writes other numbers goes on to answer another problem, so the run stops
    there with no answer instead of a silent wrong one."""
    records = solve_batch(problems_of([expr, "1+1="]), BrokenModel(fault, at_step(expr, k)), mode="traced")
    assert records[0].outcome == "misaligned" and records[0].answer is None, records[0].detail
    assert detail in records[0].detail and records[0].n_steps == k + 1 and verdict(records[1]) == "ok"


def test_a_wrong_step_that_keeps_the_operands_still_answers():
    """Only the operand tapes are checked: a halt state with a wrong digit in [OUTPUT] is read back as a (wrong)
    answer, as before."""
    (record,) = solve_batch(problems_of(["45+67="]), BrokenModel(replace_text("|2|1|1", "|3|1|1"),
                                                                 at_step("45+67=", 4)), mode="free")
    assert record.outcome == "answered" and record.answer == "113" and not is_correct(record)


def test_without_steps_the_detail_keeps_the_bad_output():
    (record,) = solve_batch(problems_of(["45+67="]), BrokenModel(garbled, at_step("45+67=", 2)), keep_steps=False)
    assert record.outcome == "unparseable" and record.steps == [] and "'#ADD" in record.detail


def test_problems_outside_the_machines_are_errors_without_model_calls():
    model = OracleModel()
    records = solve_batch(problems_of(["5-7=", "4//0=", "4*0=", "4+x=", "1+1="]), model)
    assert [r.outcome for r in records] == ["error"] * 4 + ["answered"]
    assert all(r.n_steps == 0 and r.answer is None and r.detail for r in records[:4])
    assert sum(size for _, size in model.calls) == records[4].n_steps


def test_the_oracle_refuses_prompts_off_the_machines_course():
    model = OracleModel()
    with pytest.raises(OracleError):
        model.generate(["ADD, q1,  [HEAD1]|5|4 [HEAD2]|7|6 [C]0 |9[OUTPUT]\nCMD: [C] 0, q1"], "executor_add")
    with pytest.raises(OracleError):
        model.generate(["45+67="], "aligner_sub")
    assert OracleModel(strict=False).generate(["garbage"], "executor_add") == [""]


def test_a_bad_completion_costs_its_problem_only():
    class OneBad(OracleModel):
        def generate(self, prompts, adapter):
            outputs = super().generate(prompts, adapter)
            return [None if "|1|3|5|4" in prompt and adapter == "executor_sub" else output
                    for prompt, output in zip(prompts, outputs)]

    records = solve_batch(problems_of(["4531-1504=", "20-3="]), OneBad())
    assert [verdict(r) for r in records] == ["error", "ok"]
    assert "str or a Completion" in records[0].detail


def test_duplicate_ids_are_refused():
    with pytest.raises(ValueError, match="unique"):
        solve_batch([Problem("x", "1+1="), Problem("x", "2+2=")], OracleModel())


# --------------------------------------------------------------------------- records and resume


def test_records_round_trip_through_json(tmp_path):
    expr = "4531-1504="
    records = solve_batch(problems_of([expr]), BrokenModel(wrong_digit, at_step(expr, 5)), mode="traced")
    path = tmp_path / "records.jsonl"
    with RecordWriter(path) as writer:
        writer.write(records[0])
    line = path.read_text()
    assert line.endswith("\n") and line.count("\n") == 1
    assert json.loads(line)["first_divergence"]["error_class"] == "wrong_digit"
    (loaded,) = load_records(path)
    assert loaded.to_dict() == records[0].to_dict()


def test_resume_after_an_interruption_redoes_nothing_and_loses_nothing(tmp_path):
    rng = random.Random(3)
    # Different lengths finish in different rounds, so an interruption leaves some done and some in flight.
    exprs = [f"{number(rng, n)}+{number(rng, n)}=" for n in range(1, 25)] + ["4531-1504=", "89*4=", "7>3="]
    problems = problems_of(exprs)
    path = tmp_path / "records.jsonl"

    with pytest.raises(Interrupted):
        solve_to_file(problems, DiesAfter(40), path)
    first = load_records(path)
    assert 0 < len(first) < len(problems)

    # The kill also cut the record being written: a partial last line.
    unfinished = next(p for p in problems if p.id not in {r.id for r in first})
    cut = solve_batch([unfinished], OracleModel())[0].to_json()[:70]
    with open(path, "a", encoding="utf-8") as f:
        f.write(cut)
    assert len(load_records(path)) == len(first)  # the cut line is ignored ...

    # The problems left in flight have their calls in the journal beside the records (runtime.journal).
    journal = tmp_path / "records.calls"
    journaled = [json.loads(line) for line in journal.read_text().splitlines()]
    assert {call["problem"] for call in journaled} >= {p.id for p in problems} - {r.id for r in first}

    model = Recording()
    second = solve_to_file(problems, model, path)
    assert {r.id for r in second} == {p.id for p in problems} - {r.id for r in first}
    # ... and nothing made before is asked again: no recorded problem, and no call the journal holds.
    assert not {prompt for prompt in model.prompts if "\n" not in prompt} & {p.expr for p in problems if p.id in {r.id for r in first}}
    assert not set(model.prompts) & {call["input"] for call in journaled}
    assert not journal.exists()  # every problem recorded: the journal has served

    final = load_records(path)
    assert sorted(r.id for r in final) == sorted(p.id for p in problems)  # each exactly once
    assert all(map(is_correct, final))
    assert path.read_text().endswith("\n") and all(json.loads(line) for line in path.read_text().splitlines())

    # Running again does nothing at all.
    idle = OracleModel()
    assert solve_to_file(problems, idle, path) == [] and idle.calls == []


def test_repair_and_corrupt_files(tmp_path):
    path = tmp_path / "records.jsonl"
    assert resume(path, problems_of(["1+1="])) == problems_of(["1+1="])  # no file yet
    path.write_text('{"id": "p000", "expr": "1+1=", "mode": "free", "truth": "2"}\n{"id": "p0')
    assert repair(path) == len('{"id": "p0')
    assert [p.id for p in resume(path, problems_of(["1+1=", "2+2="]))] == ["p001"]
    path.write_text('not json\n{"id": "p000", "expr": "1+1=", "mode": "free", "truth": "2"}\n')
    with pytest.raises(ValueError, match=":1:"):
        load_records(path)


def test_texts_between_steps_are_the_models_own():
    """render(parse(t)) == t: the runtime's next input is the model's output (plus a composer's newline)."""
    (record,) = solve_batch(problems_of(["4531-1504="]), OracleModel())
    for step, following in zip(record.steps[1:-2], record.steps[2:-1]):
        if step.depth == following.depth and "[CALL]" not in step.output:
            expected = step.output + ("\n" if following.adapter == "executor_sub" else "")
            assert following.input == expected
    assert parse(record.steps[1].input).trailing_newline
