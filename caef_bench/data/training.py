"""Training data: executor transitions, aligner conversions and LoRA-direct answers.

Expressions are drawn per equivalence class — (len(a), len(b)) for the
length-driven operators, (len(a), b) for mul and (len(b), quotient) for div,
within the protocol's ranges — N per class, from a random stream that depends
only on (seed, kind, op, class). Problems that appear in the committed test
sets are never drawn.

Schoolbook multiplication and long division (the long route; docs/long-mul-div.md) have classes of
their own, at the lengths of their test cells: long_mul (len(a), len(b)) up to 50 x 50 digits,
long_div (len(a), len(b)) up to 100 digits over 20, DIGIT_MUL (len(a), the digit) up to 50 digits
(LONG_MUL's a) times 1-9. Their aligners write and read the protocol's `a*b=` and `a//b=`.

From each trace the first and last transitions are always kept, plus a few random middle ones.

Stage 2 samples are the bare transition; stage 1 samples (the first few
expressions of each class) prefix the machine's explanation and one worked
example (caef_bench.data.explanations).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from caef_bench.data.direct import direct_samples
from caef_bench.data.explanations import EXPLANATIONS, stage1_preamble
from caef_bench.data.structured import replace_digit
from caef_bench.data.testsets import DEFAULT_DATA_DIR, named_rng, render_expr, solve, test_expressions
from caef_bench.machines import ALIGNED_OPS, EXECUTOR_OPS, LONG_ALIGNED_OPS, expression_op, lookup, run
from caef_bench.machines.text import split_units

KINDS = ("executor", "aligner", "direct")
MUL_DIV_DIGITS = range(1, 11)  # protocol: mul's a and div's divisor have 1-10 digits
MUL_DIV_SMALL = range(1, 16)  # protocol: mul's b and div's quotient are in [1, 15]
LONG_MUL_DIGITS = 50  # long_mul: a and b of 1-50 digits (the mul_50x50 test cell); DIGIT_MUL's a as LONG_MUL's
LONG_DIV_DIGITS = 100  # long_div: a of 1-100 digits (div_100by10) ...
LONG_DIV_DIVISOR_DIGITS = 20  # ... over a divisor of 1-20 (div_40by20); a shorter a than b: a quotient of 0
BALANCE_BOOST = 10  # with --balance a class of width w gets ceil(10 / w) times the expressions
_JSON = json.JSONEncoder(ensure_ascii=False, check_circular=False)
UNITS_EVERY = 10  # length statistics read every 10th sample: splitting every text would double the build time


@dataclass(frozen=True)
class BuildConfig:
    max_len: int = 100
    per_class: int = 20
    middle: int = 3  # random middle transitions kept per trace, besides the first and the last
    balance: bool = False  # more expressions for short operands
    stage1_per_class: int = 1  # expressions per class that also give stage-1 samples
    seed: int = 0
    ops: tuple[str, ...] = EXECUTOR_OPS
    kinds: tuple[str, ...] = KINDS
    exclude_test_sets: bool = True


@dataclass
class FileSummary:
    samples: int = 0
    expressions: int = 0
    prompt_units: list[int] = field(default_factory=list)
    completion_units: list[int] = field(default_factory=list)

    def as_dict(self) -> dict:
        def stats(values):
            return {"mean": round(sum(values) / len(values), 1), "max": max(values)} if values else None

        return {"samples": self.samples, "expressions": self.expressions,
                "prompt_units": stats(self.prompt_units), "completion_units": stats(self.completion_units)}


# --------------------------------------------------------------------------- classes and operands


def classes(op: str, max_len: int) -> list[tuple[int, int]]:
    """The equivalence classes of an operator's expressions."""
    lengths = range(1, max_len + 1)
    if op in ("mul", "div"):
        return [(digits, small) for digits in MUL_DIV_DIGITS for small in MUL_DIV_SMALL]
    if op == "digit_mul":  # (digits of a, the digit); LONG_MUL never calls it with 0
        return [(la, d) for la in range(1, min(LONG_MUL_DIGITS, max_len) + 1) for d in range(1, 10)]
    if op == "long_mul":
        sides = range(1, min(LONG_MUL_DIGITS, max_len) + 1)
        return [(la, lb) for la in sides for lb in sides]
    if op == "long_div":
        return [(la, lb) for la in range(1, min(LONG_DIV_DIGITS, max_len) + 1)
                for lb in range(1, min(LONG_DIV_DIVISOR_DIGITS, max_len) + 1)]
    if op == "left_mask":  # one operand; in SUB it masks a sum of 2..max_len+1 digits
        return [(n, 0) for n in range(1, max_len + 2)]
    if op in ("sub", "reflection"):
        return [(la, lb) for la in lengths for lb in range(1, la + 1)]
    return [(la, lb) for la in lengths for lb in lengths]


def class_size(op: str, cls: tuple[int, int], config: BuildConfig) -> int:
    size = config.per_class
    if config.balance and op not in ("mul", "div"):
        size *= math.ceil(BALANCE_BOOST / max(cls))
        size = min(size, 10 ** sum(cls))  # no more than there are distinct problems
    return size


def random_number(rng: random.Random, n: int) -> int:
    """A uniformly random number of n digits (0-9 for one)."""
    return rng.randrange(10 ** (n - 1) if n > 1 else 0, 10**n)


def draw_operands(op: str, cls: tuple[int, int], rng: random.Random, equal: bool = False) -> tuple[int, int | None]:
    la, lb = cls
    if op in ("mul", "digit_mul"):
        return random_number(rng, la), lb
    if op == "div":
        divisor = max(1, random_number(rng, la))
        return divisor * lb + rng.randrange(divisor), divisor
    if op == "left_mask":
        # Half in SUB's shape (a 1 over the difference's digits), half any number. Of SUB's shape,
        # half has a run of leading zeros to erase (a difference shorter than its operands: common
        # in SUB, yet drawn by chance only 1 time in 10 per zero).
        roll = rng.random()
        if roll >= 0.5 or la == 1:
            return (random_number(rng, la) if roll >= 0.5 else 1), None
        zeros = rng.randint(1, la - 1) if roll < 0.25 else 0
        return 10 ** (la - 1) + rng.randrange(10 ** (la - 1 - zeros)), None
    if op == "reflection":
        return 10**la - 1, random_number(rng, lb)
    if op == "long_div":
        a = random_number(rng, la)
        return (a, a) if equal else (a, max(1, random_number(rng, lb)))
    a = random_number(rng, la)
    if equal:
        return a, a
    b = random_number(rng, lb)
    if op == "sub" and a < b:  # same length: keep the result non-negative
        a, b = b, a
    return a, b


def change_one_digit(a: int, rng: random.Random) -> tuple[int, int]:
    """a with one digit replaced by another (never a leading zero); returns (b, k), k counted from the right."""
    digits = str(a)
    k = rng.randrange(len(digits))
    return int(replace_digit(rng, digits, len(digits) - 1 - k)), k


def nines_on_top(rng: random.Random, length: int, few_share: float = 0.0) -> tuple[int, int]:
    """A subtraction a - b (a >= b, both `length` digits) whose b has a run of 9s on top.

    REFLECTION's complement 9…9 - b then has as many leading zeros, which it drops one q2 step
    each, and SUB's first ADD gets a shorter second operand. Random pairs hold this about one
    time in a hundred (b's top digit 9 needs a's too), so training and the one-step check draw
    it on purpose; a == b one time in five.

    The run's length is uniform over 1..length, except that a share `few_share` has one or two 9s:
    in random pairs nine runs in ten are a single 9, which a uniform draw of a 100-digit run gives
    one time in a hundred.
    """
    few = few_share and rng.random() < few_share  # (drawn only with a share: other streams stay as they were)
    nines = rng.randint(1, min(2, length)) if few else rng.randint(1, length)
    b = int("9" * nines + "".join(str(rng.randrange(10)) for _ in range(length - nines)))
    a = b if rng.random() < 0.2 else rng.randint(b, 10**length - 1)
    return a, b


def expression(op: str, a, b) -> str | None:
    """The protocol's expression that op's aligner reads (long_mul's is mul's `a*b=`), or None for an
    auxiliary machine (reflection, left_mask, digit_mul), which no expression names."""
    return render_expr(expression_op(op), a, b) if lookup(op).symbol else None


def _excluded_expressions() -> set[str]:
    if not DEFAULT_DATA_DIR.is_dir():
        return set()
    return set(test_expressions())


def problems_for(op: str, cls: tuple[int, int], config: BuildConfig, kind: str, excluded: set[str]) -> list[tuple[int, int | None]]:
    """The class's expressions, deterministic in (seed, kind, op, class); test-set problems skipped."""
    rng = named_rng(config.seed, f"train/{kind}/{op}/{cls[0]}/{cls[1]}")
    wanted = class_size(op, cls, config)
    # Extra equal pairs for eq, so that True is not rare among equal-length operands.
    equal_flags = [False] * wanted + ([True] * wanted if op == "eq" and cls[0] == cls[1] else [])
    problems = []
    for equal in equal_flags:
        for _ in range(100):
            a, b = draw_operands(op, cls, rng, equal)
            if expression(op, a, b) not in excluded:
                break
        problems.append((a, b))
    return problems


def kept_steps(n_transitions: int, middle: int, rng: random.Random) -> list[int]:
    """First and last transitions always, plus up to `middle` distinct random ones between them."""
    inner = range(1, n_transitions - 1)
    picks = rng.sample(inner, min(middle, len(inner)))
    return sorted({0, n_transitions - 1, *picks})


# --------------------------------------------------------------------------- samples


def executor_samples(op: str, cls, problems, config: BuildConfig) -> Iterator[tuple[int, dict]]:
    """(stage, sample) for the kept transitions of each problem's trace."""
    machine = lookup(op).machine
    rng = named_rng(config.seed, f"train/steps/{op}/{cls[0]}/{cls[1]}")
    for index, (a, b) in enumerate(problems):
        machine_run = run(op, a, b)
        for step in kept_steps(len(machine_run), config.middle, rng):
            source, target = machine_run.transition(step)
            meta = {"kind": "executor", "op": op, "machine": machine, "a": str(a), "b": None if b is None else str(b),
                    "step": step, "steps": len(machine_run), "class": list(cls), "problem": index}
            yield 2, {"prompt": source, "completion": target, "meta": meta}
            if index < config.stage1_per_class and machine in EXPLANATIONS:  # (none for the long route's yet)
                yield 1, {"prompt": stage1_preamble(machine) + source, "completion": target, "meta": {**meta, "stage": 1}}


def aligner_samples(op: str, cls, problems) -> Iterator[tuple[int, dict]]:
    """Both directions: expression -> start text, and halt text -> expression with its result."""
    for a, b in problems:
        expr = expression(op, a, b)
        machine_run = run(op, a, b)
        meta = {"op": op, "a": str(a), "b": str(b), "class": list(cls)}
        yield 2, {"prompt": expr, "completion": machine_run.start_text(), "meta": {"kind": "aligner_input", **meta}}
        yield 2, {"prompt": machine_run.text(-1), "completion": expr + solve(op, a, b),
                  "meta": {"kind": "aligner_output", **meta}}


def baseline_samples(op: str, cls, problems) -> Iterator[tuple[int, dict]]:
    records = [{"op": op, "a": str(a), "b": str(b), "expr": render_expr(op, a, b), "answer": solve(op, a, b)}
               for a, b in problems]
    for sample in direct_samples(records):
        sample["meta"] = {"kind": "direct", **sample["meta"], "class": list(cls)}
        yield 2, sample


# --------------------------------------------------------------------------- writing


def build(out_dir: str | Path, config: BuildConfig = BuildConfig(), progress: bool = True) -> dict:
    """Write <kind>_<op>[.stage1].jsonl files and summary.json; return the summary."""
    from tqdm import tqdm

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    excluded = _excluded_expressions() if config.exclude_test_sets else set()
    generators = {"executor": lambda op, cls, ps: executor_samples(op, cls, ps, config),
                  "aligner": aligner_samples, "direct": baseline_samples}
    files: dict[str, FileSummary] = {}
    digests: dict[str, str] = {}
    for kind in config.kinds:
        ops = [op for op in config.ops
               if kind == "executor" or op in ALIGNED_OPS or (kind == "aligner" and op in LONG_ALIGNED_OPS)]
        for op in ops:
            names = {2: f"{kind}_{op}.jsonl", 1: f"{kind}_{op}.stage1.jsonl"}
            handles, hashes = {}, {}
            try:
                for cls in tqdm(classes(op, config.max_len), desc=f"{kind} {op}", unit="class", disable=not progress, leave=False):
                    problems = problems_for(op, cls, config, kind, excluded)
                    for stage, sample in generators[kind](op, cls, problems):
                        name = names[stage]
                        if name not in handles:
                            handles[name] = open(out / name, "wb")
                            hashes[name] = hashlib.sha256()
                        line = (_JSON.encode(sample) + "\n").encode()
                        handles[name].write(line)
                        hashes[name].update(line)
                        summary = files.setdefault(name, FileSummary())
                        if summary.samples % UNITS_EVERY == 0:
                            summary.prompt_units.append(len(split_units(sample["prompt"])))
                            summary.completion_units.append(len(split_units(sample["completion"])))
                        summary.samples += 1
                    files.setdefault(names[2], FileSummary()).expressions += len(problems)
                    if names[1] in files:
                        files[names[1]].expressions += min(config.stage1_per_class, len(problems))
            finally:
                for handle in handles.values():
                    handle.close()
            digests.update({name: h.hexdigest() for name, h in hashes.items()})
    summary = {"config": asdict(config), "files": {n: {**s.as_dict(), "sha256": digests.get(n)} for n, s in sorted(files.items())}}
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    return summary


def format_summary(summary: dict) -> str:
    lines = [f"{'file':<34} {'samples':>9} {'exprs':>7} {'prompt units':>14} {'completion units':>17}"]
    for name, s in summary["files"].items():
        prompt, completion = s["prompt_units"], s["completion_units"]
        lines.append(f"{name:<34} {s['samples']:>9,} {s['expressions']:>7,} "
                     f"{prompt['mean']:>7} / {prompt['max']:<5} {completion['mean']:>8} / {completion['max']:<6}")
    lines.append(f"units (mean / max over every {UNITS_EVERY}th sample): digit cells, markers, keywords and "
                 "single characters, as split by caef_bench.machines.text.split_units")
    return "\n".join(lines)
