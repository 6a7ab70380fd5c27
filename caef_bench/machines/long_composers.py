"""Schoolbook multiplication and long division: two composers and one small executor.

The paper's MUL and DIV are repeated addition: their runs grow with the operands' values (MUL makes
3b composer steps, DIV 3(a//b)+3), so they stop at a b of 15 and a quotient of 15. These machines
grow with the operands' lengths instead, and call the executors CAEF already has (ADD, REFLECTION)
and one more (design, states and call counts: docs/long-mul-div.md):

    DIGIT_MUL(a, d)  a times one digit, in one pass with a carry register (an executor, like ADD)
    LONG_MUL(a, b)   Horner's rule, b's top digit first: P <- 10*P + a*d for each digit d of b (DIGIT_MUL
                     for a*d, ADD for the sum), so every copy between P and a callee is a fixed offset
    LONG_DIV(a, b)   one quotient digit per digit of a: bring the digit down into a remainder of
                     len(b)+1 cells, then ADD b's ten's complement until the sum carries no more
                     (a carry out of the top column is "the remainder was at least b")

They are not in OPERATIONS (the paper's operators, which training and serving list) but in
ops.LONG_OPERATIONS; `machines.run("long_mul", a, b)` runs them all the same. Their callees' halt
states reach them as the callees write them (no composer view).

The model calls they make per problem against length: long_calls.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from .composers import ComposerRun, Phase
from .executors import _OUTPUT_BARE, _OUTPUT_RIGHT, _RIGHT, AddRun, ReflectionRun, Run
from .text import (HALT, Action, Command, ComposerState, ExecutorState, LongDivState, LongMulState, Tape, cells,
                   render_tape, to_tape)


# The executors each long composer calls (as composers.CALLEES for the paper's)
LONG_CALLEES = {"LONG_MUL": ("DIGIT_MUL", "ADD"), "LONG_DIV": ("REFLECTION", "ADD")}


# --------------------------------------------------------------------------- DIGIT_MUL, the executor


class DigitMulRun(Run):
    """DIGIT_MUL: a (tape order) times the one digit of b, a column a step, with a carry register.

    ADD's layout and rules: q0 with both heads on the blank cell; HEAD2 then stands on the digit for
    the whole run (its command never moves it again); each q1 step writes (digit * d + carry) mod 10
    and the new carry (0..8); with HEAD1 past the end the carry is written as the top digit (kept
    only when it is not 0) and the machine halts. The command line is "CMD ..." like every executor
    but ADD.
    """

    machine = "DIGIT_MUL"

    def __init__(self, a: str, b: str):
        if len(b) != 1:
            raise ValueError(f"DIGIT_MUL multiplies by one digit, got the tape {b!r}")
        self.a, self.b = a, b
        d, carry, out, carries = int(b), 0, [], [0]
        for digit in a:
            carry, written = divmod(int(digit) * d + carry, 10)
            out.append(str(written))
            carries.append(carry)
        self.out, self.carries = "".join(out), carries  # carries[k]: the carry into column k; [-1] the last
        self.n_steps = len(a) + 3  # q0, one q1 per digit, one q1 past the end, qH

    @property
    def halt_output(self) -> str:
        return self.out + (str(self.carries[-1]) if self.carries[-1] else "")

    def state(self, i: int) -> ExecutorState:
        n = len(self.a)
        if i == 0:
            return ExecutorState("DIGIT_MUL", "q0", (Tape("HEAD1", self.a, 0), Tape("HEAD2", self.b, 0)), "", "")
        tapes = (Tape("HEAD1", self.a, min(i, n + 1)), Tape("HEAD2", self.b, 1))
        if i <= n + 1:
            return ExecutorState("DIGIT_MUL", "q1", tapes, str(self.carries[i - 1]), self.out[: i - 1])
        return ExecutorState("DIGIT_MUL", "qH", tapes, str(self.carries[-1]), self.halt_output)

    def command(self, i: int) -> Command:
        n = len(self.a)
        if i == 0:
            return Command((Action("C", "0"), _RIGHT["HEAD1"], _RIGHT["HEAD2"]), "q1")
        if i <= n:
            written = Action("OUTPUT", self.out[i - 1])
            return Command((Action("C", str(self.carries[i])), written, _OUTPUT_RIGHT, _RIGHT["HEAD1"]), "q1")
        if i == n + 1:
            return Command((Action("OUTPUT", str(self.carries[-1])), _OUTPUT_BARE, Action("C", "")), "qH")
        return HALT


def digit_mul_run(a: int, b: int) -> DigitMulRun:
    return DigitMulRun(to_tape(a), to_tape(b))


def _call(machine: str, *actions: Action, next_q: str) -> Command:
    return Command((Action("CALL", machine), *actions), next_q)


def _top_zeros_dropped(digits: str) -> str:
    return digits.rstrip("0") or "0"


# --------------------------------------------------------------------------- LONG_MUL


def long_mul_run(a: int, b: int) -> ComposerRun:
    """Multiplication by Horner's rule, b's top digit first: P <- 10*P + a*d for each digit d of b.

    HEAD2 stands just above the next digit d to multiply (the cell before its marker): q0 keeps the
    paper composers' start ("[HEAD2]|5|1", where aligner (I) writes b as for MUL), q0 -> q1 puts it past
    b's top digit, and each digit done moves it one cell down ("[HEAD2] LEFT"). The product register P
    follows "[OUTPUT]" in tape order, so its cell k is always the product's digit k:
      d > 0, P not empty:   [CALL] DIGIT_MUL(a, d), q2; then in q2 [CALL] ADD(10*P, a*d) with
                            "[HEAD2] LEFT, q1", whose sum becomes P (10*P: P's cells one cell up, a 0 in
                            cell 0)
      d > 0, P empty:       [CALL] DIGIT_MUL(a, d) with "[HEAD2] LEFT, q1": a*d becomes P
      d = 0 (or a = 0):     "[OUTPUT] 0, [HEAD2] LEFT, q1": P <- 10*P, a 0 written in cell 0 and P one
                            cell up; while P is empty only "[HEAD2] LEFT, q1"
      nothing below HEAD2:  "[OUTPUT], qH" ("[OUTPUT] 0, [OUTPUT], qH" while P is empty): the halt
                            state holds P without its marker
    Every copy between P and the callees' tapes is at a fixed cell offset (cell k to k, or k to k+1),
    which coupled position ids make a fixed id offset. a = 0 calls nothing: P stays empty and the halt
    writes 0, so P never holds a top zero.
    """
    ta, tb = to_tape(a), to_tape(b)
    down = Action("HEAD2", "LEFT")
    zero = Action("OUTPUT", "0")

    def state(q: str, head: int, product: str) -> LongMulState:
        return LongMulState("LONG_MUL", q, ta, tb, None, product, head)

    phases = [Phase(state("q0", 1, ""), Command((), "q1"))]
    product = ""
    for head in range(len(tb) + 1, 1, -1):  # the digit multiplied is the cell before the marker
        digit = tb[head - 2]
        here = state("q1", head, product)
        if digit == "0" or a == 0:
            phases.append(Phase(here, Command(((zero,) if product else ()) + (down,), "q1")))
            product = "0" + product if product else ""
            continue
        partial = DigitMulRun(ta, digit)
        if not product:
            phases.append(Phase(here, _call("DIGIT_MUL", down, next_q="q1"), partial))
            product = partial.halt_output
            continue
        phases.append(Phase(here, _call("DIGIT_MUL", next_q="q2"), partial))
        column_sum = AddRun("0" + product, partial.halt_output)
        phases.append(Phase(state("q2", head, product), _call("ADD", down, next_q="q1"), column_sum))
        product = column_sum.halt_output
    phases.append(Phase(state("q1", 1, product), Command(((zero,) if not product else ()) + (_OUTPUT_BARE,), "qH")))
    phases.append(Phase(state("qH", 1, product or "0"), HALT))
    return ComposerRun("LONG_MUL", a, b, phases)


# --------------------------------------------------------------------------- LONG_DIV


def long_div_run(a: int, b: int) -> ComposerRun:
    """Long division, a's top digit first, integer quotient (as the paper's DIV), b >= 1.

    q0: CMD q1. q1: [CALL] REFLECTION(9 on each of w = len(b)+1 cells, b), q2. q2: [CALL] ADD(that, 1),
    q3: its sum is NEG = 10^w - b. Every q3 step then calls ADD(REM, NEG), q3, and its halt decides:
      a carry out of the top column (REM >= b):  REM becomes the sum's low w cells (REM - b) and
                                                the quotient's newest digit goes up by one
      no carry, HEAD1 above a's lowest digit:   the next digit comes down: HEAD1 one cell lower,
                                                REM = that digit and REM's low w-1 cells (its top
                                                cell is 0, since REM < b), a new quotient digit 0
      no carry, HEAD1 on a's lowest digit:      qH, the quotient without its top zeros
    The first q3 state is written on the return of q2's ADD: NEG, a's top digit brought down.
    """
    if b == 0:
        raise ValueError(f"division by zero: {a}//{b}")
    ta, tb = to_tape(a), to_tape(b)
    width = len(tb) + 1

    def state(q: str, head: int, neg: str = "", rem: str = "", quotient: str = "") -> LongDivState:
        return LongDivState("LONG_DIV", q, ta, tb, None, quotient, head, neg, rem)

    reflection = ReflectionRun("9" * width, tb)
    complement = AddRun(reflection.halt_output, "1")
    neg = complement.halt_output
    phases = [
        Phase(state("q0", len(ta) + 1), Command((), "q1")),
        Phase(state("q1", len(ta) + 1), _call("REFLECTION", next_q="q2"), reflection),
        Phase(state("q2", len(ta) + 1), _call("ADD", next_q="q3"), complement),
    ]
    rem, quotient = "0" * width, ""
    for head in range(len(ta), 0, -1):
        rem, quotient = ta[head - 1] + rem[:-1], "0" + quotient
        while True:
            trial = AddRun(rem, neg)
            phases.append(Phase(state("q3", head, neg, rem, quotient), _call("ADD", next_q="q3"), trial))
            if trial.carries[-1] == 0:
                break
            rem, quotient = trial.halt_output[:width], str(int(quotient[0]) + 1) + quotient[1:]
    phases.append(Phase(state("qH", 1, neg, rem, _top_zeros_dropped(quotient)), HALT))
    return ComposerRun("LONG_DIV", a, b, phases)
