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
from dataclasses import dataclass, field
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
    """A peft model holding direct adapters (named `direct_<op>`), the full fine-tunes of the base
    among them (train.full_finetune: each its own copy of the model) and the codec each one runs with."""

    model: Any  # the peft model of the LoRA ones, else the base
    codecs: dict  # op -> codec (its scheme: the adapter's manifest's, else the base's)
    full: dict = field(default_factory=dict)  # op -> its fully fine-tuned model

    def ops(self) -> tuple[str, ...]:
        return tuple(self.codecs)

    def replies(self, op: str, prompts: list[str], max_new_tokens: int | list[int], batch_size: int = 32,
                stop: str | None = STOP) -> list[str]:
        """Greedy replies of op's adapter to the prompts, each cut at `stop` (None: as decoded)."""
        from caef_bench.models.decoding import greedy_texts

        if op not in self.codecs:
            raise ValueError(f"no direct adapter for {op!r} is loaded; loaded: {', '.join(self.codecs) or 'none'}")
        model = self.full.get(op)
        if model is None:
            self.model.set_adapter(adapter_name("direct", op))
            model = self.model
        texts = greedy_texts(model, self.codecs[op], prompts, max_new_tokens, batch_size)
        return [text.split(stop)[0] if stop else text for text in texts]

    def ask(self, op: str, exprs: list[str], answers: list[str], batch_size: int = 32) -> list[str]:
        """op's replies to problems (`45+67=` and its answer `112`) asked with the protocol's LoRA-direct
        prompt, each decoded only as far as its answer could still be right (answer_limit)."""
        from caef_bench.data.direct import direct_prompt

        limits = [self.answer_limit(op, answer) for answer in answers]
        return self.replies(op, [direct_prompt(expr, op) for expr in exprs], limits, batch_size)

    def answer_limit(self, op: str, answer: str) -> int:
        """Tokens to decode for a problem whose answer is `answer` (see ANSWER_SLACK)."""
        return len(self.codecs[op].completion_ids(answer)) - 1 + ANSWER_SLACK  # (less the </s>)

    def detach(self):
        """The base model with the direct adapters taken out (to load another set)."""
        return self.model.unload() if hasattr(self.model, "peft_config") else self.model


def attach_direct(base_model, tokenizer, adapter_root: str | Path, base_scheme: str,
                  ops: Iterable[str] | None = None) -> DirectModel:
    """The direct adapters under `adapter_root` (its `direct/<op>/` folders; ops=None: all there)
    on `base_model`, each with the codec of the scheme its manifest records."""
    import json

    from caef_bench.models.codec import codec_for
    from caef_bench.models.loading import adapter_schemes, load_adapters, loaded_adapters
    from caef_bench.train.full_finetune import load_full_finetune

    full_folders = full_finetunes(adapter_root, ops)
    lora_ops = None if ops is None else tuple(op for op in ops if op not in full_folders)
    model, codecs = base_model, {}
    if lora_ops != ():
        try:
            model = load_adapters(base_model, adapter_root, lora_ops, kinds=("direct",)).eval()
        except FileNotFoundError:
            if not full_folders or lora_ops is not None:
                raise
    schemes = adapter_schemes(adapter_root)
    for name in loaded_adapters(model):
        kind, _, op = name.partition("_")
        if kind == "direct":
            codecs[op] = codec_for(tokenizer, schemes.get(name, base_scheme))
    full = {}
    for op, folder in full_folders.items():
        manifest = json.loads((folder / "manifest.json").read_text()) if (folder / "manifest.json").is_file() else {}
        full[op] = load_full_finetune(base_model, folder)
        codecs[op] = codec_for(tokenizer, manifest.get("position_scheme", base_scheme))
    return DirectModel(model, codecs, full)


def full_finetunes(adapter_root: str | Path, ops: Iterable[str] | None = None) -> dict[str, Path]:
    """op -> its direct/<op>/ folder, for those that hold a full fine-tune of the base rather than a LoRA adapter."""
    from caef_bench.machines import ALIGNED_OPS
    from caef_bench.train.full_finetune import is_full_finetune

    folders = {op: Path(adapter_root) / "direct" / op for op in (ALIGNED_OPS if ops is None else ops)}
    return {op: folder for op, folder in folders.items() if is_full_finetune(folder)}


def direct_fingerprints(tier) -> dict[str, str]:
    """{direct_<op>: fingerprint} of a tier's direct models, LoRA adapters (models.loading.fingerprints)
    and full fine-tunes (the base's fingerprint, the scheme and the weights' bytes) alike."""
    import hashlib
    import json

    from caef_bench.models.loading import fingerprints
    from caef_bench.train.full_finetune import WEIGHTS

    base, found = fingerprints(tier, kinds=("direct",))
    for op, folder in full_finetunes(tier.adapters).items():
        manifest = json.loads((folder / "manifest.json").read_text()) if (folder / "manifest.json").is_file() else {}
        digest = hashlib.sha256(f"{base}|full|{manifest.get('position_scheme')}|".encode())
        digest.update((folder / WEIGHTS).read_bytes())
        found[adapter_name("direct", op)] = digest.hexdigest()[:12]
    return found


def load_direct(tier, device: str = "cpu", ops: Iterable[str] | None = None) -> DirectModel:
    """A tier (a models.loading.Tier) with its direct adapters, on `device`."""
    from caef_bench.models.loading import load_base

    if tier.adapters is None:
        raise ValueError(f"tier {tier.name} names no adapter folder to take the direct adapters from")
    model, tokenizer = load_base(tier, device)
    return attach_direct(model, tokenizer, tier.adapters, tier.position_scheme, ops)
