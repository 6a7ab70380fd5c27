"""Anonymous tape cells: layer 0's attention reads every tape cell alike (docs/structured-operands.md).

On the shipped tiny tier, a run of one digit breaks executor_add where random digits of the same
length do not, and not because a head looks in the wrong place: layer 0's heads put the same share of
their attention on the tape cells for both, and what that attention averages is, over random digits,
about the same at every step, over a run, one digit's value a hundred or two hundred times. The layers
above follow that signal onto the run. Making the values that layer 0's attention reads from tape
cells (`|0`..`|9`) content-free, the mean of the ten digits' values, takes that signal away: with no
other change, the shipped executor_add then copies 100-digit runs of one digit right, and only the
command line's sums, which read the digits under the heads through layer 0, go wrong until an adapter
is trained with it (`train --anonymous-cells`).

A cell's digit stays in its own residual stream (the embedding) and in layer 0's keys, queries and MLP,
so every layer above still reads it where it attends. The rule is token-local: it needs the ids of
the tokens being computed only, so it holds in a batch, with padding and with a KV cache, in training
and in decoding alike. An adapter trained with it records `anonymous_cells` in its manifest, and the
runtime turns the gate on for that adapter only.

Aligners read operands as plain digits (`45+67=`), not cells, and copy them into a tape or back: the same
averaging over a run can reach them through the prompt's digits. With `digits` on, the gate treats the
plain digits `0`..`9` the same way, as a group of their own (their neutral value is the mean of the ten
plain digits' values), for adapters trained with `train --anonymous-digits`. With `digits` set to
"expressions", the gate touches only the sequences that begin with an expression (`45+67=`: aligner (I)'s
conversions), found from each sequence's first token when a pass starts one (no cache yet) and kept for
the passes that extend it: aligner (I) copies runs right with the gate, while (O), which reads the halt
state's cells through layer 0 to write the answer, is left as it learned.
"""

from __future__ import annotations

from caef_bench.models.tokenizer import BOS_ID, PAD_ID, TOKEN_ID

CELL_TOKEN_IDS = tuple(TOKEN_ID[f"|{digit}"] for digit in "0123456789")
DIGIT_TOKEN_IDS = tuple(TOKEN_ID[digit] for digit in "0123456789")


class AnonymousCells:
    """Installed once on a Llama-style causal LM (the tiny tier); `on` says whether the next forward
    passes use it. peft may wrap the model and swap layer 0's value projection for its LoRA layer after
    installation: the gate follows the projection that is there at each forward pass."""

    def __init__(self, causal_lm):
        self.on = False
        # plain digits too, each group with its own neutral value: None, "all" sequences, or only the
        # "expressions" (sequences that begin with one: aligner (I))
        self.digits = None
        self._ids = None
        self._expressions = None  # per row of the sequences being computed: begins with an expression
        self._busy = False  # while the gate itself computes the neutral value
        self._decoder = causal_lm.model
        self._decoder.register_forward_pre_hook(self._before_forward, with_kwargs=True)

    def _before_forward(self, decoder, args, kwargs):
        self._ids = kwargs.get("input_ids", args[0] if args else None)
        cache = kwargs.get("past_key_values")
        fresh = cache is None or cache.get_seq_length() == 0  # a pass that starts its sequences
        if self.on and self.digits == "expressions" and self._ids is not None and fresh:
            self._expressions = _begins_with_a_digit(self._ids)
        projection = decoder.layers[0].self_attn.v_proj
        if not getattr(projection, "_anonymous_cells", False):
            projection.register_forward_hook(self._gate)
            projection._anonymous_cells = True

    def _gate(self, projection, args, values):
        if not self.on or self._busy or self._ids is None:
            return values
        import torch

        groups = (CELL_TOKEN_IDS, DIGIT_TOKEN_IDS) if self.digits else (CELL_TOKEN_IDS,)
        for group in groups:
            ids = torch.tensor(group, device=self._ids.device)
            members = torch.isin(self._ids, ids)
            if self.digits == "expressions":
                members = members & self._expressions[:, None]
            if not members.any():
                continue
            self._busy = True
            try:  # the value each token of the group would give at layer 0, averaged: the same for every one
                layer = self._decoder.layers[0]
                neutral = projection(layer.input_layernorm(self._decoder.embed_tokens(ids))).mean(0)
            finally:
                self._busy = False
            values = torch.where(members[..., None], neutral.to(values.dtype), values)
        return values


def _begins_with_a_digit(ids):
    """Per row: whether its first token after the padding and <s> is a plain digit."""
    import torch

    text = ~torch.isin(ids, torch.tensor((PAD_ID, BOS_ID), device=ids.device))
    first = ids.gather(1, text.int().argmax(1, keepdim=True))[:, 0]
    return torch.isin(first, torch.tensor(DIGIT_TOKEN_IDS, device=ids.device)) & text.any(1)


def install(causal_lm) -> AnonymousCells:
    """The gate on `causal_lm` (off until told), installed at most once."""
    gate = getattr(causal_lm, "_anonymous_cells_gate", None)
    if gate is None:
        gate = AnonymousCells(causal_lm)
        causal_lm._anonymous_cells_gate = gate
    return gate
