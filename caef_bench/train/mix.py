"""What an adapter's training samples are drawn from: its mix of shares, each a true fraction.

A share of a *sampler* (train.samplers.REGISTRY) is the fraction of the adapter's draws that sampler makes;
the operand kinds `structured`, `same` and `near` are fractions of the draws too, made by the
protocol's draw (uniform over length classes, edge-weighted steps) on those operands; what is left
is that draw on random operands. A few shares refine a part of the draws instead, and SHARES says
which part (`equal`: of the draws whose lengths come from a class). A share that does not apply to
an adapter (`nines` to an aligner) is passed over for it.

The draw rolls for each sampler in SHARES' order, with the chance that makes its share of the
whole: a share f after shares summing to s is drawn with chance f / (1 - s). Shares are read as
the decimals they are written as (0.51 / 0.85 is 3/5 exactly), so the shipped adapters' draws,
recorded as such chances before the mix (`from_sequential`), draw the same samples to the byte
(tests/test_sampler_draws.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Mapping

from caef_bench.machines import COMPARISON, lookup
from caef_bench.machines.text import COMPOSERS

# The operators each kind of draw is for.
NINES = ("reflection", "sub", "add")  # the executors whose texts carry REFLECTION's dropped zeros
WIDE = ("add", "left_mask")  # the callees of SUB whose fields reach max_len + 1 cells
DECIDED_AT_TOP = ("gt", "lt")  # the comparisons that read every digit pair up to the top one
CALLERS = {"add": ("sub", "mul"), "gt": ("div",)}  # the composers whose calls an executor's draws take
LONG_CALLERS = {"add": ("long_mul", "long_div"), "reflection": ("long_div",)}  # ... and the long route's
# MUL's check of its count (0-15) against b: a LESS_THAN on operands of 1-2 digits, which lt's own cells
# (a 1-10-digit pair, lengths drawn uniformly) rarely give; a share of its own, since composer_calls'
# draws for lt would change the shipped adapters' draws
COUNT_CALLERS = {"lt": ("mul",)}
# every composer call of ADD and GREATER_THAN, for the draws on structured operands (a share of its own too)
STRUCTURED_CALLERS = {"add": ("sub", "mul", "div"), "gt": ("div",)}
# the operators whose operands are two numbers of 1-max_len digits each (the run_lengths draws; div's beside them)
TWO_NUMBERS = ("add", "sub", "gt", "lt", "eq")
# Equal and one-digit-apart pairs: for sub such a pair has a difference with leading zeros (all zeros
# when equal), which left_mask erases and SUB must return as they are.
PAIRED = COMPARISON + ("sub",)
OWN_LENGTHS = ("mul", "div", "left_mask", "digit_mul")  # classes of their own: the length shares pass them over


@dataclass(frozen=True)
class Share:
    name: str
    of: str  # the draws it is a fraction of
    applies: Callable[[str, str], bool]  # (kind, op) -> whether this adapter's draws take it
    what: str


def _executors(ops) -> Callable[[str, str], bool]:
    return lambda kind, op: kind == "executor" and op in ops


SHARES = {share.name: share for share in (
    # the samplers of train.samplers, in the order the draw rolls for them
    Share("nines", "draws", _executors(NINES), "subtractions whose b has 9s on top (REFLECTION drops zeros)"),
    Share("top_steps", "draws", _executors(("add",)), "ADD's last 12 steps on two operands above 90 digits"),
    Share("wide", "draws", _executors(WIDE), "SUB's calls on two operands above 90 digits (101-digit fields)"),
    Share("sub_calls", "draws", _executors(WIDE), "SUB's calls on two operands above 50 digits, their edge steps"),
    Share("deciding_steps", "draws", _executors(DECIDED_AT_TOP), "a long comparison's last 3 steps (its top pair)"),
    Share("top_runs", "draws", _executors(COMPARISON), "a run of one digit below a different top digit (9777…7)"),
    Share("carry_runs", "draws", _executors(("add",)), "a carry through a run of 11-100 9s, where it stops"),
    Share("composer_calls", "draws", _executors(tuple(CALLERS)), "the calls SUB, MUL and DIV runs make"),
    Share("carry_in", "draws", _executors(("add",)), "ADD's steps whose next state holds a carry of 1"),
    Share("carry_to_ten", "draws", _executors(("add",)), "ADD's steps whose digit pair and carry of 1 make 10"),
    Share("long_calls", "draws", _executors(tuple(LONG_CALLERS)),
          "the calls LONG_MUL and LONG_DIV runs make (ADD on partial products and zero-topped remainders)"),
    Share("count_calls", "draws", _executors(tuple(COUNT_CALLERS)), "MUL's LESS_THAN calls: its count against b"),
    Share("structured_calls", "draws", _executors(tuple(STRUCTURED_CALLERS)),
          "the calls SUB, MUL and DIV runs make on structured operands (MUL adds d000…0 to its multiples)"),
    Share("run_lengths", "draws", lambda kind, op: kind in ("executor", "aligner") and op in (*TWO_NUMBERS, "div"),
          "two runs of one digit or round numbers of lengths one apart (1000000000>999999999=; div's of a quotient "
          "of at most 15, 7777777777//777777777=), executors and aligners"),
    Share("column_sums", "draws", _executors(("add", "digit_mul")),
          "ADD's steps on each of the 200 (digit, digit, carry) columns alike (DIGIT_MUL's on its 450)"),
    Share("sub_results", "draws", _executors(("sub",)),
          "SUB's last step (LEFT_MASK's result copied) on differences of every length 1..a's alike"),
    Share("div_runs", "draws", _executors(("div", "add", "gt")),
          "DIV on a divisor with a run inside random digits (its counts hold runs): its steps and its calls'"),
    Share("low_nines", "draws", _executors(("sub",)), "SUB on an a or b ending in 9s, half at its call of REFLECTION"),
    Share("near_rounds", "draws", _executors(("sub",)),
          "SUB on a round number or run less a small d, half at its second call of ADD (a's 0s under a top 1)"),
    # operand kinds of the protocol's draw (what is left of the draws: random operands)
    Share("structured", "draws", lambda kind, op: True,
          "structured operands: runs of one digit, round numbers, periodic patterns, a == b, ... (data.structured)"),
    Share("same", "draws", lambda kind, op: op in PAIRED, "a == b (comparisons and sub)"),
    Share("near", "draws", lambda kind, op: op in PAIRED,
          "b = a but for one digit, half at the step comparing it (comparisons and sub)"),
    # refinements of a part of the draws
    Share("equal", "class draws", lambda kind, op: op not in OWN_LENGTHS, "operands of equal length"),
    Share("short", "class draws", lambda kind, op: op not in OWN_LENGTHS, "operands of at most 10 digits"),
    Share("long", "class draws", lambda kind, op: op not in OWN_LENGTHS, "a longer operand above 50 digits"),
    Share("longest", "class draws", lambda kind, op: op not in OWN_LENGTHS,
          "two operands of the longest length drawn (max_len, or the curriculum's)"),
    Share("returns", "class draws", lambda kind, op: kind == "executor" and lookup(op).machine in COMPOSERS,
          "the steps reading a callee's halt state (sub, mul, div, long_mul, long_div)"),
    Share("structured_long", "structured draws", lambda kind, op: op not in ("mul", "div"),
          "two operands of one length above 50 digits"),
    Share("nines_long", "nines draws", _executors(NINES), "a subtraction above 50 digits"),
    Share("top_steps_structured", "top_steps draws", _executors(("add",)),
          "structured operands, half at any step (and SUB's draws take both its ADD calls)"),
)}
SAMPLERS = ("nines", "top_steps", "wide", "sub_calls", "deciding_steps", "top_runs", "carry_runs", "composer_calls",
            "carry_in", "carry_to_ten", "long_calls", "count_calls", "structured_calls", "run_lengths", "column_sums",
            "sub_results", "div_runs", "low_nines", "near_rounds")
OPERANDS = ("structured", "same", "near")
LENGTHS = ("equal", "short", "long")


def exact(value) -> Fraction:
    """A share as the decimal it is written as: 0.51 is 51/100, not the float nearest it."""
    return Fraction(repr(float(value)))


def check(mix: Mapping[str, float]) -> None:
    """Unknown names and values outside [0, 1] are errors."""
    unknown = sorted(set(mix) - set(SHARES))
    if unknown:
        raise ValueError(f"unknown share(s) {', '.join(unknown)}; the shares: {', '.join(SHARES)}")
    wrong = [f"{name}={value}" for name, value in mix.items() if not 0 <= value <= 1]
    if wrong:
        raise ValueError(f"a share is a fraction in [0, 1], not {', '.join(wrong)}")


def applying(kind: str, op: str, mix: Mapping[str, float]) -> dict[str, Fraction]:
    """The shares of `mix` that this adapter's draws take, as exact fractions; zeros left out."""
    return {name: exact(value) for name, value in mix.items() if value and SHARES[name].applies(kind, op)}


@dataclass(frozen=True)
class Chances:
    """A mix as one adapter's draw rolls for it: each chance a float to compare rng.random() with."""

    samplers: tuple[tuple[str, float], ...]  # (sampler, its chance once none before it was drawn), in order
    structured: float = 0.0  # of the protocol's draws
    same: float = 0.0  # of the protocol's draws not structured
    near: float = 0.0
    lengths: tuple[float, float, float] | None = None  # equal, short, long of the class draws; None: no roll
    returns: float = 0.0
    structured_long: float = 0.0
    nines_long: float = 0.0
    top_steps_structured: float = 0.0
    longest: float = 0.0  # of the class draws, rolled before the length pools


def _chance(share: Fraction, left: Fraction) -> Fraction:
    return share / left if left else Fraction(0)


def chances(kind: str, op: str, mix: Mapping[str, float]) -> Chances:
    """The rolls that draw `mix` for one adapter; its shares of the draws must sum to at most 1."""
    check(mix)
    shares = applying(kind, op, mix)
    whole = sum((shares.get(name, 0) for name in (*SAMPLERS, *OPERANDS)), Fraction(0))
    if whole > 1:
        raise ValueError(f"{kind}_{op}: its shares of the draws sum to {float(whole):g}, more than all of them: "
                         + ", ".join(f"{n}={float(shares[n]):g}" for n in (*SAMPLERS, *OPERANDS) if n in shares))
    if sum((shares.get(name, 0) for name in LENGTHS), Fraction(0)) > 1:
        raise ValueError(f"{kind}_{op}: equal, short and long are parts of one draw's lengths: they sum to more than 1")
    left, rolls = Fraction(1), []
    for name in SAMPLERS:
        if name in shares:
            rolls.append((name, float(_chance(shares[name], left))))
            left -= shares[name]
    structured = shares.get("structured", Fraction(0))
    unstructured = left - structured
    lengths = tuple(float(shares.get(name, 0)) for name in LENGTHS)
    return Chances(samplers=tuple(rolls), structured=float(_chance(structured, left)),
                   same=float(_chance(shares.get("same", Fraction(0)), unstructured)),
                   near=float(_chance(shares.get("near", Fraction(0)), unstructured)),
                   lengths=lengths if any(lengths) else None,
                   **{name: float(shares.get(name, 0)) for name in
                      ("returns", "structured_long", "nines_long", "top_steps_structured", "longest")})


def fingerprint(adapters: list[tuple[str, str]], mix: Mapping[str, float]) -> str:
    """The mix as a source's fingerprint records it: the shares that apply to any of its adapters."""
    named = [f"{name}={mix[name]}" for name in SHARES
             if mix.get(name) and any(SHARES[name].applies(kind, op) for kind, op in adapters)]
    return f":draws[{','.join(named)}]" if named else ""


def parse(items: list[str] | None) -> dict[str, float]:
    """--share NAME=X (repeatable, or comma-separated) -> {name: X}."""
    mix = {}
    for item in (part for given in items or () for part in given.split(",") if part):
        name, equals, value = item.partition("=")
        try:
            mix[name.strip().replace("-", "_")] = float(value)
        except ValueError:
            raise ValueError(f"--share takes NAME=X, a fraction X, not {item!r}") from None
        if not equals:
            raise ValueError(f"--share takes NAME=X, a fraction X, not {item!r}")
    check(mix)
    return mix


# --------------------------------------------------------------------------- the shares before the mix

# Before the mix an adapter's draws were set by 17 `<name>_share` settings that the draw
# applied one after another, each a chance once those before it were not drawn: `top_steps_share` 0.6
# after `nines_share` 0.15 made 51% of the draws. The manifests of the shipped adapters, and the
# commands recorded in them, hold those settings; `from_sequential` gives the mix that draws the same.
SEQUENTIAL = {"nines_share": "nines", "top_steps_share": "top_steps", "wide_share": "wide",
              "sub_call_share": "sub_calls", "deciding_steps_share": "deciding_steps", "top_run_share": "top_runs",
              "carry_run_share": "carry_runs", "composer_share": "composer_calls", "structured_share": "structured",
              "same_share": "same", "near_share": "near", "equal_share": "equal", "short_share": "short",
              "long_share": "long", "return_share": "returns", "structured_long_share": "structured_long",
              "top_steps_structured_share": "top_steps_structured"}


def from_sequential(kind: str, op: str, settings: Mapping[str, float]) -> dict[str, float]:
    """The mix that draws, for this adapter, what the sequential `<name>_share` settings drew."""
    unknown = sorted(set(settings) - set(SEQUENTIAL))
    if unknown:
        raise ValueError(f"unknown sequential share(s) {', '.join(unknown)}")
    given = {SEQUENTIAL[name]: value for name, value in settings.items()}
    if given.get("long") and given.get("nines"):  # the old long_share also lengthened the nines draws
        given["nines_long"] = given["long"]
    chance = applying(kind, op, given)
    mix, left = {}, Fraction(1)
    for name in SAMPLERS:
        if name in chance:
            mix[name] = chance[name] * left
            left -= mix[name]
    if "structured" in chance:
        mix["structured"] = chance["structured"] * left
    unstructured = left - mix.get("structured", 0)
    # same and near (and the length pools) were one roll each: what was set past 1 was never drawn
    for name, part in _one_roll(chance, ("same", "near")).items():
        mix[name] = part * unstructured
    mix.update(_one_roll(chance, LENGTHS))
    for name in ("returns", "nines_long"):
        if name in chance:
            mix[name] = chance[name]
    if "structured_long" in chance and "structured" in mix:
        mix["structured_long"] = chance["structured_long"]
    if "top_steps_structured" in chance and "top_steps" in mix:
        mix["top_steps_structured"] = chance["top_steps_structured"]
    return {name: float(value) for name, value in mix.items()}


def _one_roll(chance: Mapping[str, Fraction], names: tuple[str, ...]) -> dict[str, Fraction]:
    """The parts of one roll, in order, each cut to what is left of 1."""
    parts, below = {}, Fraction(0)
    for name in names:
        if name in chance:
            parts[name] = min(chance[name], 1 - below)
            below += parts[name]
    return {name: part for name, part in parts.items() if part}


def to_sequential(kind: str, op: str, mix: Mapping[str, float]) -> dict[str, float]:
    """The sequential settings that draw `mix` for this adapter (from_sequential's inverse), so an old
    `--<name>-share` flag can replace one of them. Shares newer than those flags have no setting to
    carry them, so a mix that applies one is refused, not drawn without it."""
    # nines_long is the old long_share's second effect (from_sequential), carried by long_share
    newer = sorted(name for name in applying(kind, op, mix) if name not in {*SEQUENTIAL.values(), "nines_long"})
    if newer:
        raise ValueError(f"{kind}_{op}: its mix has {', '.join(newer)}, which no `--<name>-share` flag sets; "
                         "give the shares as --share NAME=X instead of the old flags")
    rolls = chances(kind, op, mix)
    old = {new: name for name, new in SEQUENTIAL.items()}
    settings = {old[name]: chance for name, chance in rolls.samplers}
    equal, short, long = rolls.lengths or (0.0, 0.0, rolls.nines_long)
    settings.update(structured_share=rolls.structured, same_share=rolls.same, near_share=rolls.near,
                    equal_share=equal, short_share=short, long_share=long, return_share=rolls.returns,
                    structured_long_share=rolls.structured_long, top_steps_structured_share=rolls.top_steps_structured)
    return {name: value for name, value in settings.items() if value}
