"""A tiny randomly initialised LLaMA with a character-level tokenizer, built
offline, for end-to-end runs of model-facing code (lm-eval, generation) on CPU.

Call ``build_micro_model(directory)``: its answers are noise; it exists so that
pipelines run, not so that they score. ``build_answering_model(directory, "True")``
(the ``answering_model_dir`` fixture) answers every prompt that ends in "=" with
that text, so a pipeline run on it has a score known in advance.
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


def build_answering_model(directory: str | Path, answer: str) -> Path:
    """Save a LlamaForCausalLM whose greedy reply to any prompt ending in "=" is ``answer`` then a newline.

    Its attention and MLP write nothing (zero output projections), so each next token depends on the
    current one alone: one-hot embeddings, and an lm_head that maps "=" to the answer's first character,
    each character to the next, the last to "\n" and that to the end of text. The answer's characters
    must be distinct.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    assert len(set(answer)) == len(answer) and "=" not in answer and "\n" not in answer
    directory = Path(directory)
    tokenizer = build_micro_tokenizer()
    vocab = len(tokenizer)
    hidden = 2 * ((vocab + 1) // 2)  # one dimension per token, even for two heads
    config = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=8, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=MAX_POSITIONS,
                         pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=False)
    model = LlamaForCausalLM(config)
    chain = ["=", *answer, "\n", SPECIAL_TOKENS["eos_token"]]
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        model.model.embed_tokens.weight.copy_(torch.eye(vocab, hidden))
        model.lm_head.weight.zero_()
        for here, after in zip(chain, chain[1:]):
            model.lm_head.weight[tokenizer.convert_tokens_to_ids(after), tokenizer.convert_tokens_to_ids(here)] = 1.0
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def answering_model_dir(tmp_path_factory) -> Path:
    """A model that answers "True" to every bare prompt (``45+67=``, ``5>3=``)."""
    return build_answering_model(tmp_path_factory.mktemp("answering_model"), "True")


@pytest.fixture(scope="module")
def micro_tiny_base(tmp_path_factory) -> Path:
    """A micro tiny base (the CAEF tokenizer, hidden 32) under the tiny preset's coupled ids, saved
    as the tier saves its own: for training and loading adapters on it in seconds."""
    from caef_bench.models.tiny import TinyShape, build_tiny_base, save_tiny_base

    folder = tmp_path_factory.mktemp("micro_tiny_base")
    save_tiny_base(build_tiny_base(TinyShape(hidden=32, layers=2, heads=2, ffn=64), seed=0), folder, "coupled-hints")
    return folder
