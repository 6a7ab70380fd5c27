"""Classify how a model's step text differs from the machine's: where a run first failed, and how."""

from __future__ import annotations

from .text import ComposerState, FormatError, Snapshot, parse

# In order of precedence: the first difference found names the error.
ERROR_CLASSES = (
    "unparseable",  # the text is not CAEF format
    "wrong_state",  # another machine or another q
    "misplaced_head",  # a head marker on the wrong cell
    "wrong_carry",  # ADD's carry register
    "wrong_digit",  # a digit on a tape, in the output, or in a composer register
    "wrong_output",  # a comparison's True/False register
    "wrong_command",  # the command line (actions or next state)
    "wrong_callee",  # a composer's callee lines are missing, extra or differ
)


def classify(expected: str, got: str) -> str | None:
    """None when the texts are identical, else the first error class that explains the difference."""
    if got == expected:
        return None
    try:
        actual = parse(got)
    except FormatError:
        return "unparseable"
    return _difference(parse(expected), actual) or "wrong_command"  # e.g. a missing trailing newline


def _difference(expected: Snapshot, actual: Snapshot) -> str | None:
    e, a = expected.state, actual.state
    if type(e) is not type(a) or e.machine != a.machine or e.q != a.q:
        return "wrong_state"
    if isinstance(e, ComposerState):
        # LONG_MUL and LONG_DIV also move heads and keep registers of their own (long_composers.py)
        if getattr(e, "heads", ()) != getattr(a, "heads", ()):
            return "misplaced_head"
        if (e.a, e.b, e.count, e.output, getattr(e, "registers", ())) != (a.a, a.b, a.count, a.output,
                                                                        getattr(a, "registers", ())):
            return "wrong_digit"
    else:
        if tuple(t.head for t in e.tapes) != tuple(t.head for t in a.tapes):
            return "misplaced_head"
        if e.carry != a.carry:
            return "wrong_carry"
        if tuple(t.digits for t in e.tapes) != tuple(t.digits for t in a.tapes):
            return "wrong_digit"
        if e.output != a.output:
            return "wrong_output" if e.machine in ("GREATER_THAN", "LESS_THAN", "EQUAL") else "wrong_digit"
    if expected.command != actual.command:
        return "wrong_command"
    if (expected.callee is None) != (actual.callee is None):
        return "wrong_callee"
    if expected.callee is not None:
        return _difference(expected.callee, actual.callee)
    return None
