"""Training presets: what `caef-bench train --preset NAME` trains with, one YAML file each in this folder
(llama: the paper's recipe for LLaMA 3.1-8B; smollm2: the same on SmolLM2-135M; tiny: what makes the
tiny tier learn), as baselines/ holds Table 1's systems. `--preset` also takes a path to a file of one's
own; `--set FIELD=VALUE` overrides a field of it for one command.

A file's keys are the fields of `Preset`, and three that make its adapter plans: `shipped_rounds` (what
each shipped adapter had in all; a plan each, the aligners' raised to `aligner_min_samples`) and
`direct_plan` (each LoRA-direct adapter's lr, and its samples: given, else its operator's executor and
aligner plans together)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from caef_bench.models.names import adapter_name

FOLDER = Path(__file__).resolve().parent
DIRECT_OPS = ("add", "sub", "mul", "div", "gt", "lt", "eq")


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
    # or "classes": uniform over the executors' length classes, as checkpoints/tiny/direct/'s were drawn
    direct_draw: str = "protocol"
    # The tiny base's pre-training as phases (used unless base_steps, base_lr or curriculum_steps
    # are overridden, which make it one run of base_steps); its draws are uniform over the length
    # classes (no shares).
    base_phases: tuple[BasePhase, ...] = ()
    # Per adapter ("executor_add"): its stage-2 budget in samples and the preset fields it trains
    # with instead of the preset's ("lr", "mix"). An adapter keeps the base's ids unless its plan names
    # a position_scheme (train.recipe.planned_scheme: the long route's, coupled-words).
    adapter_plans: dict = field(default_factory=dict)

    def overridden(self, overrides: dict) -> Preset:
        """This preset with a command's overrides: fields replaced, but the mix's shares each over the
        preset's (`--share nines=0.2` keeps the others)."""
        fields_ = {name: value for name, value in overrides.items() if name != "mix"}
        return replace(self, **fields_, mix={**self.mix, **overrides.get("mix", {})})

    def for_adapter(self, kind: str, op: str, overrides: dict | None = None) -> Preset:
        """This preset as one adapter trains with it: its plan, then the command line's overrides
        (an explicit --stage2-steps wins over the plan's budget; --batch divides it into steps)."""
        overrides = overrides or {}
        plan = dict(self.adapter_plans.get(adapter_name(kind, op), {}))
        samples = plan.pop("samples", None)
        preset = replace(self, **plan).overridden(overrides)
        if samples is not None and "stage2_steps" not in overrides:
            preset = replace(preset, stage2_steps=math.ceil(samples / preset.stage2_batch))
        return preset

    def base_runs(self, overridden: set[str]) -> list[tuple[int, float, int]]:
        """(steps, lr, curriculum steps) for each run of the base's pre-training at this batch."""
        if self.base_phases and not overridden & {"base_steps", "base_lr", "curriculum_steps"}:
            return [(math.ceil(p.samples / self.base_batch), p.lr, math.ceil(p.curriculum_samples / self.base_batch))
                    for p in self.base_phases]
        return [(self.base_steps, self.base_lr, self.curriculum_steps)]


def _plans(data: dict) -> dict:
    """adapter_plans from a preset file's shipped_rounds, aligner_min_samples and direct_plan."""
    plans = {}
    for name, shipped in (data.pop("shipped_rounds", None) or {}).items():
        plan = {key: value for key, value in shipped.items() if key != "position_scheme"}  # the preset's ids
        if name.startswith("aligner_"):
            plan["samples"] = max(plan["samples"], data.get("aligner_min_samples", 0))
        plans[name] = plan
    data.pop("aligner_min_samples", None)
    direct = data.pop("direct_plan", None)
    if direct is not None:
        for op in DIRECT_OPS:
            samples = direct.get("samples") or sum(plans[adapter_name(kind, op)]["samples"]
                                                   for kind in ("executor", "aligner"))
            plans[adapter_name("direct", op)] = {"samples": samples, "lr": direct["lr"],
                                                 **({} if "samples" in direct else {"mix": {}})}
    return {**plans, **data.pop("adapter_plans", {})}


def read_preset(path: str | Path) -> Preset:
    """A preset file (this folder's, or one's own)."""
    import yaml

    data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    known = {f.name for f in fields(Preset)} | {"shipped_rounds", "aligner_min_samples", "direct_plan"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{path}: unknown preset field(s) {', '.join(unknown)}; expected some of {', '.join(sorted(known))}")
    data["adapter_plans"] = _plans(data)
    data["base_phases"] = tuple(BasePhase(**phase) for phase in data.get("base_phases", ()))
    if isinstance(data.get("target_modules"), list):
        data["target_modules"] = tuple(data["target_modules"])
    return Preset(**data)


def shipped_rounds(path: Path = FOLDER / "tiny.yaml") -> dict:
    import yaml

    return yaml.safe_load(path.read_text(encoding="utf-8"))["shipped_rounds"]


PRESETS = {path.stem: read_preset(path) for path in sorted(FOLDER.glob("*.yaml"))}


def preset(name: str) -> Preset:
    """`--preset NAME` (a file of this folder) or `--preset PATH` (a .yaml file of one's own)."""
    if name in PRESETS:
        return PRESETS[name]
    if name.endswith((".yaml", ".yml")) and Path(name).is_file():
        return read_preset(name)
    raise ValueError(f"unknown preset {name!r}; expected one of {', '.join(PRESETS)} or a preset file (.yaml)")


# What each shipped tiny adapter was trained on, and the preset's plans from it (tiny.yaml says how).
SHIPPED_ROUNDS = shipped_rounds()
TINY_ADAPTER_PLANS = PRESETS["tiny"].adapter_plans
TINY_BASE_PHASES = PRESETS["tiny"].base_phases
ALIGNER_MIN_SAMPLES = 55_040  # 430 steps x 128: from a fresh LoRA the div aligner wrote 400 of 400 conversions

# Settings a command may override: options of their own (`--batch` sets the base's and stage 2's batch,
# stage 1's stays the preset's), and the rest as `--set FIELD=VALUE`. The mix's shares come as `--share`.
OPTIONS = ("stage1_steps", "stage2_steps", "batch", "lr", "lora_r", "lora_alpha", "adapter", "direct_draw")
SETTABLE = {"base_steps": int, "base_lr": float, "curriculum_steps": int, "max_len": int, "position_scheme": str,
            "position_offsets": int, "decay": str}
# --set fields of the training run rather than of its preset (train.recipe.TrainRequest)
RUN_SETTINGS = {"anonymous_cells": bool, "anonymous_digits": str, "direct_position_scheme": str}
OVERRIDABLE = OPTIONS + tuple(SETTABLE)
_FIELDS_OF = {"batch": ("base_batch", "stage2_batch")}


def _value(name: str, text: str, kind):
    if kind is bool:
        if text.lower() not in ("true", "false", "1", "0"):
            raise ValueError(f"--set {name}={text}: true or false")
        return text.lower() in ("true", "1")
    if name.endswith("position_scheme"):
        from caef_bench.models.positions import checked_scheme

        try:
            return checked_scheme(text)
        except Exception as error:  # argparse's type error: one line of the user's to fix, as any other
            raise ValueError(f"--set {name}={text}: {error}") from None
    if name == "anonymous_digits" and text not in ("all", "expressions"):
        raise ValueError(f"--set anonymous_digits={text}: all or expressions")
    return kind(text)


def parse_settings(given: list[str] | None) -> dict:
    """`--set NAME=VALUE` (repeatable, or NAME=VALUE,NAME=VALUE): {name: typed value}."""
    settings = {}
    for item in (part for text in given or () for part in text.split(",") if part):
        name, _, text = item.partition("=")
        kind = SETTABLE.get(name) or RUN_SETTINGS.get(name)
        if kind is None or not text:
            raise ValueError(f"--set {item}: expected NAME=VALUE, NAME one of {', '.join([*SETTABLE, *RUN_SETTINGS])} "
                             f"(the other settings have options of their own)")
        settings[name] = _value(name, text, kind)
    return settings


def run_settings(settings: Mapping[str, object]) -> dict:
    """The --set values of the training run itself (anonymous_cells, ...), with their defaults."""
    given = parse_settings(settings.get("set"))
    return {"anonymous_cells": given.get("anonymous_cells", False), "anonymous_digits": given.get("anonymous_digits"),
            "direct_position_scheme": given.get("direct_position_scheme", "standard")}


def preset_overrides(settings: Mapping[str, object]) -> dict:
    """The preset fields that `settings` (the command line's, None where not given) override."""
    from caef_bench.train import mix as mixes

    given = {name: settings.get(name) for name in OPTIONS}
    given.update({name: value for name, value in parse_settings(settings.get("set")).items() if name in SETTABLE})
    overrides = {field_name: value for name, value in given.items() if value is not None
                 for field_name in _FIELDS_OF.get(name, (name,))}
    if settings.get("share"):
        overrides["mix"] = mixes.parse(settings["share"])
    return overrides
