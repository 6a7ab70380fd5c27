"""The named samplers of executor (and aligner) training draws: each draws a kind of step that the protocol's draw
(uniform over length classes, random operands) holds too rarely for a model to learn it, and that a
measured failure of the tiny tier pointed at. An adapter's mix (train.mix) says what share of its
draws each one makes; lab/research/samplers-history.md tells the rounds that found each.

A sampler is `draw(source, kind, op, rng, longest, chances) -> sample`: source the MachineSource (its
max_len, excluded expressions, length classes), kind the adapter's (executor, or aligner where its share
applies to aligners: train.mix.SHARES), longest the curriculum's longest operand, chances
the adapter's mix as rolls (train.mix.Chances). Every random number is drawn in a fixed order: the
shipped adapters' draws depend on it (tests/test_sampler_draws.py).
"""

from __future__ import annotations

import random
from typing import Callable

from caef_bench.data.structured import any_operand, inner_run, random_digits, replace_digit, structured_pair
from caef_bench.data.testsets import MUL_DIV_SMALL_MAX, render_expr
from caef_bench.data.training import draw_operands, expression, nines_on_top, random_number
from caef_bench.machines import OPERATIONS, run
from caef_bench.train.mix import CALLERS, COUNT_CALLERS, LONG_CALLERS, STRUCTURED_CALLERS

SHORT = 10  # "short" operands: at most this many digits
LONG = 50  # "long" operands: more than this many digits
WIDE_ABOVE = 90  # the wide, top-steps and deciding-steps draws: operands above this, up to max_len
FEW_NINES = 0.5  # nines draws with a run of one or two 9s (data.training.nines_on_top)
SUB_CALL_EQUAL = 0.1  # sub-call draws with a == b: LEFT_MASK erases a whole field of zeros
SUB_CALL_PLAIN_ADD = 0.25  # add's sub-call draws that are ADD's own run on the pair
TOP_STEPS = 12  # the top-steps draws: one of the run's last this many steps
DECIDING_STEPS = 3  # a comparison's: the top pair's step, the one writing the answer, the halt


def calls_of(op: str, composer: str, a: int, b: int) -> list:
    """The runs of op's machine that a composer run on (a, b) calls, in order."""
    machine = OPERATIONS[op].machine
    return [callee for _, callee in run(composer, a, b).calls() if callee.machine == machine]


def call_transition(op: str, composer: str, a: int, b: int, callee, step: int, **meta) -> dict:
    """A training sample: one transition of a call that a composer run on (a, b) made (the caller
    "add": ADD's own run on the pair, see sub_calls)."""
    source, target = callee.transition(step)
    meta = {"kind": "executor", "op": op, "a": str(a), "b": str(b), "caller": composer, **meta, "step": step}
    return {"prompt": source, "completion": target, "meta": meta}


def _unexcluded(source, op: str, draw: Callable[[], tuple[int, int]]) -> tuple[int, int]:
    """draw() again until its expression is not one the source leaves out (a test set's); an auxiliary
    machine's operands (DIGIT_MUL's) have no expression, so any draw stands."""
    while True:
        a, b = draw()
        if expression(op, a, b) not in source.excluded:
            return a, b


def nines(source, kind: str, op: str, rng: random.Random, longest: int | None, chances) -> dict:
    """Subtractions whose b has 9s on top: REFLECTION's result then has leading zeros, dropped one q2
    step each, and SUB's first ADD gets a shorter b. About one random subtraction in 100 does this,
    and only at its q2 tail, so these draws take the steps that carry the zeros (a third of
    REFLECTION's on a complement whose top digit is kept, so that q2 is not learnt as "drop"); half
    the runs of 9s are one or two long, as most are in random pairs."""
    top = longest or source.max_len
    long = chances.nines_long and top > LONG and rng.random() < chances.nines_long
    length = rng.randint(LONG + 1, top) if long else rng.randint(1, top)
    a, b = _unexcluded(source, "sub", lambda: nines_on_top(rng, length, few_share=FEW_NINES))
    sub = run("sub", a, b)
    if op == "sub":
        machine_run, step = sub, rng.choice((1, 2))
    elif op == "reflection":
        machine_run = sub.phases[1].callee
        last = len(machine_run) - 1
        roll = rng.random()
        if roll < 1 / 3:  # a complement whose top digit is not zero, to be kept
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
    return source.transition(op, machine_run, step, meta)


def top_steps(source, kind: str, op: str, rng: random.Random, longest: int | None, chances) -> dict:
    """One of ADD's last TOP_STEPS steps on two operands of one length above WIDE_ABOVE digits (half of
    them max_len): ADD's own run (add_100) or SUB's calls (a + reflection(b), 101 digits). The tiny
    tier's add_100 and sub_100 failures were all there, a carry or digit read wrong 3-6 cells below
    the top, a step a uniform draw of a 100-digit run reaches once in ~100 draws. A share of these
    (top_steps_structured) is on structured operands, half at any step: drawn on random operands
    only, the tops mended and 100-digit runs of one digit broke."""
    length = _top_length(source, rng)
    caller = "add" if rng.random() < 0.5 else "sub"
    share = chances.top_steps_structured
    structured = bool(share) and rng.random() < share
    if structured:
        a, b = _unexcluded(source, caller, lambda: structured_pair(rng, caller, (length, length))[1])
    else:
        a, b = _unexcluded(source, caller, lambda: draw_operands(caller, (length, length), rng))
    calls = [run("add", a, b)] if caller == "add" else calls_of("add", "sub", a, b)
    # with the structured share, SUB's adding of 1 too (its second call)
    callee = rng.choice(calls) if caller == "sub" and share else calls[0]
    last = len(callee) - 1
    anywhere = structured and rng.random() < 0.5
    step = rng.randint(0, last) if anywhere else rng.randint(max(0, last - TOP_STEPS + 1), last)
    meta = {"top_steps": True, "structured": True} if structured else {"top_steps": True}
    return call_transition("add", caller, a, b, callee, step, **meta)


def _top_length(source, rng: random.Random) -> int:
    """Both operands' length in a top-steps or deciding-steps draw: above WIDE_ABOVE digits, half of
    them max_len, the length of Table 1's 100-digit cells."""
    return source.max_len if rng.random() < 0.5 else rng.randint(min(WIDE_ABOVE + 1, source.max_len), source.max_len)


def _long_sub_pair(source, rng: random.Random, above: int, equal: float = 0.0) -> tuple[int, int]:
    """Two operands of SUB of one length above `above` digits: half structured, else random; a share
    `equal` of them a == b (SUB's difference is then all zeros: LEFT_MASK erases 10^n)."""
    length = rng.randint(min(above + 1, source.max_len), source.max_len)
    while True:
        if equal and rng.random() < equal:
            a, _ = draw_operands("sub", (length, length), rng)
            b = a
        elif rng.random() < 0.5:
            _, (a, b) = structured_pair(rng, "sub", (length, length))
        else:
            a, b = draw_operands("sub", (length, length), rng)
        if render_expr("sub", a, b) not in source.excluded:
            return a, b


def wide(source, kind: str, op: str, rng: random.Random, longest: int | None, chances) -> dict:
    """SUB's calls of ADD or LEFT_MASK on two operands of one length above WIDE_ABOVE digits: the sum
    a + reflection(b) then has 101 digits, one more than any operand drawn, the only fields of 101
    cells a run holds. LEFT_MASK's and ADD's halting steps there were where most wrong 100-digit
    subtractions first went wrong. Half the draws are the call's first or last step; half the
    operand pairs are structured; the curriculum does not apply, these draws exist for their length."""
    a, b = _long_sub_pair(source, rng, WIDE_ABOVE)
    callee = rng.choice(calls_of(op, "sub", a, b))
    last = len(callee) - 1
    roll = rng.random()
    step = 0 if roll < 0.25 else last if roll < 0.5 else rng.randint(0, last)
    return call_transition(op, "sub", a, b, callee, step, wide=True)


def sub_calls(source, kind: str, op: str, rng: random.Random, longest: int | None, chances) -> dict:
    """SUB's calls of ADD or LEFT_MASK (a quarter of add's: ADD's own run on the pair) on two operands
    of one length above LONG digits, a tenth of them equal: ADD's halting steps on sums of repeated
    digits and LEFT_MASK erasing 10^50 when a == b failed there. The draws lean on the call's first
    step (20%) and its last three (40%), where its head reaches the top cell and it halts."""
    a, b = _long_sub_pair(source, rng, LONG, equal=SUB_CALL_EQUAL)
    if op == "add" and rng.random() < SUB_CALL_PLAIN_ADD:
        callee, caller = run("add", a, b), "add"
    else:
        callee, caller = rng.choice(calls_of(op, "sub", a, b)), "sub"
    last = len(callee) - 1
    roll = rng.random()
    step = 0 if roll < 0.2 else rng.randint(max(0, last - 2), last) if roll < 0.6 else rng.randint(0, last)
    return call_transition(op, caller, a, b, callee, step, sub_call=True)


def deciding_steps(source, kind: str, op: str, rng: random.Random, longest: int | None, chances) -> dict:
    """One of a comparison's last DECIDING_STEPS steps on two random operands of one length above
    WIDE_ABOVE digits: the step reading the top digit pair, which decides nearly every such
    comparison, then the answer and the halt. A uniform step of a random 100-digit comparison is
    that step once in ~8,000 draws, and an executor right on every other step answered 1 < 9 wrong
    there. (EQUAL halts at the first digits that differ: its random runs are short.)"""
    length = _top_length(source, rng)
    a, b = _unexcluded(source, op, lambda: draw_operands(op, (length, length), rng))
    machine_run = run(op, a, b)
    last = len(machine_run) - 1
    step = rng.randint(max(0, last - DECIDING_STEPS + 1), last)
    meta = {"kind": "executor", "op": op, "a": str(a), "b": str(b), "deciding_steps": True}
    return source.transition(op, machine_run, step, meta)


def top_runs(source, kind: str, op: str, rng: random.Random, longest: int | None, chances) -> dict:
    """A comparison on a run of one digit below a different top digit (`9777…7`, 11-100 digits; 3 to
    max_len on a tier built for at most 50), the other operand equal, one digit apart inside the run,
    or apart in its top digit; half the draws are the run's last three steps, where the heads reach
    the top digit. An executor wrote the run's digit for the top one there; structured draws hold
    that pair at that step a few times in a million samples."""
    if source.max_len > LONG:  # half the runs above 50 digits
        long = rng.random() < 0.5
        length = rng.randint(LONG + 1, source.max_len) if long else rng.randint(SHORT + 1, LONG)
    else:  # a tier built for short operands (SmolLM2's 1-12 digits): runs of its own lengths
        length = rng.randint(3, source.max_len)
    while True:
        top = rng.choice("123456789")
        digits = top + rng.choice([d for d in "0123456789" if d != top]) * (length - 1)
        roll = rng.random()
        other = (digits if roll < 0.5 else replace_digit(rng, digits, rng.randrange(1, length)) if roll < 0.75
                 else replace_digit(rng, digits, 0))
        a, b = (int(digits), int(other)) if rng.random() < 0.5 else (int(other), int(digits))
        if render_expr(op, a, b) not in source.excluded:
            break
    machine_run = run(op, a, b)
    last = len(machine_run) - 1
    step = rng.randint(max(0, last - 2), last) if rng.random() < 0.5 else rng.randint(0, last)
    meta = {"kind": "executor", "op": op, "a": str(a), "b": str(b), "top_run": True}
    return source.transition(op, machine_run, step, meta)


def carry_runs(source, kind: str, op: str, rng: random.Random, longest: int | None, chances) -> dict:
    """ADD on a + b where a's low digits are a run of 11-100 9s under a digit that is not 9 and b has
    at most three digits, mostly 1: SUB's adding of 1 to a + reflection(b) on round and one-digit
    operands. Adds kept `[C] 1` past the run's end; a uniform step of such a run is the one where
    the carry stops once in 50-100 draws, so half the draws are the four steps around it."""
    while True:
        # SUB's sum: up to max_len + 1 digits; a tier built for short operands draws its longest
        length = rng.randint(min(LONG + 1, source.max_len + 1), source.max_len + 1)
        run_of_9s = rng.randint(min(SHORT + 1, length - 1), length - 1)
        above = rng.choice("1234567") + "".join(rng.choice("0123456789") for _ in range(length - run_of_9s - 2))
        # the digit over the run is not 9, nor 0 when it is a's top digit (a would be all 9s)
        above = (above + rng.choice("012345678" if length - run_of_9s > 1 else "12345678"))[-(length - run_of_9s):]
        a = int(above + "9" * run_of_9s)
        b = 1 if rng.random() < 0.7 else rng.randint(1, 999)
        if render_expr("add", a, b) not in source.excluded:
            break
    machine_run = run("add", a, b)
    last = len(machine_run) - 1
    step = min(last, rng.randint(run_of_9s - 1, run_of_9s + 2)) if rng.random() < 0.5 else rng.randint(0, last)
    meta = {"kind": "executor", "op": "add", "a": str(a), "b": str(b), "carry_run": True}
    return source.transition("add", machine_run, step, meta)


def composer_calls(source, kind: str, op: str, rng: random.Random, longest: int | None, chances) -> dict:
    """A step of the calls a composer run on random operands makes (ADD inside SUB and MUL, GREATER_THAN
    inside DIV). Their operands are rare in random draws: MUL's first call adds a to itself, SUB's
    last adds 1 to a long sum, DIV compares a remainder with the divisor."""
    return _a_random_call_step(source, op, CALLERS[op], rng, longest)


def _a_random_call_step(source, op: str, composers: tuple[str, ...], rng: random.Random, longest: int | None) -> dict:
    """Any step of one of op's calls in a run of one of `composers` on random operands of its classes."""
    composer = rng.choice(composers)
    return _a_call_step(source, op, composer, rng, longest, lambda cls: draw_operands(composer, cls, rng))


def _a_call_step(source, op: str, composer: str, rng: random.Random, longest: int | None,
                 draw: Callable[[tuple[int, int]], tuple[int, int]], **meta) -> dict:
    """Any step of one of the calls of op's machine that a composer run makes, on the operands `draw`
    gives for one of the composer's classes (drawn again while they are held out or make no such call)."""
    allowed = source.classes(composer, longest)
    while True:
        a, b = draw(rng.choice(allowed))
        if expression(composer, a, b) in source.excluded:
            continue
        calls = calls_of(op, composer, a, b)
        if calls:
            break
    callee = rng.choice(calls)
    return call_transition(op, composer, a, b, callee, rng.randint(0, len(callee) - 1), **meta)


def carry_in(source, kind: str, op: str, rng: random.Random, longest: int | None, chances) -> dict:
    """A step of ADD whose next state holds a carry of 1 and whose next command writes a digit, which
    is then a + b + 1, not a + b; on random operands of a class the mix's length shares draw.
    SmolLM2's executor_add answered add_5 and add_10 with 43 of its 46 end-to-end misses there (the
    digit one off, the carry mostly left out; lab/research/smollm2-log.md) while a step drawn anywhere read 50/50:
    such steps are ~40% of random draws, and the one digit is one token of the ~70 each draw teaches."""
    return _executor_step_where(source, op, rng, longest, chances, {"carry_in": True},
                                lambda state, command: "[C]1 " in state and "[OUTPUT] " in command)


def carry_to_ten(source, kind: str, op: str, rng: random.Random, longest: int | None, chances) -> dict:
    """A step of ADD whose next state holds a carry of 1 and whose next command writes 0 and carries 1
    again: the digit pair under the heads sums to 9, and a + b + 1 = 10. After the carry_in round,
    5 of SmolLM2's 9 executor misses at add_10 were this step answered `[C] 0, [OUTPUT] 9` (a + b, the
    carry left out once more); on 10-digit pairs it is ~1 in 12 of carry_in's steps and ~1 in 28 of all. Operands
    without such a step are drawn again, which leans the draws towards the classes' longer operands."""
    return _executor_step_where(source, op, rng, longest, chances, {"carry_to_ten": True},
                                lambda state, command: "[C]1 " in state
                                and command.startswith("CMD: [C] 1, [OUTPUT] 0,"))


def column_sums(source, kind: str, op: str, rng: random.Random, longest: int | None, chances) -> dict:
    """A step of ADD (or DIGIT_MUL) whose next command works a column drawn uniformly from the 200 (a's digit,
    b's digit, carry) columns (DIGIT_MUL's 450: a's digit, the digit d of 1-9, a carry below d), on random
    operands of a class the mix's length shares draw: other draws give some columns far more often than others
    (runs of 9s, carries). SmolLM2's executor_add round 9 answered 9 + 6 with no carry as 16 in 10 of the 16
    such steps of MUL's and DIV's calls, and the other 1,288 steps right; the tiny executor_digit_mul's second
    round missed only product digits under a right carry."""
    while True:  # a column the class's lengths seldom hold (a carry into 1-digit operands) gives way to another
        if op == "digit_mul":
            column = rng.choice(_DIGIT_MUL_COLUMNS)
        else:  # (ADD's three draws as ever, so the rounds trained on this share draw the same samples again)
            column = (str(rng.randrange(10)), str(rng.randrange(10)), str(rng.randrange(2)))
        sample = _executor_step_where(source, op, rng, longest, chances, {"column_sums": "".join(column)},
                                      lambda state, command: _column_of(state) == column, tries=_COLUMN_TRIES)
        if sample is not None:
            return sample


_COLUMN_TRIES = 200
# x·d + c < 10·d, so the carry out, and the one in, is below d (LONG_MUL never calls DIGIT_MUL with d = 0)
_DIGIT_MUL_COLUMNS = [(str(x), str(d), str(c)) for d in range(1, 10) for c in range(d) for x in range(10)]


def _state_and_command(text: str) -> tuple[str, str]:
    """An executor step's state line and command line."""
    lines = text.split("\n")
    return lines[0], lines[-1]


def _column_of(state: str) -> tuple[str, str, str] | None:
    """(a's digit, b's digit, carry) under the heads of an ADD state line, or None where a head is past its
    operand's top or no carry is written yet."""
    found = [state.partition(marker)[2][:2] for marker in ("[HEAD1]", "[HEAD2]")]
    carry = state.partition("[C]")[2][:1]
    if not all(len(cell) == 2 and cell[0] == "|" and cell[1].isdigit() for cell in found) or not carry.isdigit():
        return None
    return found[0][1], found[1][1], carry


def _executor_step_where(source, op: str, rng: random.Random, longest: int | None, chances, marks: dict,
                         holds: Callable[[str, str], bool], tries: int | None = None) -> dict | None:
    """A step of op's executor (ADD, or DIGIT_MUL for column_sums) on random operands of a class the mix's
    length shares draw, whose next state line and next command pass `holds`, its meta marked with `marks`;
    operands without one are drawn again, up to `tries` times (None: until one comes; else None after that
    many)."""
    allowed = source.classes(op, longest, source.pool(rng, chances))
    drawn = 0
    while tries is None or drawn < tries:
        drawn += 1
        a, b = _unexcluded(source, op, lambda: draw_operands(op, rng.choice(allowed), rng))
        machine_run = run(op, a, b)
        steps = [step for step, (_, target) in enumerate(machine_run.transitions())
                 if holds(*_state_and_command(target))]
        if steps:
            meta = {"kind": "executor", "op": op, "a": str(a), "b": str(b), **marks}
            return source.transition(op, machine_run, rng.choice(steps), meta)
    return None


def long_calls(source, kind: str, op: str, rng: random.Random, longest: int | None, chances) -> dict:
    """A step of the calls schoolbook multiplication and long division make (the long route,
    docs/long-mul-div.md): ADD on LONG_MUL's product so far times ten and a partial product, ADD on LONG_DIV's
    remainder, kept with zeros on top (`|2|0`), and b's ten's complement, and REFLECTION making that
    complement. The paper's operators never give ADD such operands (a remainder of w cells whose top is
    0, a sum whose carry out says whether the remainder was at least b). Operands of the composer's own
    classes (up to 50 x 50 digits, and 100 over 20), half of them structured; any step of a call."""
    composer = rng.choice(LONG_CALLERS[op])

    def draw(cls: tuple[int, int]) -> tuple[int, int]:
        return structured_pair(rng, composer, cls)[1] if rng.random() < 0.5 else draw_operands(composer, cls, rng)

    return _a_call_step(source, op, composer, rng, longest, draw, long_call=True)


def count_calls(source, kind: str, op: str, rng: random.Random, longest: int | None, chances) -> dict:
    """A step of MUL's LESS_THAN calls, its count (0-15) against b, on random operands of mul's classes.
    SmolLM2's executor_lt, drawn on lt's own cells, dropped a digit of b inside such a call (mul_1_10's
    `28*13=`); two operands of 1-2 digits are about 1 in 30 of those cells' draws."""
    return _a_random_call_step(source, op, COUNT_CALLERS[op], rng, longest)


def structured_calls(source, kind: str, op: str, rng: random.Random, longest: int | None, chances) -> dict:
    """A step of the calls a composer run on structured operands makes (ADD inside SUB, MUL and DIV,
    GREATER_THAN inside DIV): runs of one digit, round numbers, periodic patterns. MUL on a round a adds
    d000…0 to a multiple of itself, two runs of 0s under different top digits; SmolLM2's executor_add,
    right on every random 11-12-digit call step drawn, copied the top digit of one onto the other inside
    `1000000000*15=`, and its executor_gt rewrote a run of 9s inside `9999999999//999999999=`."""
    composer = rng.choice(STRUCTURED_CALLERS[op])
    return _a_call_step(source, op, composer, rng, longest, lambda cls: structured_pair(rng, composer, cls)[1],
                        structured_call=True)


def _typed_run(rng: random.Random, n: int) -> str:
    """n digits a person types as one run: d…d, a round d0…0, or a top digit over a run (1999…9, 5000…0)."""
    top = rng.choice("123456789")
    kind = rng.randrange(3)
    if n == 1 or kind == 0:
        return top * n
    return top + ("0" if kind == 1 else rng.choice("0123456789")) * (n - 1)


def run_lengths(source, kind: str, op: str, rng: random.Random, longest: int | None, chances) -> dict:
    """Two operands that are runs of one digit or round numbers, of lengths one apart (a fifth of them of one
    length): `1000000000>999999999=`, `9999999999>999999999=`, `7777777777-7000000000=` (a difference a
    digit shorter). SmolLM2's aligners copied such a run a digit longer or shorter, into the start state or
    back from the halt: the run's length is all that tells its cells apart. Structured draws hold two runs
    of lengths one apart in under 1% of their pairs. An aligner's draw is the start or the halt text, as
    the protocol's; an executor's a step of the run, its first and last weighted as the protocol's.

    For div, b is the run (of a length its classes hold) and a one of b's length or one digit longer, with a
    quotient of at most the paper's 15 (`7777777777//777777777=`, `1000000000//100000000=`): SmolLM2's
    executor_div copied such an a or b a digit longer or shorter into its calls, and its count back from
    ADD's halt (`9999999999//999999999=`), so an executor's draw is, half the time, a step reading a
    callee's halt, as div_runs' are."""
    if op == "div":
        top = max(digits for digits, _ in source.classes("div", longest, "all"))

        def draw() -> tuple[int, int]:
            while True:
                b = _typed_run(rng, rng.randint(1, top))
                a = int(_typed_run(rng, len(b) + rng.choice((0, 1, 1))))
                if a // int(b) <= MUL_DIV_SMALL_MAX:
                    return a, int(b)
    else:
        top = max(max(cls) for cls in source.classes(op, longest, "all"))

        def draw() -> tuple[int, int]:
            first = rng.randint(2, top)
            second = min(top, max(1, first + rng.choice((-1, 1, -1, 1, 0))))
            a, b = int(_typed_run(rng, first)), int(_typed_run(rng, second))
            return (max(a, b), min(a, b)) if op == "sub" else (a, b) if rng.random() < 0.5 else (b, a)

    a, b = _unexcluded(source, op, draw)
    machine_run = run(op, a, b)
    meta = {"kind": kind, "op": op, "a": str(a), "b": str(b), "run_lengths": True}
    if kind == "aligner":
        return source.aligner_sample(op, a, b, machine_run, rng, meta)
    step = _half_at_returns(source, machine_run, rng) if op == "div" else source.edge_step(rng, len(machine_run) - 1)
    return source.transition(op, machine_run, step, meta)


def _half_at_returns(source, machine_run, rng: random.Random) -> int:
    """A step of a composer's run: half the time one reading a callee's halt, else one drawn as the protocol's."""
    returns = [call_step for call_step, _ in machine_run.calls()]
    return rng.choice(returns) if returns and rng.random() < 0.5 else source.edge_step(rng, len(machine_run) - 1)


def difference_pair(rng: random.Random, length: int, size: int) -> tuple[int, int]:
    """A subtraction a - b with a of `length` digits and a difference of `size` (<= length), half of the
    differences structured (data.structured.any_operand), half random digits."""
    if rng.random() < 0.5:
        difference = int(any_operand(rng, size))
    else:
        difference = random_number(rng, size)
    a = rng.randint(max(10 ** (length - 1), difference), 10 ** length - 1)
    return a, a - difference


def sub_results(source, kind: str, op: str, rng: random.Random, longest: int | None, chances) -> dict:
    """SUB's last step, which copies LEFT_MASK's result into its halt state, on differences of every length
    from 1 to a's alike, half of them structured (runs of one digit, periodic, round numbers); a is of the
    longest length half the time. Two random n-digit operands differ by an n-digit number nine times in
    ten, so the protocol's draw seldom asks this copy to stop early; SmolLM2's executor_sub, whose position
    ids do not count cells, cut a periodic difference (`10101010`) short there, and rounds that drew more
    of the step in whole runs cut random ones."""
    top = max(max(cls) for cls in source.classes("sub", longest, "all"))

    def draw() -> tuple[int, int]:
        length = top if rng.random() < 0.5 else rng.randint(1, top)
        return difference_pair(rng, length, rng.randint(1, length))

    a, b = _unexcluded(source, "sub", draw)
    machine_run = run("sub", a, b)
    meta = {"kind": kind, "op": op, "a": str(a), "b": str(b), "sub_results": True}
    return source.transition(op, machine_run, len(machine_run) - 1, meta)


def div_runs(source, kind: str, op: str, rng: random.Random, longest: int | None, chances) -> dict:
    """DIV on a divisor with a run of one digit among random digits, whose every multiple (DIV's count) holds
    a run too (4 x 276388760 = 1105555040): executor_div's steps, half of them those reading a callee's
    halt, where it copies the count into its next call; or a step of DIV's ADD and GREATER_THAN calls.
    SmolLM2's executor_div copied such a count a 5 short into GREATER_THAN's start
    (`2626635685//276388760=`). A random 10-digit divisor holds a run of 4 or more under one time in a
    hundred; structured ones (data.structured) are whole runs, patterns and round numbers, or runs at any
    offset of any length, 1 and 2 digits as likely as 3 or more."""

    def draw(cls: tuple[int, int]) -> tuple[int, int]:
        digits, quotient = cls
        divisor = max(1, int(inner_run(rng, digits)))  # a one-digit draw may be 0
        return divisor * quotient + rng.randrange(divisor), divisor

    if op != "div":
        return _a_call_step(source, op, "div", rng, longest, draw, div_runs=True)
    allowed = source.classes("div", longest)
    a, b = _unexcluded(source, "div", lambda: draw(rng.choice(allowed)))
    machine_run = run("div", a, b)
    meta = {"kind": kind, "op": op, "a": str(a), "b": str(b), "div_runs": True}
    return source.transition(op, machine_run, _half_at_returns(source, machine_run, rng), meta)


def nines_below(rng: random.Random, length: int, nines: int) -> int:
    """A number of `length` digits whose last `nines` digits are 9s and whose digit above them (if any) is not."""
    if nines == length:
        return int("9" * nines)
    above = str(rng.randint(1, 9)) if nines == length - 1 else \
        str(rng.randint(1, 9)) + random_digits(rng, length - nines - 2) + str(rng.randrange(9))
    return int(above + "9" * nines)


def low_nines(source, kind: str, op: str, rng: random.Random, longest: int | None, chances) -> dict:
    """SUB on an a, or (half of them) a b, whose last 1 to all of its digits are 9s (`8348599999`), the other
    operand random; half of them at SUB's step into its call of REFLECTION, whose first tape is a field of 9s
    as long as a. SUB's tapes hold a and b reversed, so those 9s open one of them, and a copy of it passes for
    the field for as many cells: SmolLM2's executor_sub copied a there (`24099-12071=`; 17 of 90 such steps
    wrong, lab/diagnosis/sub_first_call.py) and b (`9984572607-7716645899=`)."""
    top = max(max(cls) for cls in source.classes("sub", longest, "all"))

    def draw() -> tuple[int, int]:
        length = top if rng.random() < 0.5 else rng.randint(2, top)
        if rng.random() < 0.5:
            a = nines_below(rng, length, rng.randint(1, length))
            return a, rng.randint(0, a)
        b_length = rng.randint(1, length)
        b = nines_below(rng, b_length, rng.randint(1, b_length))
        return rng.randint(max(b, 10 ** (length - 1)), 10 ** length - 1), b

    a, b = _unexcluded(source, "sub", draw)
    machine_run = run("sub", a, b)
    step = 0 if rng.random() < 0.5 else source.edge_step(rng, len(machine_run) - 1)
    meta = {"kind": kind, "op": op, "a": str(a), "b": str(b), "low_nines": True}
    return source.transition(op, machine_run, step, meta)


def near_rounds(source, kind: str, op: str, rng: random.Random, longest: int | None, chances) -> dict:
    """SUB on a round number or a run of one digit (`5000000000`, `7777777777`, `1999999999`) less a small d
    (1 to 10^m, m up to half its digits), half of them at SUB's step into its second call of ADD (adding 1
    to a + REFLECTION(b)). That call's first tape is the first call's sum, 10^n + d - 1 for an n-digit a:
    a's round digits (0s) under a top 1 one cell past a's top, so that a copy of a passes for it but for its
    last cell. SmolLM2's executor_sub (round 7) copied a there, a cell short, in 5 of 10 such typed pairs
    (`5000000000-4999999999=`, `1000000001-999999999=`; lab/diagnosis/typed_steps.py)."""
    top = max(max(cls) for cls in source.classes("sub", longest, "all"))

    def draw() -> tuple[int, int]:
        length = top if rng.random() < 0.5 else rng.randint(2, top)
        a = int(_typed_run(rng, length))
        return a, a - rng.randint(1, min(a, 10 ** rng.randint(0, max(1, length // 2))))

    a, b = _unexcluded(source, "sub", draw)
    machine_run = run("sub", a, b)
    adds = [phase for phase, callee in machine_run.calls() if callee.machine == "ADD"]
    # the transition into a call is the one before its phase
    step = adds[-1] - 1 if rng.random() < 0.5 else source.edge_step(rng, len(machine_run) - 1)
    meta = {"kind": kind, "op": op, "a": str(a), "b": str(b), "near_rounds": True}
    return source.transition(op, machine_run, step, meta)


# Each sampler by its share's name (train.mix.SHARES says which executors it draws for and what of),
# in the order an adapter's draw rolls for them: the shipped draws depend on it.
REGISTRY: dict[str, Callable[..., dict]] = {
    "nines": nines, "top_steps": top_steps, "wide": wide, "sub_calls": sub_calls, "deciding_steps": deciding_steps,
    "top_runs": top_runs, "carry_runs": carry_runs, "composer_calls": composer_calls, "carry_in": carry_in,
    "carry_to_ten": carry_to_ten, "long_calls": long_calls, "count_calls": count_calls,
    "structured_calls": structured_calls, "run_lengths": run_lengths, "column_sums": column_sums,
    "sub_results": sub_results, "div_runs": div_runs, "low_nines": low_nines, "near_rounds": near_rounds}
