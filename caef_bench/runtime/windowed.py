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
with a sentinel `2` on top, answered `1<chunk of a>+1<chunk of b>=2<chunk of the result>`; the
result is the chunks' results without their sentinels, top chunk first. The output's sentinel is the
sum of the operands' so that the written chunk reads like the sums the aligner was trained on: with
`1` there, a result beginning with 1 became a run (`1+1=11…`) that SmolLM2's aligner (O) lengthened
by one more 1 (docs/long-operands.md, "Sentinels"). A comparison's chunks each
copy the verdict, and all of them must agree.

Every window is a state the machine itself could be in, except in what lies behind the window: the
carry into its first column, and the output digits written before it, come from columns the model no
longer sees. It never needs them: it reads the carry register and copies the output cells. Traced
mode compares each window with the same window of the machine's step, so a run's first divergence is
found as in a whole-state run.

SUB runs its composer's steps in chunks the same way (`sub_chunk`: 2 over a's chunk and 1 over b's, and
on each callee tape the cells those sentinels become through the machine, so that each chunk is as far
as it can be a state of the chunk's own short subtraction), each chunk's step checked against the copies
it must write (`check_sub_chunk`); its callees REFLECTION, ADD and LEFT_MASK run on windows like ADD
(in q2, where the output head walks back over the top zeros, the window follows the output head).
The design is docs/long-operands.md's "Windowed subtraction". MUL and DIV are not windowed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterator

from caef_bench.machines import (Snapshot, answer_misalignment, answer_miscopy, parse, parse_expression, render,
                                 rewritten_operand, run, start_misalignment)
from caef_bench.machines import classify as classify_step
from caef_bench.machines import next_text
from caef_bench.machines import composer_view
from caef_bench.machines.aligner import align_input, align_output
from caef_bench.machines.executors import AddRun, LeftMaskRun, ReflectionRun
from caef_bench.machines.ops import BY_MACHINE
from caef_bench.machines.text import HALT, Action, Command, ComposerState, ExecutorState, Tape
from caef_bench.models.limits import Windowing
from caef_bench.models.names import aligner_name, executor_of_machine

from .problem import (Attempt, Completion, Malformed, OffProblem, Problem, default_step_budget, parse_output,
                      reference_step_count, step_command)

SENTINEL = "1"  # the top digit of every chunk the aligners see
ADD_OUTPUT_SENTINEL = "2"  # over ADD's output chunk: 1 + 1, the operands' sentinels added
SUB_SENTINELS = ("2", SENTINEL)  # a subtraction's: 2 over a's chunk and 1 over b's, so that each chunk is one with a >= b


# --------------------------------------------------------------------------- windows of a state


@dataclass(frozen=True)
class Window:
    """Where a window was cut: the column it starts at, and each tape's own start (a tape shorter than
    the column keeps its last digit, so that its exhausted head still stands past a digit)."""

    column: int
    tape_starts: tuple[int, ...]
    width: int


# The executors whose output register is a tape of digits, cut at the window's column like the operands.
DIGIT_OUTPUTS = ("ADD", "REFLECTION", "LEFT_MASK")


def window_of(state: ExecutorState, shape: Windowing) -> tuple[ExecutorState, Window]:
    """The window of a whole state the executor is shown, and where it was cut: `back` cells behind the
    leading head, or, in REFLECTION's and LEFT_MASK's q2 (the output head walking back over the top
    zeros), behind the output head."""
    if state.q == "q2":
        column = max(0, len(state.output) - 1 - shape.back)
    else:
        column = max(0, max(tape.head for tape in state.tapes) - 1 - shape.back)
    window = Window(column, tuple(min(column, max(len(tape.digits) - 1, 0)) for tape in state.tapes), shape.width)
    return _cut_state(state, window), window


def _cut_tape(tape: Tape, start: int, width: int) -> Tape:
    """A tape's cells in a window; a head past the window (q2's finished tapes) stands just past its last cell."""
    digits = tape.digits[start:start + width]
    return Tape(tape.marker, digits, min(tape.head - start, len(digits) + 1) if tape.head else 0)


def _cut_state(state: ExecutorState, window: Window) -> ExecutorState:
    tapes = tuple(_cut_tape(t, s, window.width) for t, s in zip(state.tapes, window.tape_starts))
    output = state.output[window.column:] if state.machine in DIGIT_OUTPUTS else state.output
    return replace(state, tapes=tapes, output=output)


def splice(whole: ExecutorState, window: Window, written: ExecutorState) -> ExecutorState:
    """The whole state after a step the model wrote on a window of `whole`: every tape whole again
    with its head where the model moved it (a head left where the window showed it stays where it was),
    and the registers the model wrote."""
    if len(written.tapes) != len(whole.tapes):
        raise Malformed(f"a {written.machine} state with {len(written.tapes)} tapes")
    tapes = tuple(Tape(t.marker, t.digits, t.head if w.head == _cut_tape(t, s, window.width).head
                       else w.head + s if w.head else 0)
                  for t, w, s in zip(whole.tapes, written.tapes, window.tape_starts))
    output = whole.output[:window.column] + written.output if whole.machine in DIGIT_OUTPUTS else written.output
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


def sub_chunk_count(a: str, chunk: int) -> int:
    """SUB's chunks: a's columns and one more, where a + reflection and its + 1 write their carry digit
    (so that no chunk of any tape holds more than `chunk` digits)."""
    return len(a) // chunk + 1


def _sentinel_number(tape_chunk: str, sentinel: str = SENTINEL) -> str:
    return sentinel + tape_chunk[::-1]


def input_chunks(expr: str, chunk: int) -> list[str]:
    """Aligner (I)'s prompts for a long expression: `1<chunk of a><op>1<chunk of b>=`, lowest chunk first."""
    expression = parse_expression(expr)
    a, b = str(expression.a)[::-1], str(expression.b)[::-1]
    count = sub_chunk_count(a, chunk) if expression.op == "sub" else _chunk_count(chunk, a, b)
    symbol = expression.operation.symbol
    top_a, top_b = SUB_SENTINELS if expression.op == "sub" else (SENTINEL, SENTINEL)
    return [f"{_sentinel_number(ca, top_a)}{symbol}{_sentinel_number(cb, top_b)}="
            for ca, cb in zip(_chunks(a, count, chunk), _chunks(b, count, chunk))]


def _without_sentinel(digits: str, what: str, sentinel: str = SENTINEL) -> str:
    if not digits.endswith(sentinel):
        raise OffProblem(f"{what} lost its sentinel digit")
    return digits[:-len(sentinel)]


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
        tops = SUB_SENTINELS if isinstance(snapshot.state, ComposerState) else (SENTINEL, SENTINEL)
        tapes.append([_without_sentinel(digits, f"aligner (I) chunk {index}", top)
                      for digits, top in zip(_operands(snapshot.state), tops)])
        first = first or snapshot
    joined = ["".join(chunk[i] for chunk in tapes) for i in range(len(tapes[0]))]
    if isinstance(first.state, ComposerState):  # SUB's a and b
        state = replace(first.state, a=joined[0], b=joined[1])
    else:
        state = replace(first.state, tapes=tuple(Tape(t.marker, digits, 0) for t, digits in zip(first.state.tapes, joined)))
    start = Snapshot(state, first.command)
    if wrong := start_misalignment(expr, start):
        raise OffProblem(wrong)
    return start


def _operands(state: ExecutorState | ComposerState) -> tuple[str, ...]:
    return (state.a, state.b) if isinstance(state, ComposerState) else tuple(t.digits for t in state.tapes)


def output_chunks(halt: ExecutorState | ComposerState, chunk: int) -> list[str]:
    """Aligner (O)'s prompts for a long halt state: the halt state of each chunk of columns, every tape
    with its sentinel on top (`1` over operands, `2` over ADD's output); ADD's last chunk keeps the output's
    carry digit. SUB's
    halt is cut as its composer's steps are (`sub_chunk`)."""
    if isinstance(halt, ComposerState):
        return [render(sub_chunk(Snapshot(halt, HALT), k, sub_chunk_count(halt.a, chunk), chunk))
                for k in range(sub_chunk_count(halt.a, chunk))]
    a, b = (t.digits for t in halt.tapes[:2])
    count = _chunk_count(chunk, a, b)
    prompts = []
    for index, (ca, cb) in enumerate(zip(_chunks(a, count, chunk), _chunks(b, count, chunk))):
        tapes = tuple(Tape(t.marker, cells + SENTINEL, len(cells) + 2) for t, cells in zip(halt.tapes, (ca, cb)))
        if halt.machine == "ADD":
            end = (index + 1) * chunk if index < count - 1 else len(halt.output)
            output = halt.output[index * chunk:end] + ADD_OUTPUT_SENTINEL
            state = replace(halt, tapes=tapes, carry="0", output=output)
        else:
            state = replace(halt, tapes=tapes)
        prompts.append(render(Snapshot(state, HALT)))
    return prompts


def join_answer(expr: str, chunk_prompts: list[str], chunk_texts: list[str], machine: str) -> str:
    """The answer from aligner (O)'s chunks: each chunk's result without its sentinel, top chunk
    first (ADD, SUB), or the verdict the chunks copied (a comparison). Raises OffProblem where a chunk
    is not its halt chunk's expression with the result that chunk holds (its sentinel digit on top, the
    whole halt state's verdict), so what is joined is the executors' answer as they wrote it."""
    results = []
    for index, (prompt, text) in enumerate(zip(chunk_prompts, chunk_texts)):
        machine_answer = align_output(prompt)  # the chunk's expression and the result its halt state holds
        if text != machine_answer:  # the two checks say which part differs
            asked = machine_answer.rpartition("=")[0] + "="
            raise OffProblem(f"chunk {index}: {answer_misalignment(asked, text) or answer_miscopy(prompt, text)}")
        results.append(text.rpartition("=")[2])
    if machine in ("ADD", "SUB"):
        return "".join(r[1:] for r in reversed(results))
    return results[0]


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


# --------------------------------------------------------------------------- SUB's composer steps, in chunks

# The cells on top of each chunk of each tape SUB's composer steps show, by the composer's state and the
# callee it calls there: (the callee's tapes', its output's). Each is what the sentinels 2 and 1 on a's and
# b's chunks become through the machine, as in the chunk's own subtraction 2<a's chunk> - 1<b's chunk>:
# REFLECTION's nines stay 9 (the composer writes a 9 for every cell of a's chunk, its sentinel's too) and
# its result's top is 9 - 1 = 8; a + reflection's is 2 + 8 = 10 and the carry, 11 (its top cell, as in
# every subtraction with a > b, is the carry 1); + 1 leaves it; LEFT_MASK drops that carry and keeps a 1,
# the top of the difference 10^n + (a - b) of the chunk's own subtraction, which SUB copies.
# None: the constant 1 the composer writes as the second ADD's b, whole in every chunk.
SUB_TOPS = {
    ("q1", "REFLECTION"): (("9", SUB_SENTINELS[1]), "8"),
    ("q2", "ADD"): ((SUB_SENTINELS[0], "8"), "11"),
    ("q3", "ADD"): (("11", None), "11"),
    ("q4", "LEFT_MASK"): (("11",), SENTINEL),
}


def _columns(digits: str, k: int, count: int, chunk: int) -> str:
    """Chunk k of a tape (least significant digit first); the top chunk keeps whatever lies above."""
    return digits[k * chunk:] if k == count - 1 else digits[k * chunk:(k + 1) * chunk]


def _top(top: str, digits: str, k: int, count: int, width: int) -> str:
    """A tape's top cells in chunk k. A two-cell top is a carry and the sentinel over it: the top chunk of
    a tape with a carry digit of its own (past a's `width` columns) gets the sentinel only."""
    return top[1:] if len(top) == 2 and k == count - 1 and len(digits) > width else top


def _chunk_tape(tape: Tape, top: str | None, k: int, count: int, chunk: int, width: int, height: int = 0) -> Tape:
    if top is None:
        return tape
    digits = _columns(tape.digits, k, count, chunk).ljust(height, "0") + _top(top, tape.digits, k, count, width)
    if tape.head not in (0, len(tape.digits) + 1):
        raise Malformed(f"a {tape.marker} head left inside its tape at a halt")
    return Tape(tape.marker, digits, len(digits) + 1 if tape.head else 0)


def _sub_view(halt: Snapshot) -> Snapshot:
    """A callee's halt as SUB's chunks show it: ADD's carry as `[C]0` (`composer_view`); LEFT_MASK's
    result as the model wrote it, its top zeros erased (the whole-state view shows them kept, and the
    composer erases them; a chunk's composer cannot see which zeros are the top ones), "0" when none is left,
    and its tape cut where that result ends. The tape's cells above (the carry LEFT_MASK erased, the
    difference's top zeros) would otherwise sit under the chunk's sentinel, where the composer copies them
    as digits (it drops only the tape's top cell): cut there, every chunk is `1 1 <digits>` over
    `1 <digits>`, the one shape a chunk's last step has when the difference fills its columns."""
    if halt.machine == "LEFT_MASK" and halt.state.halted:
        result = halt.state.output or "0"
        tape = halt.state.tapes[0]
        # (the cells below the result's top are the result's own digits: LEFT_MASK erases only from the top)
        cut_tape = replace(tape, digits=tape.digits[:len(result)], head=len(result) + 1 if tape.head else 0)
        return replace(halt, state=replace(halt.state, tapes=(cut_tape,), output=result))
    return composer_view("SUB", halt, halt) if halt.state.halted else halt


def sub_chunk(whole: Snapshot, k: int, count: int, chunk: int) -> Snapshot:
    """Chunk k of a whole SUB text (a composer step's input or output): each of its tapes' chunk k with its
    top cell (`SUB_TOPS`), a callee's start or halt state cut at the same columns."""
    state = whole.state
    cut_state = replace(state, a=_columns(state.a, k, count, chunk) + SUB_SENTINELS[0],
                        b=_columns(state.b, k, count, chunk) + SUB_SENTINELS[1],
                        output=_columns(state.output, k, count, chunk) + SENTINEL if state.halted else state.output)
    callee = None
    if whole.callee is not None:
        view = _sub_view(whole.callee)
        tops, output_top = SUB_TOPS[(state.q, view.machine)]
        width = len(state.a)
        # REFLECTION's result, and the first ADD's second tape (its copy), stand as high as a's chunk: where
        # REFLECTION erased top zeros of the whole result (b's top digits 9s), those zeros are, in the chunk's
        # own subtraction 2<a> - 1<b>, under its 8, not on top. Shown without them, the 8 sits lower than a's 2
        # and the composer writes one cell too many; the whole step (`sub_next`) keeps the result as written.
        height = len(_columns(state.a, k, count, chunk))
        heights = (0, height) if (state.q, view.machine) == ("q2", "ADD") else (0, 0)
        tapes = tuple(_chunk_tape(t, top, k, count, chunk, width, h)
                      for t, top, h in zip(view.state.tapes, tops, heights))
        output = view.state.output
        if view.state.halted:
            columns = _columns(output, k, count, chunk)
            if view.machine == "REFLECTION":
                columns = columns.ljust(height, "0")
            output = columns + _top(output_top, output, k, count, width)
        callee = Snapshot(replace(view.state, tapes=tapes, output=output), view.command)
    return Snapshot(cut_state, whole.command, callee, trailing_newline=whole.trailing_newline)


def sub_next(whole: Snapshot) -> Snapshot:
    """SUB's next step after a whole composer input (its state and command, and the callee's halt once it
    has returned): the composer's program, whose every digit is a copy of its operands or of the callee's
    result, or a constant (REFLECTION's nines, the + 1). Raises Malformed where the callee's result is no number."""
    state, halt = whole.state, whole.callee
    result = halt.state.output if halt is not None else ""
    if halt is not None and not result.isdigit() and not (halt.machine == "LEFT_MASK" and result == ""):
        raise Malformed(f"{halt.machine} halted with the result {result!r}")
    callees = {"q0": lambda: ReflectionRun("9" * len(state.a), state.b), "q1": lambda: AddRun(state.a, result),
               "q2": lambda: AddRun(result, "1"), "q3": lambda: LeftMaskRun(result)}
    if state.q == "q4":
        return Snapshot(replace(state, q="qH", output=result or "0"), HALT)
    callee = callees[state.q]()
    next_q = SUB_QS[SUB_QS.index(state.q) + 1]
    command = Command((Action("CALL", callee.machine), ), SUB_QS[SUB_QS.index(next_q) + 1])
    return Snapshot(replace(state, q=next_q), command, callee.snapshot(0))


SUB_QS = ("q0", "q1", "q2", "q3", "q4", "qH")


def check_sub_chunk(k: int, written: Snapshot, asked: Snapshot) -> None:
    """A composer chunk's step against the chunk of SUB's next step: Malformed where it is not that step
    (another state, command or callee), OffProblem where it copied a tape wrong (its operands rewritten, a
    callee's tape or the difference not the copy asked, a top cell lost)."""
    if replace(written, trailing_newline=False) == replace(asked, trailing_newline=False):
        return
    step_command(written, "SUB")
    if (written.state.a, written.state.b) != (asked.state.a, asked.state.b):
        raise OffProblem(f"chunk {k}: rewrote its operands as {written.state.a[::-1]} and {written.state.b[::-1]}")
    steps = [(s.state.q, s.command, s.callee and (s.callee.machine, s.callee.state.q, s.callee.command))
             for s in (written, asked)]
    if steps[0] != steps[1]:
        raise Malformed(f"chunk {k}: not SUB's next step ({render(written).splitlines()[1][:80]!r})")
    if written.state.output != asked.state.output:
        raise OffProblem(f"chunk {k}: copied the difference as {written.state.output[::-1]} "
                         f"(asked {asked.state.output[::-1]})")
    for index, (got, want) in enumerate(zip(written.callee.state.tapes, asked.callee.state.tapes)):
        if got.digits != want.digits:
            lost = " (its top cell lost)" if got.digits[-1:] != want.digits[-1:] else ""
            raise OffProblem(f"chunk {k}: wrote {written.callee.machine}'s tape {index + 1} as {got.digits[::-1]} "
                             f"(asked {want.digits[::-1]}){lost}")
    raise Malformed(f"chunk {k}: not SUB's next step (its heads or registers)")


def _sub_composer_calls(whole: Snapshot, chunk: int) -> tuple[list[str], Snapshot, list[Snapshot]]:
    """A composer step's chunk prompts, the whole next step, and its chunks."""
    count = sub_chunk_count(whole.state.a, chunk)
    after = sub_next(whole)
    prompts = [render(sub_chunk(whole, k, count, chunk)) for k in range(count)]
    return prompts, after, [sub_chunk(after, k, count, chunk) for k in range(count)]


# --------------------------------------------------------------------------- the machine's windowed calls, for tracing


def reference_calls(expr: str, shape: Windowing) -> Iterator[tuple[str, str, str]]:
    """(adapter, input, output) of every call a correct windowed run makes on expr, in order."""
    expression = parse_expression(expr)
    machine_run = run(expression.op, expression.a, expression.b)
    aligner = aligner_name(expression.op)
    for prompt in input_chunks(expr, shape.chunk):
        yield aligner, prompt, align_input(prompt)
    if machine_run.machine == "SUB":
        yield from _sub_reference(machine_run, shape)
    else:
        yield from _executor_reference(machine_run, shape)
    for prompt in output_chunks(machine_run.halt.state, shape.chunk):
        yield aligner, prompt, align_output(prompt)


def _executor_reference(machine_run, shape: Windowing) -> Iterator[tuple[str, str, str]]:
    executor = executor_of_machine(machine_run.machine)
    for i in range(len(machine_run)):
        shown, window = windowed_step(machine_run.snapshot(i), shape)
        yield executor, render(shown), render(cut(machine_run.snapshot(i + 1), window))


def _sub_reference(machine_run, shape: Windowing) -> Iterator[tuple[str, str, str]]:
    """SUB's composer steps in chunks, each callee's run on windows in between."""
    whole = replace(machine_run.snapshot(0), trailing_newline=True)
    callees = iter(callee for _, callee in machine_run.calls())
    while True:
        prompts, after, chunks = _sub_composer_calls(whole, shape.chunk)
        for prompt, chunk_after in zip(prompts, chunks):
            yield "executor_sub", prompt, render(chunk_after)
        if after.command.is_halt:
            return
        callee = next(callees)
        yield from _executor_reference(callee, shape)
        whole = Snapshot(after.state, after.command, callee.halt, trailing_newline=True)


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
            self._take(text)
        except (Malformed, OffProblem) as error:
            self._stopped(error, index, text)
            return
        if not self.done and not self._over_budget(self.budget):
            self._next()

    def _take(self, text: str) -> None:
        """Act on the pending call's answer: a window's next state, or a chunk."""
        if self.phase == "execute":
            self._execute(text)
            return
        self.chunk_texts.append(text)
        if len(self.chunk_texts) == len(self.chunk_prompts):
            self._chunks_done()

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
            self._halted()

    def _halted(self) -> None:
        """The executor halted (self.whole): aligner (O) reads it by chunks."""
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


class WindowedSub(Windowed):
    """A subtraction run in chunks and windows: aligner (I) by chunks; each of SUB's composer steps by
    chunks (`sub_chunk`), each checked against the copies it must write (`check_sub_chunk`); each callee
    (REFLECTION, ADD twice, LEFT_MASK) on windows of its whole state; aligner (O) by chunks."""

    def __init__(self, *args, **kwargs):
        self.composing = False  # the pending call is a chunk of a composer step
        self.composer: Snapshot | None = None  # the composer's whole input
        self.after: Snapshot | None = None  # the composer's next whole step
        self.asked: list[Snapshot] = []  # its chunks
        super().__init__(*args, **kwargs)

    def _next(self) -> None:
        if self.phase == "execute" and self.composing:
            # the draft is the chunk the composer's program asks for (every digit a copy or a constant);
            # speculative decoding keeps the model's own greedy tokens, so a draft only saves passes
            self.adapter, self.depth = "executor_sub", 0
            self.draft = render(self.asked[len(self.chunk_texts)])
            self.prompt = self.chunk_prompts[len(self.chunk_texts)]
            return
        super()._next()
        self.depth = 1 if self.phase == "execute" else 0

    def _take(self, text: str) -> None:
        if not (self.phase == "execute" and self.composing):
            super()._take(text)
            return
        check_sub_chunk(len(self.chunk_texts), parse_output(text), self.asked[len(self.chunk_texts)])
        self.chunk_texts.append(text)
        if len(self.chunk_texts) == len(self.chunk_prompts):
            self._composed()

    def _chunks_done(self) -> None:
        if self.phase != "align_input":
            super()._chunks_done()
            return
        start = join_start(self.problem.expr, self.chunk_prompts, self.chunk_texts)
        self.phase = "execute"
        self._compose(replace(start, trailing_newline=True))

    def _compose(self, whole: Snapshot) -> None:
        """The composer's next step, a chunk at a time."""
        self.composing, self.composer = True, whole
        self.chunk_prompts, self.after, self.asked = _sub_composer_calls(whole, self.shape.chunk)
        self.chunk_texts = []

    def _composed(self) -> None:
        """Every chunk wrote the composer's next step: run its callee on windows, or read its halt."""
        after = self.after
        if after.command.is_halt:
            self.composing, self.whole = False, Snapshot(after.state, after.command)
            self.phase = "align_output"
            self.chunk_prompts, self.chunk_texts = output_chunks(after.state, self.shape.chunk), []
            return
        self.composing, self.whole = False, after.callee

    def _halted(self) -> None:
        """The callee halted: the composer's next step reads its halt state."""
        self._compose(Snapshot(self.after.state, self.after.command, self.whole, trailing_newline=True))


def _windowed_calls(problem: Problem, machine_run, shape: Windowing) -> int:
    """How many calls a correct windowed run makes."""
    chunks = len(input_chunks(problem.expr, shape.chunk))
    if machine_run.machine == "SUB":  # five composer steps and both aligners, by chunks
        return reference_step_count(machine_run) - 2 - len(machine_run) + 7 * chunks
    return reference_step_count(machine_run) - 2 + chunks + len(output_chunks(machine_run.halt.state, shape.chunk))


def windowed_attempt(problem: Problem, op: str, machine_run, step_budget: int | None, shape: Windowing, *,
                     mode: str, **common) -> Windowed:
    """A windowed attempt; its step budget counts the chunked aligner (and composer) calls as well."""
    budget = step_budget if step_budget is not None else default_step_budget(_windowed_calls(problem, machine_run, shape))
    kind = WindowedSub if machine_run.machine == "SUB" else Windowed
    attempt = kind(problem, op, budget, traced=mode == "traced", shape=shape, mode=mode, **common)
    attempt.record.step_budget = budget
    return attempt


__all__ = ["ADD_OUTPUT_SENTINEL", "SENTINEL", "SUB_TOPS", "Window", "Windowed", "WindowedSub", "check_sub_chunk", "input_chunks",
           "join_answer", "join_start", "output_chunks", "reference_calls", "splice", "sub_chunk", "sub_chunk_count",
           "sub_next", "window_of", "windowed_attempt", "windowed_step"]
