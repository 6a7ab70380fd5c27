"""The smollm2 preset: the paper's LoRA recipe on a pretrained base, LoRA-direct on its CAEF counterparts'
samples, `--base` naming a tier, and `--stop-after` going on where it stopped (on a micro Llama with a
tokenizer of its own standing in for SmolLM2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from caef_bench.train.presets import PRESETS

SMOLLM2 = PRESETS["smollm2"]


def test_it_is_the_papers_lora_on_the_cpus_operand_lengths():
    assert (SMOLLM2.lora_r, SMOLLM2.lora_alpha, SMOLLM2.target_modules) == (8, 16, "all-linear")
    assert SMOLLM2.position_scheme == "standard" and SMOLLM2.max_len == 10
    assert SMOLLM2.stage1_steps > 0 and SMOLLM2.stage2_steps > 0  # both of the paper's stages


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "gt", "lt", "eq"])
def test_each_direct_adapter_gets_its_executors_and_aligners_samples(op):
    def samples(kind):
        preset = SMOLLM2.for_adapter(kind, op)
        stage1 = preset.stage1_steps * preset.stage1_batch if kind == "executor" else 0
        return stage1 + preset.stage2_steps * preset.stage2_batch

    assert samples("direct") == samples("executor") + samples("aligner")


def test_direct_adapters_train_at_a_lower_rate_than_the_caef_ones_and_a_given_rate_wins():
    # (the CAEF adapters' rate made direct_gt's loss jump and its answers collapse to False)
    direct, executor = SMOLLM2.for_adapter("direct", "gt"), SMOLLM2.for_adapter("executor", "gt")
    assert direct.lr < executor.lr == SMOLLM2.lr
    assert SMOLLM2.for_adapter("direct", "gt", {"lr": 2e-3}).lr == 2e-3


@pytest.fixture(scope="module")
def micro_llama(tmp_path_factory) -> Path:
    from micro_model import build_micro_model

    return build_micro_model(tmp_path_factory.mktemp("micro_llama"))


def test_stop_after_goes_on_where_it_stopped_and_manifests_record_samples_tokens_device(micro_llama, tmp_path,
                                                                                      monkeypatch):
    """Two calls of one command: the first stops after its first adapter (its --stop-after runs out), the
    second skips that one and trains the rest; --base may name a tier (here a stand-in for smollm2-135m)."""
    from caef_bench.models import loading
    from caef_bench.train import recipe
    from caef_bench.train.recipe import TrainRequest, run_training

    monkeypatch.setattr(loading, "TIERS", {**loading.TIERS, "micro-tier": lambda **o: loading.Tier(
        "micro-tier", micro_llama, None, "float32")})
    now, train_adapter = [0.0], recipe.train_adapter

    def one_adapter_takes_the_budget(*args, **kwargs):  # --stop-after runs out while the first one trains
        manifest = train_adapter(*args, **kwargs)
        now[0] += 10_000.0
        return manifest

    monkeypatch.setattr(recipe, "train_adapter", one_adapter_takes_the_budget)
    monkeypatch.setattr(recipe.time, "monotonic", lambda: now[0])
    request = TrainRequest(preset="smollm2", out=tmp_path, base="micro-tier", executors=("add",), aligners=("add",),
                           direct=("add",), overrides={"stage1_steps": 1, "stage2_steps": 2, "max_len": 3},
                           stop_after_s=3600, progress=False)
    first = run_training(request)
    assert first["stopped"] == "--stop-after ran out before aligner_add" and set(first["adapters"]) == {"executor_add"}
    trained_first = (tmp_path / "executors/add/adapter_model.safetensors").read_bytes()
    now[0] = 0.0
    monkeypatch.setattr(recipe, "train_adapter", train_adapter)
    second = run_training(request)
    assert second["stopped"] is None and set(second["adapters"]) == {"executor_add", "aligner_add", "direct_add"}
    # finished in the first call: skipped, not trained again
    assert (tmp_path / "executors/add/adapter_model.safetensors").read_bytes() == trained_first
    for folder, samples in (("executors/add", 1 * 4 + 2 * 8), ("aligners/add", 2 * 8), ("direct/add", 2 * 8)):
        manifest = json.loads((tmp_path / folder / "manifest.json").read_text())
        assert manifest["samples"] == samples and manifest["tokens"] > 0 and manifest["device"].startswith("cpu")
        assert manifest["base"] == str(micro_llama) and manifest["position_scheme"] == "standard"
        assert manifest["preset"]["lora_r"] == 8


def test_its_direct_adapters_draw_the_protocols_problems_within_its_operand_lengths():
    """Two operands of one length, half of them at Table 1's lengths up to 10 (5 and 10), the rest 1-10."""
    from collections import Counter

    from caef_bench.train.sources import DirectSource

    source = DirectSource("add", SMOLLM2.direct_draw, seed=0, max_len=SMOLLM2.max_len)
    lengths = Counter()
    for sample in source.batch(0, 4000):
        a, b = sample["meta"]["a"], sample["meta"]["b"]
        assert len(a) == len(b) and sample["prompt"].count(f"{a}+{b}=") == 1
        lengths[len(a)] += 1
    assert set(lengths) == set(range(1, 11))
    at_test_lengths = 0.5 + 0.5 * (1 / 5 + 1 / 10) / sum(1 / n for n in range(1, 11))  # the rule's half, and 1/n's share
    assert abs((lengths[5] + lengths[10]) / 4000 - at_test_lengths) < 0.03
    assert source.fingerprint.endswith(":max_len=10") and not DirectSource("add", "protocol", 0).fingerprint.endswith("0")
