"""The CAEF runtime: aligner (I) -> executor loop -> aligner (O), batched across problems.

A model does one transition per call; this module does everything between the
calls. For one problem:

    "45+67="  --aligner_add-->  the start state ("ADD, q0, ...\\nCMD: ...")
    state i   --executor_add--> state i+1, until the halt state ("ADD, qH, ...")
    halt text --aligner_add-->  "45+67=112", whose result is the answer

Composers (SUB, MUL, DIV) call executors. A composer's output that issues
"[CALL] X" also holds X's start state and command; the runtime pushes a frame
that runs executor X from there, and when X halts it pops the frame and hands
the halt back to the composer as the extra lines of the composer's next input
(converted to the composer's view of that halt: see `composer_view`). The call
stack is general, although CAEF composers only ever call executors (depth 1).

Batching: every round, each unfinished problem needs exactly one model call;
the runtime groups those calls by adapter and makes one `generate` call per
group (chunked by `batch_size`). A thousand 100-digit additions thus take 104
calls of 1000 prompts each, not 104,000 calls.

Aligner (I)'s start state must hold the expression's operator and operands, and aligner (O)'s
text must be the asked expression with its result (the machines' `start_misalignment`,
`answer_misalignment`): otherwise the run would execute, or answer, another problem, and it ends
with outcome "misaligned", its detail naming the operand copied wrong.

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

Texts between steps: the runtime parses every output and renders the input
of the next step from the parsed snapshot. For every output that parses,
``render(parse(t)) == t``, so this is the model's own text; the only thing the
runtime decides is the trailing newline that composer inputs carry and
executor inputs do not (the reference format).

The runtime solves; it does not judge. A record holds the answer, how the run
ended and its trace; `caef_bench.evaluate.scoring` decides whether the answer is
the problem's target, by the rule every system of the benchmark is scored by.
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from dataclasses import dataclass, replace
from typing import Callable, Iterable, Iterator, Protocol, Sequence

from caef_bench.machines import (
    ComposerRun,
    FormatError,
    Run,
    Snapshot,
    answer_misalignment,
    classify,
    composer_view,
    parse,
    parse_expression,
    render,
    result,
    run,
    split_step_end,
    start_misalignment,
)
from caef_bench.machines.display import events
from caef_bench.machines.text import COMPOSERS
from caef_bench.models.names import aligner_name, executor_of_machine

from .records import Divergence, ProblemRecord, RecordWriter, StepRecord, resume

MODES = ("free", "traced")

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


@dataclass(frozen=True)
class Completion:
    """A model's answer to one prompt, when the model also counts its tokens."""

    text: str
    n_tokens: int | None = None
    reused: bool = False  # read from an earlier run's records (runtime.reuse), not generated now


class StepModel(Protocol):
    """Anything that completes prompts with one adapter: greedy, one completion per prompt.

    adapter is "executor_<op>" or "aligner_<op>", op one of add sub mul div gt
    lt eq reflection left_mask. An aligner adapter serves both directions: an
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


def reference_steps(expr: str) -> Iterator[ReferenceStep]:
    """Every model call of a correct CAEF run on expr, in the order the runtime makes them."""
    expression = parse_expression(expr)
    machine_run = run(expression.op, expression.a, expression.b)
    adapter = aligner_name(expression.op)
    yield ReferenceStep("align_input", adapter, 0, expr, machine_run.start_text())
    for event in events(machine_run):
        yield ReferenceStep("execute", executor_of_machine(event.machine), event.depth, event.input, event.output)
    answer = str(result(expression.op, expression.a, expression.b))
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


@dataclass
class Frame:
    """One machine being executed: the text of its next input, and what its caller needs back."""

    machine: str
    input: str = ""
    start: Snapshot | None = None  # a callee's start state, which `composer_view` reads
    waiting: Snapshot | None = None  # a composer's state and [CALL] command while its callee runs

    @property
    def is_composer(self) -> bool:
        return self.machine in COMPOSERS


class _Attempt:
    """One problem in flight: the call it needs next (adapter, prompt, depth), and what it does with the answer.

    Subclasses set the pending call in `_next` and consume the answer in `accept`.
    """

    def __init__(self, problem: Problem, mode: str, started: float, keep_steps: bool):
        self.problem, self.started, self.keep_steps = problem, started, keep_steps
        self.record = ProblemRecord(id=problem.id, expr=problem.expr, mode=mode, target=problem.target)
        self.done = False
        self.adapter = self.prompt = ""  # the pending call
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
        self._finish("answered")

    def _finish(self, outcome: str, detail: str | None = None) -> None:
        self.record.outcome, self.record.detail = outcome, detail
        self.record.seconds = time.perf_counter() - self.started
        self.done = True


class _FreeRunning(_Attempt):
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
        completion, beyond = self._end_step(completion, expression=self.phase == "align_output")
        text = completion.text
        error_class, expected = self._compare(text)
        index = self._log_step(completion, seconds, error_class, expected, beyond)
        if error_class:
            self.record.first_divergence = Divergence(index, self.adapter, error_class, expected, text, self.depth)
        try:
            if self.phase == "align_output":
                # The runtime answers only the problem it was asked: an expression written back with
                # other operands is no answer to it, whatever its result.
                wrong = answer_misalignment(self.problem.expr, text)
                if wrong:
                    self.record.final = text
                    self._finish("misaligned", wrong)
                else:
                    self._answer(text)
                return
            snapshot = self._parse(text)
            if self.phase == "align_input":
                # The start text is the top machine's first state: it opens the bottom frame, if it
                # holds the asked operands (else the run would execute another problem).
                # (A start that is already a halt state goes straight on to aligner (O).)
                wrong = start_misalignment(self.problem.expr, snapshot)
                if wrong:
                    self._finish("misaligned", wrong)
                    return
                self.phase = "execute"
                self.stack.append(Frame(self.machine))
            self._apply(self.stack[-1], snapshot)
        except Malformed as error:
            detail = f"step {index} ({self.adapter}): {error}"
            self._finish("unparseable", detail if self.keep_steps else f"{detail}; output {text[:500]!r}")
            return
        # The budget bounds the execution; once the top machine has halted, aligner (O) always runs.
        if self.phase == "execute" and self.record.n_steps >= self.budget:
            self._finish("no_halt", f"no halt state after {self.budget} steps (the step budget)")
            return
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

    @staticmethod
    def _parse(text: str) -> Snapshot:
        try:
            return parse(text)
        except FormatError as error:
            raise Malformed(f"not CAEF format: {error}") from None

    def _apply(self, frame: Frame, output: Snapshot) -> None:
        """Act on a frame's output: continue it, call a callee, or return its halt."""
        if output.machine != frame.machine:
            raise Malformed(f"expected a {frame.machine} state, got {output.machine}")
        command = output.command
        if command is None:
            raise Malformed("a state line without its command line")
        if output.state.halted != command.is_halt:
            raise Malformed(f"state {output.state.q} with {'the halt line' if command.is_halt else 'a command'}")
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
        caller.waiting = None


class _TeacherForced(_Attempt):
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


# --------------------------------------------------------------------------- the batch loop


def solve_batch(
    problems: Iterable[Problem],
    model: StepModel,
    mode: str = "free",
    step_budget: int | None = None,
    on_record: Callable[[ProblemRecord], None] | None = None,
    *,
    teacher_forcing: bool = False,
    batch_size: int | None = None,
    keep_steps: bool = True,
    max_in_flight: int | None = None,
) -> list[ProblemRecord]:
    """Run CAEF on every problem, batching model calls across problems; records in input order.

    step_budget: the most model calls per problem before its top machine
    halts (aligner (I) included; aligner (O) always runs after a halt); by
    default `default_step_budget` of the machine's own count, so a model that
    never halts stops with outcome "no_halt". on_record is called with
    each record as soon as its problem finishes (use it to write records
    incrementally). batch_size caps the prompts of one generate call.
    keep_steps=False leaves the step texts out of the records. max_in_flight caps the problems
    in the rounds at once (default: all of them); the others join, in order, as problems finish.
    """
    problems = list(problems)
    ids = [p.id for p in problems]
    if len(set(ids)) != len(ids):
        raise ValueError("problem ids must be unique (records and resume are keyed by id)")
    rounds = Rounds(model, mode, step_budget, teacher_forcing=teacher_forcing, batch_size=batch_size,
                    keep_steps=keep_steps)
    records: dict[str, ProblemRecord] = {}

    def emit(record: ProblemRecord) -> None:
        records[record.id] = record
        if on_record is not None:
            on_record(record)

    rounds.run(problems, emit, max_in_flight)
    return [records[problem.id] for problem in problems]


class Rounds:
    """The batch loop: the problems in flight, and the rounds that move each of them one model call on.

    Each round, every unfinished problem needs exactly one model call; the calls are grouped by
    adapter, one `generate` call per group (chunked by `batch_size`). Problems may join between
    rounds and leave unfinished: `solve_batch` adds a whole list at once, a server each problem as
    its request arrives (continuous batching, `caef_bench.serve`), with the same rounds either way.

    model_errors: "raise" (the default) lets a failing `generate` call stop the loop, as a run
    should when its model is gone; "record" finishes only the problems of that call, with outcome
    "error" and the reason, and the others go on (a server must outlive one bad call).
    """

    def __init__(self, model: StepModel, mode: str = "free", step_budget: int | None = None, *,
                 teacher_forcing: bool = False, batch_size: int | None = None, keep_steps: bool = True,
                 model_errors: str = "raise"):
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; expected one of {MODES}")
        if teacher_forcing and mode != "traced":
            raise ValueError("teacher_forcing=True needs mode='traced'")
        if batch_size is not None and batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if model_errors not in ("raise", "record"):
            raise ValueError(f"model_errors must be 'raise' or 'record', not {model_errors!r}")
        self.model, self.step_budget, self.batch_size, self.keep_steps = model, step_budget, batch_size, keep_steps
        self.mode = "teacher_forcing" if teacher_forcing else mode
        self.model_errors = model_errors
        self.active: list[_Attempt] = []

    def join(self, problem: Problem, started: float | None = None) -> ProblemRecord | None:
        """Put a problem in flight from the next round on; its record at once when it ends before any model
        call (an expression outside the machines' domain). `started`: when its time began (default now)."""
        attempt = _start(problem, self.mode, time.perf_counter() if started is None else started,
                         self.keep_steps, self.step_budget)
        if attempt.done:
            return attempt.record
        self.active.append(attempt)
        return None

    def run(self, problems: Iterable[Problem], emit: Callable[[ProblemRecord], None],
            max_in_flight: int | None = None, stop: Callable[[], bool] | None = None) -> None:
        """Solve `problems` to the end, calling `emit` with each record as its problem finishes: all of
        them in flight from the first round, or at most `max_in_flight`, the next joining (in order) as
        one finishes. Every problem's time counts from the start of this call. `stop`, asked before
        each round, ends the call early when it says so: the problems still in flight are left
        unfinished (no record), as a killed run leaves them."""
        if max_in_flight is not None and max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        started = time.perf_counter()
        waiting = iter(problems)
        more = True
        while (more or self.active) and not (stop is not None and stop()):
            while more and (max_in_flight is None or len(self.active) < max_in_flight):
                problem = next(waiting, None)
                if problem is None:
                    more = False
                    break
                finished = self.join(problem, started)
                if finished is not None:
                    emit(finished)
            for record in self.round() if self.active else ():
                emit(record)

    def drop(self, problem_id: str) -> None:
        """Take a problem out of flight unfinished (its client has gone): it costs no further call."""
        self.active = [attempt for attempt in self.active if attempt.problem.id != problem_id]

    def round(self) -> list[ProblemRecord]:
        """One model call for every problem in flight; the records of those that finished."""
        groups: dict[str, list[_Attempt]] = defaultdict(list)
        for attempt in self.active:
            groups[attempt.adapter].append(attempt)
        for adapter, group in groups.items():
            size = self.batch_size or len(group)
            for chunk_start in range(0, len(group), size):
                chunk = group[chunk_start:chunk_start + size]
                try:
                    self._call(adapter, chunk)
                except Exception as error:
                    if self.model_errors == "raise":
                        raise
                    for attempt in chunk:  # this call's problems only; the rest of the round goes on
                        attempt._finish("error", f"{adapter}: {type(error).__name__}: {error}")
        finished = [attempt.record for attempt in self.active if attempt.done]
        self.active = [attempt for attempt in self.active if not attempt.done]
        return finished

    def _call(self, adapter: str, chunk: list[_Attempt]) -> None:
        call_started = time.perf_counter()
        outputs = self.model.generate([attempt.prompt for attempt in chunk], adapter)
        if len(outputs) != len(chunk):
            raise ValueError(f"{adapter}: the model returned {len(outputs)} completions "
                             f"for {len(chunk)} prompts")
        reused = [getattr(output, "reused", False) for output in outputs]
        share = (time.perf_counter() - call_started) / max(1, reused.count(False))  # a reused step took no model time
        for attempt, output, was_reused in zip(chunk, outputs, reused):
            try:
                attempt.accept(_completion(output), 0.0 if was_reused else share)
            except Exception as error:  # a bug costs one problem, not the batch; its record says why
                attempt._finish("error", f"{type(error).__name__}: {error}")


def _completion(output) -> Completion:
    if isinstance(output, Completion):
        return output
    if isinstance(output, str):
        return Completion(output)
    raise TypeError(f"a model completion must be a str or a Completion, not {type(output).__name__}")


def _start(problem: Problem, mode: str, started: float, keep_steps: bool, step_budget: int | None) -> _Attempt:
    """Set a problem up; one outside the machines' domain is finished at once with outcome "error"."""
    common = dict(mode=mode, started=started, keep_steps=keep_steps)
    try:
        expression = parse_expression(problem.expr)
        machine_run = run(expression.op, expression.a, expression.b)
    except ValueError as error:
        attempt = _Attempt(problem, **common)
        attempt._finish("error", str(error))
        return attempt
    if mode == "teacher_forcing":
        attempt = _TeacherForced(problem, reference_steps(problem.expr), **common)
    else:
        budget = step_budget if step_budget is not None else default_step_budget(reference_step_count(machine_run))
        reference = reference_steps(problem.expr) if mode == "traced" else None
        attempt = _FreeRunning(problem, expression.op, machine_run.machine, reference, budget, **common)
        attempt.record.step_budget = budget
    return attempt


def solve_to_file(problems: Iterable[Problem], model: StepModel, path, on_record=None, **options) -> list[ProblemRecord]:
    """`solve_batch`, appending each record to a JSONL file as it finishes and skipping recorded ids.

    Safe to call again after an interruption: problems already in the file are
    not redone, a cut last line is dropped, and the rest are solved and
    appended. Returns the records made by this call (`load_records` reads
    them all); on_record also sees each new record.
    """
    seen = (lambda _path, record: on_record(record)) if on_record is not None else None
    return solve_to_files({path: problems}, model, seen, **options)[Path(path)]


def solve_to_files(jobs: dict, model: StepModel, on_record=None, *, max_in_flight: int | None = None,
                   stop: Callable[[], bool] | None = None, **options) -> dict:
    """`solve_to_file` for several files at once: {path: problems} all in the same rounds (one model
    call per adapter and round, whatever file a problem is written to), so that each call carries the
    problems of every file; each record is appended to its own file as it finishes, and a file's
    recorded problems are skipped. Problem ids must be unique over all files. on_record(path, record)
    sees each new record; max_in_flight caps the problems in flight (the others join file by file, in
    the order given), `stop` ends the call early (`Rounds.run`), and the other options are `Rounds`'.
    Returns {path: the records made, in problem order}."""
    pending = {Path(path): resume(path, list(problems)) for path, problems in jobs.items()}
    where = {problem.id: path for path, problems in pending.items() for problem in problems}
    if len(where) != sum(map(len, pending.values())):
        raise ValueError("problem ids must be unique over all files (records and resume are keyed by id)")
    made: dict[str, ProblemRecord] = {}
    writers = {path: RecordWriter(path) for path in pending}
    try:
        def record(finished: ProblemRecord) -> None:
            writers[where[finished.id]].write(finished)
            made[finished.id] = finished
            if on_record is not None:
                on_record(where[finished.id], finished)

        Rounds(model, **options).run([problem for problems in pending.values() for problem in problems], record,
                                     max_in_flight, stop)
    finally:
        for writer in writers.values():
            writer.close()
    return {path: [made[p.id] for p in problems if p.id in made] for path, problems in pending.items()}

__all__ = [
    "BUDGET_FACTOR", "BUDGET_SLACK", "MODES", "Completion", "Frame", "Problem", "ReferenceStep",
    "Rounds", "StepModel", "composer_view", "default_step_budget",
    "reference_step_count", "reference_steps", "solve_batch", "solve_to_file", "solve_to_files",
    "to_composer_view",
]
