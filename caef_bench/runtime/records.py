"""Per-problem records of a CAEF run, as JSON lines that survive an interrupted run.

One problem, one line, written the moment the problem finishes and flushed at
once, so a run killed at any point loses only the problems that were still in
flight. A kill can cut the line being written: `load_records` and `resume` drop
a last line that has no newline (it is incomplete by construction, since every
record is written as ``json + "\\n"``), and `resume` cuts it off the file before
anything is appended, so that the next record starts on a line of its own.

The runtime does not judge answers: whether an answer is right is
`caef_bench.evaluate.scoring`'s call, the same rule for every system. Records
written before that split (with `truth`, `correct` and the outcomes "ok" and
"wrong_answer") read as records of this form.

Record fields (JSON keys in the order written):
    id, expr, mode          the problem and how it was run: "free", "traced" or "teacher_forcing"
    target                  the dataset's answer ("112", "True"), passed through for the scorer; None when not given
    answer, final           the system's answer (what follows the last "=" of aligner (O)'s completion), and that completion
    outcome                 how the run ended: "answered", "misaligned" (an aligner wrote other
                            operands than the expression's, or an executor rewrote an operand tape),
                            "no_halt", "unparseable" or "error"
    detail                  why a problem stopped early (the parse error, the step budget, ...)
    n_steps, step_budget    model calls made (aligner steps included), and the most the problem was allowed
    first_divergence        traced modes: {step, adapter, error_class, expected, got, depth} of the first step that
                            differs from the machine, or None
    n_divergent_steps       teacher forcing only: how many steps differ from the machine
    seconds, model_seconds  wall time from the start of the batch to this problem's end; its share of model time
    windowed                runs a window at a time: {width, back, chunk} (runtime.windowed); absent otherwise
    route                   the machines that answered it, where not the paper's: "long" (LONG_MUL, LONG_DIV for
                            `*` and `//`; runtime.problem.Problem.route); absent otherwise
    steps                   each model call: adapter, depth, input, output, seconds, and when known tokens,
                            error_class (compared steps that differ) and expected (at those steps);
                            reused: true where the output came from an earlier run's records (runtime.reuse)
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Iterable

OUTCOMES = ("answered", "misaligned", "no_halt", "unparseable", "error")
# Older records judged their answers; their answered outcomes were these
_JUDGED_OUTCOMES = ("ok", "wrong_answer")


@dataclass
class StepRecord:
    """One model call: which adapter, at what call depth, on what text, with what answer."""

    adapter: str  # "executor_add", "aligner_sub", ...
    depth: int  # 0 for the top machine and the aligners, 1 inside a composer's call
    input: str
    output: str
    seconds: float  # this step's share of its batched generate call (call time / batch size)
    tokens: int | None = None  # generated tokens, when the model reports them
    error_class: str | None = None  # traced modes: how the output differs from the machine's
    expected: str | None = None  # the machine's output, kept only where the model's differs
    reused: bool | None = None  # True: the output was read from an earlier run's records (runtime.reuse)
    # What the model wrote past the step's end (its last command's last word), cut off before parsing
    # (machines.split_step_end); `output` is the text without it.
    beyond: str | None = None

    def to_dict(self) -> dict:
        # Optional fields are left out when empty: a 100-digit trace has a hundred steps.
        d = {"adapter": self.adapter, "depth": self.depth, "input": self.input, "output": self.output,
             "seconds": round(self.seconds, 6)}
        for key in ("tokens", "error_class", "expected", "reused", "beyond"):
            value = getattr(self, key)
            if value is not None:
                d[key] = value
        return d


@dataclass
class Divergence:
    """The first step whose output differs from the machine's (traced modes)."""

    step: int  # index into the problem's steps (0 is aligner (I))
    adapter: str
    error_class: str  # one of caef_bench.machines.ERROR_CLASSES, or "wrong_result" for aligner (O)
    expected: str
    got: str
    # The call depth of that step (0 top machine, 1 inside a composer's call), kept here as well as in
    # the step so a record whose steps were emptied to save space still says where it went wrong.
    depth: int | None = None


@dataclass
class ProblemRecord:
    id: str
    expr: str
    mode: str
    target: str | None = None
    answer: str | None = None
    final: str | None = None
    outcome: str = "error"
    detail: str | None = None
    n_steps: int = 0
    step_budget: int | None = None
    first_divergence: Divergence | None = None
    n_divergent_steps: int | None = None
    n_steps_cut: int = 0  # steps whose model went on past the step's end (StepRecord.beyond)
    seconds: float = 0.0
    model_seconds: float = 0.0
    steps: list[StepRecord] = field(default_factory=list)
    # The weights whose records this one was copied from (evaluate.suites.copy_records): every adapter the
    # problem calls is byte-identical there, so a rerun would write this record; None: solved for these.
    carried_from: str | None = None
    # A run a window at a time (runtime.windowed): the window's width and back and the aligners' chunk, in
    # cells and digits; None: whole states.
    windowed: dict | None = None
    # The route that picked the machines (machines.ROUTES), where not the paper's: "long"; None: the paper's.
    route: str | None = None

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self)
             if f.name not in ("first_divergence", "steps", "carried_from", "windowed", "route")}
        for key in ("carried_from", "windowed", "route"):  # only where set: records of whole states read as before
            if getattr(self, key) is not None:
                d[key] = getattr(self, key)
        d["seconds"] = round(self.seconds, 6)
        d["model_seconds"] = round(self.model_seconds, 6)
        d["first_divergence"] = asdict(self.first_divergence) if self.first_divergence else None
        d["steps"] = [step.to_dict() for step in self.steps]
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)

    @classmethod
    def from_dict(cls, d: dict) -> ProblemRecord:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in d.items() if k in known}
        if "target" not in d and "truth" in d:  # a record written before the runtime stopped judging answers
            values["target"] = d["truth"]
        if values.get("outcome") in _JUDGED_OUTCOMES:
            values["outcome"] = "answered"
        if values.get("first_divergence"):
            values["first_divergence"] = Divergence(**values["first_divergence"])
        values["steps"] = [StepRecord(**step) for step in values.get("steps", [])]
        return cls(**values)


# --------------------------------------------------------------------------- files


def _complete_lines(data: bytes) -> tuple[list[bytes], int]:
    """The complete lines of a records file and the byte length they span (a cut last line is excluded)."""
    end = data.rfind(b"\n") + 1  # 0 when there is no complete line at all
    return data[:end].splitlines(), end


def _parse_line(line: bytes, path: Path, number: int) -> dict:
    try:
        return json.loads(line)
    except json.JSONDecodeError as error:
        # Only the last line can be cut by a kill; a bad complete line is damage we must not hide.
        raise ValueError(f"{path}:{number}: not a JSON record ({error})") from None


def load_records(path: str | Path) -> list[ProblemRecord]:
    """Every complete record in a JSONL file; a cut last line is ignored, a missing file is empty."""
    path = Path(path)
    if not path.exists():
        return []
    lines, _ = _complete_lines(path.read_bytes())
    return [ProblemRecord.from_dict(_parse_line(line, path, n)) for n, line in enumerate(lines, 1) if line.strip()]


def recorded_ids(path: str | Path) -> set[str]:
    return {record.id for record in load_records(path)}


def repair(path: str | Path) -> int:
    """Cut an incomplete last line off a records file; returns how many bytes were dropped."""
    path = Path(path)
    if not path.exists():
        return 0
    data = path.read_bytes()
    _, end = _complete_lines(data)
    if end < len(data):
        with open(path, "r+b") as f:
            f.truncate(end)
    return len(data) - end


def resume(path: str | Path, problems: Iterable) -> list:
    """The problems (anything with an ``id``) that the records file does not hold yet, in order.

    Repairs the file first (see `repair`) so that records appended next start on a fresh line.
    """
    repair(path)
    done = recorded_ids(path)
    return [problem for problem in problems if problem.id not in done]


class RecordWriter:
    """Appends records to a JSONL file, one line each, flushed as soon as it is written.

    Opening repairs the file (a previous run may have been killed mid-line).
    Flushing hands each line to the operating system, which is what survives a
    killed process; it is not an fsync, so a power cut may still lose the tail.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        repair(self.path)
        self._file = open(self.path, "a", encoding="utf-8")

    def write(self, record: ProblemRecord) -> None:
        self._file.write(record.to_json() + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["OUTCOMES", "Divergence", "ProblemRecord", "RecordWriter", "StepRecord",
           "load_records", "recorded_ids", "repair", "resume"]
