"""The operators: names, machines, expression symbols, domains and true results."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from .composers import div_run, first_phase, mul_run, sub_run
from .executors import AddRun, CompareRun, LeftMaskRun, ReflectionRun, Run
from .long_composers import digit_mul_run, long_div_run, long_mul_run
from .text import Snapshot, render, to_tape


@dataclass(frozen=True)
class Operation:
    name: str  # the API name: "add"
    machine: str  # the machine's name in the texts: "ADD"
    symbol: str | None  # in the expression template; None for the auxiliary machines
    arity: int
    result: Callable[..., int | bool]
    start: Callable[..., Run]

    def start_text(self, a: int, b: int | None = None) -> str:
        """Step 0 as the aligner (I) writes it, without running the machine."""
        if self.machine in ("SUB", "MUL", "DIV"):
            phase = first_phase(self.machine, a, b)
            return render(Snapshot(phase.state, phase.command, None, trailing_newline=True))
        return (self.start(a) if self.arity == 1 else self.start(a, b)).start_text()

    def check(self, a: int, b: int | None) -> None:
        """Raise ValueError for operands outside what the machine computes correctly."""
        if self.name == "sub" and a < b:
            raise ValueError(f"subtraction needs a >= b (CAEF covers non-negative results only): {a}-{b}")
        if self.name == "div" and b == 0:
            raise ValueError(f"division by zero: {a}//{b}")
        if self.name == "digit_mul" and b > 9:
            raise ValueError(f"digit_mul multiplies by one digit, got {b}")
        if self.name == "long_div" and b == 0:
            raise ValueError(f"division by zero: {a}//{b}")
        if self.name == "mul" and b == 0:
            raise ValueError(f"multiplication needs b >= 1 (the MUL machine counts from 1): {a}*{b}")
        if self.name == "reflection":
            if set(str(a)) != {"9"}:
                raise ValueError(f"reflection needs a made of nines (it sets the width), got {a}")
            if len(str(b)) > len(str(a)):
                raise ValueError(f"reflection needs b no longer than a, got {a} and {b}")


def _mask(a: int) -> int:
    return int(str(a)[1:] or "0")


OPERATIONS: dict[str, Operation] = {
    op.name: op
    for op in (
        Operation("add", "ADD", "+", 2, lambda a, b: a + b, lambda a, b: AddRun(to_tape(a), to_tape(b))),
        Operation("sub", "SUB", "-", 2, lambda a, b: a - b, sub_run),
        Operation("mul", "MUL", "*", 2, lambda a, b: a * b, mul_run),
        Operation("div", "DIV", "//", 2, lambda a, b: a // b, div_run),
        Operation("gt", "GREATER_THAN", ">", 2, lambda a, b: a > b,
                  lambda a, b: CompareRun("GREATER_THAN", to_tape(a), to_tape(b))),
        Operation("lt", "LESS_THAN", "<", 2, lambda a, b: a < b,
                  lambda a, b: CompareRun("LESS_THAN", to_tape(a), to_tape(b))),
        Operation("eq", "EQUAL", "==", 2, lambda a, b: a == b,
                  lambda a, b: CompareRun("EQUAL", to_tape(a), to_tape(b))),
        Operation("reflection", "REFLECTION", None, 2, lambda a, b: a - b,
                  lambda a, b: ReflectionRun(to_tape(a), to_tape(b))),
        Operation("left_mask", "LEFT_MASK", None, 1, _mask, lambda a: LeftMaskRun(to_tape(a))),
    )
}
# Schoolbook multiplication and long division (long_composers.py, docs/long-mul-div.md): machines that
# `start` and the step functions know, kept out of OPERATIONS, whose lists of the paper's operators
# name the adapters that are trained, served and evaluated. LONG_MUL and LONG_DIV answer the paper's
# `a*b=` and `a//b=` on the long route (ROUTES): their symbol is the expression's, and their aligners
# write and read those expressions; an expression's symbol still names the paper's operator (BY_SYMBOL).
LONG_OPERATIONS: dict[str, Operation] = {
    op.name: op
    for op in (
        Operation("long_mul", "LONG_MUL", "*", 2, lambda a, b: a * b, long_mul_run),
        Operation("long_div", "LONG_DIV", "//", 2, lambda a, b: a // b, long_div_run),
        Operation("digit_mul", "DIGIT_MUL", None, 2, lambda a, b: a * b, digit_mul_run),
    )
}
EXECUTOR_OPS = tuple(OPERATIONS)  # every operation is a machine with an executor
ALIGNED_OPS = tuple(name for name, op in OPERATIONS.items() if op.symbol)  # an expression names it: an aligner
LONG_EXECUTOR_OPS = tuple(LONG_OPERATIONS)  # executor_long_mul, executor_long_div, executor_digit_mul
LONG_ALIGNED_OPS = tuple(name for name, op in LONG_OPERATIONS.items() if op.symbol)  # aligner_long_mul, _long_div
BY_MACHINE = {op.machine: op for op in (*OPERATIONS.values(), *LONG_OPERATIONS.values())}
BY_SYMBOL = {op.symbol: op for op in OPERATIONS.values() if op.symbol}
# Which machine answers an expression: on the paper's route its operator's (MUL's repeated addition for
# `a*b=`), on the long route schoolbook multiplication and long division for `*` and `//` (every other
# operator as on the paper's). The expression's text is the same on both.
ROUTES: dict[str, dict[str, str]] = {"paper": {}, "long": {"mul": "long_mul", "div": "long_div"}}
ARITHMETIC = ("add", "sub", "mul", "div")
COMPARISON = ("gt", "lt", "eq")

_NUMBER = re.compile(r"[0-9]+")


def operand(value, name: str) -> int:
    """Validate one operand: a non-negative int, or a decimal string without sign or leading zeros."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"operand {name} must be a non-negative integer, got {value!r}")
    if isinstance(value, str):
        if not _NUMBER.fullmatch(value) or not value.isascii():
            raise ValueError(f"operand {name} must be written with the digits 0-9 only, got {value!r}")
        if len(value) > 1 and value[0] == "0":
            raise ValueError(f"operand {name} has a leading zero: {value!r}")
        value = int(value)
    if value < 0:
        raise ValueError(f"operand {name} must be non-negative (CAEF has no signs), got {value}")
    return value


def lookup(op: str) -> Operation:
    try:
        return OPERATIONS[op] if op in OPERATIONS else LONG_OPERATIONS[op]
    except (KeyError, TypeError):
        raise ValueError(f"unknown operation {op!r}; expected one of {', '.join([*OPERATIONS, *LONG_OPERATIONS])}") from None


def routed(op: str, route: str = "paper") -> str:
    """The operation that answers an expression of the paper's operator `op` on `route`:
    routed("mul", "long") -> "long_mul", routed("add", "long") -> "add"."""
    if route not in ROUTES:
        raise ValueError(f"unknown route {route!r}; expected one of {', '.join(ROUTES)}")
    return ROUTES[route].get(op, op)


def expression_op(op: str) -> str:
    """The paper's operator whose expressions `op` answers (its template and symbol): "long_mul" -> "mul"."""
    symbol = lookup(op).symbol
    if symbol is None:
        raise ValueError(f"{op} is an auxiliary machine and has no expression form")
    return BY_SYMBOL[symbol].name


def start(op: str, a, b=None) -> Run:
    """Validate the operands and return the machine's run (every step available by index)."""
    operation = lookup(op)
    a = operand(a, "a")
    if operation.arity == 1:
        if b is not None:
            raise ValueError(f"{op} takes one operand")
        return operation.start(a)
    if b is None:
        raise ValueError(f"{op} takes two operands")
    b = operand(b, "b")
    operation.check(a, b)
    return operation.start(a, b)
