"""Training presets: the paper's recipe for LLaMA 3.1-8B, and what makes the tiny tier learn."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from caef_bench.models.names import adapter_name

SHARES = ("equal_share", "short_share", "same_share", "near_share", "composer_share", "nines_share", "return_share",
          "long_share", "structured_share", "structured_long_share", "wide_share",
          "sub_call_share", "top_run_share", "carry_run_share", "top_steps_share",
          "top_steps_structured_share", "deciding_steps_share")


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
    position_scheme: str = "standard"
    equal_share: float = 0.0  # share of samples drawn from equal-length classes (caef_bench.train.sources)
    short_share: float = 0.0  # share drawn from classes of operands of at most 10 digits
    same_share: float = 0.0  # comparisons and sub: share of samples with a == b
    near_share: float = 0.0  # comparisons and sub: share with b = a but for one digit
    composer_share: float = 0.0  # add, gt: share of transitions from the calls composers make
    nines_share: float = 0.0  # reflection, sub, add: share from subtractions with 9s on top of b
    return_share: float = 0.0  # sub, mul, div: share of the steps that read a callee's halt state
    long_share: float = 0.0  # share drawn from classes whose longer operand has more than 50 digits
    structured_share: float = 0.0  # share whose operands are structured (data.structured: runs, round numbers, ...)
    structured_long_share: float = 0.0  # of those, the share with two operands of one length above 50 digits
    wide_share: float = 0.0  # add, left_mask: share from SUB's calls on 91-100-digit operands (101-digit fields)
    sub_call_share: float = 0.0  # add, left_mask: share from SUB's calls on 51-100-digit operands, halting steps weighted
    top_run_share: float = 0.0  # gt, lt, eq: share of runs below a different top digit, its last steps weighted
    carry_run_share: float = 0.0  # add: share of a carry through a long run of 9s, the step where it ends weighted
    top_steps_share: float = 0.0  # add: share of the last steps of long random sums (add_100, SUB's first call)
    top_steps_structured_share: float = 0.0  # of the top-steps draws, the share on structured operands, any step
    deciding_steps_share: float = 0.0  # gt, lt: share of the last steps of long random comparisons (the top pair)
    decay: str = "constant"  # learning-rate schedule after warm-up: constant or cosine
    target_modules: str | tuple[str, ...] = "all-linear"
    adapter: str = "lora"  # "lora" (lora_r, lora_alpha on target_modules) or "full": every weight of the base trained
    # LoRA-direct adapters: how their problems are drawn (data.direct.DirectDraw: "protocol", "protocol:<digits>"),
    # or "classes": uniform over the executors' length classes, as the direct adapters before issue 61 were
    direct_draw: str = "protocol"
    # The tiny base's pre-training as phases (used unless base_steps, base_lr or curriculum_steps
    # are overridden, which make it one run of base_steps); its draws are uniform over the length
    # classes (no shares).
    base_phases: tuple[BasePhase, ...] = ()
    # Per adapter ("executor_add"): its stage-2 budget in samples and the preset fields it trains
    # with instead of the preset's ("lr", the shares). Every adapter keeps the base's ids.
    adapter_plans: dict = field(default_factory=dict)

    def for_adapter(self, kind: str, op: str, overrides: dict | None = None) -> Preset:
        """This preset as one adapter trains with it: its plan, then the command line's overrides
        (an explicit --stage2-steps wins over the plan's budget; --batch divides it into steps)."""
        overrides = overrides or {}
        plan = dict(self.adapter_plans.get(adapter_name(kind, op), {}))
        samples = plan.pop("samples", None)
        preset = replace(self, **{**plan, **overrides})
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
# and stage 2's batch (stage 1's stays the preset's).
OVERRIDABLE = ("base_steps", "stage1_steps", "stage2_steps", "max_len", "batch", "base_lr", "lr", "curriculum_steps",
               *SHARES, "position_scheme", "lora_r", "lora_alpha", "adapter", "direct_draw")
_FIELDS_OF = {"batch": ("base_batch", "stage2_batch")}


def preset_overrides(settings: Mapping[str, object]) -> dict:
    """The preset fields that `settings` (e.g. the command line's, None where not given) override."""
    return {field_name: settings[name] for name in OVERRIDABLE if settings.get(name) is not None
            for field_name in _FIELDS_OF.get(name, (name,))}


# What each shipped tiny adapter was trained on, summed over its rounds (the chain of
# `initialised_from` in its manifest): its samples, the highest peak learning rate of its rounds
# (a fresh LoRA learns less at the peak of the largest one), the shares of its last round and the
# ids it was trained with (tests/test_presets.py checks these against checkpoints/tiny): since issue
# 36 the structured-operand rebuild's rounds on top of the earlier ones, every aligner under index
# hints. The preset trains each adapter once on this (TINY_ADAPTER_PLANS, below).
_NO_SHARES = {name: 0.0 for name in SHARES}
_HINTS = "coupled-hints"  # index hints: every aligner of the structured-operand rebuild (issue 36)
SHIPPED_ROUNDS = {
    "executor_add": {"samples": 513_600, "lr": 0.0005, **_NO_SHARES, "equal_share": 0.25, "short_share": 0.15,
        "same_share": 0.2, "near_share": 0.3, "composer_share": 0.15, "nines_share": 0.15, "long_share": 0.5,
        "structured_share": 0.5, "structured_long_share": 0.6, "wide_share": 0.2, "sub_call_share": 0.4,
        "carry_run_share": 0.4, "top_steps_share": 0.6, "top_steps_structured_share": 0.6},
    "executor_sub": {"samples": 396_800, "lr": 0.0005, **_NO_SHARES, "equal_share": 0.25, "short_share": 0.15,
        "same_share": 0.2, "near_share": 0.3, "composer_share": 0.25, "nines_share": 0.3, "return_share": 0.5,
        "long_share": 0.5, "structured_share": 0.5, "structured_long_share": 0.5},
    "executor_mul": {"samples": 83_840, "lr": 0.0002, **_NO_SHARES, "return_share": 0.3,
        "structured_share": 0.7},
    "executor_div": {"samples": 83_840, "lr": 0.0002, **_NO_SHARES, "return_share": 0.3,
        "structured_share": 0.7},
    "executor_gt": {"samples": 309_440, "lr": 0.0003, **_NO_SHARES, "equal_share": 0.25, "short_share": 0.15,
        "same_share": 0.2, "near_share": 0.3, "composer_share": 0.25, "long_share": 0.5,
        "structured_share": 0.5, "structured_long_share": 0.6},
    "executor_lt": {"samples": 394_560, "lr": 0.0005, **_NO_SHARES, "equal_share": 0.25, "short_share": 0.15,
        "same_share": 0.2, "near_share": 0.3, "composer_share": 0.25, "long_share": 0.5,
        "structured_share": 0.5, "structured_long_share": 0.6, "deciding_steps_share": 0.3},
    "executor_eq": {"samples": 141_440, "lr": 0.0005, **_NO_SHARES, "equal_share": 0.25, "short_share": 0.15,
        "same_share": 0.25, "near_share": 0.35, "long_share": 0.5, "structured_share": 0.5,
        "structured_long_share": 0.6, "top_run_share": 0.3},
    "executor_reflection": {"samples": 248_960, "lr": 0.0005, **_NO_SHARES, "equal_share": 0.25,
        "short_share": 0.15, "same_share": 0.2, "near_share": 0.3, "composer_share": 0.25, "nines_share": 0.6,
        "long_share": 0.5, "structured_share": 0.5, "structured_long_share": 0.6, "top_run_share": 0.3},
    "executor_left_mask": {"samples": 417_440, "lr": 0.0005, **_NO_SHARES, "equal_share": 0.25,
        "short_share": 0.15, "same_share": 0.2, "near_share": 0.3, "composer_share": 0.25, "long_share": 0.5,
        "structured_share": 0.5, "structured_long_share": 0.6, "wide_share": 0.2, "sub_call_share": 0.4},
    "aligner_add": {"samples": 173_120, "lr": 0.0005, **_NO_SHARES, "equal_share": 0.4, "short_share": 0.15,
        "same_share": 0.2, "near_share": 0.3, "structured_share": 0.5, "structured_long_share": 0.5,
        "position_scheme": _HINTS},
    "aligner_sub": {"samples": 270_240, "lr": 0.0005, **_NO_SHARES, "equal_share": 0.25, "short_share": 0.15,
        "same_share": 0.2, "near_share": 0.3, "composer_share": 0.25, "structured_share": 0.5,
        "structured_long_share": 0.5, "position_scheme": _HINTS},
    "aligner_mul": {"samples": 167_360, "lr": 0.0005, **_NO_SHARES, "equal_share": 0.25, "short_share": 0.15,
        "same_share": 0.2, "near_share": 0.3, "composer_share": 0.25, "structured_share": 0.6,
        "position_scheme": _HINTS},
    "aligner_div": {"samples": 103_360, "lr": 0.0005, **_NO_SHARES, "equal_share": 0.4, "short_share": 0.15,
        "structured_share": 0.6, "position_scheme": _HINTS},
    "aligner_gt": {"samples": 257_920, "lr": 0.0005, **_NO_SHARES, "equal_share": 0.25, "short_share": 0.15,
        "same_share": 0.2, "near_share": 0.3, "composer_share": 0.25, "structured_share": 0.5,
        "structured_long_share": 0.5, "position_scheme": _HINTS},
    "aligner_lt": {"samples": 257_920, "lr": 0.0005, **_NO_SHARES, "equal_share": 0.25, "short_share": 0.15,
        "same_share": 0.2, "near_share": 0.3, "composer_share": 0.25, "structured_share": 0.5,
        "structured_long_share": 0.5, "position_scheme": _HINTS},
    "aligner_eq": {"samples": 181_120, "lr": 0.0005, **_NO_SHARES, "equal_share": 0.25, "short_share": 0.15,
        "same_share": 0.2, "near_share": 0.3, "composer_share": 0.25, "structured_share": 0.6,
        "structured_long_share": 0.6, "position_scheme": _HINTS},
}
# Two changes make the rounds one run from scratch (the measurements behind them are in
# docs/reproducibility.md):
# - Every aligner gets at least ALIGNER_MIN_SAMPLES: a small sum of rounds, each round starting
#   from the adapter before, is not enough from a fresh LoRA (seconds on a GPU: aligner samples
#   are short).
# - Every adapter trains under the preset's ids, those its base pre-trained under (SHIPPED_ROUNDS'
#   position_scheme is left out of the plans).
# The LoRA-direct baseline gets the budget of its operator's executor and aligner together.
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
        "lr": 2e-4, **_NO_SHARES}

# The shipped base's two rounds: 3,678 steps x 128, lengths growing over the first 1,471, then
# 2,800 steps x 128 at full length, with no shares. The preset pre-trains under the ids its
# aligners then train with (position_scheme), so the base's aligner samples already carry them.
TINY_BASE_PHASES = (BasePhase(samples=3_678 * 128, lr=1e-3, curriculum_samples=1_471 * 128),
                    BasePhase(samples=2_800 * 128, lr=5e-4))

# The smollm2 preset (below). The paper's 5e-5 is for LLaMA 3.1-8B; a LoRA on a 135M model learns far less a
# step at that rate. A sweep on this model (benchmarks/smollm2_lr_sweep.py, executor_add, 1-10 digits, batches
# of 8 fresh samples, so each step's loss is on samples it has not seen; docs/smollm2.md) had, after 15
# steps, loss 0.92 at 2e-4 and 0.17 at 3e-3 (1e-3: 0.56 after 10, where 3e-3 had 0.28 and 2e-4 1.11).
SMOLLM2_LR = 3e-3
SMOLLM2_STAGE1_STEPS, SMOLLM2_STAGE1_BATCH = 10, 4  # executors only (explanations exist for the machines)
SMOLLM2_STAGE2_STEPS, SMOLLM2_STAGE2_BATCH = 250, 8  # 2,000 samples per adapter: the CPU path's plan
# Each LoRA-direct adapter gets the samples of its operator's executor (both stages) and aligner together,
# the paper's "same data budget"; its samples are the short direct prompts, so far fewer tokens.
SMOLLM2_DIRECT_PLANS = {
    adapter_name("direct", op): {"samples": SMOLLM2_STAGE1_STEPS * SMOLLM2_STAGE1_BATCH
                                 + 2 * SMOLLM2_STAGE2_STEPS * SMOLLM2_STAGE2_BATCH}
    for op in ("add", "sub", "mul", "div", "gt", "lt", "eq")}

PRESETS = {
    # Lai et al.: LoRA r=8, alpha=16 on all linear modules of the decoder, lr 5e-5,
    # stage 1 (explanation + example) batch 8, stage 2 (bare) batch 16.
    "llama": Preset("llama", lora_r=8, lora_alpha=16, lr=5e-5, stage1_batch=8, stage2_batch=16,
                    stage1_steps=500, stage2_steps=2000),
    # SmolLM2-135M-Instruct (`--base smollm2-135m`): the paper's recipe on a real pretrained LLM, its
    # own BPE tokenizer and ordinary positions: LoRA r=8, alpha=16 on every linear layer, stage 1
    # (explanation + worked example) then stage 2 (bare transitions). Sized for the CPU path, operands
    # of 1-10 digits (benchmarks/accelerator/smollm2_training.py runs it at 1-100 digits with its own
    # budgets): stage 1 is short, its prompts are ~700 tokens of explanation, five times a 10-digit
    # transition; stage 2 gets the samples. lr: SMOLLM2_LR (why: its comment).
    # Equal-length operands and, for gt, equal and one-digit-apart pairs get extra weight, as on the
    # tiny tier: every test cell has operands of one length, and gt decides at the first digits that differ.
    "smollm2": Preset("smollm2", lora_r=8, lora_alpha=16, lr=SMOLLM2_LR, stage1_batch=SMOLLM2_STAGE1_BATCH,
                      stage2_batch=SMOLLM2_STAGE2_BATCH,
                      stage1_steps=SMOLLM2_STAGE1_STEPS, stage2_steps=SMOLLM2_STAGE2_STEPS, max_len=10,
                      decay="cosine", equal_share=0.3, same_share=0.2, near_share=0.3,
                      adapter_plans=SMOLLM2_DIRECT_PLANS),
    # The tiny tier: pre-train the whole small base on all machines and aligners
    # (with coupled positions), then give each machine its LoRA adapter, with the budget
    # and settings its shipped adapter had in all (TINY_ADAPTER_PLANS).
    # No stage 1: with coupled positions a prose prefix pushes every field of the state
    # thousands of position ids away from where the base learnt to copy it.
    # Equal-length and short operands get extra weight: they are what the test cells hold;
    # the comparisons get equal and one-digit-apart pairs (caef_bench.train.sources).
    # coupled-hints: coupled positions plus index hints for both aligners (caef_bench.models.positions).
    # Batch 128 is what the shipped checkpoints trained with; budgets are in samples, so
    # --batch 16 on a CPU runs eight times the steps.
    "tiny": Preset("tiny", lora_r=16, lora_alpha=32, lr=1e-3, stage1_batch=4, stage2_batch=128,
                   stage1_steps=0, stage2_steps=300, base_steps=50_000, base_lr=1e-3, base_batch=128,
                   curriculum_steps=20_000, position_scheme="coupled-hints", decay="cosine",
                   equal_share=0.25, short_share=0.15, same_share=0.2, near_share=0.3, composer_share=0.25,
                   base_phases=TINY_BASE_PHASES, adapter_plans=TINY_ADAPTER_PLANS),
}
