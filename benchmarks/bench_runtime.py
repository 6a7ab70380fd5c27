"""Benchmark (not a test): the paper's loop (one plain greedy decode per step) against ours.

    python benchmarks/bench_runtime.py --cell add_100 --n 3 [--checkpoints DIR]

Runs the same problems with both in one process on one loaded model, checks
that the answers and every step text are identical, and prints forward passes
per executor step and the wall time of each. The speed-up needs a model whose
steps agree with the machine's (the draft): an untrained model gains little.
"""

from __future__ import annotations

import argparse
import time

from caef_bench.data.testsets import load_cell
from caef_bench.runtime import Problem, solve_batch
from caef_bench.runtime.hf import HFStepModel, load_step_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--checkpoints")
    parser.add_argument("--cell", default="add_100")
    parser.add_argument("--n", type=int, default=3)
    args = parser.parse_args()
    ours = load_step_model(args.model, args.checkpoints, speculative=True)
    paper = HFStepModel(ours.model, ours.codec, speculative=False)  # the same weights
    problems = [Problem(p["id"], p["expr"]) for p in load_cell(args.cell)[: args.n]]
    timings, records = {}, {}
    for name, model in (("paper loop", paper), ("speculative", ours)):
        start = time.perf_counter()
        records[name] = solve_batch(problems, model, mode="traced", batch_size=1)
        timings[name] = time.perf_counter() - start
    same = all([s.output for s in a.steps] == [s.output for s in b.steps] and a.final == b.final
               for a, b in zip(records["paper loop"], records["speculative"]))
    import platform

    import torch

    print(f"{args.cell}, {len(problems)} problems, model {args.model} {args.checkpoints or ''} (weights {ours.fingerprint}), "
          f"{platform.machine()}, {torch.get_num_threads()} torch threads")
    print(f"identical answers and step texts: {same}; correct: "
          f"{sum(r.correct for r in records['speculative'])}/{len(problems)}")
    for name, model in (("paper loop", paper), ("speculative", ours)):
        steps = sum(v[0] for k, v in model.stats.by_adapter.items() if k.startswith("executor"))
        passes = sum(v[1] for k, v in model.stats.by_adapter.items() if k.startswith("executor"))
        print(f"{name:>12}: {timings[name]:8.2f} s, {passes / max(steps, 1):7.2f} forward passes per executor step")
    print(f"speed-up: {timings['paper loop'] / timings['speculative']:.1f}x")


if __name__ == "__main__":
    main()
