"""The aligner in both directions: expression <-> the executor's start and halt texts.

    align_input("45+67=")  -> "ADD, q0, [HEAD1] |5|4[HEAD2] |7|6 [C] [OUTPUT]\\nCMD: …, q1\\n"
    align_input("946*15=", route="long") -> "LONG_MUL, q0, [HEAD1]|6|4|9 [HEAD2]|5|1 [OUTPUT]\\nCMD q1\\n"
    align_output("ADD, qH,  |5|4[HEAD1] |7|6[HEAD2] [C]1 |2|1|1\\nNo command …") -> "45+67=112"

align_input checks the expression's syntax only: it is a format map, and the
reference aligner examples include expressions outside a machine's domain
(``45-67=``). `trace` and the CLI also check the operator's domain.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .ops import BY_MACHINE, BY_SYMBOL, Operation, lookup, operand, routed
from .text import ComposerState, Snapshot, from_tape, parse

# Longest symbols first so that "//" and "==" win over any one-character reading.
_SYMBOLS = sorted(BY_SYMBOL, key=len, reverse=True)
_EXPRESSION = re.compile(r"([0-9]+)(" + "|".join(re.escape(s) for s in _SYMBOLS) + r")([0-9]+)=")


@dataclass(frozen=True)
class Expression:
    operation: Operation
    a: int
    b: int

    @property
    def op(self) -> str:
        return self.operation.name

    def __str__(self) -> str:
        return f"{self.a}{self.operation.symbol}{self.b}="


def operand_texts(expr: str) -> tuple[str, str, str] | None:
    """'45+67=' -> ('add', '45', '67'): the operator and the operands' digits as written, without
    converting them (Python refuses to read integers of more than a few thousand digits); None when
    the text is not the template."""
    match = _EXPRESSION.fullmatch(expr) if isinstance(expr, str) else None
    if match is None:
        return None
    a, symbol, b = match.groups()
    return BY_SYMBOL[symbol].name, a, b


def parse_expression(expr: str) -> Expression:
    """'45+67=' -> Expression('add', 45, 67); ValueError with a one-line reason otherwise."""
    if not isinstance(expr, str):
        raise ValueError(f"expression must be a string, got {type(expr).__name__}")
    if not expr.strip():
        raise ValueError("empty expression")
    if any(ch.isspace() for ch in expr):
        raise ValueError(f"spaces are not allowed in an expression: {expr!r}")
    match = _EXPRESSION.fullmatch(expr)
    if match:
        a, symbol, b = match.groups()
        return Expression(BY_SYMBOL[symbol], operand(a, "a"), operand(b, "b"))
    raise ValueError(_explain(expr))


_DIGITS = re.compile(r"[0-9]+")
# What a person types around the template: blanks between numbers and symbols ("12 + 34 ="), none
# inside a number ("4 5+6" stays an error: is it 45 or a missing operator?).
_BLANKS_AROUND_SYMBOLS = re.compile(r"\s*([^0-9\s]+)\s*")
_BLANK_INSIDE_NUMBER = re.compile(r"[0-9]\s+[0-9]")


def typed_expression(text: str) -> str:
    """What a person typed -> the template the machines read: "12 + 34" -> "12+34=", " 7 < 7 " -> "7<7=".

    Only what has one plain meaning is mended: blanks around the operator and the '=', and a missing
    final '='. Everything else (blanks inside a number, signs, unknown operators, an answer after the
    '=') is left for parse_expression to refuse with its one-line reason. Model outputs are never
    read through this: the runtime keeps the template's exact bytes."""
    if not isinstance(text, str):
        raise ValueError(f"expression must be a string, got {type(text).__name__}")
    stripped = text.strip()
    if _BLANK_INSIDE_NUMBER.search(stripped):
        raise ValueError(f"spaces are not allowed inside a number: {stripped!r}")
    joined = _BLANKS_AROUND_SYMBOLS.sub(r"\1", stripped)
    if joined and joined[-1].isdigit() and not re.search(r"[0-9]=[0-9]", joined):
        joined += "="  # "12+34" asks 12+34= (but "12+34=46" is not a question: left to be refused)
    return joined


def _explain(expr: str) -> str:
    """Name what is wrong with an expression that does not match the template."""
    if not expr.endswith("="):
        asked, equals, after = expr.rpartition("=")
        if equals and after.isdigit() and _EXPRESSION.fullmatch(asked + "="):
            return f"expression must end with '=', without an answer after it (template '<a><op><b>='): {expr!r}"
        return f"expression must end with '=' (template '<a><op><b>='): {expr!r}"
    body = expr[:-1]
    if body[:1] in ("+", "-"):
        return f"signed operands are not supported (non-negative integers only): {expr!r}"
    gap = re.search(r"[^0-9]+", body)
    if gap is None:
        return f"missing operator (one of {' '.join(BY_SYMBOL)}): {expr!r}"
    token = gap.group(0)
    symbol = next((s for s in _SYMBOLS if token.startswith(s)), None)
    if symbol and token[len(symbol):] in ("+", "-"):
        return f"signed operands are not supported (non-negative integers only): {expr!r}"
    if re.fullmatch(r"[-+*/<>=!%^&|~.,:;?@#$\\]+", token) and token not in BY_SYMBOL:
        return f"unknown operator {token!r}; expected one of {' '.join(BY_SYMBOL)}: {expr!r}"
    # Letters or other characters inside a number: name the operand that holds them.
    split = next(((i, s) for i in range(1, len(body)) for s in _SYMBOLS if body.startswith(s, i)), None)
    if split is None:
        return f"operand {body!r} is not a non-negative integer: {expr!r}"
    position, symbol = split
    left, right = body[:position], body[position + len(symbol):]
    if not right:
        return f"missing second operand: {expr!r}"
    bad = left if not _DIGITS.fullmatch(left) else right
    return f"operand {bad!r} is not a non-negative integer: {expr!r}"


def start_operands(snapshot: Snapshot) -> tuple[str, str]:
    """The operands a start state holds, as decimal numbers (most significant digit first) exactly as
    its tapes write them: a composer's a and b fields, an executor's first two tapes."""
    state = snapshot.state
    if isinstance(state, ComposerState):
        tapes = (state.a, state.b)
    else:
        if len(state.tapes) < 2:
            raise ValueError(f"a {state.machine} state holds no two operand tapes")
        tapes = (state.tapes[0].digits, state.tapes[1].digits)
    return tapes[0][::-1], tapes[1][::-1]


def start_misalignment(expr: str, snapshot: Snapshot, route: str = "paper") -> str | None:
    """Why a start state (aligner (I)'s output for expr) is not expr's problem, or None when it holds
    the machine that answers expr on `route` (ops.ROUTES) and expr's operands. The runtime executes
    only the problem it was asked."""
    asked = parse_expression(expr)
    machine = lookup(routed(asked.op, route)).machine
    if snapshot.state.machine != machine:
        return f"aligner (I) started {snapshot.state.machine} for {machine} ({expr})"
    try:
        written = start_operands(snapshot)
    except ValueError as error:
        return f"aligner (I): {error}"
    wrong = [f"operand {name} as {got} (asked {want})"
             for name, got, want in zip("ab", written, (str(asked.a), str(asked.b))) if got != want]
    return "aligner (I) copied " + " and ".join(wrong) if wrong else None


def answer_misalignment(expr: str, final: str) -> str | None:
    """Why aligner (O)'s text is not an answer to expr (it must be expr followed by the result), or None."""
    written, equals, _ = final.rpartition("=")
    if not equals or written + "=" != expr:
        shown = (written + equals) if equals else final
        return f"aligner (O) wrote {shown[:200]!r} for the asked {expr!r}"
    return None


def answer_miscopy(halt_text: str, final: str) -> str | None:
    """Why aligner (O)'s result is not the one the halt state it read holds, or None. The result is a copy
    (the output tape's digits, or the verdict register), so a result of other digits is no answer: the
    halt state holds the executors' answer, and aligner (O) only writes it out."""
    held = align_output(halt_text).rpartition("=")[2]
    written = final.rpartition("=")[2]
    if written != held:
        return f"aligner (O) wrote the result {written[:200]!r} where the halt state holds {held[:200]!r}"
    return None


def align_input(expr: str, route: str = "paper") -> str:
    """Aligner (I): the templated expression -> the start state and first command of the machine that
    answers it on `route` (ops.ROUTES: "long" starts LONG_MUL for `a*b=`, LONG_DIV for `a//b=`)."""
    parsed = parse_expression(expr)
    return lookup(routed(parsed.op, route)).start_text(parsed.a, parsed.b)


def align_output(halt_text: str) -> str:
    """Aligner (O): an executor's halt state (and halt line) -> the expression with its result."""
    snapshot: Snapshot = parse(halt_text)
    state = snapshot.state
    if not state.halted:
        raise ValueError(f"not a halt state: {state.machine} is in {state.q}")
    if snapshot.command is not None and not snapshot.command.is_halt:
        raise ValueError("a halt state must be followed by the halt line, not a command")
    if snapshot.callee is not None:
        raise ValueError("a halt text has no callee lines")
    operation = BY_MACHINE[state.machine]
    if operation.symbol is None:
        raise ValueError(f"{state.machine} is an auxiliary machine and has no expression form")
    if isinstance(state, ComposerState):
        a, b, result = state.a, state.b, str(from_tape(state.output))
    else:
        a, b = state.tapes[0].digits, state.tapes[1].digits
        result = state.output if state.machine in ("GREATER_THAN", "LESS_THAN", "EQUAL") else str(from_tape(state.output))
    return f"{from_tape(a)}{operation.symbol}{from_tape(b)}={result}"
