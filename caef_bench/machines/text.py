"""The CAEF text representation: structured states and commands, rendered and parsed.

Every text a CAEF model reads or writes is one of these:

    ADD, q1,  |5[HEAD1]|4 |7[HEAD2]|6 [C]1 |2[OUTPUT]                 <- executor state line
    CMD: [C] 1, [OUTPUT] 1, [OUTPUT] RIGHT, [HEAD1] RIGHT, [HEAD2] RIGHT, q1   <- command line
    SUB, q2, [HEAD1]|1|3|5|4 [HEAD2]|4|0|5|1                         <- composer state line
    No command to execute. Halt state.                                <- halt line

A composer text adds the callee's state and command lines below its own two.
The machines build the dataclasses below and render them; the parser turns
text back into the same dataclasses, so ``render(parse(t)) == t`` and a model's
output can be compared with the machine field by field.

Digits are kept in *tape order* (least-significant first), exactly as they
stand on the tape: 45 is the tape ``|5|4`` and the digit string ``"54"``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

HALT_LINE = "No command to execute. Halt state."

# Executors read operand tapes that start with one blank cell; a head can stand
# on that blank (start state), on any digit, or one past the last digit.
EXECUTORS = ("ADD", "GREATER_THAN", "LESS_THAN", "EQUAL", "REFLECTION", "LEFT_MASK", "DIGIT_MUL")
# LONG_MUL and LONG_DIV (schoolbook multiplication, long division) render and parse their own
# state lines (long_composers.py): their heads move, and LONG_DIV holds registers of its own.
LONG_COMPOSERS = ("LONG_MUL", "LONG_DIV")
COMPOSERS = ("SUB", "MUL", "DIV") + LONG_COMPOSERS
MACHINES = EXECUTORS + COMPOSERS
CARRY_MACHINES = ("ADD", "DIGIT_MUL")  # executors with a carry register [C]
COMPARISONS = ("GREATER_THAN", "LESS_THAN", "EQUAL")

# Which registers a machine's commands may act on, and what each action's
# argument may be ('' = the bare register, as in "[OUTPUT], qH").
_WORD_ARGS = {
    "HEAD": re.compile(r"RIGHT"),
    "C": re.compile(r"[0-9]"),
    "OUTPUT": re.compile(r"[0-9]|RIGHT|LEFT|True|False"),
    "COUNT": re.compile(r"[0-9]"),
    "CALL": re.compile("|".join(MACHINES)),
}
# LONG_MUL moves HEAD2 down b (Horner's rule, b's top digit first): its one head that moves left
_MACHINE_WORD_ARGS = {("LONG_MUL", "HEAD2"): re.compile(r"LEFT")}
_BARE_OK = ("C", "OUTPUT")  # "[OUTPUT], [C], qH"
_CELLS_OK = ("OUTPUT", "COUNT")  # "[COUNT]|4|0|5|1"
_REGISTERS = {
    "ADD": ("C", "OUTPUT", "HEAD1", "HEAD2"),
    "GREATER_THAN": ("HEAD1", "HEAD2", "OUTPUT"),
    "LESS_THAN": ("HEAD1", "HEAD2", "OUTPUT"),
    "EQUAL": ("HEAD1", "HEAD2", "OUTPUT"),
    "REFLECTION": ("HEAD1", "HEAD2", "OUTPUT"),
    "LEFT_MASK": ("HEAD", "OUTPUT"),
    "DIGIT_MUL": ("C", "OUTPUT", "HEAD1", "HEAD2"),
    "SUB": ("CALL",),
    "MUL": ("COUNT", "OUTPUT", "CALL"),
    "DIV": ("COUNT", "OUTPUT", "CALL"),
    "LONG_MUL": ("CALL", "OUTPUT", "HEAD2"),
    "LONG_DIV": ("CALL",),
}


@lru_cache(maxsize=4096)  # operand tapes are rendered again at every step of a run
def cells(digits: str) -> str:
    """Tape-order digit string -> tape cells: '54' -> '|5|4'."""
    return "|" + "|".join(digits) if digits else ""


def to_tape(n: int) -> str:
    """A non-negative integer -> its digits in tape order (least-significant first)."""
    return str(n)[::-1]


def from_tape(digits: str) -> int:
    return int(digits[::-1])


# The format's vocabulary: every multi-character unit a CAEF text is made of.
# A tokenizer built for CAEF gives each one a token and every other character
# a token of its own; data summaries count lengths in these units.
MARKERS = ("[HEAD1]", "[HEAD2]", "[HEAD]", "[C]", "[OUTPUT]", "[COUNT]", "[CALL]")
FORMAT_WORDS = (
    HALT_LINE,
    *(f"|{d}" for d in "0123456789"),
    *MARKERS,
    *("GREATER_THAN", "LESS_THAN", "EQUAL", "REFLECTION", "LEFT_MASK", "ADD", "SUB", "MUL", "DIV"),
    *(f"q{i}" for i in range(10)),
    "qH", "True", "False", "RIGHT", "LEFT", "CMD",
)
# Longest first, so that "LEFT_MASK" wins over "LEFT" and "[HEAD1]" over "[HEAD]".
FORMAT_UNIT_PATTERN = "|".join(re.escape(w) for w in sorted(FORMAT_WORDS, key=len, reverse=True)) + r"|[\s\S]"
FORMAT_UNIT = re.compile(FORMAT_UNIT_PATTERN)


def split_units(text: str) -> list[str]:
    """Split a text into format units; ''.join(split_units(t)) == t."""
    return FORMAT_UNIT.findall(text)


# --------------------------------------------------------------------------- data model


@dataclass(frozen=True, slots=True)
class Tape:
    """An executor's operand tape: its digits and where its head stands.

    head 0 is the blank cell before the digits (the start state), head i in
    1..len(digits) is on digit i-1, and len(digits)+1 is past the last digit.
    """

    marker: str  # "HEAD1", "HEAD2" or "HEAD"
    digits: str
    head: int


@dataclass(frozen=True, slots=True)
class ExecutorState:
    """State line of an executor (ADD, comparisons, REFLECTION, LEFT_MASK)."""

    machine: str
    q: str  # "q0", "q1", "q2" or "qH"
    tapes: tuple[Tape, ...]
    carry: str | None = None  # ADD only: "" before the first write, then one digit
    output: str = ""  # tape-order digits, or "" / "True" / "False" for comparisons

    @property
    def halted(self) -> bool:
        return self.q == "qH"


@dataclass(frozen=True, slots=True)
class ComposerState:
    """State line of a composer (SUB, MUL, DIV): its operands and registers."""

    machine: str
    q: str
    a: str  # tape-order digits
    b: str
    count: str | None = None  # MUL and DIV only; "" before the first write
    output: str = ""

    @property
    def halted(self) -> bool:
        return self.q == "qH"


@dataclass(frozen=True, slots=True)
class Action:
    """One action of a command: "[C] 1" is Action("C", "1"); "[OUTPUT]" is Action("OUTPUT", "")."""

    register: str
    arg: str = ""


@dataclass(frozen=True, slots=True)
class Command:
    """A command line: actions then the next state; next_q None is the halt line."""

    actions: tuple[Action, ...]
    next_q: str | None

    @property
    def is_halt(self) -> bool:
        return self.next_q is None

    @property
    def call(self) -> str | None:
        """The machine a composer's command calls, if any."""
        for action in self.actions:
            if action.register == "CALL":
                return action.arg
        return None


HALT = Command((), None)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A whole text: a state, its command, and for a composer the callee's lines."""

    state: ExecutorState | ComposerState
    command: Command | None = None  # None: a state line alone
    callee: Snapshot | None = None
    trailing_newline: bool = False

    @property
    def machine(self) -> str:
        return self.state.machine


# --------------------------------------------------------------------------- rendering


def render_tape(marker: str, digit_cells: str, head: int) -> str:
    """Render an executor tape from pre-rendered cells (fast path for the machines)."""
    if head == 0:
        return f"[{marker}] {digit_cells}"
    split = 2 * (head - 1)  # every cell is two characters: '|' and a digit
    return f" {digit_cells[:split]}[{marker}]{digit_cells[split:]}"


def render_state(state: ExecutorState | ComposerState) -> str:
    if isinstance(state, ComposerState):
        return _render_composer_state(state)
    tapes = "".join(render_tape(t.marker, cells(t.digits), t.head) for t in state.tapes)
    head = f"{state.machine}, {state.q}, {tapes}"
    if state.carry is not None:
        head += f" [C]{state.carry}"
    return f"{head} {render_output(state.machine, state.output, state.q)}"


def render_output(machine: str, output: str, q: str) -> str:
    """The output register: digits before the [OUTPUT] head, or a truth value after it."""
    halted = q == "qH"
    if machine in COMPARISONS:
        return output if halted else f"[OUTPUT]{output}"
    if halted:
        # LEFT_MASK erases every digit of 0..9 and 10, 100, ...: the empty result reads "0".
        return cells(output) if output or machine != "LEFT_MASK" else "0"
    if machine == "REFLECTION" and q == "q2" and not output:
        # REFLECTION dropped every digit of an all-zero result: the reference writes the
        # emptied tape as a bare cell boundary (LEFT_MASK's emptied q2 tape has none).
        return "|[OUTPUT]"
    return f"{cells(output)}[OUTPUT]"


def _render_composer_state(state: ComposerState) -> str:
    if state.machine in LONG_COMPOSERS:
        return _render_long_state(state)
    text = f"{state.machine}, {state.q}, [HEAD1]{cells(state.a)} [HEAD2]{cells(state.b)} "
    if state.machine == "SUB":
        return text + cells(state.output)
    marker = "" if state.halted else "[OUTPUT]"
    return f"{text}[COUNT]{cells(state.count or '')} {marker}{cells(state.output)}"


def render_action(action: Action) -> str:
    arg = action.arg
    if not arg:
        return f"[{action.register}]"
    if arg.startswith("|"):  # a number written as cells: "[OUTPUT]|6|4|9"
        return f"[{action.register}]{arg}"
    return f"[{action.register}] {arg}"


@lru_cache(maxsize=8192)  # a machine issues a few hundred distinct commands at most
def render_command(command: Command, machine: str) -> str:
    if command.next_q is None:
        return HALT_LINE
    items = [render_action(a) for a in command.actions]
    items.append(command.next_q)
    prefix = "CMD: " if machine == "ADD" else "CMD "
    return prefix + ", ".join(items)


def render(snapshot: Snapshot) -> str:
    """Structured snapshot -> the exact CAEF text."""
    lines = [render_state(snapshot.state)]
    if snapshot.command is not None:
        lines.append(render_command(snapshot.command, snapshot.machine))
    if snapshot.callee is not None:
        lines.append(render(snapshot.callee))
    text = "\n".join(lines)
    return text + "\n" if snapshot.trailing_newline else text


# --------------------------------------------------------------------------- parsing


class FormatError(ValueError):
    """A text that is not valid CAEF format; names the first offending token."""

    def __init__(self, message: str, line: int, column: int, token: str):
        self.line, self.column, self.token = line, column, token
        super().__init__(f"line {line}, column {column}: {message} at {token!r}")


_TOKEN = re.compile(r"\[[A-Z_0-9]*\]?|\|[0-9]?|[A-Za-z_]+[0-9]*|[0-9]+|\s|.")
_Q = re.compile(r"q(?:[0-9]|H)")
_CELL_RUN = re.compile(r"(?:\|[0-9])*")  # ASCII digits only, as the tokenizer's cells
_MACHINE = re.compile("|".join(sorted(MACHINES, key=len, reverse=True)))


class _Cursor:
    """Left-to-right reader of one line that reports the offending token on failure."""

    def __init__(self, text: str, line: int):
        self.text, self.line, self.pos = text, line, 0

    def fail(self, message: str) -> FormatError:
        token = _TOKEN.match(self.text, self.pos) if self.pos < len(self.text) else None
        return FormatError(message, self.line, self.pos + 1, token.group(0) if token else "<end of line>")

    def take(self, literal: str) -> bool:
        if self.text.startswith(literal, self.pos):
            self.pos += len(literal)
            return True
        return False

    def expect(self, literal: str) -> None:
        if not self.take(literal):
            raise self.fail(f"expected {literal!r}")

    def regex(self, pattern: re.Pattern, what: str) -> str:
        match = pattern.match(self.text, self.pos)
        if not match:
            raise self.fail(f"expected {what}")
        self.pos = match.end()
        return match.group(0)

    def digits(self) -> str:
        """Read tape cells '|d|d…' and return the digit string (possibly empty)."""
        # one regex match, not a loop per cell: a 100-digit tape is parsed at every step of a run
        start, text = self.pos, self.text
        pos = _CELL_RUN.match(text, start).end()
        if pos < len(text) and text[pos] == "|":
            self.pos = pos
            raise self.fail("expected a digit after '|'")
        self.pos = pos
        return text[start + 1 : pos : 2]

    def end(self) -> None:
        if self.pos != len(self.text):
            raise self.fail("unexpected text")


def _parse_tape(cur: _Cursor, marker: str) -> Tape:
    mark = f"[{marker}]"
    if cur.take(mark):
        cur.expect(" ")
        return Tape(marker, cur.digits(), 0)
    cur.expect(" ")
    before = cur.digits()
    if not cur.take(mark):
        raise cur.fail(f"expected {mark} or a digit cell")
    return Tape(marker, before + cur.digits(), len(before) + 1)


def _parse_state(cur: _Cursor) -> ExecutorState | ComposerState:
    machine = cur.regex(_MACHINE, "a machine name")
    cur.expect(", ")
    q = cur.regex(_Q, "a state q0..q9 or qH")
    cur.expect(", ")
    halted = q == "qH"
    if machine in LONG_COMPOSERS:
        state = _parse_long_state(cur, machine, q)
        cur.end()
        return state
    if machine in COMPOSERS:
        cur.expect("[HEAD1]")
        a = cur.digits()
        cur.expect(" [HEAD2]")
        b = cur.digits()
        cur.expect(" ")
        if machine == "SUB":
            state = ComposerState(machine, q, a, b, None, cur.digits())
        else:
            cur.expect("[COUNT]")
            count = cur.digits()
            cur.expect(" ")
            if not halted:
                cur.expect("[OUTPUT]")
            state = ComposerState(machine, q, a, b, count, cur.digits())
        cur.end()
        return state
    markers = ("HEAD",) if machine == "LEFT_MASK" else ("HEAD1", "HEAD2")
    tapes = tuple(_parse_tape(cur, m) for m in markers)
    carry = None
    if machine in CARRY_MACHINES:
        cur.expect(" [C]")
        carry = cur.regex(re.compile(r"[0-9]?"), "a carry digit")
    cur.expect(" ")
    output = _parse_output(cur, machine, q)
    cur.end()
    return ExecutorState(machine, q, tapes, carry, output)


def _parse_output(cur: _Cursor, machine: str, q: str) -> str:
    halted = q == "qH"
    if machine in COMPARISONS:
        if halted:
            return cur.regex(re.compile(r"True|False"), "True or False")
        cur.expect("[OUTPUT]")
        return cur.regex(re.compile(r"(True|False)?"), "True, False or nothing")
    if halted and machine == "LEFT_MASK" and cur.take("0"):
        return ""
    if machine == "REFLECTION" and q == "q2":
        if cur.take("|[OUTPUT]"):
            return ""
        if cur.text.startswith("[OUTPUT]", cur.pos):
            raise cur.fail("REFLECTION writes an emptied q2 tape as '|[OUTPUT]'")
    output = cur.digits()
    if not halted:
        cur.expect("[OUTPUT]")
    elif not output:
        raise cur.fail("expected the output digits")
    return output


def _parse_command(cur: _Cursor, machine: str) -> Command:
    if cur.take(HALT_LINE):
        cur.end()
        return HALT
    cur.expect("CMD: " if machine == "ADD" else "CMD ")
    actions = []
    while not _Q.match(cur.text, cur.pos):
        actions.append(_parse_action(cur, machine))
        cur.expect(", ")
    next_q = cur.regex(_Q, "the next state")
    cur.end()
    return Command(tuple(actions), next_q)


def _parse_action(cur: _Cursor, machine: str) -> Action:
    start = cur.pos
    cur.expect("[")
    register = cur.regex(re.compile(r"[A-Z_0-9]+"), "a register name")
    if register not in _REGISTERS[machine]:
        cur.pos = start
        raise cur.fail(f"{machine} has no such register")
    cur.expect("]")
    if cur.text.startswith("|", cur.pos):
        if register not in _CELLS_OK:
            raise cur.fail(f"[{register}] takes no digit cells")
        return Action(register, cells(cur.digits()))
    if cur.take(" "):
        word_start = cur.pos
        word = cur.regex(re.compile(r"[^,]+"), f"an argument for [{register}]")
        pattern = _MACHINE_WORD_ARGS.get((machine, register)) or _WORD_ARGS[register[:4] if register.startswith("HEAD")
                                                                             else register]
        if not pattern.fullmatch(word):
            cur.pos = word_start
            raise cur.fail(f"invalid argument for [{register}]")
        return Action(register, word)
    if register not in _BARE_OK:
        raise cur.fail(f"[{register}] needs an argument")
    return Action(register, "")


def _command_end(line: str) -> int | None:
    """Where a command line's last word ends: after the halt line, or after the first item that is a
    state name (every action is "[REGISTER]..."); None when the line holds no complete command."""
    if line.startswith(HALT_LINE):
        return len(HALT_LINE)
    for prefix in ("CMD: ", "CMD "):
        if line.startswith(prefix):
            offset = len(prefix)
            for item in line[offset:].split(", "):
                word = _Q.match(item)  # a state name is two characters: what follows it is past the end
                if word:
                    return offset + word.end()
                offset += len(item) + 2
    return None


def split_step_end(text: str) -> tuple[str, str]:
    """(the step's text, what follows its end): a model's output is complete at the last word of its
    last command, the way a stop string ends a completion.

    A state and its command end at the command's state name (or the halt line); a composer's command
    that calls ([CALL]) goes on with the callee's state and command, and ends at theirs, with
    one trailing newline if there is one. No valid output goes on past that point, so the cut changes
    no correct step; it ends a step whose model wrote the right command and then missed its end-of-text token
    ("..., qH, qH, qH"). Text without a complete command is returned whole, to fail parsing as it is.
    """
    lines = text.split("\n")
    command_line, end = 1, _command_end(lines[1]) if len(lines) > 1 else None
    if end is not None and "[CALL]" in lines[1][:end]:  # a composer's call: the callee's command ends it
        command_line, end = 3, _command_end(lines[3]) if len(lines) > 3 else None
    if end is None:
        return text, ""
    cut = sum(len(line) + 1 for line in lines[:command_line]) + end
    if text.startswith("\n", cut):  # one trailing newline, as parse() allows (aligner (I)'s start texts)
        cut += 1
    return text[:cut], text[cut:]


def parse(text: str) -> Snapshot:
    """Parse any CAEF state/command text into a Snapshot.

    Accepts a state line alone, a state and its command, or a composer's two
    lines followed by the callee's state and command (or halt) lines; one
    trailing newline is allowed. Raises FormatError naming the first offending
    token, so ``render(parse(t)) == t`` for every text that parses.
    """
    if not isinstance(text, str):
        raise TypeError(f"parse() takes a str, not {type(text).__name__}")
    trailing = text.endswith("\n")
    lines = (text[:-1] if trailing else text).split("\n")
    if lines == [""]:
        raise FormatError("empty text", 1, 1, "<end of line>")
    if len(lines) > 4:
        raise FormatError("too many lines (at most 4)", 5, 1, lines[4][:20] or "<end of line>")
    state = _parse_state(_Cursor(lines[0], 1))
    command = _parse_command(_Cursor(lines[1], 2), state.machine) if len(lines) > 1 else None
    callee = None
    if len(lines) > 2:
        if state.machine not in COMPOSERS:
            raise FormatError(f"{state.machine} is an executor and has no callee lines", 3, 1, lines[2][:20] or "<end of line>")
        callee_state = _parse_state(_Cursor(lines[2], 3))
        if callee_state.machine in COMPOSERS:
            raise FormatError("a composer cannot be a callee", 3, 1, callee_state.machine)
        callee_command = _parse_command(_Cursor(lines[3], 4), callee_state.machine) if len(lines) > 3 else None
        callee = Snapshot(callee_state, callee_command)
    return Snapshot(state, command, callee, trailing)


# --------------------------------------------------------------------------- LONG_MUL's and LONG_DIV's states
# (the machines are caef_bench.machines.long_composers; their state lines are text's, as every other machine's)


@dataclass(frozen=True, slots=True)
class LongMulState(ComposerState):
    """LONG_MUL's state line: a, b with a moving HEAD2, and the product register P after [OUTPUT].

        LONG_MUL, q1, [HEAD1]|6|4|9 |5[HEAD2]|1 [OUTPUT]|6|4|9

    Horner's rule, b's top digit first: HEAD2 stands just above the next digit to multiply, the
    cell before its marker (an executor tape's head numbers: head k+1 before digit k, len(b)+1 past
    the top; head 1, "[HEAD2]|5|1" as the paper's composers write b, is the start state and, in q1,
    "every digit done"). P is the product so far in tape order, its cell k the product's digit k
    (empty before the first partial product). The halt state drops the marker and holds the product.
    """

    head: int = 1

    @property
    def heads(self) -> tuple[int, ...]:
        return (self.head,)

    @property
    def registers(self) -> tuple[str, ...]:
        return ()


@dataclass(frozen=True, slots=True)
class LongDivState(ComposerState):
    """LONG_DIV's state line: a with a moving HEAD1, b, the remainder, b's complement, the quotient.

        LONG_DIV, q3,  |2[HEAD1]|2 [HEAD2]|5 [REM]|2|0 [NEG]|5|9 [OUTPUT]|0

    HEAD1 stands before the digit of a brought down last (len(a)+1, past the top, before the
    first; it moves down to 1). [REM] is the partial remainder on w = len(b)+1 cells, zeros kept;
    [NEG] is 10^w - b on w cells (b's ten's complement: ADD(REM, NEG) is REM - b with a carry out
    of the top column exactly when REM >= b). The quotient's newest digit is its first cell, the
    one being counted. The halt state drops the [OUTPUT] marker and the quotient's top zeros; [REM]
    then holds a mod b.
    """

    head: int = 1
    neg: str = ""
    rem: str = ""

    @property
    def heads(self) -> tuple[int, ...]:
        return (self.head,)

    @property
    def registers(self) -> tuple[str, ...]:
        return (self.rem, self.neg)


def _render_long_state(state: LongMulState | LongDivState) -> str:
    """The state line of LONG_MUL or LONG_DIV."""
    halted = state.q == "qH"
    if state.machine == "LONG_MUL":
        b = render_tape("HEAD2", cells(state.b), state.head)
        marker = "" if halted else "[OUTPUT]"
        return f"LONG_MUL, {state.q}, [HEAD1]{cells(state.a)}{b} {marker}{cells(state.output)}"
    a = render_tape("HEAD1", cells(state.a), state.head)
    marker = "" if halted else "[OUTPUT]"
    return (f"LONG_DIV, {state.q}, {a} [HEAD2]{cells(state.b)} [REM]{cells(state.rem)} "
            f"[NEG]{cells(state.neg)} {marker}{cells(state.output)}")


def _parse_long_state(cur, machine: str, q: str) -> LongMulState | LongDivState:
    """Read the rest of a LONG_MUL or LONG_DIV state line from the cursor (after "MACHINE, q, ")."""
    halted = q == "qH"

    def moving_tape(marker: str) -> tuple[str, int]:
        cur.expect(" ")
        before = cur.digits()
        cur.expect(f"[{marker}]")
        return before + cur.digits(), len(before) + 1

    if machine == "LONG_MUL":
        cur.expect("[HEAD1]")
        a = cur.digits()
        b, head = moving_tape("HEAD2")
        cur.expect(" " if halted else " [OUTPUT]")
        product = cur.digits()
        if halted and not product:
            raise cur.fail("expected the product's digits")
        return LongMulState(machine, q, a, b, None, product, head)
    def register(marker: str) -> str:
        cur.expect(f" [{marker}]")
        return cur.digits()

    a, head = moving_tape("HEAD1")
    b, rem, neg = register("HEAD2"), register("REM"), register("NEG")
    cur.expect(" " if halted else " [OUTPUT]")
    output = cur.digits()
    if halted and not output:
        raise cur.fail("expected the quotient's digits")
    return LongDivState(machine, q, a, b, None, output, head, neg, rem)
