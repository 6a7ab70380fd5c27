"""The machines' own next text for any input an executor or aligner is given on a correct run.

    next_text("aligner", "add", "45+67=")            -> the ADD start state and first command
    next_text("executor", "add", <an ADD step>)       -> the ADD step after it
    next_text("aligner", "add", <an ADD halt text>)   -> "45+67=112"

An executor's input is parsed, the machine's run is rebuilt from the operands
on its tapes, and the step whose text is the input is found by index (the
runs' `step_of`, or a composer's phases), so a step costs O(1) renders, not a
search of the run. Only states on the machine's true course have a next text:
anything else (the continuation of a model's mistake, say) is `OffCourse`.
"""

from __future__ import annotations

import re
from functools import lru_cache

from .aligner import align_output, parse_expression
from .composers import ComposerRun
from .executors import AddRun, CompareRun, LeftMaskRun, ReflectionRun, Run
from .long_composers import DigitMulRun
from .ops import BY_MACHINE, lookup
from .ops import start as start_run
from .text import COMPARISONS, ComposerState, Snapshot, from_tape, parse, render

KINDS = ("executor", "aligner")
_EXPRESSION_LIKE = re.compile(r"[0-9]+[^0-9\n]+[0-9]+=")


class OffCourse(ValueError):
    """The text is not an input of `op`'s executor or aligner on any correct run."""


def next_text(kind: str, op: str, text: str) -> str:
    """What `op`'s executor or aligner (`kind`) writes for `text` on the machine's true course.

    The aligner maps an expression to the start state (aligner (I)) and a halt
    text to the expression with its result (aligner (O)); the executor maps a
    step to the next one. Raises `OffCourse` (or the parser's `FormatError`,
    both ValueErrors) where the text has no such answer.
    """
    if kind == "aligner":
        return _align(op, text)
    if kind == "executor":
        return _execute(op, text)
    raise ValueError(f"unknown kind {kind!r}; expected one of {', '.join(KINDS)}")


def _align(op: str, text: str) -> str:
    if _EXPRESSION_LIKE.fullmatch(text):
        # an aligner answers its operator's expressions: long_mul's are `a*b=` too (ops.ROUTES)
        expression = parse_expression(text)
        if expression.operation.symbol != lookup(op).symbol:
            raise OffCourse(f"an expression for another aligner than {op}'s")
        return lookup(op).start_text(expression.a, expression.b)
    if BY_MACHINE[parse(text).machine].name != op:
        raise OffCourse(f"a halt state for another aligner than {op}'s")
    return align_output(text)


def _execute(op: str, text: str) -> str:
    snapshot = parse(text)
    if BY_MACHINE[snapshot.machine].name != op:
        raise OffCourse(f"a {snapshot.machine} state for {op}'s executor")
    state = snapshot.state
    if isinstance(state, ComposerState):
        machine_run = _composer_run(op, state.a, state.b)
        index = _composer_step(machine_run, snapshot)
        matches = index is not None and render(machine_run.input_snapshot(index)) == text
    else:
        machine_run = _executor_run(state.machine, tuple(tape.digits for tape in state.tapes))
        index = machine_run.step_of(state)
        matches = 0 <= index < machine_run.n_steps and machine_run.text(index) == text
    if not matches:
        raise OffCourse("not a step of the machine's run on these operands")
    if index + 1 >= machine_run.n_steps:
        raise OffCourse("a halt state has no next step")
    return machine_run.text(index + 1)


# Runs are rebuilt from the tapes at every step; caching keeps that O(1) per step for a
# batch in flight (about one entry per problem and callee, a few hundred bytes each).
# Executors are built from the tapes' digits, not from numbers: LEFT_MASK's tape keeps
# leading zeros that a number would lose.
@lru_cache(maxsize=65536)
def _executor_run(machine: str, tapes: tuple[str, ...]) -> Run:
    if machine == "ADD":
        return AddRun(*tapes)
    if machine in COMPARISONS:
        return CompareRun(machine, *tapes)
    if machine == "REFLECTION":
        return ReflectionRun(*tapes)
    if machine == "DIGIT_MUL":
        return DigitMulRun(*tapes)
    return LeftMaskRun(*tapes)


@lru_cache(maxsize=4096)
def _composer_run(op: str, a: str, b: str) -> ComposerRun:
    return start_run(op, from_tape(a), from_tape(b))


def _composer_step(machine_run: ComposerRun, snapshot: Snapshot) -> int | None:
    for index, phase in enumerate(machine_run.phases):
        if phase.state == snapshot.state and phase.command == snapshot.command:
            return index
    return None


__all__ = ["KINDS", "OffCourse", "next_text"]
