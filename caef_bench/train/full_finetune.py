"""Full fine-tuning with the interface the recipe gives a LoRA adapter.

The LoRA-direct baseline's capacity check (docs/lora-direct.md) asks whether a direct answerer of
the tiny tier's size is limited by its rank-16 LoRA or by its size: the same base, every weight
trained. `FullFineTune` wraps the base so that the training loop, the learning curve's snapshots
and the unloading between operators treat it like a peft model: the weights it trains are the
base's own, put back as they were by `unload()`, and a snapshot is the whole state dict (bf16,
`model.safetensors`) beside its manifest, read back by `load_full_finetune`.
"""

from __future__ import annotations

from pathlib import Path

import torch

WEIGHTS = "model.safetensors"


class FullFineTune(torch.nn.Module):
    """`model` with every parameter trainable; `unload()` restores the weights it started from."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.config = model.config
        self._start = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
        for parameter in model.parameters():
            parameter.requires_grad_(True)

    def forward(self, **inputs):
        return self.model(**inputs)

    def get_base_model(self):
        return self.model

    def save_pretrained(self, folder: str | Path) -> None:
        from safetensors.torch import save_file

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        # tied embeddings: one tensor under two names would be written twice (safetensors refuses shared storage)
        state = {name: tensor.detach().to(torch.bfloat16).contiguous() for name, tensor in self.model.state_dict().items()
                 if not (name == "lm_head.weight" and self.config.tie_word_embeddings)}
        save_file(state, str(folder / WEIGHTS))

    def unload(self):
        with torch.no_grad():
            self.model.load_state_dict(self._start)
        for parameter in self.model.parameters():
            parameter.requires_grad_(False)
        return self.model


def is_full_finetune(folder: str | Path) -> bool:
    """Whether a direct/<op>/ folder holds a full fine-tune (its weights) rather than a LoRA adapter."""
    return (Path(folder) / WEIGHTS).is_file()


def load_full_finetune(base_model, folder: str | Path):
    """A copy of `base_model` holding the fine-tuned weights of `folder`, in eval mode."""
    import copy

    from safetensors.torch import load_file

    model = copy.deepcopy(base_model)
    weights = {name: tensor.to(next(model.parameters()).dtype) for name, tensor in load_file(str(Path(folder) / WEIGHTS)).items()}
    missing, unexpected = model.load_state_dict(weights, strict=False)
    missing = [name for name in missing if not (name == "lm_head.weight" and model.config.tie_word_embeddings)]
    if missing or unexpected:
        raise ValueError(f"{folder}/{WEIGHTS} does not fit the base (missing {missing[:3]}, unexpected {unexpected[:3]})")
    if model.config.tie_word_embeddings:
        model.tie_weights()
    return model.eval()
