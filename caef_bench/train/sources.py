"""Where training samples come from: a JSONL file set, or a stream drawn from the machines.

Both give batch k as a pure function of (seed, k), so a resumed run sees the
same batches it would have seen without the interruption.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

from caef_bench.data.direct import direct_prompt
from caef_bench.data.explanations import stage1_preamble
from caef_bench.data.structured import replace_digit, structured_pair
from caef_bench.data.testsets import named_rng, render_expr, solve
from caef_bench.data.training import change_one_digit, classes, draw_operands, nines_on_top
from caef_bench.machines import COMPARISON, OPERATIONS, run
from caef_bench.machines.text import COMPOSERS


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

    Each sample picks an (op, kind) from `adapters`, an equivalence class of
    operand lengths up to `max_len` (the protocol's classes), operands, and for
    executors one transition (first and last ones get extra weight, as in the
    protocol's sampling). Stage 1 prefixes the machine's explanation.

    Classes are drawn uniformly, except that a share `equal_share` of the
    samples of two-operand machines come from classes of equal lengths, a
    share `short_share` from classes of at most SHORT digits, and a share
    `long_share` from classes whose longer operand has more than LONG digits
    (of the nines draws too): a 100-digit run needs about 99.99% per step, and
    a step that one-step checks (uniform over traces) find 100% right can still
    fail one 100-digit run in fifty. Uniform over
    10,000 (len a, len b) pairs, equal lengths are 1% of the data and pairs of
    5-digit operands 0.25%, yet every test cell has operands of equal length
    (the protocol's), and a 5-digit addition must get every one of its 6 steps
    right: equal lengths end both tapes at once, a step the uniform mixture
    hardly shows.

    The comparisons (gt, lt, eq) decide at each step from the digit pair under
    the heads, and random operands differ in their first digit 9 times in 10:
    the step after a run of equal digits is rare in random draws. A share
    `same_share` of their samples has a == b, and a share `near_share` has
    b = a with one digit changed; of those,
    half are the transition that first compares the changed digit (step k for
    the k-th digit from the right: the command of a comparison's next state
    is decided by the pair its heads have just moved onto).

    A share `composer_share` of the samples of a machine that composers call
    (add, gt) are transitions of those very calls, from a composer run on
    random operands (CALLERS). Their operands are rare in random draws: MUL's
    first call adds a to itself, SUB's last adds 1 to a long sum, DIV compares
    a remainder with the divisor.

    A share `nines_share` of the samples of reflection, sub and add come from
    subtractions whose b has 9s on top (`nines_on_top`): REFLECTION's result
    then has leading zeros, dropped one q2 step each, and SUB's first ADD gets a
    shorter b. About 1 random subtraction in 100 does this, and only at its q2
    tail, so the draws take the steps that carry the zeros: REFLECTION from the
    step whose next state commands q2 on (a third of them instead the same steps
    of a complement whose top digit is not zero, to be kept; q2 steps that drop
    and that halt about evenly), SUB's steps that read the REFLECTION and
    first ADD halts, any step of that first ADD. (The step that writes `CMD q2`
    was left out at first: 100-digit runs then went on past it, `CMD q2, q1`.)
    Half the runs of 9s are one or two long, as most are in random pairs: drawn
    uniformly, a 100-digit REFLECTION almost never dropped a single zero, and then
    halted on it one time in twelve.

    A share `return_share` of a composer's samples (sub, mul, div) are the steps
    that read a callee's halt state (its calls: `ComposerRun.calls`): the
    composer copies its own tapes and the callee's result into its next state
    and the next call's start. Retrained on CPU-sized budgets, SUB's only misses
    were there. Four of a SUB run's five steps are such steps, but the edge
    weighting gives its first step (before any call) 30% of the draws; at 0.5
    that falls to 15%.

    A share `structured_share` of the samples draw their operands from the structured samplers
    (`data.structured`: runs of one digit, periodic patterns, round numbers, a run then random
    digits, equal operands, one digit apart, b = 0 or 1) in the class's lengths. Random digits hold
    such operands almost never, and a model trained on them alone may find a cell by its
    neighbours' content, which a run of equal digits no longer tells apart
    (docs/structured-operands.md). A share `structured_long_share` of those draw two operands of one
    length above 50 digits (LEFT_MASK: one operand that long), as the repeated-digit cells hold them.

    A share `wide_share` of the samples of add and left_mask are transitions of SUB's calls on two
    operands of one length above 90 digits (WIDE): the sum a + reflection(b) then has 101 digits,
    one more than any operand drawn, and SUB adds 1 to it and LEFT_MASK erases its top digit. Those
    are the only fields of 101 cells a run holds, and LEFT_MASK (42) and ADD (18) were where 60 of
    round 2's 69 wrong subtractions first went wrong: LEFT_MASK's halting step wrote its head after
    the first of them, ADD's halting steps were malformed (docs/structured-operands.md). Half of the
    draws are the call's first or last step, where the head sits on the top cell; half of the
    operand pairs are structured.

    A share `sub_call_share` of the samples of add and left_mask are transitions of SUB's calls on
    two operands of one length above 50 digits (LONG), where round 2c still failed: ADD's halting
    steps on sums of repeated digits at 50 and 100 digits, LEFT_MASK erasing 10^50 when a == b.
    Half of the pairs are structured, a tenth are equal; 40% of the draws are one of the call's
    last three steps and 20% its first; a quarter of add's are ADD's own run on the pair (the
    100-digit add cells end on the same halting step).

    A share `carry_run_share` of add's samples carry through a run of 11-100 9s into the digit above it,
    b mostly 1: SUB's adding of 1 to a + reflection(b) on round and one-digit operands. Round 2f's
    adds kept `[C] 1` past the run's end (rep_sub_50_round 5 of 50, step 158); a uniform step of such a
    run is the one where the carry stops once in 50-100 draws.

    A share `top_steps_share` of add's samples are one of the last TOP_STEPS steps of ADD on two random
    operands of one length above 90 digits (half of them 100): half ADD's own run (add_100), half SUB's first call
    (a + reflection(b), a sum of 101 digits). Round 2f's add_100 and sub_100 failures, and round 2h's
    remaining ones, are all there: a carry or a digit read wrong at the heads' cell 3-6 cells below the
    top (`benchmarks/diagnosis/long_sum_tops.py`), a step a uniform draw of a 100-digit run reaches
    once in ~100 draws, and only where the operands are that long. A share `top_steps_structured_share`
    of those draws are on two structured operands of that length (runs of one digit, round numbers,
    ...), half of them at any step of the run: round 2j's add, drawn on random operands only, mended
    the random tops and lost 100-digit runs of one digit (rep_add_100_p1 45/50, round 2h's 47). With
    that share on, SUB's draws take either of its ADD calls (the second adds 1 to the 101-digit sum):
    held out, 100-digit runs of one digit broke at that call's top steps (long_sum_tops.py --last 0).

    A share `deciding_steps_share` of gt's and lt's samples are one of the last DECIDING_STEPS steps
    of their run on two random operands of one length above WIDE_ABOVE digits (half of them 100): the
    step that reads the top digit pair, which decides nearly every such comparison, then the halt
    (EQUAL halts at the first digits that differ, so its random runs are short and need no such
    draw). Rebuild 2's executor_lt, right on every held-out step of runs of one digit, answered False
    for 1 < 9 at the top of 100-digit operands (lt_100 196/200; 16 of 20 such pairs held out): a
    uniform step of a random 100-digit comparison is that pair's top step once in ~8,000 draws.

    A share `top_run_share` of the comparisons' samples are runs of one digit below a different
    top digit (`9777…7`, 11-100 digits), the other operand equal or one digit apart; half of them
    the run's last three steps. Round 2c's executor_eq wrote the run's digit for the top one when
    its heads reached it (rep_eq_100_p1, 2 of 5): structured draws hold that operand pair at that
    step a few times in a million samples.
    """

    SHORT = 10
    LONG = 50
    # Machines that get equal and one-digit-apart pairs. For sub such a pair has a difference
    # with leading zeros (all zeros when equal), which left_mask erases and SUB must return as
    # they are: random pairs hardly ever have any.
    PAIRED = COMPARISON + ("sub",)
    CALLERS = {"add": ("sub", "mul"), "gt": ("div",)}
    NINES = ("reflection", "sub", "add")  # the executors whose texts carry REFLECTION's dropped zeros
    FEW_NINES = 0.5  # nines draws with a run of one or two 9s (data.training.nines_on_top)
    WIDE = ("add", "left_mask")  # the callees of SUB whose fields reach max_len + 1 cells
    WIDE_ABOVE = 90  # the operands' length in the wide draws: above this, up to max_len
    SUB_CALL_EQUAL = 0.1  # sub-call draws with a == b: LEFT_MASK erases a whole field of zeros
    SUB_CALL_PLAIN_ADD = 0.25  # add's sub-call draws that are ADD's own run on the pair
    TOP_STEPS = 12  # the top-steps draws: one of the run's last this many steps
    DECIDING_STEPS = 3  # a comparison's: the top pair's step, the one writing the answer, the halt
    DECIDED_AT_TOP = ("gt", "lt")  # the comparisons that read every digit pair up to the top one

    def __init__(self, adapters: list[tuple[str, str]], max_len: int, seed: int, stage: int = 2,
                 edge_weight: float = 0.25, excluded: frozenset[str] = frozenset(), curriculum_steps: int = 0,
                 equal_share: float = 0.0, short_share: float = 0.0, same_share: float = 0.0, near_share: float = 0.0,
                 composer_share: float = 0.0, nines_share: float = 0.0, return_share: float = 0.0,
                 long_share: float = 0.0, structured_share: float = 0.0, structured_long_share: float = 0.0,
                 wide_share: float = 0.0, sub_call_share: float = 0.0, top_run_share: float = 0.0,
                 carry_run_share: float = 0.0, top_steps_share: float = 0.0, top_steps_structured_share: float = 0.0,
                 deciding_steps_share: float = 0.0):
        self.adapters, self.max_len, self.seed, self.stage = adapters, max_len, seed, stage
        self.edge_weight, self.excluded, self.curriculum_steps = edge_weight, excluded, curriculum_steps
        self.equal_share, self.short_share, self.long_share = equal_share, short_share, long_share
        self.same_share, self.near_share, self.composer_share = same_share, near_share, composer_share
        self.nines_share, self.return_share, self.structured_share = nines_share, return_share, structured_share
        self.structured_long_share, self.wide_share = structured_long_share, wide_share
        self.sub_call_share, self.top_run_share = sub_call_share, top_run_share
        self.carry_run_share, self.top_steps_share = carry_run_share, top_steps_share
        self.top_steps_structured_share = top_steps_structured_share
        self.deciding_steps_share = deciding_steps_share
        # (op, longest, pool) -> classes: filtering 10,000 classes per sample dominated the sampling time
        self._allowed: dict[tuple[str, int | None, str], list] = {}
        self.fingerprint = f"machines:{adapters}:{max_len}:{stage}:{edge_weight}:{curriculum_steps}"
        if equal_share or short_share:  # (older fingerprints stay as they were)
            self.fingerprint += f":equal={equal_share}:short={short_share}"
        if long_share:
            self.fingerprint += f":long={long_share}"
        if same_share or near_share:
            self.fingerprint += f":same={same_share}:near={near_share}"
            if any(op == "sub" for _, op in adapters):
                self.fingerprint += ":sub_pairs"
        if composer_share:
            self.fingerprint += f":composer={composer_share}"
        if nines_share and any(op in self.NINES for _, op in adapters):
            self.fingerprint += f":nines={nines_share}:kept_tops:q2_command:few_nines"
        if return_share and any(OPERATIONS[op].machine in COMPOSERS for _, op in adapters):
            self.fingerprint += f":returns={return_share}"
        if structured_share:
            self.fingerprint += f":structured={structured_share}"
            if structured_long_share:
                self.fingerprint += f":structured_long={structured_long_share}"
        if wide_share and any(op in self.WIDE for _, op in adapters):
            self.fingerprint += f":wide={wide_share}"
        if sub_call_share and any(op in self.WIDE for _, op in adapters):
            self.fingerprint += f":sub_calls={sub_call_share}"
        if top_run_share and any(op in COMPARISON for _, op in adapters):
            self.fingerprint += f":top_runs={top_run_share}"
        if carry_run_share and any(op == "add" for _, op in adapters):
            self.fingerprint += f":carry_runs={carry_run_share}:carry_top_not_0"
        if top_steps_share and any(op == "add" for _, op in adapters):
            self.fingerprint += f":top_steps={top_steps_share}"
            if top_steps_structured_share:
                self.fingerprint += f":top_steps_structured={top_steps_structured_share}:both_sub_calls"
        if deciding_steps_share and any(op in self.DECIDED_AT_TOP for _, op in adapters):
            self.fingerprint += f":deciding_steps={deciding_steps_share}"
        if any(op == "left_mask" for _, op in adapters):
            self.fingerprint += ":left_mask_tail3"  # its samples lean on the last steps (see sample)

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

    def _classes(self, op: str, longest: int | None, pool: str = "all") -> list:
        """op's classes within the curriculum's longest operand (mul and div have their own), of a pool."""
        allowed = self._allowed.get((op, longest, pool))
        if allowed is None:
            allowed = [c for c in classes(op, self.max_len) if longest is None or op in ("mul", "div") or max(c) <= longest]
            if pool == "equal":
                allowed = [c for c in allowed if c[0] == c[1]]
            elif pool == "short":
                allowed = [c for c in allowed if max(c) <= self.SHORT]
            elif pool == "long":
                allowed = [c for c in allowed if max(c) > self.LONG] or allowed  # (a curriculum below LONG: all)
            elif pool == "equal_long":  # two operands of one length above LONG (LEFT_MASK's one operand)
                allowed = ([c for c in allowed if c[0] == c[1] and c[0] > self.LONG]
                           or [c for c in allowed if max(c) > self.LONG] or allowed)
            self._allowed[(op, longest, pool)] = allowed
        return allowed

    def _call_sample(self, op: str, rng: random.Random, longest: int | None) -> dict:
        """A transition of one of `op`'s calls inside a composer run (see the class docstring)."""
        composer = rng.choice(self.CALLERS[op])
        allowed = self._classes(composer, longest)
        while True:
            a, b = draw_operands(composer, rng.choice(allowed), rng)
            if render_expr(composer, a, b) in self.excluded:
                continue
            calls = _calls_of(op, composer, a, b)
            if calls:
                break
        callee = rng.choice(calls)
        return _call_transition(op, composer, a, b, callee, rng.randint(0, len(callee) - 1))

    def _long_sub_pair(self, rng: random.Random, above: int, equal: float = 0.0) -> tuple[int, int]:
        """Two operands of SUB of one length above `above` digits: half structured, else random;
        a share `equal` of them a == b (SUB's difference is then all zeros: LEFT_MASK erases 10^n)."""
        length = rng.randint(min(above + 1, self.max_len), self.max_len)
        while True:
            # (the extra draw only with a share, so that the wide draws stay as they were)
            if equal and rng.random() < equal:
                a, _ = draw_operands("sub", (length, length), rng)
                b = a
            elif rng.random() < 0.5:
                _, (a, b) = structured_pair(rng, "sub", (length, length))
            else:
                a, b = draw_operands("sub", (length, length), rng)
            if render_expr("sub", a, b) not in self.excluded:
                return a, b

    def _wide_sample(self, op: str, rng: random.Random) -> dict:
        """A transition of one of SUB's calls of `op` on two long operands of one length (see the class
        docstring); the curriculum does not apply, these draws exist for their length."""
        a, b = self._long_sub_pair(rng, self.WIDE_ABOVE)
        callee = rng.choice(_calls_of(op, "sub", a, b))
        last = len(callee) - 1
        roll = rng.random()
        step = 0 if roll < 0.25 else last if roll < 0.5 else rng.randint(0, last)
        return _call_transition(op, "sub", a, b, callee, step, wide=True)

    def _sub_call_sample(self, op: str, rng: random.Random) -> dict:
        """A transition of SUB's calls of `op` (or, for add, of ADD on the pair itself) on two
        operands of one length above 50 digits (see the class docstring), leaning on the call's
        first step and its last three, where its head reaches the top cell and it halts."""
        a, b = self._long_sub_pair(rng, self.LONG, equal=self.SUB_CALL_EQUAL)
        if op == "add" and rng.random() < self.SUB_CALL_PLAIN_ADD:
            callee, caller = run("add", a, b), "add"
        else:
            callee, caller = rng.choice(_calls_of(op, "sub", a, b)), "sub"
        last = len(callee) - 1
        roll = rng.random()
        step = 0 if roll < 0.2 else rng.randint(max(0, last - 2), last) if roll < 0.6 else rng.randint(0, last)
        return _call_transition(op, caller, a, b, callee, step, sub_call=True)

    def _nines_sample(self, op: str, rng: random.Random, longest: int | None) -> dict:
        """A transition that carries REFLECTION's dropped zeros (see the class docstring)."""
        top = longest or self.max_len
        # (the extra draw only when long_share is on, so that other streams stay as they were)
        long = self.long_share and top > self.LONG and rng.random() < self.long_share
        length = rng.randint(self.LONG + 1, top) if long else rng.randint(1, top)
        while True:
            a, b = nines_on_top(rng, length, few_share=self.FEW_NINES)
            if render_expr("sub", a, b) not in self.excluded:
                break
        sub = run("sub", a, b)
        if op == "sub":
            machine_run, step = sub, rng.choice((1, 2))
        elif op == "reflection":
            machine_run = sub.phases[1].callee
            last = len(machine_run) - 1
            roll = rng.random()
            if roll < 1 / 3:
                # The step into q2 and each q2 step decide from the top output digit whether to drop
                # it. Drawn from zeros alone, the draws would teach "q2 drops" whatever the digit:
                # a third are complements whose top digit is not zero.
                a, b = 10**length - 1, rng.randrange(10 ** (length - 1), 9 * 10 ** (length - 1)) if length > 1 \
                    else rng.randrange(9)
                machine_run = run("reflection", a, b)
                # the step that writes `CMD q2`, the step into q2 (it halts next), or the halt
                step = machine_run.n_q1_end - 1 + rng.choices((0, 1, 2), (0.4, 0.4, 0.2))[0]
            elif roll < 2 / 3 and last - 1 > machine_run.n_q1_end:  # the step that writes `CMD q2`, or one
                step = rng.randrange(machine_run.n_q1_end - 1, last - 1)  # whose next state drops a zero
            else:  # the step whose next state halts after the last zero, or the halt itself
                step = last - 1 if rng.random() < 0.5 else last
        else:
            machine_run = sub.phases[2].callee
            step = rng.randrange(len(machine_run))
        meta = {"kind": "executor", "op": op, "a": str(a), "b": str(b), "caller": "sub", "step": step, "nines": True}
        return self._transition_sample(op, machine_run, step, meta)

    def _top_run_sample(self, op: str, rng: random.Random) -> dict:
        """A comparison's transition on a run of one digit below a different top digit (`9777…7`),
        the other operand equal, one digit apart inside the run, or apart in its top digit; half of
        the draws are the run's last three steps, where the heads reach the top digit (see the
        class docstring)."""
        long = rng.random() < 0.5
        length = rng.randint(self.LONG + 1, self.max_len) if long else rng.randint(self.SHORT + 1, self.LONG)
        while True:
            top = rng.choice("123456789")
            digits = top + rng.choice([d for d in "0123456789" if d != top]) * (length - 1)
            roll = rng.random()
            other = (digits if roll < 0.5 else replace_digit(rng, digits, rng.randrange(1, length)) if roll < 0.75
                     else replace_digit(rng, digits, 0))
            a, b = (int(digits), int(other)) if rng.random() < 0.5 else (int(other), int(digits))
            if render_expr(op, a, b) not in self.excluded:
                break
        machine_run = run(op, a, b)
        last = len(machine_run) - 1
        step = rng.randint(max(0, last - 2), last) if rng.random() < 0.5 else rng.randint(0, last)
        meta = {"kind": "executor", "op": op, "a": str(a), "b": str(b), "top_run": True}
        return self._transition_sample(op, machine_run, step, meta)

    def _carry_run_sample(self, rng: random.Random) -> dict:
        """ADD's transition on a + b where a's low digits are a run of 11-100 9s under a digit that is not
        9 and b has at most three digits (mostly 1: SUB adds 1 to a + reflection(b), whose low digits are
        such a run for round and one-digit operands); half of the draws are the four steps around the
        run's end, where the carry stops (see the class docstring)."""
        while True:
            # SUB's sum: up to max_len + 1 digits; a tier built for short operands draws its longest
            length = rng.randint(min(self.LONG + 1, self.max_len + 1), self.max_len + 1)
            nines = rng.randint(min(self.SHORT + 1, length - 1), length - 1)
            above = rng.choice("1234567") + "".join(rng.choice("0123456789") for _ in range(length - nines - 2))
            # the digit over the run is not 9, nor 0 when it is a's top digit (a would be all 9s)
            above = (above + rng.choice("012345678" if length - nines > 1 else "12345678"))[-(length - nines):]
            a = int(above + "9" * nines)
            b = 1 if rng.random() < 0.7 else rng.randint(1, 999)
            if render_expr("add", a, b) not in self.excluded:
                break
        machine_run = run("add", a, b)
        last = len(machine_run) - 1
        step = min(last, rng.randint(nines - 1, nines + 2)) if rng.random() < 0.5 else rng.randint(0, last)
        meta = {"kind": "executor", "op": "add", "a": str(a), "b": str(b), "carry_run": True}
        return self._transition_sample("add", machine_run, step, meta)

    def _top_length(self, rng: random.Random) -> int:
        """The length of both operands of a top-steps or deciding-steps draw: above WIDE_ABOVE digits, half
        of them max_len, the length of Table 1's 100-digit cells."""
        return self.max_len if rng.random() < 0.5 else rng.randint(min(self.WIDE_ABOVE + 1, self.max_len), self.max_len)

    def _top_steps_sample(self, rng: random.Random) -> dict:
        """One of the last TOP_STEPS transitions of ADD on two random operands of one length above
        WIDE_ABOVE digits: ADD's own run, or SUB's first call on the pair (see the class docstring).
        A share `top_steps_structured_share` of them are on two structured operands instead, half of
        those at any step of the run, where their runs of one digit are."""
        length = self._top_length(rng)
        caller = "add" if rng.random() < 0.5 else "sub"
        # drawn only when the share is on, so the random-only stream stays as it was
        structured = bool(self.top_steps_structured_share) and rng.random() < self.top_steps_structured_share
        while True:
            if structured:
                _, (a, b) = structured_pair(rng, caller, (length, length))
            else:
                a, b = draw_operands(caller, (length, length), rng)
            if render_expr(caller, a, b) not in self.excluded:
                break
        calls = [run("add", a, b)] if caller == "add" else _calls_of("add", "sub", a, b)
        # SUB's adding of 1 too (its second call), drawn only with the share: the old stream stays as it was
        callee = rng.choice(calls) if caller == "sub" and self.top_steps_structured_share else calls[0]
        last = len(callee) - 1
        anywhere = structured and rng.random() < 0.5
        step = rng.randint(0, last) if anywhere else rng.randint(max(0, last - self.TOP_STEPS + 1), last)
        meta = {"top_steps": True, "structured": True} if structured else {"top_steps": True}
        return _call_transition("add", caller, a, b, callee, step, **meta)

    def _deciding_steps_sample(self, op: str, rng: random.Random) -> dict:
        """One of the last DECIDING_STEPS transitions of a comparison on two random operands of one length
        above WIDE_ABOVE digits, half of them max_len (see the class docstring)."""
        length = self._top_length(rng)
        while True:
            a, b = draw_operands(op, (length, length), rng)
            if render_expr(op, a, b) not in self.excluded:
                break
        machine_run = run(op, a, b)
        last = len(machine_run) - 1
        step = rng.randint(max(0, last - self.DECIDING_STEPS + 1), last)
        meta = {"kind": "executor", "op": op, "a": str(a), "b": str(b), "deciding_steps": True}
        return self._transition_sample(op, machine_run, step, meta)

    def _transition_sample(self, op: str, machine_run, step: int, meta: dict) -> dict:
        """One transition of a run of op's machine as a sample; a stage-1 prompt opens with the
        machine's explanation. meta gets the step (where it already names one, in its place)."""
        source, target = machine_run.transition(step)
        if self.stage == 1:
            source = stage1_preamble(OPERATIONS[op].machine) + source
        return {"prompt": source, "completion": target, "meta": {**meta, "step": step}}

    def sample(self, rng: random.Random, longest: int | None = None) -> dict:
        kind, op = self.adapters[rng.randrange(len(self.adapters))]
        if kind == "executor" and op in self.NINES and self.nines_share and rng.random() < self.nines_share:
            return self._nines_sample(op, rng, longest)
        if kind == "executor" and op == "add" and self.top_steps_share and rng.random() < self.top_steps_share:
            return self._top_steps_sample(rng)
        if kind == "executor" and op in self.WIDE and self.wide_share and rng.random() < self.wide_share:
            return self._wide_sample(op, rng)
        if kind == "executor" and op in self.WIDE and self.sub_call_share and rng.random() < self.sub_call_share:
            return self._sub_call_sample(op, rng)
        if (kind == "executor" and op in self.DECIDED_AT_TOP and self.deciding_steps_share
                and rng.random() < self.deciding_steps_share):
            return self._deciding_steps_sample(op, rng)
        if kind == "executor" and op in COMPARISON and self.top_run_share and rng.random() < self.top_run_share:
            return self._top_run_sample(op, rng)
        if kind == "executor" and op == "add" and self.carry_run_share and rng.random() < self.carry_run_share:
            return self._carry_run_sample(rng)
        if kind == "executor" and op in self.CALLERS and self.composer_share and rng.random() < self.composer_share:
            return self._call_sample(op, rng, longest)
        returns = (kind == "executor" and OPERATIONS[op].machine in COMPOSERS and self.return_share
                   and rng.random() < self.return_share)
        pool = "all"
        if op not in ("mul", "div", "left_mask") and (self.equal_share or self.short_share or self.long_share):
            roll = rng.random()  # drawn only when weighting is on, so unweighted streams are unchanged
            edges = (("equal", self.equal_share), ("short", self.short_share), ("long", self.long_share))
            pool, below = "all", 0.0
            for name, share in edges:
                below += share
                if roll < below:
                    pool = name
                    break
        allowed = self._classes(op, longest, pool)
        pair, changed = "random", None
        # (drawn only with a share, so that other streams stay as they were)
        if self.structured_share and rng.random() < self.structured_share:
            pair = "structured"
            # The 50- and 100-digit repeated cells pair two operands of one length; under aligner_sub's
            # plan one sample in nine is such a structured pair, and round 1's aligners still
            # miscopied exactly those (docs/structured-operands.md).
            if (self.structured_long_share and op not in ("mul", "div")
                    and rng.random() < self.structured_long_share):
                allowed = self._classes(op, longest, "equal_long")
        elif op in self.PAIRED and (self.same_share or self.near_share):
            roll = rng.random()
            pair = "same" if roll < self.same_share else "near" if roll < self.same_share + self.near_share else "random"
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
            if OPERATIONS[op].symbol is None or render_expr(op, a, b) not in self.excluded:
                break
        machine_run = run(op, a, b) if kind != "direct" else None
        meta = {"kind": kind, "op": op, "a": str(a), "b": None if b is None else str(b)}
        if pair == "structured":
            meta["structured"] = structured_kind
        if kind == "direct":
            return {"prompt": direct_prompt(render_expr(op, a, b), op), "completion": solve(op, a, b), "meta": meta}
        if kind == "aligner":
            if rng.random() < 0.5:
                return {"prompt": render_expr(op, a, b), "completion": machine_run.start_text(), "meta": meta}
            return {"prompt": machine_run.text(-1), "completion": render_expr(op, a, b) + solve(op, a, b), "meta": meta}
        last = len(machine_run) - 1
        roll = rng.random()
        step = 0 if roll < self.edge_weight / 2 else last if roll < self.edge_weight else rng.randint(0, last)
        if changed is not None and rng.random() < 0.5:
            step = changed
        calls = [call_step for call_step, _ in machine_run.calls()] if returns else []  # each reads its halt
        if calls:
            step = rng.choice(calls)
            meta["returns"] = True
        if op == "left_mask" and rng.random() < 0.5:
            # Half of left_mask's samples come from its last steps: erasing the carried 1 and then
            # each leading zero. One step of an n-step trace, they are rarely drawn otherwise.
            length = len(str(a))
            if length > 1 and rng.random() < 0.5:
                # The step that erases the 1 and decides from the cell below it whether to go on
                # erasing: below it a zero half the time (to be erased), else a non-zero digit
                # (halt), so that neither answer outnumbers the other.
                zeros = rng.randint(1, length - 1) if rng.random() < 0.5 else 0
                rest = rng.randrange(10 ** (length - 1 - zeros)) if zeros else rng.randrange(10 ** (length - 2), 10 ** (length - 1))
                a = 10 ** (length - 1) + rest
                machine_run, meta["a"] = run(op, a, None), str(a)
                last = len(machine_run) - 1
                step = last - _zeros_below_top(a) - 1
            else:
                step = rng.randint(max(0, last - _zeros_below_top(a) - 2), last)
        return self._transition_sample(op, machine_run, step, meta)


def _calls_of(op: str, composer: str, a: int, b: int) -> list:
    """The runs of op's machine that a composer run on (a, b) calls, in order."""
    machine = OPERATIONS[op].machine
    return [callee for _, callee in run(composer, a, b).calls() if callee.machine == machine]


def _call_transition(op: str, composer: str, a: int, b: int, callee, step: int, **meta) -> dict:
    """A training sample: one transition of a call that a composer run on (a, b) made (the caller
    "add": ADD's own run on the pair, see MachineSource._sub_call_sample)."""
    source, target = callee.transition(step)
    meta = {"kind": "executor", "op": op, "a": str(a), "b": str(b), "caller": composer, **meta, "step": step}
    return {"prompt": source, "completion": target, "meta": meta}


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
