"""`caef-bench eval-curve`: the learning curve's snapshots on their operators' Table 1 cells."""

from __future__ import annotations

import argparse


def register(commands) -> None:
    from .common import device_argument, out_argument

    curve_eval = commands.add_parser(
        "eval-curve", help="the learning curve's snapshots on their operators' Table 1 cells, in process (no lm-eval)")
    curve_eval.add_argument("--curve", default="work/direct_curve", help="train-curve's --out (default work/direct_curve)")
    out_argument(curve_eval, None, "the results JSON (default CURVE/evaluation.json); a rerun measures only what it lacks")
    curve_eval.add_argument("--limit", type=int, default=100, help="first N problems per cell (default 100)")
    curve_eval.add_argument("--ops", help="comma-separated (default: every operator with snapshots)")
    curve_eval.add_argument("--cells", help="comma-separated cells (default: all of each operator's Table 1 cells)")
    curve_eval.add_argument("--base", help="the base the snapshots were trained on (default: as their manifests say)")
    curve_eval.add_argument("--batch-size", type=int, default=100, help="problems decoded together (default 100)")
    device_argument(curve_eval)
    curve_eval.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from caef_bench.evaluate.direct_curve import evaluate_curve
    from caef_bench.machines import ALIGNED_OPS

    from .common import device, ops

    curve = Path(args.curve)
    out = Path(args.out) if args.out else curve / "evaluation.json"
    evaluate_curve(curve, out, per_cell=args.limit, ops=list(ops(args.ops, ALIGNED_OPS, ALIGNED_OPS)),
                   cells=args.cells.split(",") if args.cells else None, device=device(args),
                   batch_size=args.batch_size, base=args.base, command=args.command_line,
                   progress=lambda line: print(line, flush=True))
    print(f"wrote {out}")
    return 0
