"""The LoRA-direct baseline's answers: a base with its `direct_<op>` adapters, each run under the
position scheme its manifest records.

The direct adapters are trained under ordinary ids (0, 1, 2, …) on a base whose own ids may be
coupled (the tiny tier's): run under the base's scheme, every digit of a direct prompt would get
id 0, which is not the model they were trained as. Both ways of asking them go through here: the
`caef-direct` lm-eval model (Table 1) and the learning curve's in-process evaluation
(`evaluate.direct_curve`), which has to run where lm-eval is not installed, so nothing here
imports it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from caef_bench.models.names import adapter_name

# What the direct tasks stop a reply at (tasks/_bare_template_yaml: `until: ["\n"]`): a reply is
# its first line, as lm-eval hands it to the scorer.
STOP = "\n"
# Tokens decoded past the answer's own length. A longer reply is wrong whatever follows (its
# first integer is longer than the answer), unless it opened with this many blanks, so a row
# stops there rather than at the tasks' 256 tokens: a degenerate model writes to the limit.
ANSWER_SLACK = 8


@dataclass
class DirectModel:
    """A peft model holding direct adapters (named `direct_<op>`) and the codec each one runs with."""

    model: Any
    codecs: dict  # op -> codec (its scheme: the adapter's manifest's, else the base's)

    def ops(self) -> tuple[str, ...]:
        return tuple(self.codecs)

    def replies(self, op: str, prompts: list[str], max_new_tokens: int | list[int], batch_size: int = 32,
                stop: str | None = STOP) -> list[str]:
        """Greedy replies of op's adapter to the prompts, each cut at `stop` (None: as decoded)."""
        from caef_bench.models.decoding import greedy_texts

        if op not in self.codecs:
            raise ValueError(f"no direct adapter for {op!r} is loaded; loaded: {', '.join(self.codecs) or 'none'}")
        self.model.set_adapter(adapter_name("direct", op))
        texts = greedy_texts(self.model, self.codecs[op], prompts, max_new_tokens, batch_size)
        return [text.split(stop)[0] if stop else text for text in texts]

    def answer_limit(self, op: str, answer: str) -> int:
        """Tokens to decode for a problem whose answer is `answer` (see ANSWER_SLACK)."""
        return len(self.codecs[op].completion_ids(answer)) - 1 + ANSWER_SLACK  # (less the </s>)

    def detach(self):
        """The base model with the direct adapters taken out (to load another set)."""
        return self.model.unload()


def attach_direct(base_model, tokenizer, adapter_root: str | Path, base_scheme: str,
                  ops: Iterable[str] | None = None) -> DirectModel:
    """The direct adapters under `adapter_root` (its `direct/<op>/` folders; ops=None: all there)
    on `base_model`, each with the codec of the scheme its manifest records."""
    from caef_bench.models.codec import codec_for
    from caef_bench.models.loading import adapter_schemes, load_adapters, loaded_adapters

    model = load_adapters(base_model, adapter_root, None if ops is None else tuple(ops), kinds=("direct",)).eval()
    schemes = adapter_schemes(adapter_root)
    codecs = {}
    for name in loaded_adapters(model):
        kind, _, op = name.partition("_")
        if kind == "direct":
            codecs[op] = codec_for(tokenizer, schemes.get(name, base_scheme))
    return DirectModel(model, codecs)


def load_direct(tier, device: str = "cpu", ops: Iterable[str] | None = None) -> DirectModel:
    """A tier (a models.loading.Tier) with its direct adapters, on `device`."""
    from caef_bench.models.loading import load_base

    if tier.adapters is None:
        raise ValueError(f"tier {tier.name} names no adapter folder to take the direct adapters from")
    model, tokenizer = load_base(tier, device)
    return attach_direct(model, tokenizer, tier.adapters, tier.position_scheme, ops)
