"""Structured operands: the numbers people type, which random digits almost never hold.

Uniformly random n-digit operands (the paper's test sets, and most training draws) hold a run of
ten equal digits about once in 10^9 draws, never `10^k`, hardly ever `a == b` at 100 digits. A
model that has only seen random digits may find a cell by its neighbours' content; on
`1000000+1000000=` or a run of one hundred 9s those neighbours all look alike
(docs/structured-operands.md). Each sampler here draws one kind of structured operand for any
operator and length class, from the `random.Random` it is given, so a stream seeded by name
(`data.testsets.named_rng`) gives the same operands on every machine:

- `DigitRunSampler` ("run"): a run of one digit, 0s and 9s above all, of any length 1..n at any
  offset, the rest random; a third of them the whole operand (`999…9`, `1000…0`, `5999…9`);
- `PeriodicSampler` ("periodic"): period-2 and period-3 patterns (`4848…`, `456456…`);
- `RoundNumberSampler` ("round"): `10^k`, `10^k ± small`, `d·10^j`, `10^k - 1`;
- `RunThenRandomSampler` ("run_then_random"): a periodic run on top, then random digits (or
  random digits on top of a run);
- `EqualOperandsSampler` ("equal"): `a == b`;
- `OneDigitApartSampler` ("near"): b is a with one digit changed, inside its run;
- `SmallOperandSampler` ("small"): b = 0 or b = 1.

Operands are fitted to each operator's shape (`fit`): sub keeps a >= b; mul's b and div's
quotient are the class's small number (1-15), div's divisor and remainder structured; REFLECTION
gets 9…9 and a structured b; LEFT_MASK one operand, half of them in SUB's shape (a 1 over a
difference); DIGIT_MUL a structured a times the class's digit; LONG_MUL and LONG_DIV two structured
operands of the class's lengths (a divisor of 0 becomes 1). Every operand stays inside the class's
lengths, so a sampler never asks a tier for more digits than it was built for.
"""

from __future__ import annotations

import random

RUN_DIGITS = "0000099999123456789"  # 0s and 9s above all: carries, borrows and round numbers


def random_digits(rng: random.Random, n: int) -> str:
    return "".join(str(rng.randrange(10)) for _ in range(n))


def _valid(digits: str, rng: random.Random) -> str:
    """A number's digits: a leading zero (of more than one digit) becomes another digit, so a run of
    0s on top reads 1000…0, 5000…0."""
    if len(digits) > 1 and digits[0] == "0":
        return str(rng.randint(1, 9)) + digits[1:]
    return digits


def _unit(rng: random.Random, period: int) -> str:
    """`period` digits that are not all equal (so the pattern's smallest period is `period`)."""
    while True:
        unit = random_digits(rng, period)
        if len(set(unit)) > 1:
            return unit


def digit_run(rng: random.Random, n: int) -> str:
    """n digits holding a run of one digit: a third the whole number (or all but its top digit),
    else a run of uniform length 1..n at a uniform offset, the rest random."""
    digit = rng.choice(RUN_DIGITS)
    if rng.random() < 1 / 3:
        top = "" if rng.random() < 0.5 or n == 1 else str(rng.randint(1, 9))
        return _valid(top + digit * (n - len(top)), rng)
    length = rng.randint(1, n)
    offset = rng.randint(0, n - length)
    return _valid(random_digits(rng, offset) + digit * length + random_digits(rng, n - offset - length), rng)


def inner_run(rng: random.Random, n: int) -> str:
    """n digits holding a run of one digit, 3 to n - 1 long, among random digits (`276333338`); a run on top
    is not of 0s. Fewer than 4 digits: any structured or random operand (any_operand)."""
    if n < 4:
        return any_operand(rng, n)
    length = rng.randint(3, n - 1)
    start = rng.randint(0, n - length)
    digit = rng.choice("123456789" if start == 0 else "0123456789")
    return _valid(random_digits(rng, start) + digit * length + random_digits(rng, n - start - length), rng)


def periodic(rng: random.Random, n: int) -> str:
    """n digits of a period-2 or period-3 pattern, half of them under a free top digit."""
    unit = _unit(rng, rng.choice((2, 3)))
    digits = (unit * (n // len(unit) + 1))[:n]
    if rng.random() < 0.5:
        digits = str(rng.randint(1, 9)) + digits[1:]
    return _valid(digits, rng)


def round_number(rng: random.Random, n: int) -> str:
    """An n-digit round number: 10^k, 10^k - 1, d·10^j, 10^k + small, 10^k - small (small: 1-2 digits)."""
    if n == 1:
        return str(rng.choice((0, 1, 9, rng.randint(0, 9))))
    small = min(n - 1, rng.randint(1, 2))
    form = rng.randrange(5)
    if form == 0:
        return "1" + "0" * (n - 1)
    if form == 1:
        return "9" * n
    if form == 2:
        return str(rng.randint(1, 9)) + "0" * (n - 1)
    if form == 3:
        return "1" + "0" * (n - 1 - small) + random_digits(rng, small)
    return "9" * (n - small) + random_digits(rng, small)


def run_then_random(rng: random.Random, n: int) -> str:
    """A periodic run (period 1-3) over at least half the digits, the rest random: on top three
    times in four (`999994821`), else under random top digits (`48210000000`)."""
    if n < 3:
        return digit_run(rng, n)
    period = rng.choice((1, 2, 3))
    unit = rng.choice(RUN_DIGITS) if period == 1 else _unit(rng, period)
    run_length = rng.randint(n // 2 + 1, n - 1)
    run = (unit * (run_length // len(unit) + 1))[:run_length]
    rest = random_digits(rng, n - run_length)
    return _valid(run + rest if rng.random() < 0.75 else rest + run, rng)


def replace_digit(rng: random.Random, digits: str, index: int) -> str:
    """digits with the one at `index` replaced by another (never a new leading zero)."""
    choices = [d for d in "0123456789" if d != digits[index] and not (d == "0" and index == 0 and len(digits) > 1)]
    return digits[:index] + rng.choice(choices) + digits[index + 1:]


def change_digit(rng: random.Random, digits: str) -> str:
    """digits with one digit, at a uniform position, replaced by another (never a new leading zero)."""
    return replace_digit(rng, digits, rng.randrange(len(digits)))


OPERAND_MAKERS = (digit_run, periodic, round_number, run_then_random)


class StructuredSampler:
    """One kind of structured operands. `pair(rng, op, cls)` -> (a, b) for the operator's length
    class (as `data.training.classes` gives them); b is None for LEFT_MASK."""

    kind = ""
    ops: tuple[str, ...] | None = None  # the operators this kind applies to (None: every one)

    def applies_to(self, op: str) -> bool:
        return self.ops is None or op in self.ops

    def operand(self, rng: random.Random, n: int) -> str:
        raise NotImplementedError

    def operands(self, rng: random.Random, la: int, lb: int) -> tuple[str, str]:
        """Both operands structured three times in four, else one of them random digits."""
        roll = rng.random()
        a = self.operand(rng, la) if roll < 0.875 else _valid(random_digits(rng, la), rng)
        b = self.operand(rng, lb) if roll < 0.75 or roll >= 0.875 else _valid(random_digits(rng, lb), rng)
        return a, b

    def pair(self, rng: random.Random, op: str, cls: tuple[int, int]) -> tuple[int, int | None]:
        if not self.applies_to(op):
            raise ValueError(f"{self.kind} operands do not apply to {op}")
        return fit(op, cls, self, rng)


class DigitRunSampler(StructuredSampler):
    kind = "run"

    def operand(self, rng, n):
        return digit_run(rng, n)


class PeriodicSampler(StructuredSampler):
    kind = "periodic"

    def operand(self, rng, n):
        return periodic(rng, n)


class RoundNumberSampler(StructuredSampler):
    kind = "round"

    def operand(self, rng, n):
        return round_number(rng, n)


class RunThenRandomSampler(StructuredSampler):
    kind = "run_then_random"

    def operand(self, rng, n):
        return run_then_random(rng, n)


def any_operand(rng: random.Random, n: int) -> str:
    """An operand of any structured kind, or (one time in five) random digits."""
    if rng.random() < 0.2:
        return _valid(random_digits(rng, n), rng)
    return rng.choice(OPERAND_MAKERS)(rng, n)


class EqualOperandsSampler(StructuredSampler):
    """a == b (both of the class's first length)."""

    kind = "equal"
    ops = ("add", "sub", "gt", "lt", "eq", "long_mul", "long_div")

    def operands(self, rng, la, lb):
        a = any_operand(rng, la)
        return a, a


class OneDigitApartSampler(StructuredSampler):
    """b is a with one digit changed (both of the class's first length), a structured, so the change
    often lands inside a run: the step after a run of equal pairs decides a comparison."""

    kind = "near"
    ops = ("add", "sub", "gt", "lt", "eq")

    def operands(self, rng, la, lb):
        a = any_operand(rng, la)
        return a, _valid(change_digit(rng, a), rng)


class SmallOperandSampler(StructuredSampler):
    """b = 0 or b = 1 under a structured or random a (mul: b = 1; div: the divisor 1; DIGIT_MUL: the digit 1;
    LONG_DIV: the divisor 1)."""

    kind = "small"
    ops = ("add", "sub", "gt", "lt", "eq", "mul", "div", "digit_mul", "long_mul", "long_div")

    def operands(self, rng, la, lb):
        return any_operand(rng, la), str(rng.randint(0, 1))


SAMPLERS = {sampler.kind: sampler for sampler in (
    DigitRunSampler(), PeriodicSampler(), RoundNumberSampler(), RunThenRandomSampler(),
    EqualOperandsSampler(), OneDigitApartSampler(), SmallOperandSampler())}
KINDS = tuple(SAMPLERS)


def fit(op: str, cls: tuple[int, int], sampler: StructuredSampler, rng: random.Random) -> tuple[int, int | None]:
    """Structured operands in the shape of op's class (see the module's docstring)."""
    first, second = cls
    if op == "mul":  # class (digits of a, b): a structured, b the class's (the small kind: 1)
        a, b = sampler.operands(rng, first, 1)
        return int(a), 1 if sampler.kind == "small" else second
    if op == "div":  # class (digits of the divisor, quotient): a structured divisor and remainder
        divisor_digits, _ = sampler.operands(rng, first, first)
        divisor = 1 if sampler.kind == "small" else max(1, int(divisor_digits))
        roll = rng.random()
        remainder = 0 if roll < 0.4 else divisor - 1 if roll < 0.6 else int(any_operand(rng, len(str(divisor)))) % divisor
        return divisor * second + remainder, divisor
    if op == "left_mask":  # one operand; half in SUB's shape: a 1 over a structured difference
        if first > 1 and rng.random() < 0.5:
            return int("1" + sampler.operand(rng, first - 1).zfill(first - 1)), None
        return int(sampler.operands(rng, first, first)[0]), None
    if op == "reflection":  # 9…9 (a's length) minus a structured b
        _, b = sampler.operands(rng, second, second)
        return 10**first - 1, int(b)
    if op == "digit_mul":  # class (digits of a, the digit): a structured, b the class's digit (the small kind: 1)
        a, _ = sampler.operands(rng, first, 1)
        return int(a), 1 if sampler.kind == "small" else second
    a, b = sampler.operands(rng, first, second)
    a, b = int(a), int(b)
    if op == "sub" and a < b:
        a, b = b, a
    if op == "long_div":  # the divisor is never 0 (the small kind's 0 or 1: 1)
        b = max(1, b)
    return a, b


def structured_pair(rng: random.Random, op: str, cls: tuple[int, int], kinds: tuple[str, ...] = KINDS) -> tuple[str, tuple[int, int | None]]:
    """(kind, operands): a kind drawn uniformly among those of `kinds` that apply to op."""
    usable = [kind for kind in kinds if SAMPLERS[kind].applies_to(op)]
    if not usable:
        raise ValueError(f"none of the structured kinds {kinds} applies to {op}")
    kind = rng.choice(usable)
    return kind, SAMPLERS[kind].pair(rng, op, cls)
