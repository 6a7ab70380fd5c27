"""Windowed execution: operands longer than a tier's fields of position ids, run a window at a time.

ADD and the comparisons are local machines: a transition reads the cells under the two heads and one
register (ADD's carry, a comparison's verdict so far) and writes one cell or the register. So the
executor does not need to see a whole 1,000-digit tape, only the cells around its heads. Here each
step's prompt is a *window* of the state: every tape cut to `width` cells starting `back` cells
behind the heads (ADD's output tape cut at the same column), which is a state of a problem at most
`width` digits long, within the lengths the adapters were trained on (the tier's `Windowing`,
models.limits). The model writes the window's next
state and command; the runtime puts the window back into the whole state (`splice`), checks that no
operand was rewritten, and cuts the next window. The model computes every digit and every verdict;
the runtime only cuts and joins text, as it already parses and renders every state between steps.

The aligners copy whole operands, so they work in chunks of `chunk` digits: aligner (I) is asked
for `1<chunk of a>+1<chunk of b>=` (a `1` on top of each chunk: a chunk may begin with zeros, or be
empty where one operand is shorter, and a sentinel digit keeps both written as the aligner was
trained), and the chunks' tapes, each without its sentinel, are joined into the start state. Aligner
(O) reads the halt state chunk by chunk the same way: ADD's output tape cut at the chunks' columns
with a sentinel `1` on top, answered `1<chunk of a>+1<chunk of b>=1<chunk of the result>`; the
result is the chunks' results without their sentinels, top chunk first. A comparison's chunks each
copy the verdict, and all of them must agree.

Every window is a state the machine itself could be in, except in what lies behind the window: the
carry into its first column, and the output digits written before it, come from columns the model no
longer sees. It never needs them: it reads the carry register and copies the output cells. Traced
mode compares each window with the same window of the machine's step, so a run's first divergence is
found as in a whole-state run.

SUB, MUL and DIV are not windowed: their composers' states hold the callee's halt state and operands
whole (SUB's REFLECTION and LEFT_MASK), which needs windows of their own (docs/long-operands.md).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterator

from caef_bench.machines import (Snapshot, answer_misalignment, parse, parse_expression, render, rewritten_operand, run,
                                 start_misalignment)
from caef_bench.machines import classify as classify_step
from caef_bench.machines import next_text
from caef_bench.machines.aligner import align_input, align_output
from caef_bench.machines.ops import BY_MACHINE
from caef_bench.machines.text import HALT, ExecutorState, Tape
from caef_bench.models.limits import Windowing
from caef_bench.models.names import aligner_name, executor_of_machine

from .problem import (Attempt, Completion, Malformed, OffProblem, Problem, default_step_budget, parse_output,
                      reference_step_count, step_command)

SENTINEL = "1"  # the top digit of every chunk the aligners see


# --------------------------------------------------------------------------- windows of a state


@dataclass(frozen=True)
class Window:
    """Where a window was cut: the column it starts at, and each tape's own start (a tape shorter than
    the column keeps its last digit, so that its exhausted head still stands past a digit)."""

    column: int
    tape_starts: tuple[int, ...]
    width: int


def window_of(state: ExecutorState, shape: Windowing) -> tuple[ExecutorState, Window]:
    """The window of a whole state the executor is shown, and where it was cut."""
    leading_head = max(tape.head for tape in state.tapes)
    column = max(0, leading_head - 1 - shape.back)
    window = Window(column, tuple(min(column, max(len(tape.digits) - 1, 0)) for tape in state.tapes), shape.width)
    return _cut_state(state, window), window


def _cut_state(state: ExecutorState, window: Window) -> ExecutorState:
    tapes = tuple(Tape(t.marker, t.digits[s:s + window.width], t.head - s if t.head else 0)
                  for t, s in zip(state.tapes, window.tape_starts))
    output = state.output[window.column:] if state.machine == "ADD" else state.output
    return replace(state, tapes=tapes, output=output)


def splice(whole: ExecutorState, window: Window, written: ExecutorState) -> ExecutorState:
    """The whole state after a step the model wrote on a window of `whole`: every tape whole again
    with its head where the model moved it, and the registers the model wrote."""
    if len(written.tapes) != len(whole.tapes):
        raise Malformed(f"a {written.machine} state with {len(written.tapes)} tapes")
    tapes = tuple(Tape(t.marker, t.digits, w.head + s if w.head else 0)
                  for t, w, s in zip(whole.tapes, written.tapes, window.tape_starts))
    output = whole.output[:window.column] + written.output if whole.machine == "ADD" else written.output
    return replace(written, tapes=tapes, output=output)


def windowed_step(whole: Snapshot, shape: Windowing) -> tuple[Snapshot, Window]:
    """The window the executor is shown for the step after `whole` (a state and its command), and where it
    was cut."""
    state, window = window_of(whole.state, shape)
    return Snapshot(state, whole.command), window


# --------------------------------------------------------------------------- the aligners' chunks


def _chunks(digits: str, count: int, chunk: int) -> list[str]:
    """A tape (least significant digit first) in `count` chunks of `chunk` cells; the last ones may be empty."""
    return [digits[i * chunk:(i + 1) * chunk] for i in range(count)]


def _chunk_count(chunk: int, *tapes: str) -> int:
    return max(1, max(-(-len(t) // chunk) for t in tapes))


def _sentinel_number(tape_chunk: str) -> str:
    return SENTINEL + tape_chunk[::-1]


def input_chunks(expr: str, chunk: int) -> list[str]:
    """Aligner (I)'s prompts for a long expression: `1<chunk of a><op>1<chunk of b>=`, lowest chunk first."""
    expression = parse_expression(expr)
    a, b = str(expression.a)[::-1], str(expression.b)[::-1]
    count = _chunk_count(chunk, a, b)
    symbol = expression.operation.symbol
    return [f"{_sentinel_number(ca)}{symbol}{_sentinel_number(cb)}="
            for ca, cb in zip(_chunks(a, count, chunk), _chunks(b, count, chunk))]


def _without_sentinel(tape: Tape, what: str) -> str:
    if not tape.digits.endswith(SENTINEL):
        raise OffProblem(f"{what} lost its sentinel digit")
    return tape.digits[:-1]


def join_start(expr: str, chunk_prompts: list[str], chunk_texts: list[str]) -> Snapshot:
    """The whole start state from aligner (I)'s chunks: each chunk's tapes without their sentinels,
    joined lowest chunk first, and the lowest chunk's first command. Raises Malformed or OffProblem."""
    tapes: list[list[str]] = []
    first = None
    for index, (prompt, text) in enumerate(zip(chunk_prompts, chunk_texts)):
        snapshot = parse_output(text)
        if wrong := start_misalignment(prompt, snapshot):
            raise OffProblem(f"chunk {index}: {wrong}")
        if snapshot.command is None or snapshot.state.q != "q0":
            raise Malformed(f"chunk {index}: not a start state and its command")
        tapes.append([_without_sentinel(t, f"aligner (I) chunk {index}") for t in snapshot.state.tapes])
        first = first or snapshot
    state = replace(first.state, tapes=tuple(Tape(t.marker, "".join(chunk[i] for chunk in tapes), 0)
                                               for i, t in enumerate(first.state.tapes)))
    start = Snapshot(state, first.command)
    if wrong := start_misalignment(expr, start):
        raise OffProblem(wrong)
    return start


def output_chunks(halt: ExecutorState, chunk: int) -> list[str]:
    """Aligner (O)'s prompts for a long halt state: the halt state of each chunk of columns, every tape
    (ADD's output too) with a sentinel `1` on top; ADD's last chunk keeps the output's carry digit."""
    a, b = (t.digits for t in halt.tapes[:2])
    count = _chunk_count(chunk, a, b)
    prompts = []
    for index, (ca, cb) in enumerate(zip(_chunks(a, count, chunk), _chunks(b, count, chunk))):
        tapes = tuple(Tape(t.marker, cells + SENTINEL, len(cells) + 2) for t, cells in zip(halt.tapes, (ca, cb)))
        if halt.machine == "ADD":
            end = (index + 1) * chunk if index < count - 1 else len(halt.output)
            state = replace(halt, tapes=tapes, carry="0", output=halt.output[index * chunk:end] + SENTINEL)
        else:
            state = replace(halt, tapes=tapes)
        prompts.append(render(Snapshot(state, HALT)))
    return prompts


def join_answer(expr: str, chunk_prompts: list[str], chunk_texts: list[str], machine: str) -> str:
    """The answer from aligner (O)'s chunks: each chunk's result without its sentinel, top chunk
    first (ADD), or the verdict every chunk copied (a comparison). Raises OffProblem."""
    results = []
    for index, (prompt, text) in enumerate(zip(chunk_prompts, chunk_texts)):
        asked = _chunk_expression(prompt)
        if wrong := answer_misalignment(asked, text):
            raise OffProblem(f"chunk {index}: {wrong}")
        results.append(text.rpartition("=")[2])
    if machine == "ADD":
        if missing := [i for i, r in enumerate(results) if not r.startswith(SENTINEL)]:
            raise OffProblem(f"aligner (O) chunk {missing[0]} lost its sentinel digit")
        return "".join(r[1:] for r in reversed(results))
    if len(set(results)) != 1:
        raise OffProblem(f"aligner (O) chunks wrote different verdicts: {', '.join(sorted(set(results)))}")
    return results[0]


def _chunk_expression(halt_prompt: str) -> str:
    """The expression a chunk's halt state stands for, as aligner (O) must write it back."""
    written = align_output(halt_prompt)
    return written.rpartition("=")[0] + "="


def cut(snapshot: Snapshot, window: Window) -> Snapshot:
    """The same window of a later state (the model's next window is cut where its prompt was)."""
    return replace(snapshot, state=_cut_state(snapshot.state, window))


def draft_for(whole: Snapshot, window: Window) -> str | None:
    """The machine's next window after a whole state on its true course, to draft the model's step
    (speculative decoding checks every token; a draft only saves passes); None off the course."""
    try:
        after = parse(next_text("executor", BY_MACHINE[whole.machine].name, render(whole)))
    except ValueError:
        return None
    return render(cut(after, window))


# --------------------------------------------------------------------------- the machine's windowed calls, for tracing


def reference_calls(expr: str, shape: Windowing) -> Iterator[tuple[str, str, str]]:
    """(adapter, input, output) of every call a correct windowed run makes on expr, in order."""
    expression = parse_expression(expr)
    machine_run = run(expression.op, expression.a, expression.b)
    aligner = aligner_name(expression.op)
    for prompt in input_chunks(expr, shape.chunk):
        yield aligner, prompt, align_input(prompt)
    executor = executor_of_machine(machine_run.machine)
    for i in range(len(machine_run)):
        shown, window = windowed_step(machine_run.snapshot(i), shape)
        yield executor, render(shown), render(cut(machine_run.snapshot(i + 1), window))
    for prompt in output_chunks(machine_run.halt.state, shape.chunk):
        yield aligner, prompt, align_output(prompt)


# --------------------------------------------------------------------------- one problem, windowed


class Windowed(Attempt):
    """A problem of ADD or a comparison run a window at a time: aligner (I) by chunks, the executor on
    windows, aligner (O) by chunks. Free-running; traced mode compares each call with the machine's
    until the first difference."""

    def __init__(self, problem: Problem, op: str, budget: int, traced: bool, shape: Windowing, **kwargs):
        super().__init__(problem, **kwargs)
        self.op, self.budget, self.shape = op, budget, shape
        self.record.windowed = {"width": shape.width, "back": shape.back, "chunk": shape.chunk}
        self.reference = reference_calls(problem.expr, shape) if traced else None
        self.chunk_prompts = input_chunks(problem.expr, shape.chunk)
        self.chunk_texts: list[str] = []
        self.phase = "align_input"
        self.whole: Snapshot | None = None  # the whole state and command the executor has reached
        self.shown: Snapshot | None = None  # its window, the pending prompt
        self.window: Window | None = None
        self._next()

    def _next(self) -> None:
        if self.phase == "execute":
            self.adapter = executor_of_machine(self.whole.machine)
            self.shown, self.window = windowed_step(self.whole, self.shape)
            self.prompt = render(self.shown)
            self.draft = draft_for(self.whole, self.window)
        else:
            self.draft = None  # the chunks are expressions and halt states: the model's own drafter reads them
            self.adapter = aligner_name(self.op)
            self.prompt = self.chunk_prompts[len(self.chunk_texts)]

    def accept(self, completion: Completion, seconds: float) -> None:
        text, index = self._logged(completion, seconds, expression=self.phase == "align_output")
        try:
            if self.phase == "execute":
                self._execute(text)
            else:
                self.chunk_texts.append(text)
                if len(self.chunk_texts) == len(self.chunk_prompts):
                    self._chunks_done()
        except (Malformed, OffProblem) as error:
            self._stopped(error, index, text)
            return
        if not self.done and not self._over_budget(self.budget):
            self._next()

    def _chunks_done(self) -> None:
        if self.phase == "align_input":
            self.whole = join_start(self.problem.expr, self.chunk_prompts, self.chunk_texts)
            self.phase = "execute"
            return
        answer = join_answer(self.problem.expr, self.chunk_prompts, self.chunk_texts, self.whole.machine)
        self.record.final = f"{self.problem.expr}{answer}"
        self.record.answer = answer
        self.finish("answered")

    def _execute(self, text: str) -> None:
        written = parse_output(text)
        command = step_command(written, self.whole.machine)
        if rewritten := rewritten_operand(self.shown.state, written.state):
            raise OffProblem(rewritten + " (in its window)")
        self.whole = Snapshot(splice(self.whole.state, self.window, written.state), command)
        if command.is_halt:
            self.phase = "align_output"
            self.chunk_prompts, self.chunk_texts = output_chunks(self.whole.state, self.shape.chunk), []

    def _compare(self, text: str) -> tuple[str | None, str | None]:
        if self.reference is None or self.record.first_divergence is not None:
            return None, None
        adapter, prompt, output = next(self.reference, (None, None, None))
        if (adapter, prompt) != (self.adapter, self.prompt):
            raise RuntimeError(f"windowed input differs from the machine's at step {self.record.n_steps}: "
                               f"{self.prompt!r} vs {prompt!r}")
        if self.phase == "align_output":
            return (None if text == output else "wrong_result"), output
        return classify_step(output, text), output


def windowed_attempt(problem: Problem, op: str, machine_run, step_budget: int | None, shape: Windowing, *,
                     mode: str, **common) -> Windowed:
    """A windowed attempt; its step budget counts the chunked aligner calls as well."""
    calls = reference_step_count(machine_run) - 2 + len(input_chunks(problem.expr, shape.chunk)) + \
        len(output_chunks(machine_run.halt.state, shape.chunk))
    budget = step_budget if step_budget is not None else default_step_budget(calls)
    attempt = Windowed(problem, op, budget, traced=mode == "traced", shape=shape, mode=mode, **common)
    attempt.record.step_budget = budget
    return attempt


__all__ = ["SENTINEL", "Window", "Windowed", "input_chunks", "join_answer",
           "join_start", "output_chunks", "reference_calls", "splice", "window_of", "windowed_attempt",
           "windowed_step"]
