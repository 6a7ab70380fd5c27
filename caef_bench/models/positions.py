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
Scheme "standard": 0, 1, 2, … as usual (pretrained tiers).
"""

from __future__ import annotations

from caef_bench.models.tokenizer import BOS_ID, SEP_ID, TOKEN_ID

FIELD_STRIDE = 128  # more than the cells of any field (a 101-digit sum plus head room)
SCHEMES = ("standard", "coupled")
_SEPARATORS = frozenset({TOKEN_ID[" "], TOKEN_ID["\n"]})
_CELLS = frozenset(TOKEN_ID[f"|{d}"] for d in "0123456789")


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


def position_ids(ids, scheme: str) -> list[int]:
    """Position ids for a whole token sequence (with its <s>/<sep> markers)."""
    if scheme == "standard":
        return list(range(len(ids)))
    if scheme != "coupled":
        raise ValueError(f"unknown position scheme {scheme!r}; expected one of {SCHEMES}")
    counter = CoupledCounter()
    return [counter.next(i) for i in ids]

