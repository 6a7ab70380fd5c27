"""The six executors: ADD, GREATER_THAN, LESS_THAN, EQUAL, REFLECTION, LEFT_MASK.

Each run is computed once in O(n) (carries, comparison outcomes) and then gives
any step's state and command by index, so a data builder that samples a few
steps of a 100-digit trace renders those steps only, not all of them.

Conventions common to all executors (read off the reference traces):
- step 0 is q0 with every head on the blank cell before the digits;
- a head that has run past its operand stops, and the command then omits its
  "[HEADk] RIGHT" action;
- the halt state drops the [OUTPUT] head marker.
"""

from __future__ import annotations

from functools import lru_cache

from .text import (
    HALT,
    HALT_LINE,
    Action,
    Command,
    ExecutorState,
    Snapshot,
    Tape,
    cells,
    render,
    render_command,
    render_tape,
)

_RIGHT = {m: Action(m, "RIGHT") for m in ("HEAD1", "HEAD2", "HEAD")}
_OUTPUT_RIGHT = Action("OUTPUT", "RIGHT")
_OUTPUT_BARE = Action("OUTPUT", "")


class Run:
    """One machine's complete execution on one input, indexed by step.

    Step i has a state and the command issued in it; the last step is the halt
    state with the halt line. A transition is step i -> step i+1.
    """

    machine: str
    n_steps: int

    def state(self, i: int):
        raise NotImplementedError

    def command(self, i: int) -> Command:
        raise NotImplementedError

    def step_of(self, state: ExecutorState) -> int:
        """The index of the step whose state this is, read off its registers in O(1).

        Only meaningful for a state of this run (the caller compares the texts):
        q0 is step 0, qH the last, and in q1 one output digit is written per step.
        """
        if state.q == "q0":
            return 0
        if state.q == "qH":
            return self.n_steps - 1
        return len(state.output) + 1

    def __len__(self) -> int:
        """Number of transitions (one fewer than the steps)."""
        return self.n_steps - 1

    def _index(self, i: int) -> int:
        if i < 0:
            i += self.n_steps
        if not 0 <= i < self.n_steps:
            raise IndexError(f"{self.machine} run has {self.n_steps} steps, no step {i}")
        return i

    def snapshot(self, i: int) -> Snapshot:
        i = self._index(i)
        return Snapshot(self.state(i), self.command(i))

    def text(self, i: int) -> str:
        """Step i as text: its state line and its command (or halt) line."""
        return render(self.snapshot(i))

    def transition(self, i: int) -> tuple[str, str]:
        return self.text(i), self.text(i + 1)

    def transitions(self) -> list[tuple[str, str]]:
        texts = [self.text(i) for i in range(self.n_steps)]
        return list(zip(texts, texts[1:]))

    def start_text(self) -> str:
        """The aligner (I) target: the start state and first command, newline-terminated."""
        return render(self.snapshot(0)) + "\n"

    @property
    def halt(self) -> Snapshot:
        return self.snapshot(-1)


def rewritten_operand(start: ExecutorState, state: ExecutorState) -> str | None:
    """Why `state` cannot be a state of the executor run that began at `start`, going by its operand tapes,
    or None. Every executor only reads its operand tapes (it writes the carry and [OUTPUT]), so their
    digits stay those of the start state at every step; a state with other digits computes another problem.
    Operands are named a, b by tape order and shown most significant digit first, as they are written.
    (Both are states of one machine, whose tapes `parse` holds to that machine's layout.)"""
    wrong = [f"operand {name} as {now.digits[::-1]} (started as {then.digits[::-1]})"
             for name, then, now in zip("ab", start.tapes, state.tapes) if now.digits != then.digits]
    return "rewrote " + " and ".join(wrong) if wrong else None


def _digit(digits: str, k: int) -> int:
    return ord(digits[k]) - 48 if k < len(digits) else 0


class AddRun(Run):
    """Column addition, least-significant digit first, with a carry register."""

    machine = "ADD"

    def __init__(self, a: str, b: str):
        self.a, self.b = a, b
        width = max(len(a), len(b))
        # Python's integers add the columns; the carry into column k is then
        # (sum digit - a digit - b digit) mod 10 (a hundred-digit loop in Python was the hot spot).
        total = str(int(a[::-1]) + int(b[::-1])).zfill(width)[::-1]
        out = total[:width]
        pad_a, pad_b = a.ljust(width, "0").encode(), b.ljust(width, "0").encode()
        carries = [(s - x - y + 48) % 10 for s, x, y in zip(out.encode(), pad_a, pad_b)]  # ASCII codes
        carries.append(len(total) - width)  # the carry out of the top column
        self.width, self.out, self.carries = width, out, carries
        # q0, one q1 per column, one q1 with both heads past the end, qH
        self.n_steps = width + 3
        self._cells = (cells(a), cells(b), cells(self.halt_output))

    @property
    def halt_output(self) -> str:
        # The final carry is written as a new top digit only when it is 1.
        return self.out + ("1" if self.carries[-1] else "")

    def text(self, i: int) -> str:
        # Hot path of data building: the same text as render(self.snapshot(i))
        # (a test checks this), written without building the dataclasses.
        i = self._index(i)
        if i == 0:
            return render(self.snapshot(0))
        ca, cb, cout = self._cells
        h1, h2 = min(i, len(self.a) + 1), min(i, len(self.b) + 1)
        tapes = render_tape("HEAD1", ca, h1) + render_tape("HEAD2", cb, h2)
        if i <= self.width + 1:
            line = f"ADD, q1, {tapes} [C]{self.carries[i - 1]} {cout[: 2 * (i - 1)]}[OUTPUT]"
            return f"{line}\n{self._command_text(i)}"
        return f"ADD, qH, {tapes} [C]{self.carries[-1]} {cout}\n{HALT_LINE}"

    def state(self, i: int) -> ExecutorState:
        la, lb = len(self.a), len(self.b)
        if i == 0:
            return ExecutorState("ADD", "q0", (Tape("HEAD1", self.a, 0), Tape("HEAD2", self.b, 0)), "", "")
        tapes = (Tape("HEAD1", self.a, min(i, la + 1)), Tape("HEAD2", self.b, min(i, lb + 1)))
        if i <= self.width + 1:
            return ExecutorState("ADD", "q1", tapes, str(self.carries[i - 1]), self.out[: i - 1])
        return ExecutorState("ADD", "qH", tapes, str(self.carries[-1]), self.halt_output)

    def _command_key(self, i: int) -> tuple:
        k = i - 1
        return (self.carries[i], self.out[k], k < len(self.a), k < len(self.b))

    def _command_text(self, i: int) -> str:
        if 1 <= i <= self.width:
            return _add_column_command_text(*self._command_key(i))
        return render_command(self.command(i), "ADD")

    def command(self, i: int) -> Command:
        if i == 0:
            return Command((Action("C", "0"), _RIGHT["HEAD1"], _RIGHT["HEAD2"]), "q1")
        if i <= self.width:
            return _add_column_command(*self._command_key(i))
        if i == self.width + 1:
            return Command((Action("OUTPUT", str(self.carries[-1])), _OUTPUT_BARE, Action("C", "")), "qH")
        return HALT


@lru_cache(maxsize=None)  # 2 carries x 10 digits x 3 head patterns
def _add_column_command(carry: int, digit: str, head1: bool, head2: bool) -> Command:
    actions = [Action("C", str(carry)), Action("OUTPUT", digit), _OUTPUT_RIGHT]
    if head1:
        actions.append(_RIGHT["HEAD1"])
    if head2:
        actions.append(_RIGHT["HEAD2"])
    return Command(tuple(actions), "q1")


@lru_cache(maxsize=None)
def _add_column_command_text(carry: int, digit: str, head1: bool, head2: bool) -> str:
    return render_command(_add_column_command(carry, digit, head1, head2), "ADD")


class CompareRun(Run):
    """GREATER_THAN, LESS_THAN and EQUAL: scan both operands from the least-significant digit.

    GT/LT keep the verdict of the most significant differing digit seen so far
    (writing it only when the digits differ); when one operand runs out before
    the other, the longer operand decides. EQUAL halts at the first difference.
    """

    def __init__(self, machine: str, a: str, b: str):
        self.machine, self.a, self.b = machine, a, b
        shared = min(len(a), len(b))
        initial = "True" if machine == "EQUAL" else "False"
        values = ["", initial]  # the output register at steps 0 and 1
        stop = shared  # the column where scanning stops
        for k in range(shared):
            da, db = a[k], b[k]
            if machine == "EQUAL":
                if da != db:
                    stop = k
                    break
                values.append(initial)
            else:
                values.append(self._verdict(da, db) if da != db else values[-1])
        self.values, self.stop = values, stop
        if machine == "EQUAL":
            self.final = "True" if stop == shared and len(a) == len(b) else "False"
        elif len(a) == len(b):
            self.final = values[-1]
        else:
            self.final = str(len(a) > len(b) if machine == "GREATER_THAN" else len(a) < len(b))
        self.n_steps = stop + 3  # q0, q1 per scanned column and the deciding one, qH

    def step_of(self, state: ExecutorState) -> int:
        if state.q == "q1":
            return state.tapes[0].head  # both heads move one cell per step
        return super().step_of(state)

    def _verdict(self, da: str, db: str) -> str:
        return str(da > db if self.machine == "GREATER_THAN" else da < db)

    def state(self, i: int) -> ExecutorState:
        if i == 0:
            return ExecutorState(self.machine, "q0", (Tape("HEAD1", self.a, 0), Tape("HEAD2", self.b, 0)), None, "")
        head = min(i, self.stop + 1)
        tapes = (Tape("HEAD1", self.a, head), Tape("HEAD2", self.b, head))
        if i <= self.stop + 1:
            return ExecutorState(self.machine, "q1", tapes, None, self.values[i])
        return ExecutorState(self.machine, "qH", tapes, None, self.final)

    def command(self, i: int) -> Command:
        if i == 0:
            initial = "True" if self.machine == "EQUAL" else "False"
            return Command((_RIGHT["HEAD1"], _RIGHT["HEAD2"], Action("OUTPUT", initial)), "q1")
        if i <= self.stop:
            k = i - 1
            actions = (_RIGHT["HEAD1"], _RIGHT["HEAD2"])
            if self.machine != "EQUAL" and self.a[k] != self.b[k]:
                actions += (Action("OUTPUT", self._verdict(self.a[k], self.b[k])),)
            return Command(actions, "q1")
        if i == self.stop + 1:
            decided = self.stop < max(len(self.a), len(self.b))  # a difference or unequal lengths
            if decided:
                return Command((Action("OUTPUT", self.final), _OUTPUT_BARE), "qH")
            return Command((_OUTPUT_BARE,), "qH")
        return HALT


class ReflectionRun(Run):
    """REFLECTION: the nines' complement of b over the width of a (a is all nines).

    q1 writes one complement digit per column of a. When b's top digits are 9 at
    a's width the complement has zeros on top (999 - 990 = 009): in q2 the machine
    walks its output head left over each of them, one step each, dropping that
    digit, and halts on the first non-zero digit; an all-zero complement ends with
    an empty tape (written "|[OUTPUT]") and halts as "|0". So the result never
    has leading zeros, and SUB's next ADD gets a second operand no longer than
    its value.
    """

    machine = "REFLECTION"

    def __init__(self, a: str, b: str):
        self.a, self.b = a, b
        self.out = "".join(chr(48 + 9 - _digit(b, k)) for k in range(len(a)))
        self.kept = len(self.out.rstrip("0"))  # digits left once the top zeros are dropped
        # q0; q1 per digit and one past the end (the last q1 is step len(a)+1);
        # one q2 per output length from len(a) down to `kept`; qH
        self.n_q1_end = len(a) + 1
        self.n_steps = self.n_q1_end + (len(a) - self.kept) + 3

    @property
    def halt_output(self) -> str:
        return self.out[: self.kept] or "0"

    def _q2_digits(self, i: int) -> int:
        """Output length at q2 step i (the first q2 step holds all len(a) digits)."""
        return len(self.a) - (i - self.n_q1_end - 1)

    def state(self, i: int) -> ExecutorState:
        la, lb = len(self.a), len(self.b)
        if i == 0:
            return ExecutorState("REFLECTION", "q0", (Tape("HEAD1", self.a, 0), Tape("HEAD2", self.b, 0)), None, "")
        tapes = (Tape("HEAD1", self.a, min(i, la + 1)), Tape("HEAD2", self.b, min(i, lb + 1)))
        if i <= self.n_q1_end:
            return ExecutorState("REFLECTION", "q1", tapes, None, self.out[: i - 1])
        if i < self.n_steps - 1:
            return ExecutorState("REFLECTION", "q2", tapes, None, self.out[: self._q2_digits(i)])
        return ExecutorState("REFLECTION", "qH", tapes, None, self.halt_output)

    def command(self, i: int) -> Command:
        la = len(self.a)
        if i == 0:
            return Command((_RIGHT["HEAD1"], _RIGHT["HEAD2"]), "q1")
        if i <= la:
            k = i - 1
            actions = (_RIGHT["HEAD1"],) + ((_RIGHT["HEAD2"],) if k < len(self.b) else ())
            return Command(actions + (Action("OUTPUT", self.out[k]), _OUTPUT_RIGHT), "q1")
        if i == self.n_q1_end:
            return Command((), "q2")
        if i < self.n_steps - 1:
            if self._q2_digits(i) > self.kept:
                return Command((Action("OUTPUT", "LEFT"),), "q2")
            return Command((_OUTPUT_BARE,), "qH")
        return HALT

    def step_of(self, state: ExecutorState) -> int:
        """The step whose state has these registers (q2 drops one digit per step)."""
        if state.q == "q2":
            return self.n_q1_end + 1 + len(self.a) - len(state.output)
        return super().step_of(state)


class LeftMaskRun(Run):
    """LEFT_MASK: copy the operand, erase its top digit, then erase the zeros it exposes."""

    machine = "LEFT_MASK"

    def __init__(self, a: str):
        self.a = a
        self.kept = len(a[:-1].rstrip("0"))  # digits left after the masking
        # q0; q1 per digit and one past the end (the last q1 is step len(a)+1);
        # one q2 per output length from len(a)-1 down to `kept`; qH
        self.n_q1_end = len(a) + 1
        self.n_steps = self.n_q1_end + (len(a) - self.kept) + 2

    def _q2_digits(self, i: int) -> int:
        """Output length at q2 step i (the first q2 step holds len(a)-1 digits)."""
        return len(self.a) - 1 - (i - self.n_q1_end - 1)

    def step_of(self, state: ExecutorState) -> int:
        if state.q == "q2":  # one output digit erased per q2 step
            return self.n_q1_end + len(self.a) - len(state.output)
        return super().step_of(state)

    def state(self, i: int) -> ExecutorState:
        if i == 0:
            return ExecutorState("LEFT_MASK", "q0", (Tape("HEAD", self.a, 0),), None, "")
        tape = (Tape("HEAD", self.a, min(i, len(self.a) + 1)),)
        if i <= self.n_q1_end:
            return ExecutorState("LEFT_MASK", "q1", tape, None, self.a[: i - 1])
        if i < self.n_steps - 1:
            return ExecutorState("LEFT_MASK", "q2", tape, None, self.a[: self._q2_digits(i)])
        return ExecutorState("LEFT_MASK", "qH", tape, None, self.a[: self.kept])

    def command(self, i: int) -> Command:
        if i == 0:
            return Command((_RIGHT["HEAD"],), "q1")
        if i < self.n_q1_end:
            return Command((_RIGHT["HEAD"], Action("OUTPUT", self.a[i - 1]), _OUTPUT_RIGHT), "q1")
        if i == self.n_q1_end:
            return Command((Action("OUTPUT", "LEFT"), Action("OUTPUT", "0")), "q2")
        if i < self.n_steps - 1:
            if self._q2_digits(i) > self.kept:
                return Command((Action("OUTPUT", "LEFT"),), "q2")
            return Command((), "qH")
        return HALT
