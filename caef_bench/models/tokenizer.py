"""The CAEF tokenizer of the tiny tier: one token per format unit, one per other character.

Every digit cell ("|7"), marker ("[HEAD1]"), machine name, state name, keyword
and the halt sentence is one token; any other printable ASCII character is a
token of its own, so prose (stage-1 explanations, the baselines' prompts) and
expressions round-trip exactly too. Halving a 100-digit tape from 200
characters to 100 tokens is what makes CPU training of long traces feasible.

Two equal implementations: `encode`/`decode` in plain Python for training and
the runtime's hot loops, and a Hugging Face tokenizer (`build_hf_tokenizer`)
saved beside the model so that generic tooling (AutoTokenizer, lm-eval) loads it.
"""

from __future__ import annotations

from functools import lru_cache

from caef_bench.machines.text import FORMAT_UNIT_PATTERN, FORMAT_WORDS, split_units

PAD, BOS, EOS, SEP, UNK = "<pad>", "<s>", "</s>", "<sep>", "<unk>"
SPECIALS = (PAD, BOS, EOS, SEP, UNK)
# Printable ASCII plus newline and tab; FORMAT_WORDS come first so ids are stable.
CHARACTERS = tuple(chr(c) for c in range(32, 127)) + ("\n", "\t")
VOCAB: tuple[str, ...] = SPECIALS + FORMAT_WORDS + CHARACTERS
TOKEN_ID = {token: i for i, token in enumerate(VOCAB)}
PAD_ID, BOS_ID, EOS_ID, SEP_ID, UNK_ID = (TOKEN_ID[t] for t in SPECIALS)


def encode(text: str) -> list[int]:
    """Text -> token ids (no special tokens); characters outside the vocabulary raise."""
    try:
        return [TOKEN_ID[unit] for unit in split_units(text)]
    except KeyError as error:
        raise ValueError(f"character {error.args[0]!r} is outside the CAEF tokenizer's vocabulary") from None


def decode(ids) -> str:
    """Token ids -> text; special tokens are dropped."""
    return "".join(VOCAB[i] for i in ids if i >= len(SPECIALS))


def tokens(ids) -> list[str]:
    return [VOCAB[i] for i in ids]


@lru_cache(maxsize=1)
def build_hf_tokenizer():
    """The same tokenizer as a transformers PreTrainedTokenizerFast (saved with the tiny base)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.WordLevel(vocab=dict(TOKEN_ID), unk_token=UNK))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(FORMAT_UNIT_PATTERN), behavior="isolated")
    core.decoder = decoders.Fuse()  # concatenate tokens: no spaces are invented or removed
    return PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token=BOS, eos_token=EOS, pad_token=PAD, sep_token=SEP, unk_token=UNK,
        clean_up_tokenization_spaces=False, model_max_length=4096,
    )
