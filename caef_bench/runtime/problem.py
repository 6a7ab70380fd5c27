"""One CAEF problem's run, a model call at a time: what it asks next, and what it does with the answer.

For one problem:

    "45+67="  --aligner_add-->  the start state ("ADD, q0, ...\\nCMD: ...")
    state i   --executor_add--> state i+1, until the halt state ("ADD, qH, ...")
    halt text --aligner_add-->  "45+67=112", whose result is the answer

Which machine answers an expression is its route (`Problem.route`, `machines.ROUTES`): on the
paper's (the default) `a*b=` runs MUL's repeated addition and `a//b=` DIV's; on the long route they
run schoolbook multiplication and long division (LONG_MUL, LONG_DIV; docs/long-mul-div.md), with the
adapters aligner_long_mul, executor_long_mul, executor_digit_mul (aligner_long_div, executor_long_div,
executor_reflection) and executor_add. The expression's text, and the answer, are the same on both.

Composers (SUB, MUL, DIV, LONG_MUL, LONG_DIV) call executors. A composer's output that issues
"[CALL] X" also holds X's start state and command; the run pushes a frame
that runs executor X from there, and when X halts it pops the frame and hands
the halt back to the composer as the extra lines of the composer's next input
(converted to the composer's view of that halt: see `composer_view`). The call
stack is general, although CAEF composers only ever call executors (depth 1).

Aligner (I)'s start state must hold the expression's operator and operands, every state an
executor writes the operand tapes its start state had (an executor only reads them), every state a
composer writes its own a and b, each call the operands it takes from the composer's state or the last
result, and each register a callee's result where the composer takes it (`composer_miscopy`), and aligner
(O)'s text must be the asked expression with the result its halt state holds (the machines'
`start_misalignment`, `rewritten_operand`, `call_miscopy`, `answer_misalignment`, `answer_miscopy`): otherwise the run
would execute, or answer, another problem, or answer with digits no executor wrote, and it ends with
outcome "misaligned", its detail naming what was copied wrong and which call wrote it.

Modes:
- "free": the model's own outputs are fed back (the paper's setting); only
  the final answer is reported.
- "traced": free-running as well, and each step is also compared with the
  machine's step (`caef_bench.machines.classify`) until the first difference,
  which is recorded with its error class. Before that difference the runtime
  and the machine have seen the same texts, so the comparison is exact.
- "traced" with teacher_forcing=True: every step's input is the machine's
  text, whatever the model answered before, so every step is compared: the
  per-step accuracy of the paper's Table 2. The final answer is then aligner
  (O)'s reading of the machine's halt state.

Texts between steps: the run parses every output and renders the input
of the next step from the parsed snapshot. For every output that parses,
``render(parse(t)) == t``, so this is the model's own text; the only thing the
runtime decides is the trailing newline that composer inputs carry and
executor inputs do not (the reference format).

Nothing here knows of batches: `engine.Rounds` asks each problem in flight for its pending call
(`Attempt.adapter`, `.prompt`), makes one model call per adapter, and hands each answer back
(`Attempt.accept`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Iterator, Protocol, Sequence

from caef_bench.machines import (
    ComposerRun,
    FormatError,
    Run,
    Snapshot,
    answer_misalignment,
    answer_miscopy,
    call_miscopy,
    classify,
    composer_miscopy,
    composer_view,
    parse,
    parse_expression,
    render,
    result,
    rewritten_operand,
    routed,
    run,
    split_step_end,
    start_misalignment,
)
from caef_bench.machines.display import events
from caef_bench.machines.text import COMPOSERS
from caef_bench.models.names import aligner_name, executor_of_machine

from .records import Divergence, ProblemRecord, StepRecord

# Default step budget: the machine's own number of steps, doubled, plus slack.
# A correct model never comes near it; a model that never halts is stopped
# after about twice the work of a correct run.
BUDGET_FACTOR = 2
BUDGET_SLACK = 20


# --------------------------------------------------------------------------- the model interface


@dataclass(frozen=True)
class Problem:
    """One dataset row as the runtime takes it. The target is not read here: it rides along in the
    record so that the scorer finds it beside the answer."""

    id: str
    expr: str  # the templated expression, "45+67="
    target: str | None = None  # the dataset's answer, "112"
    # which machine answers the expression (machines.ROUTES): "paper", or "long" for `a*b=` and `a//b=` on
    # LONG_MUL and LONG_DIV (every other operator as on the paper's route)
    route: str = "paper"


@dataclass(frozen=True)
class Completion:
    """A model's answer to one prompt, when the model also counts its tokens."""

    text: str
    n_tokens: int | None = None
    reused: bool = False  # read from an earlier run's records (runtime.reuse), not generated now
    seconds: float | None = None  # read back from this run's journal (runtime.journal): the model time it took then


class StepModel(Protocol):
    """Anything that completes prompts with one adapter: greedy, one completion per prompt.

    adapter is "executor_<op>" or "aligner_<op>", op one of add sub mul div gt
    lt eq reflection left_mask (and on the long route long_mul long_div digit_mul,
    models.names). An aligner adapter serves both directions: an
    expression prompt ("45+67=") asks for the start text, a halt-text prompt
    for the expression with its result. A completion is a str, or a
    `Completion` when the model reports how many tokens it generated.
    """

    def generate(self, prompts: list[str], adapter: str) -> Sequence[str | Completion]: ...


# --------------------------------------------------------------------------- composer view of a callee's halt


def to_composer_view(composer: str, callee_halt_text: str, callee_start_text: str) -> str:
    """Text form of `composer_view`: the callee's halt text as the composer's input shows it."""
    return render(composer_view(composer, parse(callee_halt_text), parse(callee_start_text)))


# --------------------------------------------------------------------------- the machine's steps, for tracing


@dataclass(frozen=True)
class ReferenceStep:
    """One model call as a correct model makes it: what it is asked and what it answers."""

    kind: str  # "align_input", "execute" or "align_output"
    adapter: str
    depth: int
    input: str
    output: str


def reference_steps(expr: str, route: str = "paper") -> Iterator[ReferenceStep]:
    """Every model call of a correct CAEF run on expr, in the order the runtime makes them, with the
    machine that answers expr on `route` (machines.ROUTES)."""
    expression = parse_expression(expr)
    op = routed(expression.op, route)
    machine_run = run(op, expression.a, expression.b)
    adapter = aligner_name(op)
    yield ReferenceStep("align_input", adapter, 0, expr, machine_run.start_text())
    for event in events(machine_run):
        yield ReferenceStep("execute", executor_of_machine(event.machine), event.depth, event.input, event.output)
    answer = str(result(op, expression.a, expression.b))
    yield ReferenceStep("align_output", adapter, 0, machine_run.text(-1), f"{expr}{answer}")


def reference_step_count(machine_run: Run) -> int:
    """How many model calls a correct run makes: both aligner steps and every transition, callees included."""

    def transitions(r: Run) -> int:
        inner = sum(transitions(callee) for _, callee in r.calls()) if isinstance(r, ComposerRun) else 0
        return len(r) + inner

    return 2 + transitions(machine_run)


def default_step_budget(reference_steps: int) -> int:
    return BUDGET_FACTOR * reference_steps + BUDGET_SLACK


# --------------------------------------------------------------------------- one problem's execution


class Malformed(Exception):
    """A model output the runtime cannot continue from; the problem stops as "unparseable"."""


class OffProblem(Exception):
    """An executor's state whose operand tapes are not its start state's; the problem stops as "misaligned"."""


def parse_output(text: str) -> Snapshot:
    """A model's output as a snapshot; Malformed where it is not CAEF format."""
    try:
        return parse(text)
    except FormatError as error:
        raise Malformed(f"not CAEF format: {error}") from None


def step_command(output: Snapshot, machine: str):
    """The command of an executor or composer step written for `machine`; Malformed where the output is
    another machine's, lacks its command line, or pairs a halt state with a command (or the reverse)."""
    if output.machine != machine:
        raise Malformed(f"expected a {machine} state, got {output.machine}")
    command = output.command
    if command is None:
        raise Malformed("a state line without its command line")
    if output.state.halted != command.is_halt:
        raise Malformed(f"state {output.state.q} with {'the halt line' if command.is_halt else 'a command'}")
    return command


@dataclass
class Frame:
    """One machine being executed: the text of its next input, and what its caller needs back."""

    machine: str
    input: str = ""
    # its start state: a callee's (which `composer_view` reads) or aligner (I)'s; an executor keeps its operand tapes
    start: Snapshot | None = None
    waiting: Snapshot | None = None  # a composer's state and [CALL] command while its callee runs
    # a composer's calling state and its callee's result, until the composer's next step has been checked against them
    returned: tuple | None = None

    @property
    def is_composer(self) -> bool:
        return self.machine in COMPOSERS


class Attempt:
    """One problem in flight: the call it needs next (adapter, prompt, depth), and what it does with the answer.

    Subclasses set the pending call in `_next` and consume the answer in `accept`.
    """

    def __init__(self, problem: Problem, mode: str, started: float, keep_steps: bool):
        self.problem, self.started, self.keep_steps = problem, started, keep_steps
        self.record = ProblemRecord(id=problem.id, expr=problem.expr, mode=mode, target=problem.target,
                                    route=None if problem.route == "paper" else problem.route)
        self.done = False
        self.adapter = self.prompt = ""  # the pending call
        self.draft: str | None = None  # what a correct model writes for it, where the model's drafter cannot tell
        self.depth = 0

    def accept(self, completion: Completion, seconds: float) -> None:
        raise NotImplementedError

    def _end_step(self, completion: Completion, expression: bool) -> tuple[Completion, str]:
        """The step's text up to its last command's last word, and what the model wrote past it
        (machines.split_step_end: a stop string's cut). Counted per problem, kept per step. An
        `expression` (aligner (O)'s answer) is not a state and command, and is never cut."""
        if expression:
            return completion, ""
        text, beyond = split_step_end(completion.text)
        if beyond:
            self.record.n_steps_cut += 1
            completion = replace(completion, text=text)
        return completion, beyond

    def _logged(self, completion: Completion, seconds: float, expression: bool) -> tuple[str, int]:
        """A free-running call's answer cut at its step's end, compared with the machine's (traced mode,
        `_compare`) and recorded: its text, and its index among the problem's steps."""
        completion, beyond = self._end_step(completion, expression)
        text = completion.text
        error_class, expected = self._compare(text)
        index = self._log_step(completion, seconds, error_class, expected, beyond)
        if error_class:
            self.record.first_divergence = Divergence(index, self.adapter, error_class, expected, text, self.depth)
        return text, index

    def _compare(self, text: str) -> tuple[str | None, str | None]:
        return None, None  # traced attempts: (error class or None, the machine's output)

    def _stopped(self, error: Exception, index: int, text: str) -> None:
        """End the problem on a call it cannot go on from: unparseable, or off the asked problem."""
        if isinstance(error, Malformed):
            detail = f"step {index} ({self.adapter}): {error}"
            self.finish("unparseable", detail if self.keep_steps else f"{detail}; output {text[:500]!r}")
        else:
            self.finish("misaligned", f"{self.adapter} {error} at step {index}")

    def _over_budget(self, budget: int) -> bool:
        """The step budget bounds the execution; once the top machine has halted, aligner (O) always runs."""
        if self.phase == "execute" and self.record.n_steps >= budget:
            self.finish("no_halt", f"no halt state after {budget} steps (the step budget)")
        return self.done

    def _log_step(self, completion: Completion, seconds: float, error_class: str | None,
                  expected: str | None, beyond: str = "") -> int:
        """Record one call; returns its index among the problem's steps."""
        index = self.record.n_steps
        self.record.n_steps += 1
        self.record.model_seconds += seconds
        if self.keep_steps:
            self.record.steps.append(StepRecord(
                self.adapter, self.depth, self.prompt, completion.text, seconds, completion.n_tokens,
                error_class, expected if error_class else None, completion.reused or None, beyond or None))
        return index

    def _answer(self, final: str) -> None:
        """Aligner (O)'s completion: the answer is what follows its last '='."""
        record = self.record
        record.final = final
        record.answer = final.rpartition("=")[2].strip() if "=" in final else None
        self.finish("answered")

    def finish(self, outcome: str, detail: str | None = None) -> None:
        self.record.outcome, self.record.detail = outcome, detail
        self.record.seconds = time.perf_counter() - self.started
        self.done = True


class FreeRunning(Attempt):
    """The model's outputs drive the execution; in traced mode each step is also checked until one differs."""

    def __init__(self, problem: Problem, op: str, machine: str, reference: Iterator[ReferenceStep] | None,
                 budget: int, **kwargs):
        super().__init__(problem, **kwargs)
        self.op, self.machine, self.reference, self.budget = op, machine, reference, budget
        self.stack: list[Frame] = []
        self.phase = "align_input"
        self.halt_text = ""
        self._next()

    def _next(self) -> None:
        """Set the pending call from the phase and the top of the call stack."""
        if self.phase == "align_input":
            self.adapter, self.prompt, self.depth = aligner_name(self.op), self.problem.expr, 0
        elif self.phase == "execute":
            frame = self.stack[-1]
            self.adapter, self.prompt, self.depth = executor_of_machine(frame.machine), frame.input, len(self.stack) - 1
        else:
            self.adapter, self.prompt, self.depth = aligner_name(self.op), self.halt_text, 0

    def accept(self, completion: Completion, seconds: float) -> None:
        text, index = self._logged(completion, seconds, expression=self.phase == "align_output")
        try:
            if self.phase == "align_output":
                # The runtime answers only the problem it was asked: an expression written back with
                # other operands is no answer to it, whatever its result; nor is a result other than the
                # one the halt state holds (aligner (O) copies it: a miscopy would be a silent wrong answer).
                wrong = answer_misalignment(self.problem.expr, text) or answer_miscopy(self.halt_text, text)
                if wrong:
                    self.record.final = text
                    self.finish("misaligned", wrong)
                else:
                    self._answer(text)
                return
            snapshot = parse_output(text)
            if self.phase == "align_input":
                # The start text is the top machine's first state: it opens the bottom frame, if it
                # holds the asked operands (else the run would execute another problem).
                # (A start that is already a halt state goes straight on to aligner (O).)
                wrong = start_misalignment(self.problem.expr, snapshot, self.problem.route)
                if wrong:
                    self.finish("misaligned", wrong)
                    return
                self.phase = "execute"
                self.stack.append(Frame(self.machine, start=snapshot))
            self._apply(self.stack[-1], snapshot)
        except (Malformed, OffProblem) as error:
            self._stopped(error, index, text)
            return
        if not self._over_budget(self.budget):
            self._next()

    def _compare(self, text: str) -> tuple[str | None, str | None]:
        """Traced mode, until the first divergence: (error class or None, the machine's output)."""
        if self.reference is None or self.record.first_divergence is not None:
            return None, None
        step = next(self.reference, None)
        if step is None or (step.adapter, step.input) != (self.adapter, self.prompt):
            # Until a divergence the runtime sees exactly the machine's texts; anything else is a runtime bug.
            machine_input = step.input if step else "the end of the machine's run"
            raise RuntimeError(f"runtime input differs from the machine's at step {self.record.n_steps}: "
                               f"{self.prompt!r} vs {machine_input!r}")
        return _difference(step, text), step.output

    def _apply(self, frame: Frame, output: Snapshot) -> None:
        """Act on a frame's output: continue it, call a callee, or return its halt."""
        command = step_command(output, frame.machine)
        if not frame.is_composer and (rewritten := rewritten_operand(frame.start.state, output.state)):
            raise OffProblem(rewritten)
        calling, returned = frame.returned or (None, None)
        frame.returned = None
        if frame.is_composer and (wrong := composer_miscopy(frame.start.state, output.state, calling, returned)):
            raise OffProblem(wrong)
        if command.is_halt:
            if output.callee is not None:
                raise Malformed("a halt state with callee lines")
            self._return(Snapshot(output.state, command))
            return
        callee_machine = command.call
        if callee_machine is None:
            if output.callee is not None:
                raise Malformed("callee lines without a [CALL]")
            frame.input = render(Snapshot(output.state, command, None, trailing_newline=frame.is_composer))
            return
        callee = output.callee
        if callee is None or callee.command is None:
            raise Malformed(f"[CALL] {callee_machine} without the callee's start state and command")
        if callee.machine != callee_machine:
            raise Malformed(f"[CALL] {callee_machine} but the callee lines are {callee.machine}")
        if callee.command.is_halt or callee.state.halted:
            raise Malformed(f"the callee {callee.machine} starts in a halt state")
        if wrong := call_miscopy(output.state, callee.state, returned):
            raise OffProblem(f"{frame.machine}'s call to {callee.machine} {wrong}")
        frame.waiting = Snapshot(output.state, command)
        self.stack.append(Frame(callee.machine, input=render(callee), start=callee))

    def _return(self, halt: Snapshot) -> None:
        """A frame halted: hand its halt to the caller, or to aligner (O) at the top."""
        finished = self.stack.pop()
        if not self.stack:
            self.halt_text = render(halt)
            self.phase = "align_output"
            return
        caller = self.stack[-1]
        view = composer_view(caller.machine, halt, finished.start)
        caller.input = render(Snapshot(caller.waiting.state, caller.waiting.command, view, trailing_newline=True))
        caller.returned = (caller.waiting.state, view.state.output)
        caller.waiting = None


class TeacherForced(Attempt):
    """Every input is the machine's text; every output is compared (per-step accuracy)."""

    def __init__(self, problem: Problem, reference: Iterator[ReferenceStep], **kwargs):
        super().__init__(problem, **kwargs)
        self.steps = reference
        self.record.n_divergent_steps = 0
        self._next()

    def _next(self) -> None:
        self.step = next(self.steps)
        self.adapter, self.prompt, self.depth = self.step.adapter, self.step.input, self.step.depth

    def accept(self, completion: Completion, seconds: float) -> None:
        completion, beyond = self._end_step(completion, expression=self.step.kind == "align_output")
        error_class = _difference(self.step, completion.text)
        index = self._log_step(completion, seconds, error_class, self.step.output, beyond)
        if error_class:
            self.record.n_divergent_steps += 1
            if self.record.first_divergence is None:
                self.record.first_divergence = Divergence(index, self.adapter, error_class, self.step.output,
                                                          completion.text, self.depth)
        if self.step.kind == "align_output":
            self._answer(completion.text)
        else:
            self._next()


def _difference(step: ReferenceStep, got: str) -> str | None:
    """The error class of an output against the machine's; aligner (O) outputs are not states."""
    if step.kind == "align_output":
        return None if got == step.output else "wrong_result"
    return classify(step.output, got)


__all__ = [
    "BUDGET_FACTOR", "BUDGET_SLACK", "Attempt", "Completion", "Frame", "Malformed", "Problem", "ReferenceStep",
    "FreeRunning", "StepModel", "TeacherForced", "default_step_budget", "parse_output", "reference_step_count",
    "reference_steps", "step_command",
    "to_composer_view",
]
