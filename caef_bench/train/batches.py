"""Samples -> padded tensors, with the loss on the completion only."""

from __future__ import annotations

import zlib

from caef_bench.models.positions import position_ids

IGNORE = -100  # label value the loss skips


def sample_offset(sample: dict, max_offset: int) -> int:
    """A sample's position offset in 0..max_offset (models.positions: randomised positions), drawn
    from its text: the same sample gets the same offset in every run and on resuming, and samples
    drawn at random get offsets spread over the range."""
    if max_offset <= 0:
        return 0
    return zlib.crc32(f"{sample['prompt']}\x00{sample['completion']}".encode()) % (max_offset + 1)


def encode_sample(sample: dict, codec, max_offset: int = 0) -> tuple[list[int], list[int], list[int]]:
    """(input ids, labels, position ids): prompt then completion, labels on the completion only;
    the ids shifted by the sample's offset when max_offset > 0."""
    prompt = codec.prompt_ids(sample["prompt"])
    completion = codec.completion_ids(sample["completion"])
    ids = prompt + completion
    labels = [IGNORE] * len(prompt) + completion
    return ids, labels, position_ids(ids, codec.scheme, sample_offset(sample, max_offset))


def collate(samples: list[dict], codec, max_offset: int = 0) -> dict:
    """Right-padded batch tensors for a causal LM (input_ids, attention_mask, position_ids, labels)."""
    return _padded([encode_sample(s, codec, max_offset) for s in samples], codec)


def collate_micro(samples: list[dict], codec, max_tokens: int | None, max_offset: int = 0) -> list[dict]:
    """One step's samples as micro-batches of similar length, each at most max_tokens padded
    tokens (rows x width; a longer sample goes alone); None or 0, or samples of similar lengths
    (padding under a fifth of the tensor): the whole batch, as collate.

    A batch drawn over 1-100-digit operands is mostly padding when padded to its longest
    sample, and attention costs the square of that width: on a 2-core CPU, 128 such samples
    trained at ~700 tokens/s as one tensor and ~5,000 as length-sorted micro-batches of ~4k
    tokens. train() weights each micro-batch's loss by its share of the step's completion
    tokens, so the step's gradient is the whole batch's.
    """
    encoded = [encode_sample(s, codec, max_offset) for s in samples]
    lengths = [len(ids) for ids, _, _ in encoded]
    # Split only where padding is at least a fifth of the whole tensor: each micro-batch is one
    # more forward call, and samples of similar lengths leave little padding to save. (At half, as
    # before, 32 LoRA-direct samples padded 38% and 128 executor_add ones 45% stayed whole, and the
    # tiny tier trained them 1.6x and 2x slower on this CPU than split: docs/training.md.)
    if not max_tokens or 5 * (max(lengths) * len(lengths) - sum(lengths)) < max(lengths) * len(lengths):
        return [_padded(encoded, codec)]
    encoded.sort(key=lambda e: len(e[0]))
    groups, group = [], []
    for sample in encoded:  # ascending lengths: the sample being added is its group's widest
        if group and len(sample[0]) * (len(group) + 1) > max_tokens:
            groups.append(group)
            group = []
        group.append(sample)
    groups.append(group)
    return [_padded(group, codec) for group in groups]


def _padded(encoded: list[tuple[list[int], list[int], list[int]]], codec) -> dict:
    import torch

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
