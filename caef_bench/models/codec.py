"""How a tier turns prompt and completion texts into token ids, and back.

The tiny tier uses the CAEF tokenizer with <s> prompt <sep> completion </s> and
coupled positions; a pretrained tier uses its own tokenizer, its BOS and EOS,
and ordinary positions. Training, one-step evaluation and the runtime all go
through a codec, so every tier shares one code path.
"""

from __future__ import annotations

from dataclasses import dataclass

from caef_bench.models import tokenizer as caef


@dataclass(frozen=True)
class CaefCodec:
    scheme: str = "coupled"
    eos_id: int = caef.EOS_ID
    pad_id: int = caef.PAD_ID

    def prompt_ids(self, text: str) -> list[int]:
        return [caef.BOS_ID, *caef.encode(text), caef.SEP_ID]

    def completion_ids(self, text: str) -> list[int]:
        return caef.encode(text) + [caef.EOS_ID]

    def decode(self, ids) -> str:
        return caef.decode(ids)


class HFCodec:
    """A pretrained model's own tokenizer; the completion follows the prompt directly."""

    scheme = "standard"

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.eos_id = tokenizer.eos_token_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []

    def prompt_ids(self, text: str) -> list[int]:
        return self.bos + self.tokenizer.encode(text, add_special_tokens=False)

    def completion_ids(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False) + [self.eos_id]

    def decode(self, ids) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)


def codec_for(tokenizer, position_scheme: str):
    """The CAEF codec for a model saved with the CAEF tokenizer, else the model's own."""
    if getattr(tokenizer, "sep_token", None) == caef.SEP and len(tokenizer) == len(caef.VOCAB):
        return CaefCodec(position_scheme)
    return HFCodec(tokenizer)
