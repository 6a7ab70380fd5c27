"""The CAEF runtime's batch loop: every problem in flight moves on by one model call a round.

A model does one transition per call; `problem` holds what one problem does between its calls
(aligner (I) -> executor loop, with a call stack for composers -> aligner (O)). This module runs
many at once: every round, each unfinished problem needs exactly one model call; the runtime groups
those calls by adapter and makes one `generate` call per group (chunked by `batch_size`). A thousand
100-digit additions thus take 104 calls of 1000 prompts each, not 104,000 calls.

The runtime solves; it does not judge. A record holds the answer, how the run
ended and its trace; `caef_bench.evaluate.scoring` decides whether the answer is
the problem's target, by the rule every system of the benchmark is scored by.
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from typing import Callable, Iterable

from caef_bench.machines import parse_expression, routed, run
from caef_bench.models.limits import Windowing

from .journal import Journal, journal_path, read_journal
from .problem import (Attempt, Completion, FreeRunning, Problem, StepModel, TeacherForced, default_step_budget,
                      reference_step_count, reference_steps)
from .records import ProblemRecord, RecordWriter, resume
from .reuse import ReusedSteps, takes_drafts
from .windowed import windowed_attempt

MODES = ("free", "traced")


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
    windowing: Windowing | None = None,
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
    windowing: how ADD and comparison operands longer than its `past` digits run a window at a time
    (`runtime.windowed`; a tier's, `models.limits.windowing`); None: whole states only.
    """
    problems = list(problems)
    ids = [p.id for p in problems]
    if len(set(ids)) != len(ids):
        raise ValueError("problem ids must be unique (records and resume are keyed by id)")
    rounds = Rounds(model, mode, step_budget, teacher_forcing=teacher_forcing, batch_size=batch_size,
                    keep_steps=keep_steps, windowing=windowing)
    records: dict[str, ProblemRecord] = {}

    def emit(record: ProblemRecord) -> None:
        records[record.id] = record
        if on_record is not None:
            on_record(record)

    rounds.run(problems, emit, max_in_flight)
    return [records[problem.id] for problem in problems]


def start_attempt(problem: Problem, mode: str, started: float, keep_steps: bool, step_budget: int | None,
                  windowing: Windowing | None = None) -> Attempt:
    """Set a problem up; one outside the machines' domain (or with an unknown route) is finished at once
    with outcome "error". The problem's route (machines.ROUTES) picks the machine that answers it.
    windowing: operands of its `ops` (ADD, the comparisons, and SUB where measured) longer than its `past`
    digits run a window at a time (`runtime.windowed`; free and traced modes); None: every problem runs on
    whole states."""
    common = dict(mode=mode, started=started, keep_steps=keep_steps)
    try:
        expression = parse_expression(problem.expr)
        op = routed(expression.op, problem.route)  # the machine that answers it on the problem's route
        machine_run = run(op, expression.a, expression.b)
    except ValueError as error:
        attempt = Attempt(problem, **common)
        attempt.finish("error", str(error))
        return attempt
    longest = max(len(str(expression.a)), len(str(expression.b)))
    if windowing is not None and mode != "teacher_forcing" and op in windowing.ops and longest > windowing.past:
        return windowed_attempt(problem, op, machine_run, step_budget, windowing, **common)
    if mode == "teacher_forcing":
        attempt = TeacherForced(problem, reference_steps(problem.expr, problem.route), **common)
    else:
        budget = step_budget if step_budget is not None else default_step_budget(reference_step_count(machine_run))
        reference = reference_steps(problem.expr, problem.route) if mode == "traced" else None
        attempt = FreeRunning(problem, op, machine_run.machine, reference, budget, **common)
        attempt.record.step_budget = budget
    return attempt


class CallNotKept(RuntimeError):
    """`on_call` could not keep a call (a journal that cannot be written: a full disk, a folder gone). The
    run stops here, as when its model is gone, rather than record the problem as failed: what was recorded
    and journaled stays, and a rerun resumes the problem. The command line prints it as one line and
    exits with `exit_code` (no traceback: the disk or folder is the user's to mend)."""

    exit_code = 1


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
                 model_errors: str = "raise", windowing: Windowing | None = None):
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
        self.windowing = windowing
        # a model that takes a caller's drafts (runtime.hf) gets those windowed problems offer
        self._takes_drafts = takes_drafts(model)
        self.active: list[Attempt] = []
        # on_call(problem id, adapter, prompt, completion, model seconds): each completion the model generated
        # (not one read from records or a journal), as it returns (solve_to_files journals them)
        self.on_call: Callable[[str, str, str, Completion, float], None] | None = None

    def join(self, problem: Problem, started: float | None = None) -> ProblemRecord | None:
        """Put a problem in flight from the next round on; its record at once when it ends before any model
        call (an expression outside the machines' domain). `started`: when its time began (default now)."""
        attempt = start_attempt(problem, self.mode, time.perf_counter() if started is None else started,
                                self.keep_steps, self.step_budget, self.windowing)
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
        groups: dict[str, list[Attempt]] = defaultdict(list)
        for attempt in self.active:
            groups[attempt.adapter].append(attempt)
        for adapter, group in groups.items():
            size = self.batch_size or len(group)
            for chunk_start in range(0, len(group), size):
                chunk = group[chunk_start:chunk_start + size]
                try:
                    self._call(adapter, chunk)
                except CallNotKept:
                    raise
                except Exception as error:
                    if self.model_errors == "raise":
                        raise
                    for attempt in chunk:  # this call's problems only; the rest of the round goes on
                        attempt.finish("error", f"{adapter}: {type(error).__name__}: {error}")
        finished = [attempt.record for attempt in self.active if attempt.done]
        self.active = [attempt for attempt in self.active if not attempt.done]
        return finished

    def _call(self, adapter: str, chunk: list[Attempt]) -> None:
        call_started = time.perf_counter()
        prompts = [attempt.prompt for attempt in chunk]
        drafts = [attempt.draft for attempt in chunk]
        if self._takes_drafts and any(draft is not None for draft in drafts):
            outputs = self.model.generate(prompts, adapter, drafts=drafts)
        else:
            outputs = self.model.generate(prompts, adapter)
        if len(outputs) != len(chunk):
            raise ValueError(f"{adapter}: the model returned {len(outputs)} completions "
                             f"for {len(chunk)} prompts")
        made = [not getattr(output, "reused", False) and getattr(output, "seconds", None) is None for output in outputs]
        # a reused step took no model time; one read back from the journal the time it took when it was made
        share = (time.perf_counter() - call_started) / max(1, sum(made))
        for attempt, output, was_made in zip(chunk, outputs, made):
            try:
                completion = _completion(output)
            except Exception as error:  # a bug costs one problem, not the batch; its record says why
                attempt.finish("error", f"{type(error).__name__}: {error}")
                continue
            seconds = share if was_made else 0.0 if completion.reused else completion.seconds
            if was_made and self.on_call is not None:
                try:
                    self.on_call(attempt.problem.id, adapter, attempt.prompt, completion, seconds)
                except Exception as error:
                    raise CallNotKept(f"{adapter}: a call of problem {attempt.problem.id} could not be kept: "
                                      f"{type(error).__name__}: {error}") from error
            try:
                attempt.accept(completion, seconds)
            except Exception as error:  # a bug costs one problem, not the batch; its record says why
                attempt.finish("error", f"{type(error).__name__}: {error}")


def _completion(output) -> Completion:
    if isinstance(output, Completion):
        return output
    if isinstance(output, str):
        return Completion(output)
    raise TypeError(f"a model completion must be a str or a Completion, not {type(output).__name__}")


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
    # the calls of problems a killed run left in flight, read back so they resume where they were (runtime.journal)
    journaled = {}
    for path, problems in pending.items():
        journaled.update(read_journal(journal_path(path), {problem.id for problem in problems}))
    writers = {path: RecordWriter(path) for path in pending}
    journals = {path: Journal(path) for path in pending}
    try:
        def record(finished: ProblemRecord) -> None:
            writers[where[finished.id]].write(finished)
            made[finished.id] = finished
            if on_record is not None:
                on_record(where[finished.id], finished)

        rounds = Rounds(ReusedSteps(model, journaled) if journaled else model, **options)
        rounds.on_call = lambda problem_id, *call: journals[where[problem_id]].write(problem_id, *call)
        rounds.run([problem for problems in pending.values() for problem in problems], record, max_in_flight, stop)
    finally:
        for path, writer in writers.items():
            writer.close()
            journals[path].close(finished=all(problem.id in made for problem in pending[path]))
    return {path: [made[p.id] for p in problems if p.id in made] for path, problems in pending.items()}


__all__ = ["MODES", "CallNotKept", "Rounds", "solve_batch", "solve_to_file", "solve_to_files"]
