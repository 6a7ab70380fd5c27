"""Benchmark (not a test): the paper's loop (one plain greedy decode per step) against ours.

    python benchmarks/bench_runtime.py --cell add_100 --n 3 [--checkpoints DIR] [--out results/bench_runtime.md]
    python benchmarks/bench_runtime.py --rerender --out results/bench_runtime.md   # layout only, no measuring

Runs the same problems with both in one process on one loaded model, checks
that the answers and every step text are identical, and prints forward passes
per executor step and the wall time of each. The speed-up needs a model whose
steps agree with the machine's (the draft): an untrained model gains little.
"""

from __future__ import annotations

import argparse
import platform
import re
import time
from pathlib import Path

import torch

from caef_bench.data.testsets import load_cell
from caef_bench.evaluate.scoring import is_correct
from caef_bench.evaluate.suites import as_problems
from caef_bench.runtime import solve_batch
from caef_bench.runtime.hf import load_step_model
from written_report import command_line, parse_arguments, section

HEADING = "# Runtime benchmark: the paper's loop against ours"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--checkpoints")
    parser.add_argument("--cell", default="add_100")
    parser.add_argument("--n", type=int, default=3)
    args = parse_arguments(parser, HEADING, finding)
    if args is None:  # --rerender: laid out again, nothing measured
        return
    ours = load_step_model(args.model, args.checkpoints, speculative=True)
    paper = ours.paper_loop()  # the same weights, adapters and position ids
    problems = as_problems(load_cell(args.cell)[: args.n])
    timings, records = {}, {}
    for name, model in (("paper loop", paper), ("speculative", ours)):
        start = time.perf_counter()
        records[name] = solve_batch(problems, model, mode="traced", batch_size=1)
        timings[name] = time.perf_counter() - start
    same = all([s.output for s in a.steps] == [s.output for s in b.steps] and a.final == b.final
               for a, b in zip(records["paper loop"], records["speculative"]))
    lines = [f"{args.cell}, {len(problems)} problems, model {args.model} {args.checkpoints or ''} "
             f"(weights {ours.fingerprint}), {platform.machine()}, {torch.get_num_threads()} torch threads",
             f"identical answers and step texts: {same}; correct: "
             f"{sum(map(is_correct, records['speculative']))}/{len(problems)}"]
    for name, model in (("paper loop", paper), ("speculative", ours)):
        steps = sum(v[0] for k, v in model.stats.by_adapter.items() if k.startswith("executor"))
        passes = sum(v[1] for k, v in model.stats.by_adapter.items() if k.startswith("executor"))
        lines.append(f"{name:>12}: {timings[name]:8.2f} s, {passes / max(steps, 1):7.2f} forward passes per executor step")
    lines.append(f"speed-up: {timings['paper loop'] / timings['speculative']:.1f}x")
    print("\n".join(lines))
    if args.out:
        command = command_line()
        # this benchmark's part is the top of the file; the sections after it (bench_serving.py's) stay
        out = Path(args.out)
        text = section(HEADING, finding(lines), lines, command)
        rest = out.read_text().partition("\n## ") if out.is_file() else ("", "", "")
        out.write_text(text + (f"\n## {rest[2]}" if rest[1] else ""))


def finding(lines: list[str]) -> str:
    """The speed-up, the wall times and whether both decoders wrote the same steps, from the printed lines."""
    times = dict(re.findall(r"^\s*(paper loop|speculative):\s+([\d.]+) s", "\n".join(lines), re.M))
    same = re.search(r"identical answers and step texts: (\w+); correct: (\d+)/(\d+)", lines[1])
    speed_up = float(times["paper loop"]) / float(times["speculative"])
    return (f"Speculative decoding solves {lines[0].split(',')[1].strip()} of {lines[0].split(',')[0]} "
            f"{speed_up:.1f}x faster than the paper's loop ({float(times['speculative']):.1f} s against "
            f"{float(times['paper loop']):.1f} s), "
            + ("with the same answers and step texts" if same[1] == "True" else "but NOT with the same step texts")
            + f"; {same[2]} of {same[3]} answers right.")


if __name__ == "__main__":
    main()
