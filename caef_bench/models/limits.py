"""The operands each tier was built for, checked at the edge before any model is loaded.

A tier's adapters only ever saw the protocol's operand ranges (add, sub, gt, lt, eq: 1-100 digits;
mul: a of 1-10 digits times b in [1, 15]; div: a divisor of 1-10 digits and a quotient in [1, 15]).
Beyond them a model is not wrong by chance but by construction: on the tiny tier a 110-digit
operand leaves the 128 position ids each tape field has, and aligner (I) writes a start state the
executors cannot read. So `solve`, `run` and the `caef` lm-eval model refuse such an expression
with one line naming the tier and the limit, instead of printing "unparseable" after a run.

Past the paper's mul and div limits a tier may take the long route (schoolbook multiplication and long
division, LONG_MUL and LONG_DIV; docs/long-mul-div.md): where its file's `limits` give the long route's
lengths (`long_mul_digits`; `long_div_digits` with `long_divisor_digits`, as measured) and its adapters
include the long route's (`long_route_adapters`), `a*b=` and `a//b=` past the paper's limits and within
those run on LONG_MUL and LONG_DIV (`route_within_tier`). A tier without them refuses as before.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Collection, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from caef_bench.machines import ROUTES, Expression, operand_texts, parse_expression, routed, typed_expression
from caef_bench.models.names import operator_adapters, split_adapter_name
from caef_bench.models.tiers import TIER_FILES, TierFile, checked

LENGTH_OPS = ("add", "sub", "gt", "lt", "eq")
# The operators whose executors are local enough to run a window of a state at a time (runtime.windowed):
# past a tier's fields of position ids they still run, up to the tier's `windowed_digits` (those of its
# `windowed_ops` measured). SUB's composer steps run in chunks, its callees on windows.
WINDOWED_OPS = ("add", "sub", "gt", "lt", "eq")


class BeyondTierError(ValueError):
    """An expression outside what the tier was built for (the CLI's exit 2, like other bad input)."""


class MissingAdaptersError(ValueError):
    """An operator whose adapters the tier lacks: refused before any model runs (the CLI's exit 2)."""


@dataclass(frozen=True)
class Windowing:
    """How a tier runs ADD and the comparisons past the operand length its adapters read whole
    (`runtime.windowed`). Each window and each aligner chunk must be a state or an expression no longer
    than the adapters were trained on: a window of `width` cells per tape, and chunks of `chunk` digits
    plus the sentinel digit the aligners see on top of each."""

    past: int  # operands longer than this many digits run a window at a time
    width: int  # cells of each tape a window shows
    back: int  # cells of each tape a window keeps behind its head
    chunk: int  # digits of each operand one aligner call converts
    ops: tuple[str, ...] = ("add", "gt", "lt", "eq")  # which of WINDOWED_OPS the tier runs so (as measured)


@dataclass(frozen=True)
class OperandLimits:
    max_digits: int = 100  # add, sub, gt, lt, eq: each operand
    small_digits: int = 10  # mul's a, div's divisor
    small_factor: int = 15  # mul's b, div's quotient
    why: str = "the protocol's training ranges"
    needs: str = ""  # what operands past max_digits would take, where it is known
    # ADD and the comparisons run windowed past max_digits up to this many digits, where measured (0: never)
    windowed_digits: int = 0
    windowing: Windowing | None = None  # how (None: never)
    windowed_measured: str = ""  # the report of the longest windowed runs measured
    # The long route past the paper's mul and div limits, where measured (0: no long route for that operator):
    # mul's two factors of at most long_mul_digits digits each (LONG_MUL); div's dividend of at most
    # long_div_digits digits over a divisor of at most long_divisor_digits (LONG_DIV; both or neither).
    long_mul_digits: int = 0
    long_div_digits: int = 0
    long_divisor_digits: int = 0
    long_measured: str = ""  # the report of the longest long-route runs measured

    def long_digits(self, op: str) -> tuple[int, int] | None:
        """The most digits of (a, b) that `op` (mul, div) takes on the long route, or None where this tier
        has no long route for it."""
        if op == "mul" and self.long_mul_digits:
            return self.long_mul_digits, self.long_mul_digits
        if op == "div" and self.long_div_digits:
            return self.long_div_digits, self.long_divisor_digits
        return None

    def long_limit(self, op: str) -> str:
        """The long route's limit for `op` in words ("" where it has none)."""
        digits = self.long_digits(op)
        if digits is None:
            return ""
        if op == "mul":
            return f"on the long route factors of at most {digits[0]} digits each"
        return f"on the long route a dividend of at most {digits[0]} digits over a divisor of at most {digits[1]}"

    def within_long_route(self, op: str, a: int, b: int) -> bool:
        """Whether `a op b` is within the long route's limits (False where the tier has no long route for op)."""
        digits = self.long_digits(op)
        return digits is not None and len(str(a)) <= digits[0] and len(str(b)) <= digits[1]

    @property
    def windowed_ops(self) -> tuple[str, ...]:
        return self.windowing.ops if self.windowing is not None else ()

    @property
    def windows(self) -> bool:
        """Whether the tier runs any operator windowed past its whole states."""
        return self.windowed_digits > self.max_digits

    def runs_windowed(self, op: str) -> bool:
        return self.windows and op in self.windowed_ops

    def longest(self, op: str) -> int:
        """The most digits an operand of `op` may have on this tier (mul's b and div's quotient are
        bounded by value; at most two digits)."""
        if op in LENGTH_OPS:
            return self.windowed_digits if self.runs_windowed(op) else self.max_digits
        paper = self.small_digits + (len(str(self.small_factor)) if op == "div" else 0)
        return max(paper, *(self.long_digits(op) or (0,)))

    def length_problem(self, op: str, longest: int) -> str | None:
        """What is out of range for operands of `op` whose longer one has `longest` digits, or None."""
        limit = self.longest(op)
        if longest <= limit:
            return None
        how = " run a window at a time" if self.runs_windowed(op) else ""
        return f"{op} operands of at most {limit} digits{how} (got {longest})"

    def problem(self, op: str, a: int, b: int) -> str | None:
        """What is out of range for `a op b` on the paper's route, or None when it is within the limits
        (`route` says whether the long route takes what the paper's does not)."""
        if op in LENGTH_OPS:
            return self.length_problem(op, max(len(str(a)), len(str(b))))
        long = self.long_limit(op)
        or_long = f", or {long}" if long else ""  # where the long route takes b or a long dividend, their lengths
        if op == "mul" and (len(str(a)) > self.small_digits or b > self.small_factor):
            got = f"a of {_digits(a)} and " + (f"b of {_digits(b)}" if long else f"b={b}")
            return (f"mul with a of at most {self.small_digits} digits and b at most {self.small_factor}{or_long} "
                    f"(got {got})")
        if op == "div":
            quotient = a // b if b else 0
            if len(str(b)) > self.small_digits or quotient > self.small_factor:
                got = (f"a of {_digits(a)} and a divisor of {_digits(b)}" if long
                       else f"a divisor of {_digits(b)} and quotient {quotient}")
                return (f"div with a divisor of at most {self.small_digits} digits and a quotient at most "
                        f"{self.small_factor}{or_long} (got {got})")
        return None

    def route(self, op: str, a: int, b: int) -> str | None:
        """The route `a op b` runs on by these limits: "paper" within the paper's, "long" past them and
        within the long route's; None beyond both (`problem` says what)."""
        if self.problem(op, a, b) is None:
            return "paper"
        return "long" if op in ROUTES["long"] and self.within_long_route(op, a, b) else None


# Operands of mul and div up to this many digits are read as numbers before their limits are checked
# (well within the 4,300 digits Python reads; longer ones are refused by their length alone).
READABLE_DIGITS = 1000


def _digits(n: int) -> str:
    return "1 digit" if len(str(n)) == 1 else f"{len(str(n))} digits"


def _limits(tier: TierFile) -> OperandLimits:
    """A tier file's `limits` (with their windowing) as OperandLimits."""
    values = dict(tier.limits)
    if values.get("windowing") is not None:
        shape = checked(Windowing, values["windowing"], tier.path, "windowing")
        if not set(shape.ops) <= set(WINDOWED_OPS):
            raise ValueError(f"{tier.path}: windowing runs {', '.join(WINDOWED_OPS)} only (got {', '.join(shape.ops)})")
        values["windowing"] = replace(shape, ops=tuple(shape.ops))
    limits = checked(OperandLimits, values, tier.path, "limits")
    long = (limits.long_mul_digits, limits.long_div_digits, limits.long_divisor_digits)
    if any(n < 0 or n > READABLE_DIGITS for n in long):
        raise ValueError(f"{tier.path}: the long route's limits are 0 (none) to {READABLE_DIGITS} digits (got {long})")
    if bool(limits.long_div_digits) != bool(limits.long_divisor_digits):
        raise ValueError(f"{tier.path}: long_div_digits and long_divisor_digits go together (the dividend's and the "
                         f"divisor's longest on the long route)")
    if (limits.long_mul_digits or limits.long_div_digits) and not limits.long_measured:
        raise ValueError(f"{tier.path}: a long route's limits name where they were measured (long_measured)")
    return limits


# What each tier takes, and how it runs past that: its file's `limits` (caef_bench/models/tiers/, where each
# number says where it was measured).
TIER_LIMITS = {name: _limits(tier) for name, tier in TIER_FILES.items()}


def windowing(tier: str) -> Windowing | None:
    """How the tier runs ADD and the comparisons past its whole-state length (`runtime.windowed`), or
    None where it never does."""
    limits = TIER_LIMITS.get(tier, OperandLimits())
    return limits.windowing if limits.windows else None


def measuring_to(tier: str, windowed_digits: int | None) -> OperandLimits:
    """The tier's limits, or, for a run that measures windowed operands past the longest measured so far,
    the same limits with windowed runs allowed up to `windowed_digits` (lm-eval's `caef` model,
    `windowed_digits=`: its results' config records it)."""
    limits = TIER_LIMITS.get(tier, OperandLimits())
    if windowed_digits is None:
        return limits
    if limits.windowing is None:
        raise ValueError(f"the {tier} tier runs nothing a window at a time; windowed_digits does not apply")
    return replace(limits, windowed_digits=int(windowed_digits),
                   windowed_measured=f"windowed_digits={int(windowed_digits)}, a measurement run")


def check_lengths(tier: str, text: str, limits: OperandLimits | None = None) -> None:
    """Raise BeyondTierError when an operand of a templated expression has more digits than the tier
    takes for its operator, before the digits are read as numbers (Python refuses integers of more
    than a few thousand digits, with a message about itself rather than the tier). Text that is not
    the template is left for parse_expression to explain. `limits`: the tier's own by default."""
    parts = operand_texts(text)
    if parts is None:
        return
    op, a, b = parts
    longest = max(len(a), len(b))
    if op not in LENGTH_OPS and longest <= READABLE_DIGITS:
        return  # read as numbers, check_within_tier names mul's and div's limits in full
    limits = limits or TIER_LIMITS.get(tier, OperandLimits())
    if problem := limits.length_problem(op, longest):
        _refuse(tier, limits, op, problem, text)


def check_supported(tier: str, expr: str, adapters=None) -> str:
    """The expression a person typed as the template ("12 + 34" -> "12+34="); BeyondTierError (or
    parse_expression's ValueError, one line) unless the tier can run it. `adapters`: as route_within_tier's."""
    return supported_problem(tier, expr, adapters)[0]


def supported_problem(tier: str, expr: str, adapters=None, limits: OperandLimits | None = None) -> tuple[str, str]:
    """(the expression a person typed as the template, the route it runs on: `route_within_tier`);
    BeyondTierError (or parse_expression's ValueError, one line) unless the tier can run it."""
    text = typed_expression(expr)
    check_lengths(tier, text, limits)
    expression = parse_expression(text)
    return str(expression), route_within_tier(tier, expression, limits, adapters)


def long_route_adapters(op: str) -> tuple[str, ...]:
    """The adapters a problem of `op` (mul, div) calls on the long route: 'mul': aligner_long_mul,
    executor_long_mul, executor_digit_mul, executor_add."""
    return operator_adapters(routed(op, "long"))


def route_within_tier(tier: str, expression: Expression, limits: OperandLimits | None = None,
                      adapters=None) -> str:
    """The route an already parsed expression runs on: "paper" within the paper's limits (every operator
    but mul and div always); "long" for mul and div past them, within the tier's long-route limits, where
    the model has the long route's adapters. BeyondTierError otherwise, naming the paper's limit (and the
    long route's, where the tier has one).

    adapters: the adapters the model has (a collection), or a function giving them (asked only when the
    paper's limits are passed and the long route's are not); None: a bare base or a server that does
    not list its adapters, which answers every call itself, as check_adapters takes it."""
    limits = limits or TIER_LIMITS.get(tier, OperandLimits())
    op, a, b = expression.op, expression.a, expression.b
    route = limits.route(op, a, b)
    if route == "paper":
        return route
    problem = limits.problem(op, a, b)
    if route == "long":
        available = adapters() if callable(adapters) else adapters
        missing = [name for name in long_route_adapters(op) if available is not None and name not in available]
        if not missing:
            return route
        problem += f"; the long route calls {', '.join(missing)}, which the model lacks"
    _refuse(tier, limits, op, problem, str(expression))
    raise AssertionError("unreachable")  # (_refuse raises)


def check_within_tier(tier: str, expression: Expression, limits: OperandLimits | None = None, adapters=None) -> str:
    """Raise BeyondTierError unless the tier was built for the operands of an already parsed expression;
    the route it runs on (`route_within_tier`: "paper", or "long" past the paper's mul/div limits)."""
    return route_within_tier(tier, expression, limits, adapters)


def _refuse(tier: str, limits: OperandLimits, op: str, problem: str, expr: str) -> None:
    why = limits.why
    needs = f"; longer operands need {limits.needs}" if limits.needs and op in LENGTH_OPS else ""
    if limits.runs_windowed(op):  # past what windowed runs were measured to do
        why, needs = f"the longest windowed runs measured ({limits.windowed_measured})", ""
    elif limits.long_digits(op) is not None:
        why += f"; the long route as measured ({limits.long_measured})"
    elif limits.windows and op in LENGTH_OPS:
        needs += (f" ({', '.join(limits.windowed_ops[:-1])} and {limits.windowed_ops[-1]} run a window at a time "
                  f"up to {limits.windowed_digits} digits; "
                  f"{op} does not yet)")
    raise BeyondTierError(f"the {tier} tier supports {problem}: {why}{needs}. Expression: "
                          f"{expr if len(expr) <= 60 else expr[:28] + '…' + expr[-28:]}")


# How each tier's adapters are trained (`caef-bench train`), for the message that names missing ones: its file's `train`.
TRAIN_ARGUMENTS = {name: tier.train for name, tier in TIER_FILES.items()}


def train_command(tier: str, folder: str | Path | None, adapters: Iterable[str]) -> str:
    """The `caef-bench train` command that trains `adapters` (names) of `tier` into `folder`."""
    kinds: dict[str, list[str]] = {"executor": [], "aligner": [], "direct": []}
    for name in adapters:
        kind, op = split_adapter_name(name)
        kinds[kind].append(op)
    words = ["caef-bench train", TRAIN_ARGUMENTS.get(tier, "--preset llama --base BASE")]
    if folder is not None:
        folder = Path(folder)
        here = Path.cwd()
        shown = os.path.relpath(folder, here) if folder.is_absolute() and folder.is_relative_to(here) else folder
        words.append(f"--out {shlex.quote(str(shown))}")
    words += [f"--{kind}s {','.join(ops)}" if kind != "direct" else f"--direct {','.join(ops)}"
              for kind, ops in kinds.items() if ops]
    return " ".join(words)


def check_adapters(tier: str, ops: Iterable[str], available: Collection[str] | None,
                   folder: str | Path | None = None, server: str | None = None) -> None:
    """Raise MissingAdaptersError, one line naming every adapter that problems of `ops` call and
    `available` lacks, and how to train them (or, for a `server`, that it does not serve them).
    available=None: a bare base, which answers every call itself, or a server that does not list
    its adapters; nothing to check."""
    if available is None:
        return
    ops = list(dict.fromkeys(ops))
    missing = list(dict.fromkeys(name for op in ops for name in operator_adapters(op) if name not in available))
    if not missing:
        return
    needed_by = f"which {', '.join(ops)} need{'s' if len(ops) == 1 else ''}"
    if server is not None:
        raise MissingAdaptersError(f"the server at {server} serves no {', '.join(missing)}, {needed_by}: serve them "
                                   f"there, or solve with a tier that has them")
    looked = f" in {folder}" if folder is not None else ""
    raise MissingAdaptersError(f"the {tier} tier has no {', '.join(missing)}{looked}, {needed_by}: train "
                               f"{'it' if len(missing) == 1 else 'them'} with `{train_command(tier, folder, missing)}`")


__all__ = ["TIER_LIMITS", "TRAIN_ARGUMENTS", "WINDOWED_OPS", "BeyondTierError", "MissingAdaptersError", "OperandLimits",
           "Windowing", "check_adapters", "check_lengths", "check_supported", "check_within_tier", "long_route_adapters",
           "measuring_to", "route_within_tier", "supported_problem", "train_command", "windowing"]
