"""Samples -> padded tensors, with the loss on the completion only."""

from __future__ import annotations

from caef_bench.models.positions import position_ids

IGNORE = -100  # label value the loss skips


def encode_sample(sample: dict, codec) -> tuple[list[int], list[int], list[int]]:
    """(input ids, labels, position ids): prompt then completion, labels on the completion only."""
    prompt = codec.prompt_ids(sample["prompt"])
    completion = codec.completion_ids(sample["completion"])
    ids = prompt + completion
    labels = [IGNORE] * len(prompt) + completion
    return ids, labels, position_ids(ids, codec.scheme)


def collate(samples: list[dict], codec) -> dict:
    """Right-padded batch tensors for a causal LM (input_ids, attention_mask, position_ids, labels)."""
    import torch

    encoded = [encode_sample(s, codec) for s in samples]
    width = max(len(ids) for ids, _, _ in encoded)
    batch = {name: torch.full((len(encoded), width), fill, dtype=torch.long)
             for name, fill in (("input_ids", codec.pad_id), ("labels", IGNORE), ("position_ids", 0),
                                ("attention_mask", 0))}
    for row, (ids, labels, positions) in enumerate(encoded):
        n = len(ids)
        batch["input_ids"][row, :n] = torch.tensor(ids)
        batch["labels"][row, :n] = torch.tensor(labels)
        batch["position_ids"][row, :n] = torch.tensor(positions)
        batch["attention_mask"][row, :n] = 1
    return batch
