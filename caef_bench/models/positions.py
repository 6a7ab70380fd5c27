"""Position ids for the tiny tier: position coupling.

A tiny transformer with ordinary positions does not learn to copy a 100-digit
tape exactly (a trial on this machine: 0% exact steps after 30 minutes). With
position coupling (after Cho et al. 2024) a token's position says *where on the
tape* it is rather than how far into the text: the k-th cell of a field gets the
same position id in the input and in the output, so "copy the next cell" is the
same short relative offset everywhere, at any length.

Scheme "coupled": prompt and completion each count from 0; a field is the text
between two separators (space, newline); every token gets
    FIELD_STRIDE * (separators so far) + (digit cells so far in this field),
so markers and words share the id of the cell that follows them. The id of a
token depends only on the tokens before it, which is what generation needs.

Scheme "coupled-expr": the same for machine states, and index hints for the
aligners' expressions too. Under "coupled" every digit of `45+67=` has id 0, so
an aligner reverses a 100-digit operand onto the tape with no positional signal
(its accuracy fell with length). Here a segment (prompt or completion) that
starts with a digit is an expression, and its k-th digit *from the right* of an
operand gets the id of the tape cell it lands on:
  - in a prompt (aligner I: expression -> start state), operand r's digits get
    the ids of the start state's r-th cell field, read off the machine of the
    expression's operator; the prompt is known whole, so counting from the
    right may look ahead;
  - in a completion (aligner O: halt state -> expression with its result), the
    r-th number gets the ids of the prompt's r-th field holding cells (the
    result: the last such field), counted down from that field's cell count,
    so an id still depends only on the tokens before it.
Machine states never start with a digit, so executors see the same ids under
both schemes.
Scheme "standard": 0, 1, 2, … as usual (pretrained tiers).
"""

from __future__ import annotations

from functools import lru_cache

from caef_bench.models.tokenizer import BOS_ID, SEP_ID, TOKEN_ID, VOCAB, encode

FIELD_STRIDE = 128  # more than the cells of any field (a 101-digit sum plus head room)
SCHEMES = ("standard", "coupled", "coupled-expr")
_SEPARATORS = frozenset({TOKEN_ID[" "], TOKEN_ID["\n"]})
_CELLS = frozenset(TOKEN_ID[f"|{d}"] for d in "0123456789")
_DIGITS = frozenset(TOKEN_ID[d] for d in "0123456789")


class StandardCounter:
    def __init__(self):
        self.n = 0

    def next(self, token_id: int) -> int:
        self.n += 1
        return self.n - 1

    def prompt(self, ids) -> list[int]:
        return [self.next(i) for i in ids]


class CoupledCounter:
    """Assigns coupled position ids one token at a time (prompt and completion restart at 0)."""

    def __init__(self):
        self.fields, self.cells = 0, 0

    def next(self, token_id: int) -> int:
        if token_id in (SEP_ID, BOS_ID):  # a new segment: the completion aligns with the prompt
            self.fields, self.cells = 0, 0
            return 0
        position = FIELD_STRIDE * self.fields + self.cells
        if token_id in _SEPARATORS:
            self.fields, self.cells = self.fields + 1, 0
        elif token_id in _CELLS:
            self.cells += 1
        return position

    def prompt(self, ids) -> list[int]:
        """Ids of a whole prompt (<s> … <sep>), after which next() goes on with the completion."""
        return [self.next(i) for i in ids]


class ExpressionCounter(CoupledCounter):
    """Scheme "coupled-expr" (see the module's docstring). Holds only ints and tuples, so a
    shallow copy is an independent counter (speculative decoding tries proposals on copies)."""

    def __init__(self):
        super().__init__()
        self.filled = ()  # cells of each finished field of the segment so far
        self.prompt_cell_fields = ()  # (field, cells) of the prompt's fields that hold cells
        self.segment_start = False
        self.expression = False  # inside a completion that is an expression
        self.run, self.in_run, self.digit = -1, False, 0

    def next(self, token_id: int) -> int:
        if token_id in (SEP_ID, BOS_ID):
            fields = self.filled + (self.cells,)
            self.prompt_cell_fields = tuple((f, c) for f, c in enumerate(fields) if c) if token_id == SEP_ID else ()
            self.filled, self.segment_start, self.expression = (), True, False
            self.run, self.in_run, self.digit = -1, False, 0
            return super().next(token_id)
        if self.segment_start:
            self.segment_start, self.expression = False, token_id in _DIGITS
        if not self.expression:
            if token_id in _SEPARATORS:
                self.filled = self.filled + (self.cells,)
            return super().next(token_id)
        if token_id in _DIGITS and not self.in_run:
            self.run, self.in_run, self.digit = self.run + 1, True, 0
        field, cells = self._target(self.run)
        if token_id in _DIGITS:
            self.digit += 1
            return FIELD_STRIDE * field + max(0, cells - self.digit)
        self.in_run = False
        return FIELD_STRIDE * field + cells  # operators, '=', words: the place past the number's last cell

    def _target(self, run: int) -> tuple[int, int]:
        fields = self.prompt_cell_fields
        if not fields:  # not the answer to a machine state: one field per number
            return run, 0
        return fields[run] if run < min(2, len(fields)) else fields[-1]

    def prompt(self, ids) -> list[int]:
        if len(ids) < 2 or ids[0] != BOS_ID or ids[1] not in _DIGITS:
            return [self.next(i) for i in ids]
        end = ids.index(SEP_ID) if SEP_ID in ids else len(ids)
        positions = [self.next(BOS_ID)] + _expression_prompt_ids(tuple(ids[1:end]))
        self.segment_start, self.expression = False, False  # a prompt's expression has no cells to record
        self.fields, self.cells, self.filled = 0, 0, ()
        return positions + [self.next(i) for i in ids[end:]]


def _expression_prompt_ids(ids: tuple[int, ...]) -> list[int]:
    """Ids of an expression prompt: each operand's digits, counted from the right, get the ids of
    the start-state cells they land on; other tokens the id past their number's last digit."""
    runs, start = [], None  # (first index, length) of each run of digits
    for i, token in enumerate(ids + (-1,)):
        if token in _DIGITS and start is None:
            start = i
        elif token not in _DIGITS and start is not None:
            runs.append((start, i - start))
            start = None
    operator = "".join(VOCAB[t] for t in ids[runs[0][0] + runs[0][1]:runs[1][0]]) if len(runs) > 1 else ""
    fields = start_state_fields().get(operator, (0, 1))
    positions, run = [], -1
    for i, token in enumerate(ids):
        if run + 1 < len(runs) and i == runs[run + 1][0]:
            run += 1
        first, length = runs[run]
        field = fields[run] if run < len(fields) else fields[-1] + run - len(fields) + 1
        inside = first <= i < first + length
        positions.append(FIELD_STRIDE * field + (length - 1 - (i - first) if inside else length))
    return positions


@lru_cache(maxsize=1)
def start_state_fields() -> dict[str, tuple[int, int]]:
    """Operator symbol -> the fields (coupled counting) of the start state that hold a and b."""
    from caef_bench.machines import OPERATIONS, run

    layout = {}
    for op, operation in OPERATIONS.items():
        if not operation.symbol:
            continue
        counter, holding = CoupledCounter(), []
        for token in encode(run(op, 12, 3).start_text()):
            field = counter.fields
            counter.next(token)
            if token in _CELLS and field not in holding:
                holding.append(field)
        layout[operation.symbol] = tuple(holding[:2])
    return layout


def make_counter(scheme: str):
    counters = {"standard": StandardCounter, "coupled": CoupledCounter, "coupled-expr": ExpressionCounter}
    if scheme not in counters:
        raise ValueError(f"unknown position scheme {scheme!r}; expected one of {SCHEMES}")
    return counters[scheme]()


def position_ids(ids, scheme: str) -> list[int]:
    """Position ids for a whole token sequence (<s> prompt <sep> completion): the prompt as a
    whole, then the completion token by token, exactly as decoding assigns them."""
    ids = list(ids)
    counter = make_counter(scheme)
    end = ids.index(SEP_ID) + 1 if SEP_ID in ids else len(ids)
    return counter.prompt(ids[:end]) + [counter.next(i) for i in ids[end:]]
