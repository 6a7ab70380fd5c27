"""The server's one step loop: every request's problems join one `runtime.Rounds`, in one thread.

Requests arrive on the event loop; the loop thread owns the model. Each turn it takes what has
arrived (problems to join, single steps to make, problems whose clients have gone), then runs one
round: one model call per unfinished problem, grouped by adapter, whichever request each problem
came from. A problem that arrives while others are half-way joins them at the next round
(continuous batching), so 64 concurrent clients share each forward pass instead of queueing.

A problem whose client disconnects is dropped before the next round and costs nothing more; a
failing model call fails the problems of that call only (`Rounds(model_errors="record")`); the
loop itself survives anything, failing only what was in flight.
"""

from __future__ import annotations

import inspect
import itertools
import threading
from collections import defaultdict
from concurrent.futures import Future
from dataclasses import dataclass, field

from caef_bench.runtime import Completion, Problem, ProblemRecord, Rounds


@dataclass(eq=False)
class Job:
    """One thing a request waits for: a whole problem (`problem`) or one step (`adapter`, `prompt`)."""

    id: str
    problem: Problem | None = None
    adapter: str = ""
    prompt: str = ""
    limit: int | None = None  # a step's most tokens (the request's max_tokens)
    future: Future = field(default_factory=Future)  # a ProblemRecord, or a step's Completion


def _settle(future: Future, result=None, error: BaseException | None = None) -> None:
    """Resolve a future unless its request has already given up on it."""
    if future.done():
        return
    try:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)
    except Exception:  # cancelled in between (InvalidStateError): nobody is waiting
        pass


class Scheduler:
    """The step loop of `caef-bench serve` (see the module docstring). mode: the runtime's ("free":
    the answer only; "traced" compares each step with the machine's)."""

    def __init__(self, model, *, mode: str = "free", batch_size: int | None = None, windowing=None):
        self.model = model
        self.rounds = Rounds(model, mode, batch_size=batch_size, keep_steps=False, model_errors="record",
                             windowing=windowing)
        # a model that caps each step's tokens (runtime.hf) honours a request's max_tokens
        self._takes_limits = (callable(getattr(model, "room", None))
                              and "limits" in inspect.signature(model.generate).parameters)
        self._wake = threading.Condition()
        self._inbox: list[Job] = []
        self._gone: set[str] = set()
        self._in_flight: dict[str, Job] = {}
        self._ids = itertools.count()
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name="caef-rounds", daemon=True)
        # what the loop has done, for /health and the tests
        self.rounds_run = 0
        self.widest_round = 0  # the most problems one round has carried
        self.left = 0  # jobs whose clients went away before their answer (counted as they leave)
        self.dropped = 0  # problems of those that the loop dropped: in its rounds, or before they joined

    # ------------------------------------------------------------------ the request side (event loop)

    def start(self) -> Scheduler:
        self._thread.start()
        return self

    def stop(self, timeout: float = 10) -> None:
        with self._wake:
            self._stopping = True
            self._wake.notify()
        self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    @property
    def queued(self) -> int:
        """Jobs that arrived and wait for the loop's next turn."""
        return len(self._inbox)

    def solve(self, expr: str, route: str = "paper") -> Job:
        """A whole problem, `45+67=` (checked by the caller, which picks its route: runtime.Problem.route);
        its future gets the record."""
        job_id = f"p{next(self._ids)}"
        return self._submit(Job(job_id, problem=Problem(job_id, expr, route=route)))

    def step(self, adapter: str, prompt: str, limit: int | None = None) -> Job:
        """One call of one adapter; its future gets the Completion."""
        return self._submit(Job(f"s{next(self._ids)}", adapter=adapter, prompt=prompt, limit=limit))

    def cancel(self, job: Job) -> None:
        """The client has gone: the job is dropped before the next round."""
        job.future.cancel()
        with self._wake:
            self.left += 1
            self._gone.add(job.id)
            self._wake.notify()

    def _submit(self, job: Job) -> Job:
        with self._wake:
            if self._stopping:
                raise RuntimeError("the server is shutting down")
            self._inbox.append(job)
            self._wake.notify()
        return job

    # ------------------------------------------------------------------ the loop thread

    def _loop(self) -> None:
        while True:
            with self._wake:
                while not (self._stopping or self._inbox or self._gone or self.rounds.active):
                    self._wake.wait()
                if self._stopping:
                    break
                arrived, self._inbox = self._inbox, []
                gone, self._gone = self._gone, set()
            try:
                self._turn(arrived, gone)
            except BaseException as error:  # a bug of ours: fail what is in flight, keep serving
                self._fail_all(arrived, error)
        self._fail_all([], RuntimeError("the server shut down"))

    def _turn(self, arrived: list[Job], gone: set[str]) -> None:
        for job_id in gone:
            if self._in_flight.pop(job_id, None) is not None:
                self.rounds.drop(job_id)
                self.dropped += 1
        steps = []
        for job in arrived:
            if job.id in gone or job.future.cancelled():
                self.dropped += job.problem is not None
                continue
            if job.problem is None:
                steps.append(job)
                continue
            record = self.rounds.join(job.problem)
            if record is not None:  # outside the machines' domain: finished before any call
                _settle(job.future, record)
            else:
                self._in_flight[job.id] = job
        self._steps(steps)
        if self.rounds.active:
            self.widest_round = max(self.widest_round, len(self.rounds.active))
            finished = self.rounds.round()
            self.rounds_run += 1
            for record in finished:
                self._finish(record)

    def _finish(self, record: ProblemRecord) -> None:
        job = self._in_flight.pop(record.id, None)
        if job is not None:
            _settle(job.future, record)

    def _steps(self, jobs: list[Job]) -> None:
        """Single steps, one generate call per adapter (a failing call fails that adapter's steps only)."""
        by_adapter: dict[str, list[Job]] = defaultdict(list)
        for job in jobs:
            by_adapter[job.adapter].append(job)
        for adapter, group in by_adapter.items():
            prompts = [job.prompt for job in group]
            try:
                if self._takes_limits and any(job.limit is not None for job in group):
                    own = [self.model.room(prompt, adapter) for prompt in prompts]  # what it allows itself in-process
                    limits = [mine if job.limit is None else min(mine, job.limit) for mine, job in zip(own, group)]
                    outputs = self.model.generate(prompts, adapter, limits)
                else:
                    outputs = self.model.generate(prompts, adapter)
                if len(outputs) != len(group):
                    raise ValueError(f"{adapter}: {len(outputs)} completions for {len(group)} prompts")
            except Exception as error:
                for job in group:
                    _settle(job.future, error=error)
                continue
            for job, output in zip(group, outputs):
                _settle(job.future, output if isinstance(output, Completion) else Completion(str(output)))

    def _fail_all(self, arrived: list[Job], error: BaseException) -> None:
        for job in [*arrived, *self._in_flight.values()]:
            _settle(job.future, error=RuntimeError(f"{type(error).__name__}: {error}"))
        for job_id in list(self._in_flight):
            self.rounds.drop(job_id)
        self._in_flight.clear()


__all__ = ["Job", "Scheduler"]
