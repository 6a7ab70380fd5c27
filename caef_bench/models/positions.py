"""Position ids for the tiny tier: position coupling.

A tiny transformer with ordinary positions does not learn to copy a 100-digit
tape exactly (0% exact steps after 30 minutes of training on a CPU:
lab/research/training-log.md, "From docs/format.md"). With
position coupling (after Cho et al. 2024) a token's position says *where on the
tape* it is rather than how far into the text: the k-th cell of a field gets the
same position id in the input and in the output, so "copy the next cell" is the
same short relative offset everywhere, at any length.

Scheme "coupled": prompt and completion each count from 0; a field is the text
between two separators (space, newline); every token gets
    FIELD_STRIDE * (separators so far) + (digit cells so far in this field),
so markers and words share the id of the cell that follows them. The id of a
token depends only on the tokens before it, which is what generation needs.

Scheme "coupled-expr": the same, plus index hints for aligner (O), which reads
a halt state and writes the expression with its result (`45+67=112`). Under
"coupled" every digit of that answer has id 0, so the aligner reverses a
100-digit tape with no positional signal (its accuracy fell with length, and it
dropped the top digit of short results). Here a completion that starts with a
digit is an expression: its r-th number gets the ids of the prompt's r-th field
that holds cells (the result: the last such field), counted down from that
field's cell count, so each digit has the id of the tape cell it copies; an
operator, '=' or a word gets the id just past the top cell of the number that
follows it (where the halt state's head marker sits), so every next digit is
one id down. An id still depends only on the tokens before it. A comparison's
answer (`45>67=False`) gets the same hints for a and b: its halt state holds just
those two tapes (heads stopped mid-tape where the digits first differ, which
moves no cell's id); its '=' gets the id of the halt state's word, which the
next token copies, and each further non-digit token one id up (`==`'s second
'=', the word), so no two of its queries share an id: sharing them, the eq
aligner wrote `===` and went on writing digits after the word. Its <sep> is the
query that writes a's top digit and gets the id just past that cell, as an
operator does for b (a comparison's halt state is told apart by its two tapes
and the halt line before <sep>; every other prompt's <sep> keeps id 0): from
id 0 the aligner found a's top digit by content and wrote its neighbour about
once in a hundred 100-digit answers. Until round 5
comparisons kept coupled ids, and their aligners copied 100-digit operands by
content: 96% of held-out conversions, with digits skipped inside repeats such
as `8181818`.
Prompts keep the coupled ids (aligner (I)'s expressions included: giving its
digits their cells' ids made the first cell of each operand unlearnable in a
trial, as the query that writes it has an id that varies with the operand's
length). Machine states never start with a digit, so executors see the same ids
under both schemes.

Scheme "coupled-hints": coupled-expr plus index hints for aligner (I), which
reads `45+67=` and writes the start state. Under the other schemes every token
of an expression prompt has id 0, so the aligner finds the digit a cell copies
by counting (it skipped digits after repeats at 100 digits). Here each prompt
digit gets the id of the completion token that *writes* its cell (the token
just before the cell: the previous cell, a head marker or a separator), so
"copy the digit whose id is mine" is the same zero offset for every cell of
every operand at any length. Those ids come from the operator's start-state
layout, which depends only on the operands' lengths (`_expression_hints`). In
that completion a token's id is FIELD_STRIDE * field + its place in the field,
markers counted too: under coupled ids a head marker shares its id with the
cell after it (`[HEAD1]|2`), and the ids of the queries of a's first two cells
would coincide, as would the last cell of a and the query of b's first cell
(`|4[HEAD2] |7`). Only aligner (I) sees these ids: executors read the start
state as a new prompt with coupled ids.
Scheme "coupled-words": coupled-hints, plus one rule for words the tokenizer spells a character a
token (machine names outside FORMAT_WORDS: LONG_MUL, DIGIT_MUL, LONG_DIV; the markers [REM], [NEG]).
Under the other coupled schemes every token of such a word has the same id, so a model cannot tell
how far into the word it is (what that did to executor_long_mul:
lab/research/long-mul-div-log.md). Here, inside a field, from its
first letter, `_` or `[` token on every token takes its own place: each adds one to an in-field count
that is added to the ids of the tokens after it in the field (`LONG_MUL,` gets 0..6, `[REM]|2|0`
gets 0, 1, 2, 3, 4, its `[` too, and its cells 5, 6: the cells keep a fixed offset), as aligner (I)'s hinted
completion counts its fields. A text with no such token (every state of the paper's machines,
every expression) gets exactly coupled-hints' ids, so the scheme is opt-in for the long route's
adapters and changes nothing for the others; one thing differs because those adapters are the long
route's: aligner (I)'s hints for `a*b=` and `a//b=` follow LONG_MUL's and LONG_DIV's start states
(LONG_DIV's a stands before its head, not after it as in DIV's).
One more rule is LONG_MUL's own: its completion reads b's digit just before [HEAD2], a cell whose place
moves every step, twice: the token after its command's `CMD` (is that digit 0?) and the token after
[HEAD2] in DIGIT_MUL's start (the digit itself). Both queries get that cell's id, so the read is a copy at
offset 0, as a head marker writes the cell after it; every other token keeps its id. Without the hint, every
one-step miss of executor_long_mul's second round was this read (lab/research/long-mul-div-log.md).
Scheme "standard": 0, 1, 2, … as usual (pretrained tiers).

A coupled scheme's name may carry its field stride, `coupled-hints/1024`: the ids of a field then
start STRIDE apart instead of FIELD_STRIDE (128), so a field can hold STRIDE - 1 cells. The tiny
base's attention reads "the same cell in the next field" as the fixed offset of its stride (its
RoPE rotation), so weights trained under one stride are wrong under another (results/long_operands.md,
"Single steps": the shipped adapters run under a stride of 256; docs/long-operands.md).

Training may add an offset to every id of a sample but <s>'s and <sep>'s (`position_ids(..., offset=)`).
Attention under RoPE sees only differences of ids, so one offset for the whole sample would change
nothing; left out of the two markers it moves every cell away from the segment's start by a random
amount, so nothing can be learned from "how far from <sep>" that a longer tape would break, while
every offset between cells (the coupling) stays as it is.
"""

from __future__ import annotations

import re
from functools import lru_cache

from caef_bench.machines.ops import BY_SYMBOL, lookup, routed
from caef_bench.machines.text import HALT_LINE
from caef_bench.models.tokenizer import BOS_ID, SEP_ID, TOKEN_ID, VOCAB, encode

FIELD_STRIDE = 128  # the default stride: more than the cells of any field (a 101-digit sum plus head room)
SCHEMES = ("standard", "coupled", "coupled-expr", "coupled-hints", "coupled-words")  # names; a coupled one may add /STRIDE
_SEPARATORS = frozenset({TOKEN_ID[" "], TOKEN_ID["\n"]})
_CELLS = frozenset(TOKEN_ID[f"|{d}"] for d in "0123456789")
_DIGITS = frozenset(TOKEN_ID[d] for d in "0123456789")
_HALT = TOKEN_ID[HALT_LINE]
_LETTERS = frozenset(TOKEN_ID[c] for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
# A spelled word starts at its first letter, or at the `[` of a spelled marker: had `[REM]`'s `[` and R one
# id, the token after `[` was copied from the id after it, and executor_long_div wrote `[EEM]` and `[NNG]`.
_WORD_STARTS = _LETTERS | {TOKEN_ID["["]}
_HEAD2, _CMD = TOKEN_ID["[HEAD2]"], TOKEN_ID["CMD"]


class _Counter:
    def prompt(self, ids) -> list[int]:
        """Ids of a whole prompt (its <s> … <sep>); a counter may look ahead within it."""
        return [self.next(i) for i in ids]


class StandardCounter(_Counter):
    def __init__(self):
        self.n = 0

    def next(self, token_id: int) -> int:
        self.n += 1
        return self.n - 1


class CoupledCounter(_Counter):
    """Assigns coupled position ids one token at a time (prompt and completion restart at 0)."""

    def __init__(self, stride: int = FIELD_STRIDE):
        self.stride = stride
        self.fields, self.cells = 0, 0

    def next(self, token_id: int) -> int:
        if token_id in (SEP_ID, BOS_ID):  # a new segment: the completion aligns with the prompt
            self.fields, self.cells = 0, 0
            return 0
        position = self.stride * self.fields + self.cells
        if token_id in _SEPARATORS:
            self.fields, self.cells = self.fields + 1, 0
        elif token_id in _CELLS:
            self.cells += 1
        return position


class ExpressionCounter(CoupledCounter):
    """Scheme "coupled-expr" (see the module's docstring). Holds only ints and tuples, so a
    shallow copy is an independent counter (speculative decoding tries proposals on copies)."""

    def __init__(self, stride: int = FIELD_STRIDE):
        super().__init__(stride)
        self.filled = ()  # cells of each finished field of the segment so far
        self.prompt_cell_fields = ()  # (field, cells) of the prompt's fields that hold cells
        self.segment_start = False
        self.expression = False  # inside a completion that is an expression
        self.run, self.digit = -1, 0  # the number being written, and its digits so far
        self.previous = -1  # the last token counted
        self.comparison = False  # the prompt is a comparison's halt state: two tapes, then the halt line

    def next(self, token_id: int) -> int:
        previous, self.previous = self.previous, token_id
        if token_id in (SEP_ID, BOS_ID):
            fields = self.filled + (self.cells,)
            self.prompt_cell_fields = tuple((f, c) for f, c in enumerate(fields) if c) if token_id == SEP_ID else ()
            self.filled, self.segment_start, self.expression = (), token_id == SEP_ID, False
            self.run, self.digit = -1, 0
            self.comparison = token_id == SEP_ID and previous == _HALT and len(self.prompt_cell_fields) == 2
            if self.comparison:  # <sep> is the query that writes a's top digit: the id just past that
                field, cells = self.prompt_cell_fields[0]  # cell, as an operator gets for b
                super().next(token_id)
                return self.stride * field + cells
            return super().next(token_id)
        if self.segment_start:  # an answer: a halt state's tapes (a, b and maybe a result) before it
            self.segment_start = False
            self.expression = token_id in _DIGITS and len(self.prompt_cell_fields) >= 2
            if self.expression:
                self.run = 0
        if not self.expression:
            if token_id in _SEPARATORS:
                self.filled = self.filled + (self.cells,)
            return super().next(token_id)
        if token_id in _DIGITS:
            if self.digit < 0:  # the first digit after an operator, '=' or a word: the next number
                self.run, self.digit = self.run + 1, 0
            field, cells = self._target(self.run)
            self.digit += 1
            return self.stride * field + max(0, cells - self.digit)
        self.digit = min(self.digit, 0) - 1  # -1 at the first token after a digit, -2 at the next, ...
        field, cells = self._target(self.run + 1)
        # just past the top cell of the number that follows; in a comparison's answer each further
        # token one id up (the second '=' of '==', the word after '='), so no two queries share an id
        later = -1 - self.digit if self.comparison else 0
        return self.stride * field + cells + later

    def _target(self, run: int) -> tuple[int, int]:
        """(field, cells) of the prompt's tape that the run-th number of the answer copies."""
        fields = self.prompt_cell_fields  # a, b, …, the result (a comparison's: a and b alone)
        if run >= 2 and self.comparison:  # a comparison's '=' and word: the halt state's answer word,
            return fields[-1][0] + 1, 0    # first token of the field after b
        return fields[run] if run < 2 else fields[-1]


class HintCounter(ExpressionCounter):
    """Scheme "coupled-hints" (see the module's docstring): prompt() looks ahead over an
    expression prompt to give its digits the ids of the queries that write their cells."""

    def __init__(self, stride: int = FIELD_STRIDE):
        super().__init__(stride)
        self.hinted = False  # inside the completion of an expression prompt
        self.in_field = 0  # tokens so far in the current field of that completion

    route = "paper"  # whose machine's start state an expression's hints follow (machines.ROUTES)

    def prompt(self, ids) -> list[int]:
        positions = [self.next(i) for i in ids]
        hints = _expression_hints(tuple(ids), self.stride, self.route)
        if hints:
            for index, position in hints.items():
                positions[index] = position
            self.hinted = True
        return positions

    def next(self, token_id: int) -> int:
        if token_id in (SEP_ID, BOS_ID):
            self.hinted, self.in_field = False, 0
        elif self.hinted:  # the token's place in its field, whatever it is
            position = self.stride * self.fields + self.in_field
            super().next(token_id)  # fields are still counted as ever
            self.in_field = 0 if token_id in _SEPARATORS else self.in_field + 1
            return position
        return super().next(token_id)


class WordCounter(HintCounter):
    """Scheme "coupled-words" (see the module's docstring): coupled-hints, with every token of a field
    from its first letter, `_` or `[` token on in a place of its own, and LONG_MUL's two reads under HEAD2
    hinted. Holds only ints, strings and bools, as the counters it extends, so a shallow copy is an
    independent counter. Its adapters are the long route's, so aligner (I)'s hints follow LONG_MUL's and
    LONG_DIV's start states for `*` and `//`."""

    route = "long"

    def __init__(self, stride: int = FIELD_STRIDE):
        super().__init__(stride)
        self.worded = False  # the current field has had a letter token
        self.extra = 0  # places taken so far in the current field by tokens from that letter on
        self.completion = False  # the segment is a completion (it began at <sep>)
        self.lines = 0  # newlines so far in the segment
        self.line_word = ""  # the current line's text up to its first separator
        self.machine = ""  # the segment's first line's word: the machine whose state it is
        self.last_cell = -1  # id of the last cell of the segment's first line so far
        self.digit_read = -1  # id of the cell just before [HEAD2] in that line (-1: none)

    def next(self, token_id: int) -> int:
        previous = self.previous  # (ExpressionCounter's last token counted, before this one is)
        position = self._worded_next(token_id)
        if token_id in (SEP_ID, BOS_ID):
            self.completion, self.lines, self.line_word, self.machine = token_id == SEP_ID, 0, "", ""
            self.last_cell = self.digit_read = -1
            return position
        if self.lines == 0 and token_id in _CELLS:
            self.last_cell = position
        elif self.lines == 0 and token_id == _HEAD2:
            self.digit_read = self.last_cell
        if token_id in _SEPARATORS:
            # LONG_MUL reads the digit of b just before HEAD2 twice, at a cell that moves from step to step: the
            # command's first token (is it 0?) and DIGIT_MUL's start (the digit itself). Their queries get that
            # cell's id, so the read is a copy at offset 0 as every other copy is at a fixed one (as aligner (I)'s
            # hints make its reads); the tokens after them keep their ids.
            # (its second line is its command, its third the callee's start)
            hinted = (self.completion and self.machine == "LONG_MUL," and self.digit_read >= 0
                      and ((self.lines == 1 and previous == _CMD and self.line_word == "CMD")
                           or (self.lines == 2 and previous == _HEAD2 and self.line_word == "DIGIT_MUL, ")))
            self.last_cell = -1  # (a cell of the field before is not "just before HEAD2")
            if self.lines == 0 and not self.machine:
                self.machine = self.line_word
            if token_id == TOKEN_ID["\n"]:
                self.lines, self.line_word = self.lines + 1, ""
            elif not self.line_word.endswith(" "):
                self.line_word += " "  # the first field is done: nothing more is added to the line's word
            return self.digit_read if hinted else position
        if not self.line_word.endswith(" "):
            self.line_word += VOCAB[token_id]
        return position

    def _worded_next(self, token_id: int) -> int:
        position = super().next(token_id)
        if token_id in (SEP_ID, BOS_ID) or token_id in _SEPARATORS:
            position += 0 if token_id in (SEP_ID, BOS_ID) else self.extra
            self.worded, self.extra = False, 0
            return position
        if self.hinted or self.expression:  # aligner (I)'s completion and (O)'s answer: places of their own
            return position
        position += self.extra
        self.worded = self.worded or token_id in _WORD_STARTS
        if self.worded and token_id not in _CELLS:  # (a cell takes its place through the cell count)
            self.extra += 1
        return position


_EXPRESSION = re.compile(r"([0-9]+)(\+|-|\*|//|>|<|==)([0-9]+)=")


def _expression_hints(ids: tuple[int, ...], stride: int = FIELD_STRIDE, route: str = "paper") -> dict[int, int] | None:
    """{index in ids: id} for the digits of a prompt <s> a OP b = <sep> (the start state of OP's machine on
    `route`), or None for another prompt."""
    if len(ids) < 2 or ids[0] != BOS_ID or ids[-1] != SEP_ID:
        return None
    text = "".join(VOCAB[i] for i in ids[1:-1])
    match = _EXPRESSION.fullmatch(text)
    if not match or len(text) != len(ids) - 2:  # one character per token: text index + 1 = token index
        return None
    a, symbol, b = match.groups()
    queries = _cell_queries(symbol, len(a), len(b), stride, route)
    if queries is None:
        return None
    hints = {}
    for start, digits, offset in ((1, len(a), 0), (1 + match.start(3), len(b), len(a))):
        for i in range(digits):  # the i-th digit from the left is the (digits-1-i)-th cell
            hints[start + i] = queries[offset + digits - 1 - i]
    return hints


@lru_cache(maxsize=4096)
def _cell_queries(symbol: str, length_a: int, length_b: int, stride: int = FIELD_STRIDE,
                  route: str = "paper") -> tuple[int, ...] | None:
    """Ids of the tokens that write a's cells, then b's, in the start state of the machine that answers
    `symbol` on `route` (as a completion under this scheme). The layout depends only on the lengths, so operands
    a = 99…9 and b = 10…0 stand in for any with those lengths; None where the machine has no
    start state for them (e.g. a shorter minuend)."""
    a, b = 10**length_a - 1, 10 ** (length_b - 1)
    if symbol == "-" and a < b:
        return None
    try:
        ids = encode(lookup(routed(BY_SYMBOL[symbol].name, route)).start_text(a, b))
    except (ValueError, KeyError):
        return None
    counter = HintCounter(stride)
    counter.next(SEP_ID)
    counter.hinted = True
    positions = [counter.next(i) for i in ids]
    cells = [k for k, i in enumerate(ids) if i in _CELLS][: length_a + length_b]
    expected = ["|9"] * length_a + ["|0"] * (length_b - 1) + ["|1"]
    if [VOCAB[ids[k]] for k in cells] != expected:  # not the layout this assumes: no hints
        return None
    return tuple(positions[k - 1] for k in cells)


def split_scheme(scheme: str) -> tuple[str, int | None]:
    """(name, field stride) of a scheme: "coupled-hints/1024" -> ("coupled-hints", 1024); the stride is
    FIELD_STRIDE for a coupled name alone and None for "standard". ValueError for anything else."""
    name, _, stride = scheme.partition("/")
    if name not in SCHEMES:
        raise ValueError(f"unknown position scheme {scheme!r}; expected one of {SCHEMES}, a coupled one "
                         f"optionally with /STRIDE (e.g. coupled-hints/1024)")
    if name == "standard":
        if stride:
            raise ValueError(f"position scheme {scheme!r}: standard ids have no field stride")
        return name, None
    if not stride:
        return name, FIELD_STRIDE
    if not stride.isdigit() or int(stride) < 2:
        raise ValueError(f"position scheme {scheme!r}: the field stride must be an integer of at least 2")
    return name, int(stride)


def checked_scheme(scheme: str) -> str:
    """`scheme` if it names a scheme (the type of a --position-scheme flag), else argparse's error
    with split_scheme's message."""
    import argparse

    try:
        split_scheme(scheme)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return scheme


def field_cells(scheme: str) -> int | None:
    """Cells a tape field can hold under `scheme` before its ids reach the next field's (the stride,
    the separator after the last cell included); None for standard ids, which have no fields."""
    stride = split_scheme(scheme)[1]
    return None if stride is None else stride - 1


def make_counter(scheme: str):
    name, stride = split_scheme(scheme)
    if name == "standard":
        return StandardCounter()
    return {"coupled": CoupledCounter, "coupled-expr": ExpressionCounter, "coupled-hints": HintCounter,
            "coupled-words": WordCounter}[name](stride)


def position_ids(ids, scheme: str, offset: int = 0) -> list[int]:
    """Position ids for a whole token sequence (with its <s>/<sep> markers), token by token,
    exactly as decoding assigns them; `offset` (training only) is added to every id but the
    markers' (see the module's docstring)."""
    counter = make_counter(scheme)
    ids = list(ids)
    # The prompt is whole before decoding starts, so it is counted at once (prompt() may look
    # ahead within it); the completion one token at a time.
    end = ids.index(SEP_ID) + 1 if SEP_ID in ids else len(ids)
    positions = counter.prompt(ids[:end]) + [counter.next(i) for i in ids[end:]]
    if offset:
        positions = [p if i in (BOS_ID, SEP_ID) else p + offset for p, i in zip(positions, ids)]
    return positions
