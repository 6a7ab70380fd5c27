"""A tiny randomly initialised LLaMA with a character-level tokenizer, built
offline, for end-to-end runs of model-facing code (lm-eval, generation) on CPU.

Use the ``micro_model_dir`` fixture (import it into a test module), or call
``build_micro_model(directory)`` directly. Its answers are noise; it exists so
that pipelines run, not so that they score.
"""

from __future__ import annotations

from pathlib import Path

import pytest

SPECIAL_TOKENS = {"pad_token": "<pad>", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
# Printable ASCII and newline: every character of the protocol's prompts.
CHARACTERS = [chr(code) for code in range(32, 127)] + ["\n"]
MAX_POSITIONS = 1024  # > the longest prompt (~210 characters) plus max_gen_toks (256)


def build_micro_tokenizer():
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: index for index, token in enumerate([*SPECIAL_TOKENS.values(), *CHARACTERS])}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token=SPECIAL_TOKENS["unk_token"]))
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tokenizer.decoder = decoders.Fuse()  # concatenate characters back, no separator
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, **SPECIAL_TOKENS)


def build_micro_model(directory: str | Path, seed: int = 0) -> Path:
    """Save a 2-layer, 32-wide LlamaForCausalLM and its tokenizer to ``directory``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    directory = Path(directory)
    tokenizer = build_micro_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=MAX_POSITIONS,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(seed)
    LlamaForCausalLM(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def micro_model_dir(tmp_path_factory) -> Path:
    return build_micro_model(tmp_path_factory.mktemp("micro_model"))


@pytest.fixture(scope="module")
def micro_tiny_base(tmp_path_factory) -> Path:
    """A micro tiny base (the CAEF tokenizer, hidden 32) under the tiny preset's coupled ids, saved
    as the tier saves its own: for training and loading adapters on it in seconds."""
    from caef_bench.models.tiny import TinyShape, build_tiny_base, save_tiny_base

    folder = tmp_path_factory.mktemp("micro_tiny_base")
    save_tiny_base(build_tiny_base(TinyShape(hidden=32, layers=2, heads=2, ffn=64), seed=0), folder, "coupled-hints")
    return folder
