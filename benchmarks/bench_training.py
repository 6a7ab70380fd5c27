"""Benchmark (not a test): training throughput of the tiny tier on this machine, per batching and precision.

    python benchmarks/bench_training.py [--batch 128] [--steps 3] [--threads 2] [--out results/bench_training.md]
    python benchmarks/bench_training.py --draw direct --batch 32 --out results/bench_training.md   # LoRA-direct's
    python benchmarks/bench_training.py --rerender --out results/bench_training.md   # layout only, no measuring

Trains the shipped base (full parameters, as the preset's pre-training) and a fresh LoRA on it
(as every adapter) on the same steps drawn from all machines, once per configuration: each
step's batch as one padded tensor or as length-sorted micro-batches (collate_micro), fp32 or
bf16 autocast. `--draw direct` times a LoRA adapter alone on LoRA-direct's draws instead (add, the
protocol's prompt over 1-100 digits, standard position ids), in its own section. Prints
completion-weighted loss of the last step (the configurations should agree closely: they see the
same samples) and real (unpadded) tokens per second.
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time

import torch

from caef_bench.data.training import ALIGNED_OPS, EXECUTOR_OPS
from caef_bench.models.codec import CaefCodec
from caef_bench.train.batches import collate_micro
from caef_bench.train.loop import RunOptions, RunPlan, native_cpu_bf16, train
from caef_bench.train.presets import PRESETS
from caef_bench.train.sources import DirectSource, MachineSource
from written_report import parse_arguments, write_section

HEADING = "# Training benchmark: batching and precision on this machine"
DIRECT_HEADING = "## LoRA-direct's draws"


def _model(base: str, lora: bool):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    if lora:  # the tiny preset's adapters; peft leaves only the LoRA weights trainable
        from peft import LoraConfig, get_peft_model

        preset = PRESETS["tiny"]
        model = get_peft_model(model, LoraConfig(r=preset.lora_r, lora_alpha=preset.lora_alpha, lora_dropout=0.0,
                                                 target_modules=preset.target_modules, task_type="CAUSAL_LM"))
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="checkpoints/tiny/base")
    parser.add_argument("--batch", type=int, default=128, help="samples per step (the tiny preset's)")
    parser.add_argument("--steps", type=int, default=3, help="timed steps per configuration, after one warm-up step")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--micro", default="0,4096", help="micro-batch token budgets to compare (0: whole batch)")
    parser.add_argument("--draw", choices=("machines", "direct"), default="machines",
                        help="machines: every executor and aligner (the base and a LoRA); direct: LoRA-direct's add "
                             "draws (a LoRA), in its own section")
    # (read before the rest: --rerender lays out the draw's own section)
    heading = DIRECT_HEADING if parser.parse_known_args()[0].draw == "direct" else HEADING
    args = parse_arguments(parser, heading, finding)
    if args is None:  # --rerender: laid out again, nothing measured
        return
    torch.set_num_threads(args.threads)
    if args.draw == "direct":
        codec, source, drawn = CaefCodec("standard"), DirectSource("add", "protocol", seed=0), "as LoRA-direct draws add"
    else:
        every = [("executor", op) for op in EXECUTOR_OPS] + [("aligner", op) for op in ALIGNED_OPS]
        codec, source, drawn = CaefCodec("coupled-hints"), MachineSource(every, 100, seed=0), "from all machines"
    steps = [source.batch(step, args.batch) for step in range(args.steps + 1)]
    precisions = ["fp32", "bf16"] if native_cpu_bf16() else ["fp32"]
    lines = [f"{platform.machine()} ({platform.processor() or 'cpu'}), {args.threads} torch threads, native bf16: "
             f"{native_cpu_bf16()}; {args.batch} samples per step drawn {drawn} (1-100 digits), "
             f"{args.steps} timed steps after one warm-up",
             f"{'what':<6} {'micro-batch tokens':>18} {'precision':>9} {'tokens/s':>9} {'last loss':>9}"]
    print("\n".join(lines), flush=True)
    for lora in (True,) if args.draw == "direct" else (False, True):
        for micro in (int(m) for m in args.micro.split(",")):
            for precision in precisions:
                model = _model(args.base, lora)
                options = RunOptions(precision=precision, progress=False, log_every=args.steps)
                # Warm-up on batch 0 and the timed run on batches 1.. are two runs, each in its own
                # folder: a run folder holds one run (a checkpoint of another plan is refused).
                with tempfile.TemporaryDirectory() as warm_up, tempfile.TemporaryDirectory() as timed:
                    train(model, lambda step: collate_micro(steps[0], codec, micro), warm_up,
                          RunPlan(steps=1, lr=1e-4), options)
                    started = time.perf_counter()
                    result = train(model, lambda step: collate_micro(steps[step + 1], codec, micro), timed,
                                   RunPlan(steps=args.steps, lr=1e-4), options)
                    seconds = time.perf_counter() - started
                tokens = sum(int(b["attention_mask"].sum()) for s in steps[1:] for b in collate_micro(s, codec, 0))
                lines.append(f"{'LoRA' if lora else 'base':<6} {micro or 'whole':>18} {precision:>9} "
                             f"{tokens / seconds:>9,.0f} {result.final_loss:>9.4f}")
                print(lines[-1], flush=True)
    if args.out:
        write_section(args.out, heading, finding, lines)


def finding(lines: list[str]) -> str:
    """The fastest configuration of the base and of a LoRA adapter against whole fp32 batches, from the
    printed table's rows (what, micro-batch tokens, precision, tokens/s, last loss)."""
    rows = [line.split() for line in lines[2:]]
    speeds = {(what, micro, precision): float(rate.replace(",", "")) for what, micro, precision, rate, _ in rows}
    parts = []
    for what, name in (("base", "the base (every weight)"), ("LoRA", "a LoRA adapter")):
        mine = {key: rate for key, rate in speeds.items() if key[0] == what}
        if not mine:  # (LoRA-direct's draws time a LoRA only)
            continue
        (_, micro, precision), best = max(mine.items(), key=lambda item: item[1])
        plain = mine.get((what, "whole", "fp32"))
        parts.append(f"{name} at {best:,.0f} tokens/s with "
                     + ("whole batches" if micro == "whole" else f"micro-batches of {int(micro):,} tokens")
                     + f" in {precision}" + (f", {best / plain:.1f}x whole fp32 batches ({plain:,.0f})" if plain else ""))
    return f"On this machine ({lines[0].split(';')[0]}) the fastest way trains " + "; ".join(parts) + "."


if __name__ == "__main__":
    main()
