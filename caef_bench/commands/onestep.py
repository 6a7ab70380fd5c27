"""`caef-bench onestep`: one-step exact match of executors and aligners per test cell."""

from __future__ import annotations

import argparse
import json


def register(commands) -> None:
    from .common import device_argument, out_argument, seed_argument, tier_arguments

    onestep = commands.add_parser("onestep", help="one-step exact match of executors and aligners per test cell")
    tier_arguments(onestep)
    onestep.add_argument("--base-only", action="store_true", help="the tiny base itself, no adapters")
    onestep.add_argument("--executors", help="comma-separated ops (default the paper's nine; also long_mul, long_div, "
                                               "digit_mul, the long route's)")
    onestep.add_argument("--aligners", help="comma-separated ops (default the paper's seven; also long_mul, long_div)")
    onestep.add_argument("--per-cell", type=int, default=50, help="cases per test cell (default 50)")
    onestep.add_argument("--every-step", action="store_true",
                         help="executors: every transition of --per-cell problems per cell (whole runs, teacher-forced), "
                              "not one drawn from each: a 100-digit run needs ~99.99%% per step")
    onestep.add_argument("--structured", action="store_true",
                         help="also the struct_<n> cells: operands of the structured samplers (runs of one digit, "
                              "round numbers, periodic patterns, equal operands, …; caef_bench/data/structured.py)")
    onestep.add_argument("--max-len", type=int,
                         help="only the cells of operands up to N digits (add_5, add_10 for 10): a tier that "
                              "generates slowly on a CPU, such as SmolLM2, in minutes rather than hours")
    seed_argument(onestep, "cases")
    device_argument(onestep)
    onestep.add_argument("--json", help="also write the results to this JSON file")
    out_argument(onestep, None, "write onestep.md and .json here, after every adapter; a rerun with the same weights, "
                                "--per-cell and --seed skips the adapters already measured")
    onestep.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from caef_bench.evaluate.onestep import measure_tier
    from caef_bench.machines import ALIGNED_OPS, EXECUTOR_OPS
    from caef_bench.machines.ops import LONG_ALIGNED_OPS, LONG_EXECUTOR_OPS
    from caef_bench.report.tables import onestep_markdown

    from .common import device, ops

    # the long route's adapters (docs/long-mul-div.md) only when named: their cells are the long test cells
    adapters = [("executor", op) for op in ops(args.executors, EXECUTOR_OPS + LONG_EXECUTOR_OPS, EXECUTOR_OPS)]
    adapters += [("aligner", op) for op in ops(args.aligners, ALIGNED_OPS + LONG_ALIGNED_OPS, ALIGNED_OPS)]

    def show(name, cells):
        print(f"{name:<19} " + ", ".join(f"{cell} {r['accuracy']:.1%} [{r['ci_low']:.1%}, {r['ci_high']:.1%}]"
                                        for cell, r in cells.items()), flush=True)

    record = measure_tier(args.tier, args.checkpoints, adapters, args.per_cell, args.seed, base_only=args.base_only,
                          device=str(device(args)), command=args.command_line,
                          out=Path(args.out) if args.out else None, markdown=onestep_markdown, progress=show,
                          every_step=args.every_step, structured=args.structured, max_len=args.max_len)
    if args.json:
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n")
    return 0
