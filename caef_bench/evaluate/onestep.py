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

With `structured`, every adapter also gets `struct_<n>` cells (mul and div: `struct_1_10`): operands
drawn by the structured samplers (`data.structured`: runs of one digit, periodic patterns, round
numbers, a run then random digits, equal operands, one digit apart, b = 0 or 1, each kind that
applies to the operator equally often), half of a pair of n-digit operands and half an n-digit a
with a shorter b, from a stream of their own (short ones may coincide with a training draw).

REFLECTION also gets `subtail_<n>` cells: the test problems' own REFLECTION runs from the step
that writes `CMD q2` on (the step into q2, each q2 step, the halt). One step in a hundred of a 100-digit
REFLECTION run, a uniform draw hardly ever reaches them, yet every run makes them once, and
whether to drop the top digit is decided there.

ADD and LEFT_MASK also get `subwide_<n>` cells: their steps on SUB's own sum, a + reflection(b),
which has n + 1 digits (the only fields of 101 cells in a 100-digit run): the last steps of SUB's
two ADD calls, and LEFT_MASK's first step and its last three, of the sub_<n> test problems. Drawn
uniformly, about one case in a hundred reaches them; round 2's weights passed every other cell at
99.3% or more and still broke one 100-digit subtraction in ten, random ones, there
(lab/research/structured-operands-log.md).

The long route's adapters (docs/long-mul-div.md) are measured on its test cells: `executor_long_mul` and
`aligner_long_mul` on mul_20x20 and mul_50x50, `executor_long_div` and `aligner_long_div` on div_40by20 and
div_100by10, one composer transition (or conversion) per problem; `executor_digit_mul` on the DIGIT_MUL
calls LONG_MUL makes for the mul_20x20 and mul_50x50 problems (a of 20 and 50 digits times one digit of b),
one transition of one call per problem. The cells keep the test cells' names, as REFLECTION's sub_<n> do.

`measure_tier` is `caef-bench onestep` (resumable results in onestep.md and onestep.json);
`one_step_check` is the measurement training records in each adapter's manifest.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from caef_bench.data.structured import structured_pair
from caef_bench.data.testsets import cell_stream, load_cell, named_rng, repeated_cells, solve
from caef_bench.data.training import expression, nines_on_top
from caef_bench.evaluate.scoring import text_accuracy
from caef_bench.machines import routed, run
from caef_bench.models.names import adapter_name

LENGTH_CELLS = ("5", "10", "50", "100")
SUB_CALLEES = {"reflection": 1, "left_mask": 4}  # SUB's phase that calls each auxiliary machine
TOP_NINES = "sub9"  # the cells of subtractions whose REFLECTION drops leading zeros
TOP_NINES_EXECUTORS = ("reflection", "sub", "add")
REFLECTION_TAIL = "subtail"  # REFLECTION's last steps on the sub_<n> test problems
STRUCTURED = "struct"  # operands of the structured samplers (data.structured)
STRUCTURED_LENGTHS = ("10", "50", "100")
SUB_WIDE = "subwide"  # ADD's and LEFT_MASK's steps on SUB's (n+1)-digit sum
SUB_WIDE_PHASES = {"add": (2, 3), "left_mask": (SUB_CALLEES["left_mask"],)}  # SUB's phases that call each on the sum
SUB_WIDE_LENGTHS = ("50", "100")
SUB_WIDE_TAIL = 3  # the last steps of each such call: the carry into the top cell, the halt
# The long route's adapters: the test cells whose problems call them (DIGIT_MUL: LONG_MUL's calls on them)
LONG_ROUTE_CELLS = {"long_mul": ("mul_20x20", "mul_50x50"), "digit_mul": ("mul_20x20", "mul_50x50"),
                    "long_div": ("div_40by20", "div_100by10")}


def cells_for(op: str, kind: str = "executor", structured: bool = False) -> list[str]:
    """Cells an adapter is evaluated on: add_5 … add_100, mul_1_10, SUB's for its callees, and sub9_<n>;
    with `structured`, its struct_<n> cells too (the long route's adapters: LONG_ROUTE_CELLS alone)."""
    if op in LONG_ROUTE_CELLS:
        return list(LONG_ROUTE_CELLS[op])
    if op in ("mul", "div"):
        return [f"{op}_1_10"] + ([f"{STRUCTURED}_1_10"] if structured else [])
    cells = [f"{'sub' if op in SUB_CALLEES else op}_{n}" for n in LENGTH_CELLS]
    if structured:
        cells += [f"{STRUCTURED}_{n}" for n in STRUCTURED_LENGTHS]
    if kind == "executor" and op in TOP_NINES_EXECUTORS:
        cells += [f"{TOP_NINES}_{n}" for n in LENGTH_CELLS]
    if kind == "executor" and op == "reflection":
        cells += [f"{REFLECTION_TAIL}_{n}" for n in LENGTH_CELLS]
    if kind == "executor" and op in SUB_WIDE_PHASES:
        cells += [f"{SUB_WIDE}_{n}" for n in SUB_WIDE_LENGTHS]
    return cells


def repeated_cells_for(op: str) -> list[str]:
    """The repeated-digit family: the repeated_<op>_<n>_<pattern> cells whose problems call this
    adapter (REFLECTION's and LEFT_MASK's are SUB's), controls included. executor_cases and aligner_cases
    draw from them as from Table 1's cells."""
    source = "sub" if op in SUB_CALLEES else op
    return [cell for cell in repeated_cells() if cell.split("_")[1] == source]


def top_nines_cases(op: str, cell: str, n: int, seed: int = 0, every_step: bool = False) -> list[tuple[str, str]]:
    """Transitions that carry REFLECTION's dropped zeros, from subtractions with 9s on top of b (with
    `every_step`, each of them in every one of the n subtractions)."""
    rng = named_rng(seed, f"onestep/executor/{op}/{cell}")
    length = int(cell.rpartition("_")[2])
    cases = []
    for _ in range(n):
        sub = run("sub", *nines_on_top(rng, length))
        if op == "sub":  # the steps that read the REFLECTION halt and the first ADD's halt
            cases += [sub.transition(1), sub.transition(2)] if every_step else [sub.transition(rng.choice((1, 2)))]
        elif op == "reflection":  # from the last q1 step (its next state is the first q2) on
            reflection = sub.phases[SUB_CALLEES["reflection"]].callee
            cases += _transitions(reflection, reflection.n_q1_end, rng, every_step)
        else:
            cases += _transitions(sub.phases[2].callee, 0, rng, every_step)
    return cases


def sub_wide_cases(op: str, cell: str, n: int, seed: int = 0, every_step: bool = False) -> list[tuple[str, str]]:
    """ADD's or LEFT_MASK's steps on SUB's sum in n problems of sub_<n> (see the module's docstring): one
    drawn from each problem, or with `every_step` each of them."""
    rng = named_rng(seed, f"onestep/executor/{op}/{cell}")
    problems = load_cell("sub_" + cell.rpartition("_")[2])
    cases = []
    for problem in rng.sample(problems, min(n, len(problems))):
        sub = run("sub", int(problem["a"]), int(problem["b"]))
        steps = []
        for phase in SUB_WIDE_PHASES[op]:
            callee = sub.phases[phase].callee
            tail = range(max(0, len(callee) - SUB_WIDE_TAIL), len(callee))
            steps += [(callee, step) for step in sorted({*tail, *((0,) if op == "left_mask" else ())})]
        for callee, step in steps if every_step else [rng.choice(steps)]:
            cases.append(callee.transition(step))
    return cases


def structured_problems(op: str, cell: str, n: int, seed: int = 0, kind: str = "executor") -> list[tuple[int, int | None]]:
    """n operand pairs of a struct_<n> cell for op (see the module's docstring), from a stream of their own."""
    rng = named_rng(seed, f"onestep/{kind}/{op}/{cell}")
    length = int(cell.rpartition("_")[2])
    problems = []
    for _ in range(n):
        if op in ("mul", "div"):
            cls = (rng.randint(1, length), rng.randint(1, 15))
        elif op == "left_mask":
            cls = (length, 0)
        else:
            cls = (length, length if rng.random() < 0.5 else rng.randint(1, length))
        problems.append(structured_pair(rng, op, cls)[1])
    return problems


def long_route_cases(op: str, cell: str, n: int, seed: int = 0, every_step: bool = False) -> list[tuple[str, str]]:
    """The long route's executors on a test cell's problems, run on LONG_MUL or LONG_DIV: one composer
    transition drawn from each of n problems (with `every_step`, every one); DIGIT_MUL: one transition of
    one of the DIGIT_MUL calls the problem makes, drawn (with `every_step`, every transition of that call)."""
    rng = named_rng(seed, f"onestep/executor/{op}/{cell}")
    problems = load_cell(cell)
    cases = []
    for problem in rng.sample(problems, min(n, len(problems))):
        machine_run = run(routed(problem["op"], "long"), int(problem["a"]), int(problem["b"]))
        if op == "digit_mul":
            machine_run = rng.choice([callee for _, callee in machine_run.calls() if callee.machine == "DIGIT_MUL"])
        cases += _transitions(machine_run, 0, rng, every_step)
    return cases


def executor_cases(op: str, cell: str, n: int, seed: int = 0, every_step: bool = False) -> list[tuple[str, str]]:
    """One transition drawn from each of n problems of the cell; with `every_step`, every transition of
    each (of the part a cell is about: REFLECTION's tail in subtail_<n>), as a run teacher-forced."""
    if op in LONG_ROUTE_CELLS:
        return long_route_cases(op, cell, n, seed, every_step)
    if cell.startswith(f"{TOP_NINES}_"):
        return top_nines_cases(op, cell, n, seed, every_step)
    if cell.startswith(f"{SUB_WIDE}_"):
        return sub_wide_cases(op, cell, n, seed, every_step)
    if cell.startswith(f"{STRUCTURED}_"):
        rng = named_rng(seed, f"onestep/executor/{op}/{cell}/steps")
        return [case for a, b in structured_problems(op, cell, n, seed)
                for case in _transitions(run(op, a, b), 0, rng, every_step)]
    tail = cell.startswith(f"{REFLECTION_TAIL}_")
    rng = named_rng(seed, f"onestep/executor/{op}/{cell_stream(cell)}")
    problems = load_cell("sub_" + cell.rpartition("_")[2] if tail else cell)
    cases = []
    for problem in rng.sample(problems, min(n, len(problems))):
        machine_run = run(problem["op"], int(problem["a"]), int(problem["b"]))
        if op in SUB_CALLEES:
            machine_run = machine_run.phases[SUB_CALLEES[op]].callee
        # (REFLECTION's step whose next state commands q2, and every step after it)
        first = machine_run.n_q1_end - 1 if tail else 0
        cases += _transitions(machine_run, first, rng, every_step)
    return cases


def _transitions(machine_run, first: int, rng, every_step: bool) -> list[tuple[str, str]]:
    """Transitions first.. of a run: one drawn, or every one."""
    if every_step:
        return [machine_run.transition(step) for step in range(first, len(machine_run))]
    return [machine_run.transition(rng.randrange(first, len(machine_run)))]


def aligner_cases(op: str, cell: str, n: int, seed: int = 0) -> list[tuple[str, str]]:
    """Both directions, alternating: expression -> start text, halt text -> expression with result."""
    if cell.startswith(f"{STRUCTURED}_"):
        pairs = structured_problems(op, cell, n, seed, "aligner")
    else:
        rng = named_rng(seed, f"onestep/aligner/{op}/{cell_stream(cell)}")
        problems = load_cell(cell)
        pairs = [(int(problem["a"]), int(problem["b"])) for problem in rng.sample(problems, min(n, len(problems)))]
    return conversion_cases(op, pairs)


def conversion_cases(op: str, pairs) -> list[tuple[str, str]]:
    """The aligner's cases for operand pairs, (I) and (O) alternating: expression -> start text for the
    even ones, halt text -> expression with its result for the odd ones (long_mul's expression is `a*b=`,
    its start and halt LONG_MUL's)."""
    cases = []
    for index, (a, b) in enumerate(pairs):
        machine_run = run(op, a, b)
        expr = expression(op, a, b)
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
    return text_accuracy(cases, outputs, keep)  # the rule every component is scored by


def one_step_accuracy(model, codec, kind: str, op: str, per_cell: int, seed: int, structured: bool = False,
                      max_len: int | None = None) -> dict:
    """Exact match of single transitions (or aligner conversions) per test cell (with `max_len`, the cells
    of operands up to that many digits)."""
    from caef_bench.models.decoding import speculative_greedy

    def generate(prompts, limits, drafts):
        return [codec.decode(speculative_greedy(model, codec, codec.prompt_ids(p), codec.completion_ids(d)[:-1], n)[0])
                for p, n, d in zip(prompts, limits, drafts)]

    return _score_cells(generate, codec, kind, op, per_cell, seed, structured, max_len)


def cell_digits(cell: str) -> int:
    """The longest operand's digits a one-step cell holds: add_10, sub9_10, struct_10 -> 10; mul_1_10 -> 10;
    mul_50x50 -> 50, div_100by10 -> 100."""
    return max(int(n) for n in cell.rsplit("_", 1)[1].replace("by", "x").split("x"))


def _score_cells(generate, codec, kind: str, op: str, per_cell: int, seed: int, structured: bool,
                 max_len: int | None = None) -> dict:
    """score_cases on each of the adapter's cells (up to `max_len` digits), its cases drawn with `seed`."""
    cases_for = executor_cases if kind == "executor" else aligner_cases
    # The first few wrong outputs stay beside the numbers (score_cases): a miss in a thousand is worth reading.
    return {cell: score_cases(generate, cases_for(op, cell, per_cell, seed), lambda text: len(codec.completion_ids(text)))
            for cell in cells_for(op, kind, structured) if max_len is None or cell_digits(cell) <= max_len}


EVERY_STEP_BATCH = 64  # transitions per batched call (the step model packs them into passes)


def every_step_accuracy(step_model, op: str, problems: int, seed: int, structured: bool = False) -> dict:
    """Every transition of `problems` test problems per cell for one executor, batched through the step
    model (its greedy output, as a run would get it): whole runs teacher-forced. A 100-digit run needs
    about 99.99% per step, a rate a thousand drawn transitions cannot tell from 100%."""
    name = adapter_name("executor", op)
    results = {}
    for cell in cells_for(op, structured=structured):
        cases = executor_cases(op, cell, problems, seed, every_step=True)
        results[cell] = text_accuracy(cases, generate_in_batches(step_model, name, [prompt for prompt, _ in cases]))
    return results


def generate_in_batches(step_model, name: str, prompts: list[str], limits: list[int] | None = None) -> list[str]:
    """The step model's greedy outputs for `prompts`, EVERY_STEP_BATCH per call (each capped by `limits`)."""
    outputs = []
    for start in range(0, len(prompts), EVERY_STEP_BATCH):
        chunk = slice(start, start + EVERY_STEP_BATCH)
        completions = (step_model.generate(prompts[chunk], name) if limits is None
                       else step_model.generate(prompts[chunk], name, limits[chunk]))
        outputs += [getattr(o, "text", o) for o in completions]
    return outputs


def batched_one_step_accuracy(step_model, kind: str, op: str, per_cell: int, seed: int,
                              structured: bool = False, max_len: int | None = None) -> dict:
    """`one_step_accuracy` through the step model's batched greedy decoding (one verification pass for
    many cases, as the runtime decodes): the same greedy outputs, the same cases, many times faster
    for a thousand cases per cell."""
    name = adapter_name(kind, op)
    generate = lambda prompts, limits, drafts: generate_in_batches(step_model, name, prompts, limits)  # noqa: E731
    return _score_cells(generate, step_model.codec_for(name), kind, op, per_cell, seed, structured, max_len)


def one_step_check(per_cell: int, seed: int) -> Callable[..., dict]:
    """one_step_accuracy(model, codec, kind, op, max_len=None) at `per_cell` cases per cell, drawn with
    `seed`: what training records in each adapter's manifest (train.recipe.TrainRequest.one_step_check)."""
    return lambda model, codec, kind, op, max_len=None: one_step_accuracy(model, codec, kind, op, per_cell, seed,
                                                                          max_len=max_len)


def measure_adapters(step_model, adapters: list[tuple[str, str]], per_cell: int, seed: int,
                     measured: dict | None = None, save: Callable[[dict], None] | None = None,
                     progress: Callable[[str, dict], None] | None = None, every_step: bool = False,
                     structured: bool = False, max_len: int | None = None) -> dict:
    """One-step accuracy of each (kind, op) adapter of `step_model` (a runtime.hf.HFStepModel), by adapter
    name, in the order of `adapters` (then any others in `measured`); with `max_len`, on the cells of
    operands up to that many digits alone.

    The adapters already in `measured` (an earlier run's results) are not measured again;
    save(results) runs after every adapter measured, so an interrupted run keeps what finished;
    progress(name, cells) for every adapter, measured or not.
    """
    results = dict(measured or {})
    for kind, op in adapters:
        name = adapter_name(kind, op)
        if name not in results:
            step_model.activate(name)
            if every_step and kind == "executor":
                results[name] = every_step_accuracy(step_model, op, per_cell, seed, structured)
            elif hasattr(step_model, "generate"):
                results[name] = batched_one_step_accuracy(step_model, kind, op, per_cell, seed, structured, max_len)
            else:
                results[name] = one_step_accuracy(step_model.model, step_model.codec_for(name), kind, op, per_cell, seed,
                                                  structured, max_len)
            if save is not None:
                save(results)
        if progress is not None:
            progress(name, results[name])
    order = [adapter_name(kind, op) for kind, op in adapters]
    return {name: results[name] for name in sorted(results, key=lambda n: order.index(n) if n in order else len(order))}


def _measured_model(tier: str, checkpoints: str | None, base_only: bool, device: str):
    """(step model, the weights it names): the tier with its adapters, or its base alone."""
    from caef_bench.runtime.hf import HFStepModel, load_step_model

    if not base_only:
        step_model = load_step_model(tier, checkpoints, device=device)
        return step_model, {"weights": step_model.fingerprint}
    from caef_bench.models.codec import codec_for
    from caef_bench.models.loading import load_bare_base

    loaded = load_bare_base(tier, checkpoints, device=device)
    return HFStepModel(loaded.model, codec_for(loaded.tokenizer, loaded.tier.position_scheme)), {"weights": "base only"}


def measure_tier(tier: str, checkpoints: str | None, adapters: list[tuple[str, str]], per_cell: int, seed: int, *,
                 base_only: bool = False, device: str = "cpu", command: str = "", out: Path | None = None,
                 markdown: Callable[[dict, str], str] | None = None,
                 progress: Callable[[str, dict], None] | None = None, every_step: bool = False,
                 structured: bool = False, max_len: int | None = None) -> dict:
    """`caef-bench onestep`: the one-step accuracy of a tier's adapters (or, base_only, of its base with
    no adapter), as a record: the command, the weights (and each adapter's fingerprint), N, seed, results.
    With `every_step`, each executor is measured on every transition of `per_cell` problems per cell
    (`every_step_accuracy`) instead of one transition of each.

    With `out`, the results go to onestep.md (as `markdown(results, header)` renders them) and
    onestep.json there after every adapter, and a rerun with the same weights, N and seed measures
    only the adapters those files lack.
    """
    if every_step and base_only:
        raise ValueError("--every-step measures a tier's executors through their adapters, not the bare base")
    if every_step and max_len is not None:
        raise ValueError("--max-len picks one-step cells; --every-step runs whole problems of every cell")
    step_model, settings = _measured_model(tier, checkpoints, base_only, device)
    settings.update(per_cell=per_cell, seed=seed)
    if every_step:  # (only when set: files written before the option compare equal without it)
        settings["every_step"] = True
    if structured:
        settings["structured"] = True
    if max_len is not None:  # a rerun without it measures every cell: other settings, other files
        settings["max_len"] = max_len
    if not base_only:  # each adapter's own fingerprint, as the runs' records folders keep them (runtime.reuse)
        settings["adapters"] = step_model.adapter_fingerprints
    measured, save = {}, None
    if out is not None:
        if markdown is None:  # the table is the report layer's (report.tables.onestep_markdown), above this one
            raise ValueError("measure_tier: writing to `out` needs `markdown`, the table renderer")
        measured = earlier_results(out, settings)
        save = lambda results: write_results(out, command, settings, results, device, markdown)  # noqa: E731
    results = measure_adapters(step_model, adapters, per_cell, seed, measured, save, progress, every_step, structured,
                               max_len)
    if save is not None:  # in the order asked (a resumed run measured the missing adapters last)
        save(results)
    return {"command": command, **settings, "results": results}


RESULTS_JSON, RESULTS_MARKDOWN = "onestep.json", "onestep.md"


def earlier_results(out: Path, settings: dict) -> dict:
    """The adapters an earlier run into `out` already measured with the same weights, N and seed."""
    path = Path(out) / RESULTS_JSON
    if not path.exists():
        return {}
    earlier = json.loads(path.read_text())
    same = all(earlier.get(k) == v for k, v in settings.items() if k != "adapters")  # (older files lack them)
    return earlier["results"] if same else {}


ONE_STEP_BAR = {"executor": 0.999, "aligner": 0.995}  # per cell, at every length, for the tiny tier


def results_header(document: dict) -> str:
    """How a one-step results document (onestep.json) was measured: its command, weights, device, N and seed."""
    executors = (f"every transition of {document['per_cell']} held-out problems per cell (executors: whole runs, "
                 f"teacher-forced; N counts transitions)" if document.get("every_step") else
                 "single transitions (executors)")
    return (f"Generated by `{document['command']}`, weights `{document['weights']}`, device {document['device']}: "
            f"exact match of {executors} and conversions (aligners, (I) and (O) alternating), up to "
            f"{document['per_cell']} held-out cases per cell (seed {document['seed']}; fewer where a cell's test set "
            f"is smaller: N is in each cell); Wilson 95% intervals. The one-step bar the tiny tier is held to: "
            f"executors {100 * ONE_STEP_BAR['executor']:.1f}%, aligners {100 * ONE_STEP_BAR['aligner']:.1f}% at "
            f"every length.")


def write_results(out: Path, command: str, settings: dict, results: dict, device: str,
                  markdown: Callable[[dict, str], str]) -> None:
    """onestep.md (the table `markdown` renders, with `results_header` saying how it was measured) and
    onestep.json, the document the header and table are rendered from."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    document = {"command": command, **settings, "device": device, "results": results}
    (out / RESULTS_MARKDOWN).write_text(markdown(results, results_header(document)))
    (out / RESULTS_JSON).write_text(json.dumps(document, indent=1) + "\n")
