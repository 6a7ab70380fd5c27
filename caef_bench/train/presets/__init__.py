"""Training presets: the paper's recipe for LLaMA 3.1-8B, and what makes the tiny tier learn."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from caef_bench.models.names import adapter_name
from caef_bench.train import mix as mixes


@dataclass(frozen=True)
class BasePhase:
    """One run of the tiny base's pre-training; each phase starts a fresh optimizer and schedule
    from the weights of the one before."""

    samples: int  # steps x batch: the budget does not depend on the batch a machine can hold
    lr: float
    curriculum_samples: int = 0  # operand lengths grow from 8 to max_len over these samples


@dataclass(frozen=True)
class Preset:
    name: str
    lora_r: int
    lora_alpha: int
    lr: float
    stage1_batch: int
    stage2_batch: int
    stage1_steps: int  # per adapter; the tiny tier's stage 1 is short (explanations are long prompts)
    stage2_steps: int  # per adapter, unless its plan in adapter_plans has a budget in samples
    base_steps: int = 0  # >0: first pre-train the base itself on the mixture of all machines
    base_lr: float = 0.0
    base_batch: int = 0
    max_len: int = 100  # operand lengths 1..max_len
    curriculum_steps: int = 0  # >0: operand lengths grow from 8 to max_len over these base steps
    position_scheme: str = "standard"  # models.positions: a name, a coupled one optionally with /STRIDE
    # > 0: each training sample's ids but <s>'s and <sep>'s shifted by an offset in 0..N (randomised
    # positions, models.positions); decoding uses none. For operands longer than training's.
    position_offsets: int = 0
    # What the samples are drawn from (train.mix): {share: fraction of the draws}; the rest are the
    # protocol's draws on random operands.
    mix: Mapping[str, float] = field(default_factory=dict)
    decay: str = "constant"  # learning-rate schedule after warm-up: constant or cosine
    target_modules: str | tuple[str, ...] = "all-linear"
    adapter: str = "lora"  # "lora" (lora_r, lora_alpha on target_modules) or "full": every weight of the base trained
    # LoRA-direct adapters: how their problems are drawn (data.direct.DirectDraw: "protocol", "protocol:<digits>"),
    # or "classes": uniform over the executors' length classes, as checkpoints/tiny/direct/ was drawn
    direct_draw: str = "protocol"
    # The tiny base's pre-training as phases (used unless base_steps, base_lr or curriculum_steps
    # are overridden, which make it one run of base_steps); its draws are uniform over the length
    # classes (no shares).
    base_phases: tuple[BasePhase, ...] = ()
    # Per adapter ("executor_add"): its stage-2 budget in samples and the preset fields it trains
    # with instead of the preset's ("lr", "mix"). Every adapter keeps the base's ids.
    adapter_plans: dict = field(default_factory=dict)

    def overridden(self, overrides: dict) -> Preset:
        """This preset with a command's overrides: fields replaced, but the mix's shares each over the
        preset's (`--share nines=0.2` keeps the others). `sequential` (the flags before the mix) is
        one adapter's to convert: for_adapter."""
        fields = {name: value for name, value in overrides.items() if name not in ("mix", "sequential")}
        return replace(self, **fields, mix={**self.mix, **overrides.get("mix", {})})

    def for_adapter(self, kind: str, op: str, overrides: dict | None = None) -> Preset:
        """This preset as one adapter trains with it: its plan, then the command line's overrides
        (an explicit --stage2-steps wins over the plan's budget; --batch divides it into steps)."""
        overrides = overrides or {}
        plan = dict(self.adapter_plans.get(adapter_name(kind, op), {}))
        samples = plan.pop("samples", None)
        preset = replace(self, **plan).overridden(overrides)
        if overrides.get("sequential"):  # the old flags: the plan's settings in their terms, some replaced
            settings = {**mixes.to_sequential(kind, op, preset.mix), **overrides["sequential"]}
            preset = replace(preset, mix=mixes.from_sequential(kind, op, settings))
        if samples is not None and "stage2_steps" not in overrides:
            preset = replace(preset, stage2_steps=math.ceil(samples / preset.stage2_batch))
        return preset

    def base_runs(self, overridden: set[str]) -> list[tuple[int, float, int]]:
        """(steps, lr, curriculum steps) for each run of the base's pre-training at this batch."""
        if self.base_phases and not overridden & {"base_steps", "base_lr", "curriculum_steps"}:
            return [(math.ceil(p.samples / self.base_batch), p.lr, math.ceil(p.curriculum_samples / self.base_batch))
                    for p in self.base_phases]
        return [(self.base_steps, self.base_lr, self.curriculum_steps)]


# Settings a command may override, by name: each a Preset field, but `batch`, which sets the base's
# and stage 2's batch (stage 1's stays the preset's). The mix's shares come as `share`, a list of
# NAME=X (train.mix.parse), or as the flags before the mix (`<name>_share`, train.mix.SEQUENTIAL).
OVERRIDABLE = ("base_steps", "stage1_steps", "stage2_steps", "max_len", "batch", "base_lr", "lr", "curriculum_steps",
               "position_scheme", "position_offsets", "lora_r", "lora_alpha", "adapter", "direct_draw")
_FIELDS_OF = {"batch": ("base_batch", "stage2_batch")}


def preset_overrides(settings: Mapping[str, object]) -> dict:
    """The preset fields that `settings` (e.g. the command line's, None where not given) override."""
    overrides = {field_name: settings[name] for name in OVERRIDABLE if settings.get(name) is not None
                 for field_name in _FIELDS_OF.get(name, (name,))}
    sequential = {name: settings[name] for name in mixes.SEQUENTIAL if settings.get(name) is not None}
    if settings.get("share") and sequential:
        raise ValueError("--share sets fractions of the draws, the --<name>-share flags the chances before it: "
                         "give one or the other")
    if settings.get("share"):
        overrides["mix"] = mixes.parse(settings["share"])
    if sequential:
        overrides["sequential"] = sequential
    return overrides


# What each shipped tiny adapter was trained on, summed over its rounds (the chain of
# `initialised_from` in its manifest): its samples, the highest peak learning rate of its rounds
# (a fresh LoRA learns less at the peak of the largest one), the mix of its last round and the ids
# it was trained with (tests/test_presets.py checks these against checkpoints/tiny): since the
# structured-operand rebuild, its rounds on top of the earlier ones, every aligner under index
# hints. The preset trains each adapter once on this (TINY_ADAPTER_PLANS, below).
# The mixes are fractions of each adapter's draws (train.mix); the manifests record the same draws
# in the sequential shares of their time (mix.from_sequential: executor_add's top_steps_share 0.6,
# after nines_share 0.15, is 0.51 of its draws), and the draws are the same to the byte
# (tests/test_sampler_draws.py). Left of the draws: the protocol's draw on random operands.
_LENGTHS = {"equal": 0.25, "short": 0.15, "long": 0.5}  # of the draws from length classes
_ALIGNER_LENGTHS = {"equal": 0.25, "short": 0.15}
_HINTS = "coupled-hints"  # index hints: every aligner of the structured-operand rebuild
SHIPPED_ROUNDS = {
    "executor_add": {"samples": 513_600, "lr": 0.0005, "mix": {
        "nines": 0.15, "top_steps": 0.51, "wide": 0.068, "sub_calls": 0.1088, "carry_runs": 0.06528,
        "composer_calls": 0.014688, "structured": 0.041616, **_LENGTHS, "nines_long": 0.5, "structured_long": 0.6,
        "top_steps_structured": 0.6}},
    "executor_sub": {"samples": 396_800, "lr": 0.0005, "mix": {
        "nines": 0.3, "structured": 0.35, "same": 0.07, "near": 0.105, **_LENGTHS, "returns": 0.5,
        "nines_long": 0.5, "structured_long": 0.5}},
    "executor_mul": {"samples": 83_840, "lr": 0.0002, "mix": {"structured": 0.7, "returns": 0.3}},
    "executor_div": {"samples": 83_840, "lr": 0.0002, "mix": {"structured": 0.7, "returns": 0.3}},
    "executor_gt": {"samples": 309_440, "lr": 0.0003, "mix": {
        "composer_calls": 0.25, "structured": 0.375, "same": 0.075, "near": 0.1125, **_LENGTHS,
        "structured_long": 0.6}},
    "executor_lt": {"samples": 394_560, "lr": 0.0005, "mix": {
        "deciding_steps": 0.3, "structured": 0.35, "same": 0.07, "near": 0.105, **_LENGTHS, "structured_long": 0.6}},
    "executor_eq": {"samples": 141_440, "lr": 0.0005, "mix": {
        "top_runs": 0.3, "structured": 0.35, "same": 0.0875, "near": 0.1225, **_LENGTHS, "structured_long": 0.6}},
    "executor_reflection": {"samples": 248_960, "lr": 0.0005, "mix": {
        "nines": 0.6, "structured": 0.2, **_LENGTHS, "nines_long": 0.5, "structured_long": 0.6}},
    "executor_left_mask": {"samples": 417_440, "lr": 0.0005, "mix": {
        "wide": 0.2, "sub_calls": 0.32, "structured": 0.24, "structured_long": 0.6}},
    "aligner_add": {"samples": 173_120, "lr": 0.0005, "position_scheme": _HINTS, "mix": {
        "structured": 0.5, "equal": 0.4, "short": 0.15, "structured_long": 0.5}},
    "aligner_sub": {"samples": 270_240, "lr": 0.0005, "position_scheme": _HINTS, "mix": {
        "structured": 0.5, "same": 0.1, "near": 0.15, **_ALIGNER_LENGTHS, "structured_long": 0.5}},
    "aligner_mul": {"samples": 167_360, "lr": 0.0005, "position_scheme": _HINTS, "mix": {"structured": 0.6}},
    "aligner_div": {"samples": 103_360, "lr": 0.0005, "position_scheme": _HINTS, "mix": {"structured": 0.6}},
    "aligner_gt": {"samples": 257_920, "lr": 0.0005, "position_scheme": _HINTS, "mix": {
        "structured": 0.5, "same": 0.1, "near": 0.15, **_ALIGNER_LENGTHS, "structured_long": 0.5}},
    "aligner_lt": {"samples": 257_920, "lr": 0.0005, "position_scheme": _HINTS, "mix": {
        "structured": 0.5, "same": 0.1, "near": 0.15, **_ALIGNER_LENGTHS, "structured_long": 0.5}},
    "aligner_eq": {"samples": 181_120, "lr": 0.0005, "position_scheme": _HINTS, "mix": {
        "structured": 0.6, "same": 0.08, "near": 0.12, **_ALIGNER_LENGTHS, "structured_long": 0.6}},
}
# Two changes make the rounds one run from scratch (the measurements behind them are in
# docs/reproducibility.md):
# - Every aligner gets at least ALIGNER_MIN_SAMPLES: a small sum of rounds, each round starting
#   from the adapter before, is not enough from a fresh LoRA (seconds on a GPU: aligner samples
#   are short).
# - Every adapter trains under the preset's ids, those its base pre-trained under (SHIPPED_ROUNDS'
#   position_scheme is left out of the plans).
# The LoRA-direct baseline gets the budget of its operator's executor and aligner together, at lr 1e-3:
# in the capacity check (results/direct_capacity.md) the rank-16 LoRA at 1e-3 went from 0% to 84.5% of
# add_5 between 16,384 and 32,768 samples; at 2e-4, the earlier plans' rate, its loss after the first
# 4,096 samples was higher (1.92 against 1.81), and rank 256 diverged at 1e-3 (so the rate is rank 16's).
ALIGNER_MIN_SAMPLES = 430 * 128


def _one_run(name: str, shipped: dict) -> dict:
    plan = {key: value for key, value in shipped.items() if key != "position_scheme"}
    if name.startswith("aligner_"):
        plan["samples"] = max(plan["samples"], ALIGNER_MIN_SAMPLES)
    return plan


TINY_ADAPTER_PLANS = {name: _one_run(name, shipped) for name, shipped in SHIPPED_ROUNDS.items()}
for _op in ("add", "sub", "mul", "div", "gt", "lt", "eq"):
    TINY_ADAPTER_PLANS[adapter_name("direct", _op)] = {
        "samples": sum(TINY_ADAPTER_PLANS[adapter_name(kind, _op)]["samples"] for kind in ("executor", "aligner")),
        "lr": 1e-3, "mix": {}}

# The shipped base's two rounds: 3,678 steps x 128, lengths growing over the first 1,471, then
# 2,800 steps x 128 at full length, with no shares. The preset pre-trains under the ids its
# aligners then train with (position_scheme), so the base's aligner samples already carry them.
TINY_BASE_PHASES = (BasePhase(samples=3_678 * 128, lr=1e-3, curriculum_samples=1_471 * 128),
                    BasePhase(samples=2_800 * 128, lr=5e-4))

# The smollm2 preset (below). The paper's 5e-5 is for LLaMA 3.1-8B; a LoRA on a 135M model learns far less a
# step at that rate. A sweep on this model (benchmarks/bench_smollm2_lr_sweep.py, executor_add, 1-10 digits, batches
# of 8 fresh samples, so each step's loss is on samples it has not seen; docs/smollm2.md) had, after 15
# steps, loss 0.92 at 2e-4 and 0.17 at 3e-3 (1e-3: 0.56 after 10, where 3e-3 had 0.28 and 2e-4 1.11).
SMOLLM2_LR = 3e-3
SMOLLM2_STAGE1_STEPS, SMOLLM2_STAGE1_BATCH = 10, 4  # executors only (explanations exist for the machines)
SMOLLM2_STAGE2_STEPS, SMOLLM2_STAGE2_BATCH = 250, 8  # 2,000 samples per adapter: the CPU path's plan
# Each LoRA-direct adapter gets the samples of its operator's executor (both stages) and aligner together,
# the paper's "same data budget"; its samples are the short direct prompts, so far fewer tokens.
# Their rate is a third of the CAEF adapters': direct_gt at 3e-3 (batch 8) had its loss jump from ~0.1
# to 4.4 at step 310 and came out answering False to everything; at 1e-3, on the same samples, it
# ended at 0.0017 and answered all of gt_5 and gt_10 (docs/smollm2.md). 1e-3 is the tiny tier's direct rate too.
SMOLLM2_DIRECT_LR = 1e-3
SMOLLM2_DIRECT_PLANS = {
    adapter_name("direct", op): {"samples": SMOLLM2_STAGE1_STEPS * SMOLLM2_STAGE1_BATCH
                                 + 2 * SMOLLM2_STAGE2_STEPS * SMOLLM2_STAGE2_BATCH, "lr": SMOLLM2_DIRECT_LR}
    for op in ("add", "sub", "mul", "div", "gt", "lt", "eq")}

PRESETS = {
    # Lai et al.: LoRA r=8, alpha=16 on all linear modules of the decoder, lr 5e-5,
    # stage 1 (explanation + example) batch 8, stage 2 (bare) batch 16.
    "llama": Preset("llama", lora_r=8, lora_alpha=16, lr=5e-5, stage1_batch=8, stage2_batch=16,
                    stage1_steps=500, stage2_steps=2000),
    # SmolLM2-135M-Instruct (`--base smollm2-135m`): the paper's recipe on a real pretrained LLM, its
    # own BPE tokenizer and ordinary positions: LoRA r=8, alpha=16 on every linear layer, stage 1
    # (explanation + worked example) then stage 2 (bare transitions). Sized for the CPU path, operands
    # of 1-10 digits (on a GPU, `--max-len 100` and more --stage2-steps for 1-100 digits): stage 1 is
    # short, its prompts are ~700 tokens of explanation, five times a 10-digit
    # transition; stage 2 gets the samples. lr: SMOLLM2_LR (why: its comment).
    # Equal-length operands and, for gt, equal and one-digit-apart pairs get extra weight, as on the
    # tiny tier: every test cell has operands of one length, and gt decides at the first digits that differ.
    "smollm2": Preset("smollm2", lora_r=8, lora_alpha=16, lr=SMOLLM2_LR, stage1_batch=SMOLLM2_STAGE1_BATCH,
                      stage2_batch=SMOLLM2_STAGE2_BATCH,
                      stage1_steps=SMOLLM2_STAGE1_STEPS, stage2_steps=SMOLLM2_STAGE2_STEPS, max_len=10,
                      decay="cosine", mix={"same": 0.2, "near": 0.3, "equal": 0.3},
                      adapter_plans=SMOLLM2_DIRECT_PLANS),
    # The tiny tier: pre-train the whole small base on all machines and aligners
    # (with coupled positions), then give each machine its LoRA adapter, with the budget
    # and settings its shipped adapter had in all (TINY_ADAPTER_PLANS).
    # No stage 1: with coupled positions a prose prefix pushes every field of the state
    # thousands of position ids away from where the base learnt to copy it.
    # Equal-length and short operands get extra weight: they are what the test cells hold;
    # the comparisons get equal and one-digit-apart pairs (caef_bench.train.mix).
    # coupled-hints: coupled positions plus index hints for both aligners (caef_bench.models.positions).
    # Batch 128 is what the shipped checkpoints trained with; budgets are in samples, so
    # --batch 16 on a CPU runs eight times the steps.
    "tiny": Preset("tiny", lora_r=16, lora_alpha=32, lr=1e-3, stage1_batch=4, stage2_batch=128,
                   stage1_steps=0, stage2_steps=300, base_steps=50_000, base_lr=1e-3, base_batch=128,
                   curriculum_steps=20_000, position_scheme="coupled-hints", decay="cosine",
                   mix={"composer_calls": 0.25, "same": 0.2, "near": 0.3, "equal": 0.25, "short": 0.15},
                   base_phases=TINY_BASE_PHASES, adapter_plans=TINY_ADAPTER_PLANS),
}
