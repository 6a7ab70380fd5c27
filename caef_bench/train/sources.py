"""Where training samples come from: a JSONL file set, or a stream drawn from the machines.

Both give batch k as a pure function of (seed, k), so a resumed run sees the
same batches it would have seen without the interruption.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Mapping

from caef_bench.data.direct import direct_prompt
from caef_bench.data.explanations import stage1_preamble
from caef_bench.data.structured import structured_pair
from caef_bench.data.testsets import named_rng, render_expr, solve
from caef_bench.data.training import change_one_digit, classes, draw_operands, expression
from caef_bench.machines import lookup, run
from caef_bench.train import mix as mixes
from caef_bench.train.samplers import LONG, REGISTRY, SHORT


class FileSource:
    """Samples from JSONL files (as written by `caef-bench data build`), drawn with replacement."""

    def __init__(self, paths: list[str | Path], seed: int):
        self.samples = [json.loads(line) for path in paths for line in Path(path).read_text(encoding="utf-8").splitlines()]
        if not self.samples:
            raise ValueError(f"no samples in {', '.join(map(str, paths))}")
        self.seed = seed
        digest = hashlib.sha256()
        for path in sorted(map(str, paths)):
            digest.update(Path(path).read_bytes())
        self.fingerprint = f"files:{digest.hexdigest()[:16]}"

    def batch(self, step: int, size: int) -> list[dict]:
        rng = named_rng(self.seed, f"batch/{step}")
        return [self.samples[rng.randrange(len(self.samples))] for _ in range(size)]


class MachineSource:
    """Transitions drawn from the machines on the fly: unlimited, never stored.

    Each sample picks an (op, kind) from `adapters`; then, with the chances its `mix` gives that
    adapter (train.mix), one of the named samplers (train.samplers), or the protocol's draw: an
    equivalence class of operand lengths up to `max_len` (the protocol's classes), operands, and
    for executors one transition, the first and last with extra weight (`edge_weight`). Stage 1
    prefixes the machine's explanation. With an empty mix every draw is the protocol's.

    The protocol's draw takes a few refinements of the mix: the length pools `equal`, `short` and
    `long` (every test cell has operands of equal length, and a 5-digit addition must get all 6 of
    its steps right, where uniform classes give equal lengths 1% of the draws and 5-digit pairs
    0.25%), the operand kinds `structured`, `same` and `near` (the comparisons decide at the step
    after a run of equal digits, which random operands hardly hold), and `returns` (a composer's
    steps that read a callee's halt state, where it copies the callee's result).
    """

    def __init__(self, adapters: list[tuple[str, str]], max_len: int, seed: int, stage: int = 2,
                 edge_weight: float = 0.25, excluded: frozenset[str] = frozenset(), curriculum_steps: int = 0,
                 mix: Mapping[str, float] | None = None):
        self.adapters, self.max_len, self.seed, self.stage = adapters, max_len, seed, stage
        self.edge_weight, self.excluded, self.curriculum_steps = edge_weight, excluded, curriculum_steps
        self.mix = dict(mix or {})
        self._chances = {adapter: mixes.chances(*adapter, self.mix) for adapter in adapters}
        # (op, longest, pool) -> classes: filtering 10,000 classes per sample dominated the sampling time
        self._allowed: dict[tuple[str, int | None, str], list] = {}
        self.fingerprint = (f"machines:{adapters}:{max_len}:{stage}:{edge_weight}:{curriculum_steps}"
                            + mixes.fingerprint(adapters, self.mix))
        if any(op == "left_mask" for _, op in adapters):
            self.fingerprint += ":left_mask_tail3"  # its samples lean on the last steps (see _protocol_draw)

    def longest(self, step: int) -> int:
        """Curriculum: the longest operand allowed at a step, from 8 digits up to max_len over curriculum_steps.

        Short traces teach the format and the copying many times faster per second of training."""
        if not self.curriculum_steps or step >= self.curriculum_steps:
            return self.max_len
        return min(self.max_len, 8 + (self.max_len - 8) * step // self.curriculum_steps)

    def batch(self, step: int, size: int) -> list[dict]:
        rng = named_rng(self.seed, f"batch/{step}")
        longest = self.longest(step)
        return [self.sample(rng, longest) for _ in range(size)]

    def classes(self, op: str, longest: int | None, pool: str = "all") -> list:
        """op's classes within the curriculum's longest operand (mul and div have their own), of a pool."""
        allowed = self._allowed.get((op, longest, pool))
        if allowed is None:
            # (DIGIT_MUL's class is (digits of a, the digit): its a grows with the curriculum)
            allowed = [c for c in classes(op, self.max_len) if longest is None or op in ("mul", "div")
                       or (c[0] if op == "digit_mul" else max(c)) <= longest]
            if pool == "equal":
                allowed = [c for c in allowed if c[0] == c[1]]
            elif pool == "short":
                allowed = [c for c in allowed if max(c) <= SHORT]
            elif pool == "long":
                allowed = [c for c in allowed if max(c) > LONG] or allowed  # (a curriculum below LONG: all)
            elif pool == "longest":  # two operands of the longest length allowed
                top = max(max(c) for c in allowed)
                allowed = [c for c in allowed if c == (top, top)] or allowed
            elif pool == "equal_long":  # two operands of one length above LONG (LEFT_MASK's one operand)
                allowed = ([c for c in allowed if c[0] == c[1] and c[0] > LONG]
                           or [c for c in allowed if max(c) > LONG] or allowed)
            self._allowed[(op, longest, pool)] = allowed
        return allowed

    @staticmethod
    def pool(rng: random.Random, chances) -> str:
        """The pool of length classes a draw takes (longest, equal, short, long or all), rolled on the mix's
        shares (longest first: no roll is made without it, so the draws of mixes before it are unchanged)."""
        if chances.longest and rng.random() < chances.longest:
            return "longest"
        if chances.lengths:
            roll, below = rng.random(), 0.0
            for name, share in zip(mixes.LENGTHS, chances.lengths):
                below += share
                if roll < below:
                    return name
        return "all"

    def transition(self, op: str, machine_run, step: int, meta: dict) -> dict:
        """One transition of a run of op's machine as a sample; a stage-1 prompt opens with the
        machine's explanation. meta gets the step (where it already names one, in its place)."""
        source, target = machine_run.transition(step)
        if self.stage == 1:
            source = stage1_preamble(lookup(op).machine) + source
        return {"prompt": source, "completion": target, "meta": {**meta, "step": step}}

    @staticmethod
    def aligner_sample(op: str, a: int, b: int, machine_run, rng: random.Random, meta: dict) -> dict:
        """An aligner's sample on (a, b): half the start state from the expression (aligner (I)), half the
        expression and its answer from the halt state (aligner (O)). (long_mul's and long_div's expressions are
        mul's and div's: `a*b=`, `a//b=`.)"""
        if rng.random() < 0.5:
            return {"prompt": expression(op, a, b), "completion": machine_run.start_text(), "meta": meta}
        return {"prompt": machine_run.text(-1), "completion": expression(op, a, b) + solve(op, a, b), "meta": meta}

    def edge_step(self, rng: random.Random, last: int) -> int:
        """An executor's step of a run of last + 1 transitions: the first or the last with extra weight."""
        roll = rng.random()
        return 0 if roll < self.edge_weight / 2 else last if roll < self.edge_weight else rng.randint(0, last)

    def sample(self, rng: random.Random, longest: int | None = None) -> dict:
        kind, op = self.adapters[rng.randrange(len(self.adapters))]
        chances = self._chances[(kind, op)]
        for name, chance in chances.samplers:
            if rng.random() < chance:
                return REGISTRY[name](self, kind, op, rng, longest, chances)
        return self._protocol_draw(kind, op, rng, longest, chances)

    def _protocol_draw(self, kind: str, op: str, rng: random.Random, longest: int | None, chances) -> dict:
        """The protocol's draw (a length class, operands, a step), on the operand kind the mix rolls."""
        returns = chances.returns and rng.random() < chances.returns
        allowed = self.classes(op, longest, self.pool(rng, chances))
        pair, changed = "random", None
        if chances.structured and rng.random() < chances.structured:
            pair = "structured"
            # The 50- and 100-digit repeated cells pair two operands of one length; aligners trained
            # with structured draws of any lengths still miscopied exactly those.
            if chances.structured_long and rng.random() < chances.structured_long:
                allowed = self.classes(op, longest, "equal_long")
        elif chances.same or chances.near:
            roll = rng.random()
            pair = "same" if roll < chances.same else "near" if roll < chances.same + chances.near else "random"
        while True:
            cls = rng.choice(allowed)
            if pair == "structured":
                structured_kind, (a, b) = structured_pair(rng, op, cls)
            elif pair == "random":
                a, b = draw_operands(op, cls, rng, equal=op == "eq" and rng.random() < 0.25)
            else:
                a, _ = draw_operands(op, (cls[0], cls[0]), rng)
                b, changed = (a, None) if pair == "same" else change_one_digit(a, rng)
                if op == "sub":  # a difference with leading zeros, not a deciding step
                    a, b, changed = max(a, b), min(a, b), None
            if expression(op, a, b) not in self.excluded:
                break
        machine_run = run(op, a, b) if kind != "direct" else None
        meta = {"kind": kind, "op": op, "a": str(a), "b": None if b is None else str(b)}
        if pair == "structured":
            meta["structured"] = structured_kind
        if kind == "direct":
            return {"prompt": direct_prompt(render_expr(op, a, b), op), "completion": solve(op, a, b), "meta": meta}
        if kind == "aligner":
            return self.aligner_sample(op, a, b, machine_run, rng, meta)
        last = len(machine_run) - 1
        step = self.edge_step(rng, last)
        if changed is not None and rng.random() < 0.5:
            step = changed  # the transition that first compares the changed digit
        calls = [call_step for call_step, _ in machine_run.calls()] if returns else []  # each reads its halt
        if calls:
            step = rng.choice(calls)
            meta["returns"] = True
        if op == "left_mask" and rng.random() < 0.5:
            a, machine_run, step = _left_mask_tail(rng, a, machine_run, meta)
        return self.transition(op, machine_run, step, meta)


def _left_mask_tail(rng: random.Random, a: int, machine_run, meta: dict):
    """Half of left_mask's samples come from its last steps: erasing the carried 1 and then each
    leading zero. One step of an n-step trace, they are rarely drawn otherwise."""
    length = len(str(a))
    last = len(machine_run) - 1
    if length > 1 and rng.random() < 0.5:
        # The step that erases the 1 and decides from the cell below it whether to go on erasing:
        # below it a zero half the time (to be erased), else a non-zero digit (halt), so that neither
        # answer outnumbers the other.
        zeros = rng.randint(1, length - 1) if rng.random() < 0.5 else 0
        rest = rng.randrange(10 ** (length - 1 - zeros)) if zeros else rng.randrange(10 ** (length - 2), 10 ** (length - 1))
        a = 10 ** (length - 1) + rest
        machine_run, meta["a"] = run("left_mask", a, None), str(a)
        return a, machine_run, len(machine_run) - 1 - _zeros_below_top(a) - 1
    return a, machine_run, rng.randint(max(0, last - _zeros_below_top(a) - 2), last)


def _zeros_below_top(a: int) -> int:
    """The zeros left_mask erases after a's top digit (all of them when the rest is 0: 1000 -> 3)."""
    rest = str(a)[1:]
    return len(rest) - len(rest.lstrip("0"))


class DirectSource:
    """LoRA-direct samples drawn as the test protocol draws its problems (data.direct.DirectDraw),
    the committed test sets' problems held out; batch k is a pure function of (seed, k)."""

    def __init__(self, op: str, draw: str, seed: int, max_len: int = 100):
        from caef_bench.data.direct import MAX_DIGITS, DirectDraw
        from caef_bench.data.testsets import test_expressions

        self.op, self.draw, self.seed = op, DirectDraw(draw, min(max_len, MAX_DIGITS)), seed
        self.excluded = test_expressions()
        self.fingerprint = f"direct:{op}:{draw}:held_out_test_sets"
        if max_len < MAX_DIGITS:  # (the full range's fingerprint stays as it was)
            self.fingerprint += f":max_len={max_len}"

    def batch(self, step: int, size: int) -> list[dict]:
        rng = named_rng(self.seed, f"batch/{step}")
        return [self.draw.sample(self.op, rng, self.excluded) for _ in range(size)]
