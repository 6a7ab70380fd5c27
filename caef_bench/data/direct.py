"""Prompts of the paper's baselines, verbatim from the protocol.

LoRA-direct: LLaMA 3.1-8B fine-tuned to answer a fixed prompt with the bare
answer (an integer, or True/False). Instruct/GPT-4o: one chat user turn asking
for the answer on a final ``Answer:`` line (comparisons: "true or false").
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property

from caef_bench.data.testsets import COMPARISON_OPS, TABLE1_LENGTHS, load_protocol, protocol_pair, render_expr, solve


def _prompt_kind(op: str) -> str:
    return "comparison" if op in COMPARISON_OPS else "arithmetic"


def direct_prompt(expr: str, op: str) -> str:
    """The LoRA-direct prompt for a templated expression such as ``45+67=``."""
    return load_protocol()["lora_direct"][_prompt_kind(op)].replace("{expr}", expr)


def chat_prompt(expr: str, op: str) -> str:
    """The LLaMA-Instruct / GPT-4o user message for a templated expression."""
    return load_protocol()["instruct_and_gpt4o"][_prompt_kind(op)].replace("{expr}", expr)


def direct_samples(problems: Iterable[Mapping]) -> list[dict]:
    """LoRA-direct fine-tuning/evaluation samples: the prompt, the bare answer as
    completion, and the source problem as ``meta``."""
    return [
        {
            "prompt": direct_prompt(problem["expr"], problem["op"]),
            "completion": problem["answer"],
            "meta": dict(problem),
        }
        for problem in problems
    ]


# The LoRA-direct draws follow the test protocol. Drawn uniformly over (len a, len b)
# pairs, as the executors' classes are, two operands of one length (every test cell's) were 1% of
# the draws and an equal-length 5-digit addition one in ten thousand: the shipped direct adapters
# learnt no addition at all. Here every problem is drawn as a Table 1 cell draws its own
# (data.testsets.protocol_pair), at a length drawn so that both the test lengths and the lengths
# between them are seen (LENGTH_RULE says how).
PROTOCOL = "protocol"
LENGTH_RULE = ("half of the draws at one of Table 1's lengths (5, 10, 50, 100: an eighth each), half over "
               "1-100 digits with P(n) proportional to 1/n (each length then gets about as many answer digits)")
MAX_DIGITS = 100


@dataclass(frozen=True)
class DirectDraw:
    """How a LoRA-direct adapter's training problems are drawn: `protocol` (LENGTH_RULE), or one
    operand length (`protocol:5`: the capacity check's equal-length 5-digit problems). mul and div
    draw from the protocol's ranges either way. Problems of the committed test sets are never drawn."""

    spec: str = PROTOCOL
    # The longest operands drawn: the tier's training lengths (the smollm2 preset's 1-10 digits on a CPU);
    # the rule's Table 1 lengths and its 1/n part stay within them.
    max_digits: int = MAX_DIGITS

    def __post_init__(self):
        name, _, fixed = self.spec.partition(":")
        if name != PROTOCOL or (fixed and not (fixed.isdigit() and 1 <= int(fixed) <= MAX_DIGITS)):
            raise ValueError(f"unknown direct draw {self.spec!r}; expected {PROTOCOL!r} or {PROTOCOL}:<digits 1-100>")

    @property
    def fixed_length(self) -> int | None:
        fixed = self.spec.partition(":")[2]
        return int(fixed) if fixed else None

    @cached_property
    def _weights(self) -> list[float]:
        inverse = [1 / n for n in range(1, self.max_digits + 1)]
        total = sum(inverse)
        lengths = [n for n in TABLE1_LENGTHS if n <= self.max_digits]
        at_test_length = [0.5 / len(lengths) if n in lengths else 0.0 for n in range(1, self.max_digits + 1)]
        return [0.5 * w / total + t for w, t in zip(inverse, at_test_length)]

    def length(self, rng: random.Random) -> int:
        if self.fixed_length is not None:
            return self.fixed_length
        return rng.choices(range(1, self.max_digits + 1), self._weights)[0]

    def share_of_length(self, n: int) -> float:
        """The probability that a draw of a length-driven operator has operands of n digits."""
        if self.fixed_length is not None:
            return float(n == self.fixed_length)
        return self._weights[n - 1] if n <= self.max_digits else 0.0

    def problem(self, op: str, rng: random.Random, excluded: frozenset[str] = frozenset()) -> tuple[int, int]:
        """(a, b) of one training problem, never one of `excluded`'s expressions."""
        while True:
            a, b = protocol_pair(op, None if op in ("mul", "div") else self.length(rng), rng)
            if render_expr(op, a, b) not in excluded:
                return a, b

    def sample(self, op: str, rng: random.Random, excluded: frozenset[str] = frozenset()) -> dict:
        """One training sample: the protocol's LoRA-direct prompt and the bare answer."""
        a, b = self.problem(op, rng, excluded)
        return {"prompt": direct_prompt(render_expr(op, a, b), op), "completion": solve(op, a, b),
                "meta": {"kind": "direct", "op": op, "a": str(a), "b": str(b)}}
