"""Failure classes for the repeated-digit analysis: each failure gets one *where* and one *what*.

The paper's first limitation: on repeated digit patterns ("999…", "456456…") executor and aligner
"tend to generate incorrect steps", errors that "manifest as extra or missing repetitions of the
pattern". This module names, for one failed run, where it first went wrong and what the error
looks like, so that repeated-digit cells can be counted against their random controls.

Where (exactly one):
  aligner (I), executor, aligner (O)   the component of the first step that differs from the machine
                                        (a CAEF traced record's `first_divergence`; a one-step case).
                                        An executor failure also names the machine, the step index,
                                        the call depth and the tape (HEAD1, HEAD2, HEAD, OUTPUT, C,
                                        COUNT, state, command, or `call …` inside a composer's callee lines).
  no halt, unparseable output,          the run as a whole, for runs whose record names no divergent
  wrong call, runtime error             step (untraced records; the runtime stopped them).
  answer                                a baseline, known only by its answer (`unparseable output` when
                                        no answer can be read from its reply).
What (exactly one), from the first divergent field, expected against produced:
  extra_repetition / missing_repetition  the produced digits are the right ones with whole copies of a
                                        unit of 1-3 digits inserted or deleted where that unit already
                                        stands in a run (twice in a row; a single digit three times)
  pattern_overwrite                     digits replaced by more copies of the run next to them: the run goes
                                        on over what should follow it (or starts early), the length kept
  truncated                             the field stops short: its first digits right, two or more missing at
                                        its end (a tape's end is its number's top), not whole repetitions
  duplicated_digit / dropped_digit      one digit inserted (a copy of its neighbour) or deleted, not in a run
  carry_error                           an adder's digits each off by one (mod 10), or its carry register
                                        or carry action wrong: a carry or borrow that should (not) have propagated
  wrong_digit                           digits replaced, the length kept
  head_off_by_one                       a head marker one cell off, or a head move added or left out
  early_halt / late_halt                the model halts where the machine goes on, or goes on where it halts
                                        (an answer: the right one and more)
  wrong_verdict                         a comparison's True/False
  malformed                             not CAEF text (the runtime's `unparseable`) and no digit-level change
                                        explains it; its tape is the field of the machine's text where the
                                        output first departs from it, its position that field's cell there
  other                                 anything else (kept small on purpose)
A run whose answer is right can still have a divergent step (an exact-trace failure):
`Failure.answer_correct` says so.

Positions are indices into the field as it is written: tapes in tape order (least-significant digit
first, as the CAEF text shows them), expressions and answers in reading order.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

from caef_bench.evaluate.scoring import exact_match, extract_answer, is_correct
from caef_bench.machines import ComposerState, FormatError, Snapshot, parse, parse_expression
from caef_bench.machines.ops import BY_SYMBOL
from caef_bench.machines.text import cells, render_command, render_tape, split_units
from caef_bench.runtime.records import ProblemRecord

WHERE = ("aligner (I)", "executor", "aligner (O)", "no halt", "unparseable output", "wrong call", "runtime error",
         "answer")
WHAT = ("extra_repetition", "missing_repetition", "pattern_overwrite", "truncated", "duplicated_digit", "dropped_digit",
        "carry_error", "wrong_digit", "head_off_by_one", "early_halt", "late_halt", "wrong_verdict", "malformed", "other")

MAX_UNIT = 3  # the test sets' periods are 1, 2 and 3
COMPARISON_MACHINES = ("GREATER_THAN", "LESS_THAN", "EQUAL")
HALT_STATE = "qH"  # every machine's halting state
_CELLS = frozenset(f"|{d}" for d in "0123456789")


@dataclass(frozen=True)
class Failure:
    where: str
    what: str
    component: str | None = None  # the adapter ("executor_add", "aligner_sub") where one is known
    machine: str | None = None  # the executor's machine (ADD, SUB, REFLECTION, ...)
    step: int | None = None  # index into the record's steps (0 is aligner (I))
    depth: int | None = None  # 0 for the top machine, 1 inside a composer's call
    tape: str | None = None
    position: int | None = None  # where in that field the difference starts
    units: int | None = None  # repetitions: how many copies of the unit were inserted or deleted
    expected: str = ""  # the field as the machine (or the truth) has it
    got: str = ""  # and as the model produced it
    error_class: str | None = None  # the runtime's own class (caef_bench.machines.ERROR_CLASSES)
    answer_correct: bool = False

    def to_dict(self) -> dict:
        return {key: value for key, value in asdict(self).items() if value is not None}


@dataclass(frozen=True)
class Difference:
    """What distinguishes two sequences of digits (or format units)."""

    what: str
    position: int
    units: int | None = None


# --------------------------------------------------------------------------- sequences


def split_difference(expected: Sequence, got: Sequence) -> tuple[int, Sequence, Sequence]:
    """(at, removed, inserted) with expected = P + removed + S and got = P + inserted + S, the common
    prefix P as long as it can be (so an inserted copy inside a run stands at the run's end), then the
    common suffix S."""
    shorter = min(len(expected), len(got))
    at = 0
    while at < shorter and expected[at] == got[at]:
        at += 1
    tail = 0
    while tail < shorter - at and expected[len(expected) - 1 - tail] == got[len(got) - 1 - tail]:
        tail += 1
    return at, expected[at:len(expected) - tail], got[at:len(got) - tail]


def _copies_in_a_row(sequence: Sequence, unit: Sequence, start: int, end: int) -> int:
    """Copies of unit that stand in sequence right before `start` and right after `end`, all in a row."""
    p, count = len(unit), 0
    at = start
    while at - p >= 0 and list(sequence[at - p:at]) == list(unit):
        count, at = count + 1, at - p
    at = end
    while at + p <= len(sequence) and list(sequence[at:at + p]) == list(unit):
        count, at = count + 1, at + p
    return count


def _repeated_unit(expected: Sequence, at: int, block: Sequence, removed: bool) -> tuple[int, int] | None:
    """(unit length, copies) when the block is whole copies of a unit of 1-3 items that makes a run in
    expected at `at`: the unit in a row at least twice (a single item three times), the block's own copies
    counted when the block was removed from expected (they stood there)."""
    for p in range(1, min(MAX_UNIT, len(block)) + 1):
        if len(block) % p:
            continue
        unit = block[:p]
        if any(block[i] != unit[i % p] for i in range(len(block))):
            continue
        end = at + len(block) if removed else at
        around = _copies_in_a_row(expected, unit, at, end)
        if around == 0:  # the unit must continue what stands next to it
            continue
        if around + (len(block) // p if removed else 0) >= (3 if p == 1 else 2):
            return p, len(block) // p
    return None


def _continues_a_run(got: Sequence, start: int, end: int) -> bool:
    """Whether got[start:end] is made of further copies of a run of a unit of 1-3 items that stands right
    before it (or right after it) in got: in a row at least twice, a single item three times."""
    for p in range(1, MAX_UNIT + 1):
        needed = 3 if p == 1 else 2
        before = got[max(0, start - p):start]
        if len(before) == p and all(got[j] == got[j - p] for j in range(start, end)):
            if _copies_in_a_row(got, before, start, start) >= needed:
                return True
        after = got[end:end + p]
        if len(after) == p and all(got[j] == got[j + p] for j in range(start, end)):
            if _copies_in_a_row(got, after, end, end) >= needed:
                return True
    return False


def _off_by_one(x: str, y: str) -> bool:
    return x.isdigit() and y.isdigit() and (int(x) - int(y)) % 10 in (1, 9)


def classify_sequence(expected: Sequence, got: Sequence, arithmetic: bool = False) -> Difference | None:
    """How `got` differs from `expected` (digit strings, or lists of format units); None if they are equal.

    arithmetic: the digits are an adder's (sum or difference), where a digit off by one is a carry or
    borrow that should (not) have propagated; a copied field's off-by-one digit is just a wrong digit.
    """
    if list(expected) == list(got):
        return None
    at, removed, inserted = split_difference(expected, got)
    if removed and inserted:
        if len(removed) == len(inserted):
            changed = [(x, y) for x, y in zip(removed, inserted) if x != y]
            if arithmetic and all(_off_by_one(x, y) for x, y in changed):
                return Difference("carry_error", at + next(i for i, (x, y) in enumerate(zip(removed, inserted)) if x != y))
            if _continues_a_run(got, at, at + len(inserted)):
                return Difference("pattern_overwrite", at)
            return Difference("wrong_digit", at)
        return Difference("other", at)
    block = removed or inserted
    repeated = _repeated_unit(expected, at, block, removed=bool(removed))
    if repeated:
        return Difference("missing_repetition" if removed else "extra_repetition", at, repeated[1])
    if removed and len(block) > 1 and at + len(block) == len(expected):
        return Difference("truncated", at)
    if len(block) == 1:
        if removed:
            return Difference("dropped_digit", at)
        neighbours = {expected[at - 1] if at > 0 else None, expected[at] if at < len(expected) else None}
        return Difference("duplicated_digit" if block[0] in neighbours else "other", at)
    return Difference("other", at)


# --------------------------------------------------------------------------- steps


@dataclass(frozen=True)
class _Field:
    tape: str
    what: str
    position: int | None = None
    units: int | None = None
    expected: str = ""
    got: str = ""


def _digits_field(tape: str, expected: str, got: str, arithmetic: bool = False) -> _Field | None:
    found = classify_sequence(expected, got, arithmetic)
    if found is None:
        return None
    return _Field(tape, found.what, found.position, found.units, expected, got)


def _halt_field(tape: str, expected_halts: bool, got_halts: bool, expected: str, got: str) -> _Field:
    if expected_halts and not got_halts:
        return _Field(tape, "late_halt", None, None, expected, got)
    if got_halts and not expected_halts:
        return _Field(tape, "early_halt", None, None, expected, got)
    return _Field(tape, "other", None, None, expected, got)


def _state_field(expected: Snapshot, got: Snapshot) -> _Field | None:
    """The first field of the state lines that differs (tapes before registers, digits before heads)."""
    e, g = expected.state, got.state
    if type(e) is not type(g) or e.machine != g.machine or e.q != g.q:
        return _halt_field("state", e.halted, g.halted, f"{e.machine}, {e.q}", f"{g.machine}, {g.q}")
    if isinstance(e, ComposerState):
        for tape, x, y in (("HEAD1", e.a, g.a), ("HEAD2", e.b, g.b), ("COUNT", e.count or "", g.count or ""),
                           ("OUTPUT", e.output, g.output)):
            found = _digits_field(tape, x, y)
            if found:
                return found
        return None
    for x, y in zip(e.tapes, g.tapes):
        found = _digits_field(x.marker, x.digits, y.digits)
        if found:
            return found
        if x.head != y.head:
            what = "head_off_by_one" if abs(x.head - y.head) == 1 else "other"
            return _Field(x.marker, what, x.head, None, str(x.head), str(y.head))
    if e.carry != g.carry:
        return _Field("C", "carry_error", None, None, e.carry or "", g.carry or "")
    if e.output != g.output:
        if e.machine in COMPARISON_MACHINES:
            return _Field("OUTPUT", "wrong_verdict", None, None, e.output, g.output)
        return _digits_field("OUTPUT", e.output, g.output, arithmetic=e.machine == "ADD")
    return None


def _command_field(expected: Snapshot, got: Snapshot) -> _Field | None:
    e, g = expected.command, got.command
    if e == g:
        return None
    machine = expected.machine

    def text(command) -> str:  # the command line as the machine writes it
        return "" if command is None else render_command(command, machine)

    if e is None or g is None or e.is_halt or g.is_halt:
        return _halt_field("command", e is not None and e.is_halt, g is not None and g.is_halt, text(e), text(g))
    if (e.next_q == HALT_STATE) != (g.next_q == HALT_STATE):  # one moves into the halt state, the other goes on
        return _halt_field("command", e.next_q == HALT_STATE, g.next_q == HALT_STATE, text(e), text(g))
    e_args = {a.register: a.arg for a in e.actions}
    g_args = {a.register: a.arg for a in g.actions}
    if e.call != g.call:
        return _Field("call", "other", None, None, e.call or "", g.call or "")
    if e_args.get("C") != g_args.get("C"):
        return _Field("command", "carry_error", None, None, e_args.get("C") or "", g_args.get("C") or "")
    # a head moved one way or the other (REFLECTION's output head and LONG_MUL's HEAD2 move LEFT)
    e_moves = sorted(f"{a.register} {a.arg}" for a in e.actions if a.arg in ("RIGHT", "LEFT"))
    g_moves = sorted(f"{a.register} {a.arg}" for a in g.actions if a.arg in ("RIGHT", "LEFT"))
    if e_moves != g_moves:
        return _Field("command", "head_off_by_one", None, None, ", ".join(e_moves), ", ".join(g_moves))
    written = [(a.register, a.arg) for a in e.actions if a.arg not in ("RIGHT", "LEFT")]
    for register, arg in written:
        other = next((a.arg for a in g.actions if a.register == register and a.arg not in ("RIGHT", "LEFT")), None)
        if other == arg:
            continue
        if arg in ("True", "False") or other in ("True", "False"):
            return _Field("command", "wrong_verdict", None, None, arg, other or "")
        if machine == "ADD" and register == "OUTPUT" and other is not None and _off_by_one(arg, other):
            return _Field("command", "carry_error", None, None, arg, other)
        return _Field("command", "wrong_digit", None, None, arg, other or "")
    return _Field("command", "other", None, None, text(e), text(g))


def _snapshot_field(expected: Snapshot, got: Snapshot) -> _Field | None:
    """The first field in which two parsed texts differ: state, command, then a composer's callee lines."""
    found = _state_field(expected, got) or _command_field(expected, got)
    if found:
        return found
    if (expected.callee is None) != (got.callee is None):
        return _Field("call", "other", None, None, "callee lines" if expected.callee else "",
                      "callee lines" if got.callee else "")
    if expected.callee is not None:
        inner = _snapshot_field(expected.callee, got.callee)
        if inner:
            return _Field(f"call {inner.tape}", inner.what, inner.position, inner.units, inner.expected, inner.got)
    return None


def _unit_field(expected: str, got: str) -> _Field:
    """Texts the parser refuses, compared as format units: a difference made only of digit cells is
    classified as digits are; anything else is malformed."""
    e_units, g_units = split_units(expected), split_units(got)
    at, removed, inserted = split_difference(e_units, g_units)
    if set(removed) | set(inserted) <= _CELLS:
        found = classify_sequence(e_units, g_units)
        if found is not None and found.what != "other":
            position = len("".join(e_units[:found.position]))  # a character offset in the text
            return _Field("text", found.what, position, found.units, expected, got)
    tape, cell = _field_at(expected, len("".join(e_units[:at])))
    return _Field(tape, "malformed", cell, None, expected, got)


def _field_at(text: str, offset: int) -> tuple[str, int | None]:
    """The field of a machine's text that holds character `offset`, and the index of the digit cell there
    (tapes); fields: state, HEAD1, HEAD2, HEAD, C, COUNT, OUTPUT (the state line), command, call (below)."""
    line_start = text.rfind("\n", 0, offset) + 1
    if line_start > 0:
        return ("command" if text.count("\n", 0, offset) == 1 else "call"), None
    state = parse(text).state
    pieces = [("state", f"{state.machine}, {state.q}, ")]
    if isinstance(state, ComposerState):
        pieces += [("HEAD1", f"[HEAD1]{cells(state.a)}"), ("HEAD2", f" [HEAD2]{cells(state.b)}"), ("OUTPUT", "")]
    else:
        pieces += [(tape.marker, render_tape(tape.marker, cells(tape.digits), tape.head)) for tape in state.tapes]
        if state.carry is not None:
            pieces.append(("C", f" [C]{state.carry}"))
        pieces.append(("OUTPUT", ""))  # the rest of the line
    start = 0
    for name, piece in pieces:
        if offset < start + len(piece) or not piece:
            return name, (text.count("|", start, offset) if name not in ("state", "C") else None)
        start += len(piece)
    return "OUTPUT", None


_OPERATORS = sorted(BY_SYMBOL, key=len, reverse=True)


def _split_expression(text: str) -> tuple[str, str, str] | None:
    """'45+67=112' -> ('45', '67', '112'); None when it does not have that shape."""
    left, equals, result = text.rpartition("=")  # eq's own symbol is '==': the result follows the last '='
    if not equals:
        return None
    for symbol in _OPERATORS:
        a, found, b = left.partition(symbol)
        if found and a.isdigit() and b.isdigit():
            return a, b, result
    return None


def _expression_field(op: str, expected: str, got: str) -> _Field:
    """Aligner (O): `a<op>b=result`; a and b copied from HEAD1 and HEAD2, the result from OUTPUT."""
    e, g = _split_expression(expected), _split_expression(got)
    if e is None or g is None:
        return _Field("text", "malformed", None, None, expected, got)
    for tape, x, y in zip(("HEAD1", "HEAD2", "OUTPUT"), e, g):
        if x == y:
            continue
        if x in ("True", "False") or y in ("True", "False"):
            return _Field(tape, "wrong_verdict", None, None, x, y)
        return _digits_field(tape, x, y) or _Field(tape, "other", None, None, x, y)
    return _Field("text", "other", None, None, expected, got)


def classify_step(adapter: str, expected: str, got: str, direction: str | None = None) -> Failure | None:
    """One model call against the machine's: None if the texts are equal.

    adapter: "executor_<op>" or "aligner_<op>"; direction, for an aligner: "I" (expression -> start
    state) or "O" (halt state -> expression with its result).
    """
    if expected == got:
        return None
    kind, _, op = adapter.partition("_")
    if kind == "aligner" and direction == "O":
        found = _expression_field(op, expected, got)
        return Failure("aligner (O)", found.what, adapter, tape=found.tape, position=found.position,
                       expected=found.expected, got=found.got)
    where = "aligner (I)" if kind == "aligner" else "executor"
    machine_text = parse(expected)
    try:
        found = _snapshot_field(machine_text, parse(got))
    except FormatError:
        found = _unit_field(expected, got)
    if found is None:  # equal fields, different bytes (a trailing newline)
        found = _Field("text", "other", None, None, expected, got)
    return Failure(where, found.what, adapter, machine_text.machine if where == "executor" else None,
                   tape=found.tape, position=found.position, units=found.units, expected=found.expected,
                   got=found.got)


# --------------------------------------------------------------------------- runs and answers


def classify_record(record: ProblemRecord | dict) -> Failure | None:
    """A CAEF run (a `ProblemRecord` or its JSON dict): None when it is right at every step it was
    checked at; else its first divergence, classified, or the way the runtime stopped it."""
    if isinstance(record, dict):
        record = ProblemRecord.from_dict(record)
    correct = is_correct(record)
    divergence = record.first_divergence
    if divergence is not None:
        failure = classify_step(divergence.adapter, divergence.expected, divergence.got,
                                "I" if divergence.step == 0 else "O")
        if failure is None:  # (a divergence is recorded only where the texts differ)
            failure = Failure("executor", "other", divergence.adapter, expected=divergence.expected, got=divergence.got)
        depth = divergence.depth
        if depth is None and divergence.step < len(record.steps):  # (records from before the divergence kept it)
            depth = record.steps[divergence.step].depth
        return Failure(**{**asdict(failure), "step": divergence.step, "depth": depth,
                          "error_class": divergence.error_class, "answer_correct": correct})
    if correct:
        return None
    detail = record.detail or ""
    if record.outcome == "no_halt":
        return Failure("no halt", "late_halt", expected=record.target, got=detail)
    if record.outcome == "unparseable":
        where = "wrong call" if "[CALL]" in detail or "callee" in detail else "unparseable output"
        return Failure(where, "malformed" if where == "unparseable output" else "other", got=detail)
    if record.outcome == "error":
        return Failure("runtime error", "other", got=detail)
    if record.outcome == "misaligned":  # (untraced: the runtime's check names the call and the operand)
        if detail.startswith("executor_"):  # "executor_add rewrote operand a as ... at step 5"
            return Failure("executor", "wrong_digit", component=detail.split()[0], got=detail)
        return Failure("aligner (O)" if detail.startswith("aligner (O)") else "aligner (I)", "wrong_digit", got=detail)
    return classify_answer(record.expr, record.target, record.answer, where="aligner (O)")


def classify_answer(expr: str, truth: str, answer: str | None, where: str = "answer") -> Failure | None:
    """A final answer against the truth (a baseline's, read by the tasks' scorer): None if it is right."""
    if exact_match(answer, truth):
        return None
    if answer is None or not answer.strip():
        return Failure("unparseable output" if where == "answer" else where, "malformed", expected=truth,
                       got=answer or "")
    answer = answer.strip()
    if truth in ("True", "False"):
        return Failure(where, "wrong_verdict", tape="OUTPUT", expected=truth, got=answer)
    try:
        op = parse_expression(expr).op
    except ValueError:
        op = None
    found = classify_sequence(truth, answer, arithmetic=op in ("add", "sub"))
    what = found.what
    if what == "other" and answer.startswith(truth):
        what = "late_halt"  # the right answer, then more: the model did not stop
    return Failure(where, what, tape="OUTPUT", position=found.position, units=found.units, expected=truth, got=answer)


def reply_failure(expr: str, truth: str, reply: str, op: str, style: str) -> Failure:
    """A baseline's wrong reply, classified from the answer the tasks' scorer reads in it (`extract_answer`
    in the prompt style `style`). A reply the scorer judged wrong is always a failure here: where the
    classifier would read the answer as right, it is classified as no answer."""
    failure = classify_answer(expr, truth, extract_answer(reply, op, style))
    if failure is None:  # the scorer and the classifier read the answer alike; keep the count honest
        failure = classify_answer(expr, truth, "")
    return failure


EXAMPLE_CONTEXT = 20  # characters kept either side of a failure's difference in the results


def failure_entry(problem, failure: Failure, context: int = EXAMPLE_CONTEXT) -> dict:
    """A failure as the results keep it: the problem (its id, expression and, for a repeated-digit
    cell, its period), the failure's fields, and the differing field cut around the difference."""
    entry = {"id": problem["id"], "expr": problem["expr"], **({"period": problem["period"]} if "period" in problem else {}),
             **failure.to_dict()}
    entry["expected"], entry["got"] = mark_difference(failure.expected, failure.got, context)
    return entry


def record_failures(records, problems: dict[str, dict] | None = None) -> list[dict]:
    """Every run of `records` that is wrong or left the machine's course (`classify_record`), as
    `failure_entry` keeps it, with the run's answer, target and step count; `problems` (rows by id)
    adds what the records lack (a repeated-digit cell's period)."""
    entries = []
    for record in records:
        failure = classify_record(record)
        if failure is not None:
            problem = (problems or {}).get(record.id) or {"id": record.id, "expr": record.expr}
            entries.append({**failure_entry(problem, failure), "answer": record.answer, "target": record.target,
                            "n_steps": record.n_steps})  # (not len(steps): packed records empty them)
    return entries


def mark_difference(expected: str, got: str, context: int = 16) -> tuple[str, str]:
    """Both texts cut to the difference with `context` characters either side, the differing part of
    each in ⟦ ⟧ (empty ⟦⟧ where the other text has something the one lacks); newlines shown as ⏎."""
    at, removed, inserted = split_difference(expected, got)
    start = max(0, at - context)

    def show(text: str, middle: str) -> str:
        end = at + len(middle)
        cut = ("…" if start else "") + text[start:at] + f"⟦{middle}⟧" + text[end:end + context]
        return (cut + ("…" if end + context < len(text) else "")).replace("\n", "⏎")

    return show(expected, removed), show(got, inserted)

