"""The operands each tier was built for, checked at the edge before any model is loaded.

A tier's adapters only ever saw the protocol's operand ranges (add, sub, gt, lt, eq: 1-100 digits;
mul: a of 1-10 digits times b in [1, 15]; div: a divisor of 1-10 digits and a quotient in [1, 15]).
Beyond them a model is not wrong by chance but by construction: on the tiny tier a 110-digit
operand leaves the 128 position ids each tape field has, and aligner (I) writes a start state the
executors cannot read. So `solve`, `run` and the `caef` lm-eval model refuse such an expression
with one line naming the tier and the limit, instead of printing "unparseable" after a run.
"""

from __future__ import annotations

from dataclasses import dataclass

from caef_bench.machines import Expression, parse_expression, typed_expression

LENGTH_OPS = ("add", "sub", "gt", "lt", "eq")


class BeyondTierError(ValueError):
    """An expression outside what the tier was built for (the CLI's exit 2, like other bad input)."""


@dataclass(frozen=True)
class OperandLimits:
    max_digits: int = 100  # add, sub, gt, lt, eq: each operand
    small_digits: int = 10  # mul's a, div's divisor
    small_factor: int = 15  # mul's b, div's quotient
    why: str = "the protocol's training ranges"

    def problem(self, op: str, a: int, b: int) -> str | None:
        """What is out of range for `a op b`, or None when it is within the limits."""
        if op in LENGTH_OPS:
            longest = max(len(str(a)), len(str(b)))
            if longest > self.max_digits:
                return f"{op} operands of at most {self.max_digits} digits (got {longest})"
        elif op == "mul":
            if len(str(a)) > self.small_digits or b > self.small_factor:
                return (f"mul with a of at most {self.small_digits} digits and b at most {self.small_factor} "
                        f"(got {len(str(a))} digits and b={b})")
        elif op == "div":
            quotient = a // b if b else 0
            if len(str(b)) > self.small_digits or quotient > self.small_factor:
                return (f"div with a divisor of at most {self.small_digits} digits and a quotient at most "
                        f"{self.small_factor} (got {len(str(b))} digits and quotient {quotient})")
        return None


TIER_LIMITS = {
    "tiny": OperandLimits(why="its adapters were trained on the protocol's ranges only, and its coupled "
                              "position ids give each tape field 128 cells"),
    "smollm2-135m": OperandLimits(why="CAEF adapters for it follow the protocol's training ranges"),
    "llama-3.1-8b": OperandLimits(why="the released adapters were trained on the protocol's ranges"),
}


def check_supported(tier: str, expr: str) -> str:
    """The expression a person typed as the template ("12 + 34" -> "12+34="); BeyondTierError (or
    parse_expression's ValueError, one line) unless the tier can run it."""
    expression = parse_expression(typed_expression(expr))
    check_within_tier(tier, expression)
    return str(expression)


def check_within_tier(tier: str, expression: Expression) -> None:
    """Raise BeyondTierError unless the tier was built for the operands of an already parsed expression."""
    expr = str(expression)
    limits = TIER_LIMITS.get(tier, OperandLimits())
    problem = limits.problem(expression.op, expression.a, expression.b)
    if problem:
        raise BeyondTierError(f"the {tier} tier supports {problem}: {limits.why}. Expression: "
                              f"{expr if len(expr) <= 60 else expr[:28] + '…' + expr[-28:]}")


__all__ = ["TIER_LIMITS", "BeyondTierError", "OperandLimits", "check_supported", "check_within_tier"]
