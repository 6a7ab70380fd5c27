"""A learning curve of the LoRA-direct baseline: one training run per operator, with a snapshot
of its adapter at each asked fraction of its budget.

An operator's budget is its direct adapter's plan (`presets.TINY_ADAPTER_PLANS`: the samples of
that operator's CAEF executor and aligner together). The run's learning rate warms up, then stays
constant, so the run that reaches a quarter of the budget begins with the run that reached a
sixteenth: each snapshot is what that many samples of training give, not a cut through a
schedule planned for the whole budget (a cosine would make the early snapshots a high-lr middle
of someone else's run). The run is planned to the whole budget whichever fractions are asked, so
asking for more of them later goes on with the same run.

Layout under OUT:
    <label>/direct/<op>/        a snapshot: adapter + manifest (samples, fraction of the budget,
                                position scheme, base, command, seed); <label> is frac_1_16, ..., frac_1
    .runs/direct_<op>/curve/    the run's checkpoint and loss curve (resumable)
A snapshot folder is a checkpoints folder for the direct adapters (`direct/<op>/`): the fraction-1
ones are what `checkpoints/tiny/direct/` ships.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import time
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

from caef_bench.models.names import adapter_name
from caef_bench.train.loop import RunPlan, describe_device, train
from caef_bench.train.recipe import (KIND_FOLDERS, TrainRequest, _base, _batches, _finished, _new_adapter, _recorded,
                                     _source, adapter_codec, adapter_identity, save_adapter_folder)

DEFAULT_FRACTIONS = "1/16,1/8,1/4,1/2,1"
SCHEDULE = "constant after warm-up"


def parse_fractions(text: str) -> list[Fraction]:
    """'1/16,1/8,1' -> the fractions, ascending; each in (0, 1] (a curve up to the whole budget)."""
    fractions = set()
    for item in (i.strip() for i in text.split(",")):
        if not re.fullmatch(r"\d+(/\d+)?", item):
            raise ValueError(f"--fractions takes fractions such as 1/16,1/4,1, not {item!r}")
        numerator, _, denominator = item.partition("/")
        if denominator and int(denominator) == 0:
            raise ValueError(f"--fractions: {item!r} divides by zero")
        value = Fraction(int(numerator), int(denominator or 1))
        if not 0 < value <= 1:
            raise ValueError(f"--fractions: {item} is not in (0, 1]: a curve goes up to its budget, the whole of it")
        fractions.add(value)
    return sorted(fractions)


def label(fraction: Fraction) -> str:
    """The snapshot folder of a fraction: 1/16 -> frac_1_16, 1 -> frac_1."""
    return f"frac_{fraction.numerator}" + (f"_{fraction.denominator}" if fraction.denominator != 1 else "")


def budget(request: TrainRequest, op: str) -> tuple[int, int, int]:
    """(budget in samples, steps of the whole run, batch) of op's direct adapter under `request`: its
    plan's samples, or an explicit --stage2-steps times the batch."""
    from caef_bench.train.presets import PRESETS

    recipe = request.recipe_for("direct", op)
    plan = PRESETS[request.preset].adapter_plans.get(adapter_name("direct", op), {})
    samples = plan.get("samples") if "stage2_steps" not in request.overrides else None
    steps, batch = recipe.stage2_steps, recipe.stage2_batch
    return (samples or steps * batch), steps, batch


def snapshot_steps(fractions: list[Fraction], budget_samples: int, batch: int) -> list[tuple[Fraction, int]]:
    """(fraction, the step its snapshot is taken after): the first step whose samples reach it."""
    return [(f, max(1, math.ceil(f * budget_samples / batch))) for f in fractions]


def train_curve(request: TrainRequest, fractions: list[Fraction]) -> dict:
    """Train each of request.direct's operators on the base in request.base, a snapshot at each
    fraction of its budget; returns {op: {label: manifest}} and what stopped it (or None).

    The same call goes on after an interruption (a stop signal, --stop-after): snapshots already
    taken stay, the run continues from its checkpoint. A fraction below where the run already is
    cannot be taken any more: that is an error naming the step."""
    import torch

    if request.base is None:
        raise ValueError("a learning curve trains on an existing base: pass --base (the tiny tier's: "
                         "checkpoints/tiny/base)")
    torch.manual_seed(request.seed)
    if request.stop_after_s is not None:
        request = replace(request, deadline=time.monotonic() + request.stop_after_s)
    model, codec = _base(request, request.command)
    for p in model.parameters():
        p.requires_grad_(False)
    codec = adapter_codec(codec, request, "direct")
    base = base_weights(request.base)
    snapshots, stopped = {}, None
    for op in request.direct:
        snapshots[op], stopped = _train_op(model, codec, request, op, fractions, base)
        if stopped:
            break
    return {"snapshots": snapshots, "stopped": stopped}


def shown_path(path: str | Path) -> str:
    """A path as a manifest records it: relative to the data root when inside it (the tiny tier's
    base is checkpoints/tiny/base on every machine), else as given."""
    from caef_bench.paths import DATA_ROOT

    try:
        return str(Path(path).resolve().relative_to(DATA_ROOT))
    except ValueError:
        return str(path)


def resolve_shown(path: str) -> Path:
    """The folder a recorded path names here: as given when it exists, else under the data root."""
    from caef_bench.paths import DATA_ROOT

    return Path(path) if Path(path).exists() or Path(path).is_absolute() else DATA_ROOT / path


def base_weights(base: str | Path) -> str:
    """The fingerprint of the base alone (models.loading), recorded so the curve's evaluation can
    refuse another base."""
    from caef_bench.models.loading import base_fingerprint

    return base_fingerprint(base)


def _train_op(model, codec, request: TrainRequest, op: str, fractions: list[Fraction], base: str):
    """One operator's run: ({label: manifest} of its snapshots, why it stopped or None)."""
    budget_samples, steps, batch = budget(request, op)
    targets = snapshot_steps(fractions, budget_samples, batch)
    folders = {f: request.out / label(f) / KIND_FOLDERS["direct"] / op for f, _ in targets}
    done = {label(f): json.loads((folders[f] / "manifest.json").read_text()) for f, _ in targets if _finished(folders[f])}
    if len(done) == len(targets):
        return done, None
    recipe = replace(request.recipe_for("direct", op), decay="constant", position_scheme=codec.scheme)
    peft_model, initialised_from = _new_adapter(model, request, recipe, "direct", op)
    source = _source(request, "direct", op, 2)
    micro_tokens = request.micro_tokens(model)
    runs = request.out / ".runs" / adapter_name("direct", op) / "curve"
    # The plan is the whole budget's, whichever fractions are asked: a later call with more of them
    # goes on with the same run (a checkpoint is continued only under the plan that started it).
    warmup = min(20, steps // 10)
    plan = RunPlan(steps=steps, lr=recipe.lr, warmup=warmup, decay="constant",
                   data={"data": source.fingerprint, "seed": request.seed, "batch": batch, "positions": codec.scheme,
                         **adapter_identity(recipe),
                         "initialised_from": str(request.adapter_init) if request.adapter_init else None})
    stopped = None
    try:
        for fraction, step in targets:
            if label(fraction) in done:
                continue
            options = replace(request.run_options(f"direct {op} to {fraction} of its budget"), stop_at=step)
            result = train(peft_model, _batches(source, batch, codec, micro_tokens), runs, plan, options)
            if result.steps > step:
                raise ValueError(f"direct_{op}: the run in {runs} is at step {result.steps}, past step {step} where "
                                 f"the snapshot at {fraction} of the budget comes; snapshots are taken on the way "
                                 f"only: ask for it in a new --out")
            if result.steps < step:
                stopped = f"the time ran out in direct_{op} at step {result.steps} of {step} (to {fraction})"
                break
            samples = step * batch
            manifest = {
                "adapter": adapter_name("direct", op), "command": request.command, "seed": request.seed,
                "data": [source.fingerprint],
                "stages": {"stage2": {"steps": step, "tokens": result.tokens, "batch": batch,
                                      "precision": result.precision, "micro_batch_tokens": micro_tokens,
                                      "wall_time_s": round(result.seconds, 1), "invocations": result.invocations,
                                      "final_loss": result.final_loss, "complete": True}},
                "wall_time_s": round(result.seconds, 1), "device": describe_device(next(model.parameters()).device),
                "one_step_accuracy": None, "preset": _recorded(recipe),
                "position_scheme": codec.scheme,  # the ids it was trained with: loading runs it with the same
                "base": shown_path(request.base), "base_weights": base, "samples": samples,
                "curve": {"fraction": str(fraction), "samples": samples, "budget_samples": budget_samples,
                          "fraction_of_budget": samples / budget_samples, "run_steps": steps, "warmup": warmup,
                          "schedule": SCHEDULE},
            }
            if initialised_from is not None:
                manifest["initialised_from"] = initialised_from
            save_adapter_folder(peft_model, folders[fraction], manifest)
            for name in ("loss.jsonl", "loss.png"):  # the run's curve so far, beside the snapshot
                if (runs / name).exists():
                    shutil.copy(runs / name, folders[fraction] / f"stage2_{name}")
            done[label(fraction)] = manifest
    finally:
        peft_model.unload()  # the next operator starts from the same base
    return done, stopped
