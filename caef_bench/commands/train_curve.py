"""`caef-bench train-curve`: the LoRA-direct learning curve, a snapshot at each fraction of the budget."""

from __future__ import annotations

import argparse


def register(commands) -> None:
    from .common import adapter_arguments, out_argument, training_arguments

    curve = commands.add_parser(
        "train-curve", help="the LoRA-direct learning curve: one run per operator, a snapshot of its direct adapter "
                            "at each fraction of its budget (its CAEF executor's and aligner's samples)")
    curve.add_argument("--ops", help="comma-separated (default all seven: add,sub,mul,div,gt,lt,eq)")
    curve.add_argument("--fractions", default="1/16,1/8,1/4,1/2,1",
                       help="fractions of each budget to take a snapshot at (default 1/16,1/8,1/4,1/2,1)")
    out_argument(curve, "work/direct_curve", "snapshots go to OUT/frac_<n>_<d>/direct/<op>/")
    curve.add_argument("--base", help="the base the adapters train on (default: the tiny tier's, checkpoints/tiny/base)")
    training_arguments(curve)
    adapter_arguments(curve)
    curve.set_defaults(handler=run, reexecute_with_jemalloc=True)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from caef_bench.machines import ALIGNED_OPS
    from caef_bench.paths import TINY_CHECKPOINTS
    from caef_bench.train.curve import label, parse_fractions, train_curve
    from caef_bench.train.presets import preset_overrides, run_settings
    from caef_bench.train.recipe import TrainRequest

    from .common import ops, said_stopped, stoppable

    fractions = parse_fractions(args.fractions)
    request = TrainRequest(
        preset="tiny", out=Path(args.out), seed=args.seed, base=args.base or str(TINY_CHECKPOINTS / "base"),
        executors=(), aligners=(),
        direct=ops(args.ops, ALIGNED_OPS, ALIGNED_OPS), overrides=preset_overrides(vars(args)),
        stop_after_s=args.stop_after, progress=not args.quiet, command=args.command_line, device=args.device,
        workers=args.workers, precision=args.precision, micro_batch_tokens=args.micro_batch_tokens,
        direct_position_scheme=run_settings(vars(args))["direct_position_scheme"])
    summary, code = stoppable(lambda: train_curve(request, fractions))
    if summary is None:
        return code
    for op, snapshots in summary["snapshots"].items():
        taken = ", ".join(f"{name} ({m['samples']:,} samples, loss {m['stages']['stage2']['final_loss']:.3f}, "
                          f"{m['stages']['stage2']['tokens'] / max(m['wall_time_s'], 1e-9):,.0f} tokens/s)"
                          for name, m in sorted(snapshots.items(), key=lambda item: item[1]["samples"]))
        print(f"direct_{op}: {taken or 'no snapshot yet'}")
    print(f"snapshots in {args.out}/<{label(fractions[0])}, ...>/direct/<op>/")
    return said_stopped(summary)
