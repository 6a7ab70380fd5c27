"""Training presets: the paper's recipe for LLaMA 3.1-8B, and what makes the tiny tier learn."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Preset:
    name: str
    lora_r: int
    lora_alpha: int
    lr: float
    stage1_batch: int
    stage2_batch: int
    stage1_steps: int  # per adapter; the tiny tier's stage 1 is short (explanations are long prompts)
    stage2_steps: int  # per adapter
    base_steps: int = 0  # >0: first pre-train the base itself on the mixture of all machines
    base_lr: float = 0.0
    base_batch: int = 0
    max_len: int = 100  # operand lengths 1..max_len
    curriculum_steps: int = 0  # >0: operand lengths grow from 8 to max_len over these base steps
    position_scheme: str = "standard"
    equal_share: float = 0.0  # share of samples drawn from equal-length classes (caef_bench.train.sources)
    short_share: float = 0.0  # share drawn from classes of operands of at most 10 digits
    same_share: float = 0.0  # comparisons and sub: share of samples with a == b
    near_share: float = 0.0  # comparisons and sub: share with b = a but for one digit
    composer_share: float = 0.0  # add, gt: share of transitions from the calls composers make
    decay: str = "constant"  # learning-rate schedule after warm-up: constant or cosine
    target_modules: str | tuple[str, ...] = "all-linear"


PRESETS = {
    # Lai et al.: LoRA r=8, alpha=16 on all linear modules of the decoder, lr 5e-5,
    # stage 1 (explanation + example) batch 8, stage 2 (bare) batch 16.
    "llama": Preset("llama", lora_r=8, lora_alpha=16, lr=5e-5, stage1_batch=8, stage2_batch=16,
                    stage1_steps=500, stage2_steps=2000),
    # The tiny tier: pre-train the whole small base on all machines and aligners
    # (with coupled positions), then give each machine its LoRA adapter.
    # No stage 1: with coupled positions a prose prefix pushes every field of the state
    # thousands of position ids away from where the base learnt to copy it.
    # Equal-length and short operands get extra weight: they are what the test cells hold;
    # the comparisons get equal and one-digit-apart pairs (caef_bench.train.sources).
    # coupled-hints: coupled positions plus index hints for both aligners (caef_bench.models.positions).
    # A quarter of add's and gt's samples are their calls inside composer runs.
    "tiny": Preset("tiny", lora_r=16, lora_alpha=32, lr=1e-3, stage1_batch=4, stage2_batch=16,
                   stage1_steps=0, stage2_steps=300, base_steps=50_000, base_lr=1e-3, base_batch=16,
                   curriculum_steps=20_000, position_scheme="coupled-hints", decay="cosine",
                   equal_share=0.25, short_share=0.15, same_share=0.2, near_share=0.3, composer_share=0.25),
}
