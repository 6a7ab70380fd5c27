"""The three composers: SUB, MUL and DIV, which call executors.

A composer step issues "[CALL] X" and the runtime switches to executor X. The
composer's transition texts carry the callee's lines: its output shows the
callee's start state and first command, and its next input shows the callee's
halt state and halt line.

    SUB(a, b) = LEFT_MASK(ADD(ADD(a, REFLECTION(9…9, b)), 1))       a >= b
    (REFLECTION drops its result's leading zeros, so the first ADD's b may be shorter than a)
    MUL(a, b): count = 1, out = a; while count < b: out += a; count += 1
    DIV(a, b): count = b, out = 0; while not count > a: out += 1; count += b
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .executors import AddRun, CompareRun, LeftMaskRun, ReflectionRun, Run
from .text import HALT, Action, Command, ComposerState, Snapshot, cells, render, to_tape


@dataclass(frozen=True)
class Phase:
    """One composer step: its state, its command and, for a call, the callee's run."""

    state: ComposerState
    command: Command
    callee: Run | None = None


def composer_view(composer: str, halt: Snapshot, start: Snapshot) -> Snapshot:
    """A callee's halt state (as the callee writes it) the way the composer's texts show it.

    The reference implementation writes a few callee halt states differently
    from the callee's own trace, and the released adapters were trained on
    those texts, so they are reproduced here:
    - in SUB, an ADD halt always shows the carry register as "[C]0";
    - in SUB, a LEFT_MASK halt shows its input without the top digit, zeros
      kept ("|0|0", where the standalone machine erases them down to "0");
    - in MUL, a LESS_THAN halt writes the count's tape in natural order
      (count 12 shows "|1|2" where its start state shows "|2|1").
    A pure format conversion of the callee's halt and start texts, so the
    runtime applies it to a model's callee output just as the machines do.
    """
    state = halt.state
    if composer == "SUB" and state.machine == "ADD":
        state = replace(state, carry="0")
    elif composer == "SUB" and state.machine == "LEFT_MASK":
        state = replace(state, output=start.state.tapes[0].digits[:-1])
    elif composer == "MUL" and state.machine == "LESS_THAN":
        count_tape = state.tapes[0]
        state = replace(state, tapes=(replace(count_tape, digits=count_tape.digits[::-1]),) + state.tapes[1:])
    return Snapshot(state, halt.command)


# The operands a call copies from its composer's state, by the composer and the state it issues the call in:
# MUL and DIV call on their own tapes; SUB's first call on a and b, its later ones on an earlier callee's
# result, which its state does not hold. The runs below build their calls from it (`call_operands`), and the
# runtime checks a model's calls against it (`call_miscopy`).
CALL_OPERANDS = {
    ("MUL", "q1"): lambda state: (state.count, state.b),
    ("MUL", "q2"): lambda state: (state.a, state.output),
    ("MUL", "q3"): lambda state: (state.count, "1"),
    ("DIV", "q1"): lambda state: (state.count, state.a),
    ("DIV", "q2"): lambda state: (state.output, "1"),
    ("DIV", "q3"): lambda state: (state.b, state.count),
    ("SUB", "q1"): lambda state: ("9" * len(state.a), state.b),
}


def call_operands(state: ComposerState) -> tuple[str, str]:
    """The operands (tape order) of the call a composer issues in `state`."""
    return CALL_OPERANDS[(state.machine, state.q)](state)


# SUB's state holds no callee's result: each of its later calls is on the previous callee's result (as `sub_run`
# chains them), given here with the caller's state and that result.
CHAINED_OPERANDS = {
    ("SUB", "q2"): lambda state, result: (state.a, result),
    ("SUB", "q3"): lambda state, result: (result, "1"),
    ("SUB", "q4"): lambda state, result: (result,),
}


def call_miscopy(caller: ComposerState, callee_start, returned: str | None = None) -> str | None:
    """Why a callee's start state cannot be the call its composer's state issues, going by the operands the
    call copies from the composer's tapes (`CALL_OPERANDS`) or, for SUB's later calls, from the result the
    previous callee `returned` (`CHAINED_OPERANDS`), or None. A composer only copies them; a call on other
    digits computes another problem (DIV's ADD on b with one digit more answered 66471854667//6478030270
    with 1). Operands are shown most significant digit first, as they are written."""
    key = (caller.machine, caller.q)
    if key in CALL_OPERANDS:
        operands, whose = CALL_OPERANDS[key](caller), f"its {caller.machine} state holds"
    elif key in CHAINED_OPERANDS and returned is not None:
        operands, whose = CHAINED_OPERANDS[key](caller, returned), f"its {caller.machine} state and the last result hold"
    else:
        return None
    wrong = [f"operand {name} as {tape.digits[::-1]} ({whose} {want[::-1]})"
             for name, want, tape in zip("ab", operands, callee_start.tapes) if tape.digits != want]
    return "copied " + " and ".join(wrong) if wrong else None


# Where a callee's result goes in its composer's next state, by the composer and the state that made the call:
# MUL's and DIV's additions become their out (q2) or count (q3), and SUB's halt holds LEFT_MASK's result (q4);
# every other register keeps what the calling state held (a comparison only picks the next state).
RESULT_REGISTERS = {("MUL", "q2"): "output", ("MUL", "q3"): "count", ("DIV", "q2"): "output",
                    ("DIV", "q3"): "count", ("SUB", "q4"): "output"}
_REGISTER_NAMES = {"count": "count", "output": "out"}


def _number(digits: str):
    """A register's number (tape-order digits), so that LEFT_MASK's zeros kept on top are the difference SUB
    writes without them; other text as it is."""
    return int(digits[::-1]) if digits.isdigit() else digits


def composer_miscopy(start: ComposerState, state: ComposerState, calling: ComposerState | None = None,
                     returned: str | None = None) -> str | None:
    """Why `state` cannot be a state of the SUB, MUL or DIV run that began at `start`, or None: its operand
    tapes must be the start's (a composer only reads a and b) and, on the step after a callee returned
    `returned` to the state `calling` that called it, its count and out registers must hold that result where
    the composer takes it (`RESULT_REGISTERS`) and what `calling` held elsewhere. A composer that writes another
    number there goes on to answer another problem (SmolLM2's executor_sub wrote SUB's halt out as 34975 where
    LEFT_MASK returned 0701034975). Numbers are shown most significant digit first, as they are written."""
    if state.machine not in ("SUB", "MUL", "DIV"):
        return None
    wrong = [f"rewrote operand {name} as {now[::-1]} (started as {then[::-1]})"
             for name, then, now in (("a", start.a, state.a), ("b", start.b, state.b)) if now != then]
    if calling is not None:
        target = RESULT_REGISTERS.get((calling.machine, calling.q))
        for register, name in _REGISTER_NAMES.items():
            now, held = getattr(state, register), getattr(calling, register)
            want = returned if register == target and returned is not None else held
            if now is None or want is None or _number(now) == _number(want):
                continue
            source = f"the call returned {want[::-1]}" if register == target else f"it held {want[::-1]}"
            wrong.append(f"wrote {name} as {now[::-1]} ({source})")
    return " and ".join(wrong) if wrong else None


def composer_view_of_halt(composer: str, callee: Run) -> Snapshot:
    """The callee run's halt as the composer's texts show it (see `composer_view`)."""
    return composer_view(composer, callee.halt, callee.snapshot(0))


class ComposerRun(Run):
    """A composer's execution as a list of phases; step i is phase i."""

    def __init__(self, machine: str, a: int, b: int, phases: list[Phase]):
        self.machine, self.a, self.b = machine, a, b
        self.phases = phases
        self.n_steps = len(phases)

    def state(self, i: int) -> ComposerState:
        return self.phases[i].state

    def command(self, i: int) -> Command:
        return self.phases[i].command

    def snapshot(self, i: int) -> Snapshot:
        """Step i as the composer's *output* text: with the callee's start if it calls."""
        i = self._index(i)
        phase = self.phases[i]
        callee = phase.callee.snapshot(0) if phase.callee else None
        return Snapshot(phase.state, phase.command, callee)

    def input_snapshot(self, i: int) -> Snapshot:
        """Step i as the composer's *input* text: with the callee's halt once it has returned."""
        i = self._index(i)
        phase = self.phases[i]
        callee = composer_view_of_halt(self.machine, phase.callee) if phase.callee else None
        return Snapshot(phase.state, phase.command, callee, trailing_newline=True)

    def transition(self, i: int) -> tuple[str, str]:
        return render(self.input_snapshot(i)), self.text(i + 1)

    def transitions(self) -> list[tuple[str, str]]:
        return [self.transition(i) for i in range(len(self))]

    def calls(self) -> list[tuple[int, Run]]:
        """(step, callee run) for every call, in order."""
        return [(i, p.callee) for i, p in enumerate(self.phases) if p.callee is not None]


# The executors each composer calls (the order of its phases' calls).
CALLEES = {"SUB": ("REFLECTION", "ADD", "LEFT_MASK"), "MUL": ("LESS_THAN", "ADD"), "DIV": ("GREATER_THAN", "ADD")}


def _call(machine: str, next_q: str) -> Command:
    return Command((Action("CALL", machine),), next_q)


# Composer step counts grow with the operands' values (MUL: 3b-1 steps, DIV:
# 3(a//b)+2), not their lengths; refuse runs no one could train or test on.
MAX_COMPOSER_STEPS = 100_000


def composer_steps(machine: str, a: int, b: int) -> int:
    """Number of steps (states) a composer run takes, without running it."""
    if machine == "SUB":
        return 6
    if machine == "MUL":
        return 3 * b
    return 3 * (a // b) + 3


def _check_size(machine: str, a: int, b: int) -> None:
    steps = composer_steps(machine, a, b)
    if steps > MAX_COMPOSER_STEPS:
        raise ValueError(f"{machine} on ({a}, {b}) would take {steps} steps; the limit is {MAX_COMPOSER_STEPS}")


def first_phase(machine: str, a: int, b: int) -> Phase:
    """The composer's start state and first command (all that aligner (I) needs)."""
    ta, tb = to_tape(a), to_tape(b)
    if machine == "SUB":
        return Phase(ComposerState("SUB", "q0", ta, tb, None, ""), Command((), "q1"))
    if machine == "MUL":
        actions = (Action("COUNT", "1"), Action("OUTPUT", cells(ta)))
    else:
        actions = (Action("COUNT", cells(tb)), Action("OUTPUT", "0"))
    return Phase(ComposerState(machine, "q0", ta, tb, "", ""), Command(actions, "q1"))


def sub_run(a: int, b: int) -> ComposerRun:
    ta, tb = to_tape(a), to_tape(b)

    def state(q: str, output: str = "") -> ComposerState:
        return ComposerState("SUB", q, ta, tb, None, output)

    reflection = ReflectionRun(*call_operands(state("q1")))
    first_sum = AddRun(ta, reflection.halt_output)
    plus_one = AddRun(first_sum.halt.state.output, "1")
    mask = LeftMaskRun(plus_one.halt.state.output)
    difference = to_tape(a - b)
    phases = [
        first_phase("SUB", a, b),
        Phase(state("q1"), _call("REFLECTION", "q2"), reflection),
        Phase(state("q2"), _call("ADD", "q3"), first_sum),
        Phase(state("q3"), _call("ADD", "q4"), plus_one),
        Phase(state("q4"), _call("LEFT_MASK", "qH"), mask),
        Phase(state("qH", difference), HALT),
    ]
    return ComposerRun("SUB", a, b, phases)


def mul_run(a: int, b: int) -> ComposerRun:
    _check_size("MUL", a, b)
    ta, tb = to_tape(a), to_tape(b)

    def state(q: str, count: int, out: int) -> ComposerState:
        return ComposerState("MUL", q, ta, tb, to_tape(count), to_tape(out))

    phases = [first_phase("MUL", a, b)]
    count, out = 1, a
    while True:
        test = CompareRun("LESS_THAN", *call_operands(asking := state("q1", count, out)))
        phases.append(Phase(asking, _call("LESS_THAN", "q2"), test))
        if test.final != "True":
            break
        phases.append(Phase(asking := state("q2", count, out), _call("ADD", "q3"), AddRun(*call_operands(asking))))
        out += a
        phases.append(Phase(asking := state("q3", count, out), _call("ADD", "q1"), AddRun(*call_operands(asking))))
        count += 1
    phases.append(Phase(state("qH", count, out), HALT))
    return ComposerRun("MUL", a, b, phases)


def div_run(a: int, b: int) -> ComposerRun:
    _check_size("DIV", a, b)
    ta, tb = to_tape(a), to_tape(b)

    def state(q: str, count: int, out: int) -> ComposerState:
        return ComposerState("DIV", q, ta, tb, to_tape(count), to_tape(out))

    phases = [first_phase("DIV", a, b)]
    count, out = b, 0
    while True:
        test = CompareRun("GREATER_THAN", *call_operands(asking := state("q1", count, out)))
        phases.append(Phase(asking, _call("GREATER_THAN", "q2"), test))
        if test.final == "True":
            break
        phases.append(Phase(asking := state("q2", count, out), _call("ADD", "q3"), AddRun(*call_operands(asking))))
        out += 1
        phases.append(Phase(asking := state("q3", count, out), _call("ADD", "q1"), AddRun(*call_operands(asking))))
        count += b
    phases.append(Phase(state("qH", count, out), HALT))
    return ComposerRun("DIV", a, b, phases)
