"""One-step evaluation: exact match of single executor transitions and aligner conversions.

Cases come from the committed test-set problems (never drawn for training),
one uniformly chosen transition per problem, so long traces are weighted the
way the test traces are; REFLECTION and LEFT_MASK are evaluated on the calls
SUB makes for the same problems.

The executors whose texts depend on REFLECTION dropping leading zeros (reflection,
sub, and add on SUB's first call) also get `sub9_<n>` cells: subtractions of n-digit
operands whose b has 9s on top (`nines_on_top`), about 1 in 100 of the test sets'
pairs. Their cases are the transitions that carry the dropped zeros: REFLECTION's
last q1 and q2 steps, SUB's steps that read the REFLECTION and first ADD halts, and
every step of that first ADD. They are drawn from their own random stream (short
ones may coincide with a training draw; 50 and 100 digits never do).
"""

from __future__ import annotations

from typing import Any, Callable

from caef_bench.data.testsets import load_cell, named_rng, render_expr, repeated_cells, solve
from caef_bench.data.training import nines_on_top
from caef_bench.evaluate.scoring import accuracy
from caef_bench.machines import run

LENGTH_CELLS = ("5", "10", "50", "100")
SUB_CALLEES = {"reflection": 1, "left_mask": 4}  # SUB's phase that calls each auxiliary machine
TOP_NINES = "sub9"  # the cells of subtractions whose REFLECTION drops leading zeros
TOP_NINES_EXECUTORS = ("reflection", "sub", "add")


def cells_for(op: str, kind: str = "executor") -> list[str]:
    """Cells an adapter is evaluated on: add_5 … add_100, mul_1_10, SUB's for its callees, and sub9_<n>."""
    if op in ("mul", "div"):
        return [f"{op}_1_10"]
    cells = [f"{'sub' if op in SUB_CALLEES else op}_{n}" for n in LENGTH_CELLS]
    if kind == "executor" and op in TOP_NINES_EXECUTORS:
        cells += [f"{TOP_NINES}_{n}" for n in LENGTH_CELLS]
    return cells


def repeated_cells_for(op: str) -> list[str]:
    """The repeated-digit family (issue 23): the rep_<op>_<n>_<pattern> cells whose problems call this
    adapter (REFLECTION's and LEFT_MASK's are SUB's), controls included. executor_cases and aligner_cases
    draw from them as from Table 1's cells."""
    source = "sub" if op in SUB_CALLEES else op
    return [cell for cell in repeated_cells() if cell.split("_")[1] == source]


def top_nines_cases(op: str, cell: str, n: int, seed: int = 0) -> list[tuple[str, str]]:
    """Transitions that carry REFLECTION's dropped zeros, from subtractions with 9s on top of b."""
    rng = named_rng(seed, f"onestep/executor/{op}/{cell}")
    length = int(cell.rpartition("_")[2])
    cases = []
    for _ in range(n):
        sub = run("sub", *nines_on_top(rng, length))
        if op == "sub":  # the steps that read the REFLECTION halt and the first ADD's halt
            cases.append(sub.transition(rng.choice((1, 2))))
        elif op == "reflection":  # from the last q1 step (its next state is the first q2) on
            reflection = sub.phases[SUB_CALLEES["reflection"]].callee
            cases.append(reflection.transition(rng.randrange(reflection.n_q1_end, len(reflection))))
        else:
            first_add = sub.phases[2].callee
            cases.append(first_add.transition(rng.randrange(len(first_add))))
    return cases


def executor_cases(op: str, cell: str, n: int, seed: int = 0) -> list[tuple[str, str]]:
    if cell.startswith(f"{TOP_NINES}_"):
        return top_nines_cases(op, cell, n, seed)
    rng = named_rng(seed, f"onestep/executor/{op}/{cell}")
    problems = load_cell(cell)
    cases = []
    for problem in rng.sample(problems, min(n, len(problems))):
        machine_run = run(problem["op"], int(problem["a"]), int(problem["b"]))
        if op in SUB_CALLEES:
            machine_run = machine_run.phases[SUB_CALLEES[op]].callee
        cases.append(machine_run.transition(rng.randrange(len(machine_run))))
    return cases


def aligner_cases(op: str, cell: str, n: int, seed: int = 0) -> list[tuple[str, str]]:
    """Both directions, alternating: expression -> start text, halt text -> expression with result."""
    rng = named_rng(seed, f"onestep/aligner/{op}/{cell}")
    problems = load_cell(cell)
    cases = []
    for index, problem in enumerate(rng.sample(problems, min(n, len(problems)))):
        a, b = int(problem["a"]), int(problem["b"])
        machine_run = run(op, a, b)
        expr = render_expr(op, a, b)
        cases.append((expr, machine_run.start_text()) if index % 2 == 0
                     else (machine_run.text(-1), expr + solve(op, a, b)))
    return cases


def score_cases(generate: Callable[[list[str], list[int], list[str]], list[str]], cases: list[tuple[str, str]],
                count_tokens: Callable[[str], int], keep: int | None = 5) -> dict:
    """Exact match of generate(prompts, limits, drafts) against the expected texts, with a Wilson interval.

    Each case may generate one token more than its expected completion (a longer output is wrong
    anyway); the expected texts are passed as drafts for speculative decoding, which returns the
    model's greedy output whatever the draft, only faster when the model is right.
    """
    expected = [text for _, text in cases]
    outputs = generate([prompt for prompt, _ in cases], [count_tokens(text) + 1 for text in expected], expected)
    records = [{"correct": got == expected} for (_, expected), got in zip(cases, outputs)]
    failures = [{"prompt": p, "expected": e, "got": g} for (p, e), g in zip(cases, outputs) if g != e]
    return {**accuracy(records), "failures": failures[:keep]}  # keep=None: every failure


def one_step_accuracy(model, codec, kind: str, op: str, per_cell: int, seed: int) -> dict:
    """Exact match of single transitions (or aligner conversions) per test cell."""
    from caef_bench.models.decoding import speculative_greedy

    def generate(prompts, limits, drafts):
        return [codec.decode(speculative_greedy(model, codec, codec.prompt_ids(p), codec.completion_ids(d)[:-1], n)[0])
                for p, n, d in zip(prompts, limits, drafts)]

    cases_for = executor_cases if kind == "executor" else aligner_cases
    results = {}
    for cell in cells_for(op, kind):
        scored = score_cases(generate, cases_for(op, cell, per_cell, seed), lambda text: len(codec.completion_ids(text)))
        # The first few wrong outputs stay beside the numbers: a miss in a thousand is worth reading.
        results[cell] = {k: scored[k] for k in ("n", "correct", "accuracy", "ci_low", "ci_high", "failures")}
    return results


def one_step_check(per_cell: int, seed: int) -> Callable[[Any, Any, str, str], dict]:
    """one_step_accuracy(model, codec, kind, op) at `per_cell` cases per cell, drawn with `seed`: what
    training records in each adapter's manifest (train.recipe.TrainRequest.one_step_check)."""
    return lambda model, codec, kind, op: one_step_accuracy(model, codec, kind, op, per_cell, seed)
