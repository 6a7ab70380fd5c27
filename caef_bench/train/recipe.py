"""`caef-bench train`: the base (tiny tier), then one LoRA adapter per machine and aligner.

Output layout (the official release's, so every tier loads the same way):
    OUT/base/                      tiny tier only: the pre-trained base, bf16, with its tokenizer
    OUT/executors/<op>/            peft LoRA adapter + manifest.json + loss curves
    OUT/aligners/<op>/
    OUT/direct/<op>/               the LoRA-direct baseline (direct prompt -> answer)
    OUT/.runs/                     resumable run state (checkpoints, not shipped)
A finished adapter (one with a manifest) is skipped, so an interrupted run resumes; no adapter
trains on a base whose pre-training was cut short. Each adapter is a function of the base, the
seed, its name and its plan: not of which adapters trained before it in the same process.
"""

from __future__ import annotations

import json
import shutil
import time
import zlib
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from caef_bench.data.explanations import EXPLANATIONS
from caef_bench.machines import ALIGNED_OPS, EXECUTOR_OPS, lookup
from caef_bench.models.names import adapter_name
from caef_bench.train.loop import CPU_FAST_MIN_HIDDEN, RunOptions, RunPlan, describe_device, train
from caef_bench.train.presets import Preset, preset
from caef_bench.train.sources import DirectSource, FileSource, MachineSource

KIND_FOLDERS = {"executor": "executors", "aligner": "aligners", "direct": "direct"}
CPU_MICRO_BATCH_TOKENS = 4096
# The LoRA-direct baseline's ids, whatever the base's: the paper's LoRA-direct has LLaMA's ordinary
# positions, and under the tiny base's coupled ids every digit of a direct prompt has id 0, so the
# model cannot tell one digit from another (docs/format.md).
DIRECT_POSITION_SCHEME = "standard"


@dataclass
class TrainRequest:
    preset: str
    out: Path
    seed: int = 0
    executors: tuple[str, ...] = EXECUTOR_OPS
    aligners: tuple[str, ...] = ALIGNED_OPS
    direct: tuple[str, ...] = ()
    base: str | None = None  # a base model folder; the tiny preset builds and pre-trains its own
    data: Path | None = None  # `caef-bench data build` output, for presets that train from files
    overrides: dict = field(default_factory=dict)  # preset fields, e.g. {"stage2_steps": 10}
    time_budget_s: float | None = None  # per training run, per invocation
    stop_after_s: float | None = None  # for the whole command: no run goes past it, none starts after it
    deadline: float | None = None  # time.monotonic() at which stop_after_s runs out (set by run_training)
    # (model with the adapter, codec, kind, op) -> the adapter's one-step accuracy per test cell, for its
    # manifest (the CLI's is evaluate.onestep.one_step_check); None: the manifest records none
    one_step_check: Callable[[Any, Any, str, str], dict] | None = None
    progress: bool = True
    tiny_shape: object = None  # a TinyShape for the tiny base (default: TinyShape())
    base_init: Path | None = None  # start the tiny base's pre-training from these weights, not a random init
    adapter_init: Path | None = None  # start each adapter from the one of the same name in this folder (official layout)
    # ... or from the one of this operator there: a sibling machine's (LESS_THAN and EQUAL from GREATER_THAN share
    # their tapes, heads and verdict register; only the verdict's rule differs)
    adapter_init_op: str | None = None
    command: str = "caef_bench.train.recipe.run_training"  # recorded in every manifest
    device: str | None = None  # default: cuda when available, else cpu
    workers: int = 0  # processes building batches ahead of training (worth it on an accelerator)
    precision: str = "auto"  # fp32, bf16 (autocast) or auto (train.loop.resolve_precision)
    micro_batch_tokens: int | None = None  # padded tokens per micro-batch; 0: whole batches; None: the device's default
    direct_position_scheme: str = DIRECT_POSITION_SCHEME  # the ids the direct adapters train with
    anonymous_cells: bool = False  # CAEF adapters train with layer 0 reading tape cells alike (models.anonymous_cells)
    # ... and plain digits alike too (aligners read operands as plain digits): None, "all" sequences, or
    # only "expressions" (those that begin with one: aligner (I)'s conversions)
    anonymous_digits: str | None = None

    @property
    def torch_device(self) -> str:
        from caef_bench.models.loading import default_device

        return default_device(self.device)

    def micro_tokens(self, model) -> int:
        """Padded tokens per micro-batch for training `model` (0: each step's batch as one tensor).
        On a CPU, models of hidden size 256 or more (the tiny tier) default to length-sorted
        micro-batches of CPU_MICRO_BATCH_TOKENS, the fastest size measured (docs/training.md);
        narrower ones, where splitting gains little, and an accelerator keep whole batches."""
        if self.micro_batch_tokens is not None:
            return self.micro_batch_tokens
        wide = getattr(model.config, "hidden_size", 0) >= CPU_FAST_MIN_HIDDEN
        return CPU_MICRO_BATCH_TOKENS if self.torch_device == "cpu" and wide else 0

    def run_budget_s(self) -> float | None:
        """Seconds the next training run may take: its own budget, or what is left of the command's."""
        budgets = [b for b in (self.time_budget_s, None if self.deadline is None else self.deadline - time.monotonic())
                   if b is not None]
        return max(0.0, min(budgets)) if budgets else None

    def run_options(self, title: str) -> RunOptions:
        """How this command carries out its next training run."""
        return RunOptions(time_budget_s=self.run_budget_s(), title=title, progress=self.progress,
                          workers=self.workers, precision=self.precision)

    @property
    def recipe(self) -> Preset:
        return preset(self.preset).overridden(self.overrides)

    def recipe_for(self, kind: str, op: str) -> Preset:
        """The preset with this adapter's plan (budget, learning rate, shares) and the overrides."""
        return preset(self.preset).for_adapter(kind, op, self.overrides)


def _finished(folder: Path) -> bool:
    """A checkpoint whose training ran to the end (not cut short by a time budget)."""
    path = folder / "manifest.json"
    if not path.exists():
        return False
    manifest = json.loads(path.read_text())
    stages = manifest.get("stages", {}).values()
    return manifest.get("complete", True) and all(stage.get("complete", True) for stage in stages)


def _lineage(start: Path | None):
    """The manifest of the checkpoint (base or adapter) a further round started from, so its whole
    history stays on record."""
    if start is None:
        return "random (seed)"
    path = Path(start) / "manifest.json"
    return json.loads(path.read_text()) if path.exists() else str(start)


def _write_manifest(folder: Path, manifest: dict) -> None:
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


def _batches(source, size: int, codec, micro_tokens: int, max_offset: int = 0):
    from caef_bench.train.batches import collate_micro

    return lambda step: collate_micro(source.batch(step, size), codec, micro_tokens, max_offset)


def _offsets(recipe: Preset) -> dict:
    """A run's position offsets for its plan, only when on (runs trained before them resume as they were)."""
    return {"position_offsets": recipe.position_offsets} if recipe.position_offsets else {}


def _source(request: TrainRequest, kind: str, op: str, stage: int):
    recipe = request.recipe_for(kind, op)
    if request.data is not None:
        name = f"{kind}_{op}.stage1.jsonl" if stage == 1 else f"{kind}_{op}.jsonl"
        path = request.data / name
        return FileSource([path], request.seed) if path.exists() else None
    if stage == 1 and (kind != "executor" or lookup(op).machine not in EXPLANATIONS):
        return None  # explanations exist for the paper's machines only
    if kind == "direct" and recipe.direct_draw != "classes":
        return DirectSource(op, recipe.direct_draw, request.seed + stage, recipe.max_len)  # the CAEF adapters' lengths
    return MachineSource([(kind, op)], recipe.max_len, request.seed + stage, stage=stage, mix=recipe.mix)


def _recorded(recipe: Preset) -> dict:
    """The preset as a manifest records it: every adapter's plan would repeat in each manifest;
    an adapter's own settings are already in the preset it trained with."""
    return {name: value for name, value in asdict(recipe).items() if name != "adapter_plans"}


def _load_fp32(path: str | Path, device: str):
    """A saved model in fp32 on `device`, as the recipe trains it."""
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32).to(device)


def _copy_loss_curves(run_dir: Path, folder: Path, prefix: str) -> None:
    """A training run's loss curve (loss.jsonl and loss.png) beside the weights it made, as <prefix>loss.*."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("loss.jsonl", "loss.png"):
        if (run_dir / name).exists():
            shutil.copy(run_dir / name, folder / f"{prefix}{name}")


def base_folder(base: str | None) -> str | None:
    """A --base as a folder: a tier's name (smollm2-135m) is its base's folder (SmolLM2 converted from
    its package on first use), anything else is a folder already."""
    from caef_bench.models.loading import TIERS, get_tier

    return str(get_tier(base, adapters=None).base) if base in TIERS else base


def _base(request: TrainRequest, command: str):
    """(model, codec): the model the adapters sit on: the given base, or the tiny tier's own (pre-trained
    here unless a finished one is in OUT/base)."""
    if request.base:
        return _given_base(request)
    folder = request.out / "base"
    if _finished(folder):
        from transformers import AutoTokenizer

        from caef_bench.models.codec import codec_for

        model = _load_fp32(folder, request.torch_device)
        return model, codec_for(AutoTokenizer.from_pretrained(folder), request.recipe.position_scheme)
    return _pretrain_tiny_base(request, command)


def _given_base(request: TrainRequest):
    """(model, codec) of a --base folder: its ids are its own scheme's, unless the request overrides
    position_scheme (coupled-expr differs from coupled on expressions only, so aligners can move to
    it on a base pre-trained with coupled)."""
    from transformers import AutoTokenizer

    from caef_bench.models.codec import codec_for
    from caef_bench.models.tiny import tier_info

    model = _load_fp32(request.base, request.torch_device)
    tokenizer = AutoTokenizer.from_pretrained(request.base)
    asked = request.overrides.get("position_scheme")
    codec = codec_for(tokenizer, asked or tier_info(request.base)["position_scheme"])
    if asked not in (None, codec.scheme):
        raise ValueError(f"position scheme {asked!r} needs the CAEF tokenizer; {request.base} has its own")
    return model, codec


def _tiny_base_start(request: TrainRequest, folder: Path, runs: Path):
    """The weights the tiny base's pre-training starts from, or goes on from."""
    from caef_bench.models.tiny import TinyShape, build_tiny_base

    if (folder / "manifest.json").exists() and not any(runs.glob("**/checkpoint/state.json")):
        # A base cut short by a time budget, shipped without its optimizer state: go on from its weights.
        return _load_fp32(folder, request.torch_device)
    if request.base_init is not None:  # a further round of pre-training on an earlier base
        return _load_fp32(request.base_init, request.torch_device)
    # new, or resumed from the run's checkpoint by train()
    return build_tiny_base(request.tiny_shape or TinyShape(), seed=request.seed).to(request.torch_device)


def _base_source(request: TrainRequest, index: int, curriculum: int, phased: bool):
    """What run `index` of the base's pre-training draws from."""
    if request.data is not None:  # the mixture of every executor and aligner file of the data folder
        files = sorted(p for p in request.data.glob("*.jsonl") if p.name.startswith(("executor_", "aligner_"))
                       and ".stage1." not in p.name)
        return FileSource(files, request.seed + index)
    # The machines the run trains adapters for (all of them by default). Phases draw uniformly
    # over the length classes; one overridden run takes the preset's mix.
    recipe = request.recipe
    every = [("executor", op) for op in EXECUTOR_OPS] + [("aligner", op) for op in ALIGNED_OPS]
    adapters = [("executor", op) for op in request.executors] + [("aligner", op) for op in request.aligners]
    return MachineSource(adapters or every, recipe.max_len, request.seed + index, curriculum_steps=curriculum,
                         mix={} if phased else recipe.mix)


@dataclass
class _Pretraining:
    """The tiny base's pre-training runs of this command, summed for its manifest."""

    runs: list  # (steps, lr, curriculum steps) of each run the preset plans
    fingerprints: list = field(default_factory=list)  # of each run's data, as far as they went
    steps: int = 0
    tokens: int = 0
    seconds: float = 0.0
    invocations: list = field(default_factory=list)
    finished: int = 0  # runs that went to their end
    last: object = None  # the last run's train.loop.RunResult

    @property
    def phased(self) -> bool:
        return len(self.runs) > 1

    @property
    def complete(self) -> bool:
        return self.finished == len(self.runs)


def _run_base_phases(request: TrainRequest, model, codec, runs: Path, micro_tokens: int) -> _Pretraining:
    """Pre-train the tiny base run by run (phases, when the preset has several), until one is cut short."""
    recipe = request.recipe
    done = _Pretraining(recipe.base_runs(set(request.overrides)))
    for index, (phase_steps, phase_lr, curriculum) in enumerate(done.runs):
        source = _base_source(request, index, curriculum, done.phased)
        phase_runs = runs / f"phase{index + 1}" if done.phased else runs
        title = f"tiny base: all machines{f' (phase {index + 1} of {len(done.runs)})' if done.phased else ''}"
        plan = RunPlan(steps=phase_steps, lr=phase_lr, warmup=100, decay=recipe.decay,
                       data={"data": source.fingerprint, "seed": request.seed, "batch": recipe.base_batch,
                             "positions": codec.scheme, **_offsets(recipe),
                             "initialised_from": str(request.base_init) if request.base_init else None})
        result = train(model, _batches(source, recipe.base_batch, codec, micro_tokens, recipe.position_offsets),
                       phase_runs, plan,
                       request.run_options(title))
        done.fingerprints.append(source.fingerprint)
        done.steps += result.steps
        done.tokens += result.tokens
        done.seconds += result.seconds
        done.invocations += ([{"phase": index + 1, **run} for run in result.invocations] if done.phased
                             else result.invocations)
        done.last = result
        if result.stopped_early:  # the same command goes on from this phase's checkpoint
            break
        done.finished += 1
    return done


def _pretrain_tiny_base(request: TrainRequest, command: str):
    """Build (or go on with) the tiny base, pre-train it on the machines, save it to OUT/base with its
    loss curves and manifest; returns (model, codec)."""
    from caef_bench.models.codec import CaefCodec
    from caef_bench.models.tiny import save_tiny_base, shape_of

    recipe = request.recipe
    folder, runs = request.out / "base", request.out / ".runs" / "base"
    model = _tiny_base_start(request, folder, runs)
    codec = CaefCodec(recipe.position_scheme)
    micro_tokens = request.micro_tokens(model)
    done = _run_base_phases(request, model, codec, runs, micro_tokens)
    save_tiny_base(model, folder, recipe.position_scheme, {"shape": shape_of(model)})
    if done.phased:  # each finished phase's curve as phase<k>_loss.*
        for k in range(1, done.finished + 1):
            _copy_loss_curves(runs / f"phase{k}", folder, f"phase{k}_")
    else:
        _copy_loss_curves(runs, folder, "")
    _write_manifest(folder, {
        "what": "tiny base pre-trained, full parameters, on a mixture of the transitions of the machines and "
                "aligners it gets adapters for",
        "command": command, "seed": request.seed, "data": done.fingerprints if done.phased else done.fingerprints[0],
        "steps": done.steps, "tokens": done.tokens, "wall_time_s": round(done.seconds, 1),
        "device": describe_device(next(model.parameters()).device), "invocations": done.invocations,
        "final_loss": done.last.final_loss, "complete": done.complete, "precision": done.last.precision,
        "micro_batch_tokens": micro_tokens, "preset": _recorded(recipe),
        "phases": [{"steps": n, "lr": lr, "curriculum_steps": c} for n, lr, c in done.runs] if done.phased else None,
        "initialised_from": _lineage(request.base_init),
    })
    return model, codec


def _to_bf16(path: Path) -> None:
    """Store an adapter's weights in bf16 (half the bytes: the tiny tier ships ~20 adapters in the repo);
    peft casts them back to the model's dtype when it loads them."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file

    with safe_open(str(path), framework="pt") as f:
        metadata = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    save_file({k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in tensors.items()}, str(path), metadata)


def _init_adapter(peft_model, folder: Path | None, kind: str, op: str):
    """Load an earlier adapter's weights into the fresh LoRA layers (a further round of training);
    returns that adapter's manifest (or path), for the new manifest's lineage."""
    if folder is None:
        return None
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    source = Path(folder) / KIND_FOLDERS[kind] / op
    weights = source / "adapter_model.safetensors"
    if not weights.exists():
        raise FileNotFoundError(f"--adapter-init: no {kind} adapter for {op} at {source}")
    state = {k: v.float() for k, v in load_file(str(weights)).items()}
    outcome = set_peft_model_state_dict(peft_model, state)
    missing = [k for k in outcome.missing_keys if "lora_" in k]
    if missing or outcome.unexpected_keys:  # a different rank or target modules: not a continuation
        raise ValueError(f"--adapter-init: {weights} does not fit this preset's LoRA layers "
                         f"(missing {missing[:3]}, unexpected {list(outcome.unexpected_keys)[:3]})")
    return _lineage(source)


def _init_source(request: TrainRequest, kind: str) -> str | None:
    """The folder a further round starts from, as its run plan records it (and the sibling's adapter, if any)."""
    if request.adapter_init is None:
        return None
    sibling = f" ({KIND_FOLDERS[kind]}/{request.adapter_init_op})" if request.adapter_init_op else ""
    return f"{request.adapter_init}{sibling}"


def adapter_seed(seed: int, kind: str, op: str) -> int:
    """The seed of one adapter's LoRA initialisation. Without it the initialisation would follow
    from whatever drew random numbers before in the process (the base, earlier adapters), so a
    resumed command, or one asked for fewer adapters, would start an adapter elsewhere."""
    return seed * 1_000_003 + zlib.crc32(adapter_name(kind, op).encode())


def _new_adapter(model, request: TrainRequest, recipe: Preset, kind: str, op: str):
    """(peft model, lineage): fresh LoRA layers on `model`, seeded by the adapter's name, or the
    earlier adapter's weights (--adapter-init) and that adapter's manifest."""
    import torch
    from peft import LoraConfig, get_peft_model

    if recipe.adapter == "full":
        from caef_bench.train.full_finetune import FullFineTune

        if request.adapter_init is not None:
            raise ValueError("--adapter-init continues a LoRA adapter; a full fine-tune starts from the base")
        return FullFineTune(model), None
    if recipe.adapter != "lora":
        raise ValueError(f"unknown adapter {recipe.adapter!r}; expected lora or full")
    config = LoraConfig(r=recipe.lora_r, lora_alpha=recipe.lora_alpha, target_modules=recipe.target_modules,
                        lora_dropout=0.0, task_type="CAUSAL_LM")
    torch.manual_seed(adapter_seed(request.seed, kind, op))  # peft draws lora_A from the global generator
    peft_model = get_peft_model(model, config)
    return peft_model, _init_adapter(peft_model, request.adapter_init, kind, request.adapter_init_op or op)


def _train_stages(peft_model, codec, request: TrainRequest, recipe: Preset, kind: str, op: str, folder: Path):
    """Stage 1 then stage 2 (those with data and steps); returns ({stage: its record}, data fingerprints)."""
    stages, fingerprints, micro_tokens = {}, [], request.micro_tokens(peft_model.get_base_model())
    for stage, steps, batch in ((1, recipe.stage1_steps, recipe.stage1_batch), (2, recipe.stage2_steps, recipe.stage2_batch)):
        source = _source(request, kind, op, stage)
        if source is None or steps == 0:
            continue
        runs = request.out / ".runs" / adapter_name(kind, op) / f"stage{stage}"
        plan = RunPlan(steps=steps, lr=recipe.lr, warmup=min(20, steps // 10), decay=recipe.decay,
                       data={"data": source.fingerprint, "seed": request.seed, "batch": batch, "positions": codec.scheme,
                             **adapter_identity(recipe),
                             "initialised_from": _init_source(request, kind),
                             # (only when on, so that the runs trained before the gate resume as they were)
                             **_gate_flags(request, kind), **_offsets(recipe)})
        result = train(peft_model, _batches(source, batch, codec, micro_tokens, recipe.position_offsets), runs, plan,
                       request.run_options(f"{kind} {op} stage {stage}"))
        stages[f"stage{stage}"] = {"steps": result.steps, "tokens": result.tokens, "batch": batch,
                                   "precision": result.precision, "micro_batch_tokens": micro_tokens,
                                   "wall_time_s": round(result.seconds, 1), "invocations": result.invocations,
                                   "final_loss": result.final_loss, "complete": not result.stopped_early}
        fingerprints.append(source.fingerprint)
        _copy_loss_curves(runs, folder, f"stage{stage}_")
    return stages, fingerprints


def adapter_identity(recipe: Preset) -> dict:
    """What a run plan records of the weights it trains (a checkpoint continues only under the same)."""
    if recipe.adapter == "full":
        return {"adapter": "full"}
    return {"lora": [recipe.lora_r, recipe.lora_alpha, recipe.target_modules]}


def _gate_flags(request: TrainRequest, kind: str) -> dict:
    """The anonymous-cells gate an adapter trains with, as its run plan and manifest record it (only when
    on, so that the runs trained before the gate resume as they were)."""
    if kind == "direct" or not (request.anonymous_cells or request.anonymous_digits):
        return {}
    digits = {"all": True, "expressions": "expressions"}.get(request.anonymous_digits)
    return {"anonymous_cells": True, **({"anonymous_digits": digits} if digits else {})}


def planned_scheme(request: TrainRequest, kind: str, op: str, current: str) -> str | None:
    """The position scheme the preset's plan for this adapter names (the long route's adapters train under
    coupled-words: tiny.yaml), at the field stride of `current` (the base's ids, or --set position_scheme's)
    unless the plan names a stride; None where the plan names no scheme (the adapter keeps `current`). The
    plan's name wins over --set's: the long route's names need coupled-words whatever ids the base is given."""
    from caef_bench.models.positions import FIELD_STRIDE, split_scheme

    planned = preset(request.preset).adapter_plans.get(adapter_name(kind, op), {}).get("position_scheme")
    if planned is None or "/" in planned:
        return planned
    stride = split_scheme(current)[1]
    return planned if stride in (None, FIELD_STRIDE) else f"{planned}/{stride}"


def adapter_codec(codec, request: TrainRequest, kind: str, op: str | None = None):
    """The codec an adapter trains with: the base's, but for a LoRA-direct adapter the ids of
    request.direct_position_scheme, and for one whose plan names a scheme that scheme's (planned_scheme);
    the manifest records them, and loading runs it with them."""
    from caef_bench.models.codec import CaefCodec

    if kind == "direct":
        wanted = request.direct_position_scheme
    else:
        wanted = planned_scheme(request, kind, op, codec.scheme) if op else None
    if wanted is None or codec.scheme == wanted:
        return codec
    if not isinstance(codec, CaefCodec):  # a pretrained base's own tokenizer has ordinary ids only
        raise ValueError(f"position scheme {wanted!r} needs the CAEF tokenizer; "
                         f"this base has its own ({codec.scheme} ids)")
    return replace(codec, scheme=wanted)


def save_adapter_folder(peft_model, folder: Path, manifest: dict) -> None:
    """An adapter's weights (bf16) and its manifest in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    peft_model.save_pretrained(folder)
    if (folder / "adapter_model.safetensors").is_file():  # (a full fine-tune writes bf16 itself)
        _to_bf16(folder / "adapter_model.safetensors")
    _write_manifest(folder, manifest)


def train_adapter(model, codec, request: TrainRequest, kind: str, op: str, command: str) -> dict:
    """Stage 1 then stage 2 LoRA training of one adapter on the frozen base; returns its manifest."""
    codec = adapter_codec(codec, request, kind, op)
    recipe = request.recipe_for(kind, op)
    if kind == "direct" or planned_scheme(request, kind, op, codec.scheme):  # its recorded preset says the ids
        recipe = replace(recipe, position_scheme=codec.scheme)  # it trained with, not the base's
    folder = request.out / KIND_FOLDERS[kind] / op
    flags = _gate_flags(request, kind)
    if flags or hasattr(model, "_anonymous_cells_gate"):
        from caef_bench.models.anonymous_cells import install

        gate = install(model)
        gate.on, gate.digits = bool(flags), request.anonymous_digits if flags else None
    peft_model, initialised_from = _new_adapter(model, request, recipe, kind, op)
    stages, fingerprints = _train_stages(peft_model, codec, request, recipe, kind, op, folder)
    peft_model.eval()
    complete = all(stage["complete"] for stage in stages.values())
    # (an adapter cut short by a time budget is measured when a later call finishes it: a one-step check at
    # the end of every chunk of a long CPU run would cost minutes a chunk and measure weights still moving)
    # (the long route's adapters are measured on the long route's test cells: evaluate.onestep.LONG_ROUTE_CELLS)
    checked = request.one_step_check is not None and kind != "direct" and complete
    # (on the test cells of operands it was trained for: a CPU-sized adapter of 1-10 digits on 100-digit steps
    # measures nothing it was asked to learn, at minutes a step)
    accuracy = request.one_step_check(peft_model, codec, kind, op, max_len=recipe.max_len) if checked else None
    manifest = {"adapter": adapter_name(kind, op), "command": command, "seed": request.seed, "data": fingerprints,
                "stages": stages, "wall_time_s": round(sum(s["wall_time_s"] for s in stages.values()), 1),
                "device": describe_device(next(model.parameters()).device), "one_step_accuracy": accuracy,
                "samples": sum(stage["steps"] * stage["batch"] for stage in stages.values()),
                "tokens": sum(stage["tokens"] for stage in stages.values()),
                "base": request.base or str(request.out / "base"),
                "preset": _recorded(recipe),
                "position_scheme": codec.scheme}  # the ids it was trained with: loading runs it with the same
    manifest.update(flags)  # loading runs it with the gate on, as trained (models.anonymous_cells)
    if initialised_from is not None:
        manifest["initialised_from"] = initialised_from
    save_adapter_folder(peft_model, folder, manifest)
    peft_model.unload()  # take the LoRA layers out: the next adapter starts from the same base
    return manifest


def run_training(request: TrainRequest) -> dict:
    import torch

    torch.manual_seed(request.seed)
    command = request.command
    started = time.perf_counter()
    if request.stop_after_s is not None:
        request = replace(request, deadline=time.monotonic() + request.stop_after_s)
    request = replace(request, base=base_folder(request.base))
    model, codec = _base(request, command)
    manifests, stopped, cut = {}, None, []
    if request.base is None and not _finished(request.out / "base"):
        # Adapters trained on a base that is still to change would be skipped, as finished, later.
        stopped = "the base's pre-training was cut short"
    for p in model.parameters():
        p.requires_grad_(False)
    asked = [(kind, op) for kind, ops in (("executor", request.executors), ("aligner", request.aligners),
                                          ("direct", request.direct)) for op in ops]
    for kind, op in [] if stopped else asked:
        folder = request.out / KIND_FOLDERS[kind] / op
        if _finished(folder):
            manifests[adapter_name(kind, op)] = json.loads((folder / "manifest.json").read_text())
            continue
        if request.deadline is not None and time.monotonic() >= request.deadline:
            stopped = f"--stop-after ran out before {kind}_{op}"
            break
        manifests[adapter_name(kind, op)] = manifest = train_adapter(model, codec, request, kind, op, command)
        if not all(stage["complete"] for stage in manifest["stages"].values()):
            cut.append(adapter_name(kind, op))  # (its checkpoint is saved: the same command goes on)
            if request.deadline is not None and time.monotonic() >= request.deadline:
                break
    if cut and not stopped:  # said, so that a cut-short run is never taken for a finished one
        stopped = f"the time ran out during {', '.join(cut)}"
    return {"seconds": round(time.perf_counter() - started, 1), "adapters": manifests, "stopped": stopped}


def format_summary(summary: dict, out: str | Path) -> str:
    """What `caef-bench train` prints at the end: each adapter's one-step accuracy per test cell (when
    checked), and where the checkpoints went."""
    lines = []
    for name, manifest in summary["adapters"].items():
        accuracy = manifest.get("one_step_accuracy") or {}
        cells = ", ".join(f"{cell} {r['accuracy']:.1%}" for cell, r in accuracy.items()) or "one-step not checked"
        lines.append(f"{name:<22} {cells}")
    return "\n".join([*lines, f"written to {out}/ in {summary['seconds']} s"])


def check_draws(request: TrainRequest) -> None:
    """Each adapter's mix can be drawn, and each --share names draws of one of the adapters: a bad
    share fails before the base's hours of pre-training, not after."""
    from caef_bench.train import mix as mixes

    adapters = [(kind, op) for kind, ops in (("executor", request.executors), ("aligner", request.aligners),
                                             ("direct", request.direct)) for op in ops]
    for kind, op in adapters:
        mixes.chances(kind, op, request.recipe_for(kind, op).mix)
    idle = [name for name in request.overrides.get("mix", {})
            if not any(mixes.SHARES[name].applies(kind, op) for kind, op in adapters)]
    if idle:
        raise ValueError(f"--share {', '.join(idle)}: no adapter this command trains draws from it "
                         f"(train.mix.SHARES says whose draws each share is for)")
