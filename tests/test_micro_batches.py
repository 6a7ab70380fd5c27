"""Length-sorted micro-batches give the whole batch's training step; precision is chosen per device."""

import json

import pytest
import torch

from caef_bench.machines import trace
from caef_bench.models.codec import CaefCodec
from caef_bench.models.tiny import TinyShape, build_tiny_base
from caef_bench.train import loop
from caef_bench.train.batches import IGNORE, collate, collate_micro
from caef_bench.train.loop import RunOptions, RunPlan, resolve_precision, train

MICRO = TinyShape(hidden=32, layers=2, heads=2, ffn=64, max_positions=8192)
CODEC = CaefCodec("coupled")


def _samples():
    """Transitions of very different lengths, as a draw over 1-100-digit operands gives."""
    pairs = [(45, 67), (3, 9), (7, 7), (12, 5), (8, 96), (1, 1), (2, 3), (5, 4), (9, 9), (123456789012345678901234567890, 98765), (10 ** 60 - 1, 1)]
    return [{"prompt": s, "completion": t} for a, b in pairs for s, t in trace("add", a, b)[:4]]


def _rows(batch: dict) -> list[tuple]:
    """Each row's unpadded (input ids, labels, positions), to compare batches as sets of samples."""
    rows = []
    for r in range(batch["input_ids"].shape[0]):
        n = int(batch["attention_mask"][r].sum())
        rows.append(tuple(tuple(batch[k][r, :n].tolist()) for k in ("input_ids", "labels", "position_ids")))
    return rows


def test_micro_batches_hold_the_same_samples_sorted_and_within_the_budget():
    samples = _samples()
    whole = collate(samples, CODEC)
    parts = collate_micro(samples, CODEC, max_tokens=600)
    assert len(parts) > 2
    assert sorted(row for part in parts for row in _rows(part)) == sorted(_rows(whole))
    widths = [part["input_ids"].shape[1] for part in parts]
    assert widths == sorted(widths)  # ascending lengths
    for part in parts:
        rows, width = part["input_ids"].shape
        assert rows * width <= 600 or rows == 1  # a sample longer than the budget goes alone
    # Far less padding than the whole batch padded to its longest sample (here 199 against 4,178).
    real = int(whole["attention_mask"].sum())
    assert sum(p["input_ids"].numel() for p in parts) - real < (whole["input_ids"].numel() - real) / 4


@pytest.mark.parametrize("budget", [None, 0])
def test_no_budget_is_the_whole_batch_as_collate_builds_it(budget):
    samples = _samples()
    (only,) = collate_micro(samples, CODEC, budget)
    whole = collate(samples, CODEC)
    assert all(torch.equal(only[k], whole[k]) for k in whole)


def test_a_step_on_micro_batches_equals_a_step_on_the_whole_batch(tmp_path):
    samples = _samples()
    whole = build_tiny_base(MICRO, seed=0)
    fp32 = RunOptions(precision="fp32", progress=False)
    train(whole, lambda step: collate(samples, CODEC), tmp_path / "whole", RunPlan(steps=2, lr=1e-2), fp32)
    split = build_tiny_base(MICRO, seed=0)
    result = train(split, lambda step: collate_micro(samples, CODEC, 600), tmp_path / "split",
                   RunPlan(steps=2, lr=1e-2), fp32)
    assert result.tokens == 2 * int(collate(samples, CODEC)["attention_mask"].sum())  # padding is not counted
    for (name, a), (_, b) in zip(whole.named_parameters(), split.named_parameters()):
        assert torch.allclose(a, b, atol=1e-6), name
    logged = [json.loads(line)["loss"] for line in (tmp_path / "split" / "loss.jsonl").read_text().splitlines()]
    reference = [json.loads(line)["loss"] for line in (tmp_path / "whole" / "loss.jsonl").read_text().splitlines()]
    assert logged == pytest.approx(reference, rel=1e-5)


def test_micro_batches_weight_each_loss_by_its_completion_tokens():
    # Unweighted means of the parts would count a short sample's tokens as much as a long one's.
    samples = _samples()
    model = build_tiny_base(MICRO, seed=0).eval()
    with torch.no_grad():
        whole = model(**collate(samples, CODEC)).loss.item()
        parts = collate_micro(samples, CODEC, 600)
        counts = [int((p["labels"][:, 1:] != IGNORE).sum()) for p in parts]
        weighted = sum(model(**p).loss.item() * n for p, n in zip(parts, counts)) / sum(counts)
        unweighted = sum(model(**p).loss.item() for p in parts) / len(parts)
    assert weighted == pytest.approx(whole, rel=1e-5)
    assert abs(unweighted - whole) > 1e-3


def test_samples_of_similar_lengths_stay_one_batch():
    # Splitting them saves little padding and costs a forward call per micro-batch.
    samples = [{"prompt": s, "completion": t} for s, t in trace("add", 12, 34)] * 8  # 16% padding
    (only,) = collate_micro(samples, CODEC, 100)
    assert torch.equal(only["input_ids"], collate(samples, CODEC)["input_ids"])


def test_a_batch_a_third_padding_is_split():
    # As a LoRA-direct draw over 1-100 digits pads (~38%): kept whole it trained 1.6x slower.
    samples = [{"prompt": s, "completion": t} for s, t in trace("add", 12, 34)] * 8
    samples += [{"prompt": s, "completion": t} for s, t in trace("add", 10 ** 11 - 1, 10 ** 11 - 1)][:3]
    whole = collate(samples, CODEC)
    padding = 1 - int(whole["attention_mask"].sum()) / whole["input_ids"].numel()
    assert 0.25 < padding < 0.5
    parts = collate_micro(samples, CODEC, 4096)
    assert len(parts) > 1 and sum(p["input_ids"].numel() for p in parts) < whole["input_ids"].numel()


def test_precision_follows_the_device_and_the_model_width_unless_named(monkeypatch):
    assert resolve_precision("cuda") == "bf16"
    monkeypatch.setattr(loop, "native_cpu_bf16", lambda: True)
    assert resolve_precision("cpu", hidden_size=256) == "bf16"
    assert resolve_precision("cpu", hidden_size=64) == "fp32"  # casts cost more than narrow products save
    monkeypatch.setattr(loop, "native_cpu_bf16", lambda: False)
    assert resolve_precision("cpu", hidden_size=256) == "fp32"
    assert resolve_precision("cpu", "bf16") == "bf16" and resolve_precision("cuda", "fp32") == "fp32"
    with pytest.raises(ValueError, match="unknown precision 'fp16'"):
        resolve_precision("cpu", "fp16")


def test_bf16_autocast_on_the_cpu_trains_and_keeps_fp32_weights(tmp_path):
    samples = _samples()[:6]
    model = build_tiny_base(MICRO, seed=0)
    batch = collate(samples, CODEC)
    before = model(**batch).loss.item()
    result = train(model, lambda step: collate_micro(samples, CODEC, 600), tmp_path, RunPlan(steps=20, lr=3e-3),
                   RunOptions(precision="bf16", progress=False))
    assert result.precision == "bf16"
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert model(**batch).loss.item() < before * 0.7
