"""The tiny tier's base model: a small Llama, built here, with the CAEF tokenizer.

Small enough to train on two CPU cores and to ship in the repository (bf16
safetensors), and a standard transformers LlamaForCausalLM, so the tiny tier
goes through the same transformers + peft code path as LLaMA 3.1-8B. What is
special is outside the model: the tokenizer (caef_bench.models.tokenizer) and
the coupled position ids (caef_bench.models.positions), recorded in
`caef_tier.json` beside the weights.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from caef_bench.models.tokenizer import BOS_ID, EOS_ID, PAD_ID, VOCAB, build_hf_tokenizer

TIER_FILE = "caef_tier.json"


@dataclass(frozen=True)
class TinyShape:
    hidden: int = 256
    layers: int = 4
    heads: int = 4
    ffn: int = 768
    max_positions: int = 8192  # coupled ids reach FIELD_STRIDE x (fields in a composer text)


def build_tiny_base(shape: TinyShape = TinyShape(), seed: int = 0):
    """A freshly initialised tiny Llama (deterministic in the seed)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(VOCAB), hidden_size=shape.hidden, intermediate_size=shape.ffn,
        num_hidden_layers=shape.layers, num_attention_heads=shape.heads, num_key_value_heads=shape.heads,
        max_position_embeddings=shape.max_positions, rope_theta=10000.0, tie_word_embeddings=True,
        bos_token_id=BOS_ID, eos_token_id=EOS_ID, pad_token_id=PAD_ID,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(config)


def save_tiny_base(model, folder: str | Path, position_scheme: str, extra: dict | None = None) -> Path:
    """Weights in bf16 (half the bytes; the tiny tier ships in the repo), tokenizer, tier file."""
    import torch

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(folder, safe_serialization=True)
    model.to(torch.float32)  # keep training or evaluating in full precision
    build_hf_tokenizer().save_pretrained(folder)
    info = {"position_scheme": position_scheme, "tokenizer": "caef", **(extra or {})}
    (folder / TIER_FILE).write_text(json.dumps(info, indent=1) + "\n")
    return folder


def tier_info(folder: str | Path) -> dict:
    """What caef_tier.json beside a base's weights says (a pretrained base has none: standard positions)."""
    path = Path(folder) / TIER_FILE
    return json.loads(path.read_text()) if path.is_file() else {"position_scheme": "standard"}


def set_position_scheme(folder: str | Path, scheme: str) -> None:
    """Switch a saved tiny base to another position scheme (its weights untouched). Only for a
    scheme that gives the adapters already trained on it the same ids, e.g. coupled -> coupled-expr,
    which differs only on aligner (O)'s answers, or -> coupled-hints, which also changes aligner (I)'s
    ids (retrain the aligners under it: `caef-bench train --position-scheme`)."""
    from caef_bench.models.positions import split_scheme

    split_scheme(scheme)  # ValueError for an unknown one
    path = Path(folder) / TIER_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: not a tiny base folder")
    info = json.loads(path.read_text())
    path.write_text(json.dumps({**info, "position_scheme": scheme}, indent=1) + "\n")


def shape_of(model) -> dict:
    c = model.config
    return asdict(TinyShape(c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.intermediate_size,
                            c.max_position_embeddings))
