"""`caef-bench train-curve`: the LoRA-direct learning curve, a snapshot at each fraction of the budget."""

from __future__ import annotations

import argparse


def register(commands) -> None:
    from caef_bench.models.positions import checked_scheme

    from .common import adapter_arguments

    curve = commands.add_parser(
        "train-curve", help="the LoRA-direct learning curve: one run per operator, a snapshot of its direct adapter "
                            "at each fraction of its budget (its CAEF executor's and aligner's samples)")
    curve.add_argument("--ops", help="comma-separated (default all seven: add,sub,mul,div,gt,lt,eq)")
    curve.add_argument("--fractions", default="1/16,1/8,1/4,1/2,1",
                       help="fractions of each budget to take a snapshot at (default 1/16,1/8,1/4,1/2,1)")
    curve.add_argument("--out", default="work/direct_curve",
                       help="snapshots go to OUT/frac_<n>_<d>/direct/<op>/ (default work/direct_curve)")
    curve.add_argument("--base", help="the base the adapters train on (default: the tiny tier's, checkpoints/tiny/base)")
    curve.add_argument("--position-scheme", type=checked_scheme, default="standard",
                       help="the adapters' ids (default standard, the paper's; another is its own system)")
    curve.add_argument("--seed", type=int, default=0)
    curve.add_argument("--device", help="cpu, cuda, cuda:1 … (default: cuda when available)")
    curve.add_argument("--workers", type=int, default=0, help="processes building batches ahead (use several on a GPU)")
    curve.add_argument("--batch", type=int, help="override the batch (default the plan's 128; budgets are samples)")
    curve.add_argument("--lr", type=float, help="override the plan's learning rate (constant after warm-up)")
    curve.add_argument("--stage2-steps", type=int, help="override the budget: this many steps of --batch (tests)")
    curve.add_argument("--max-len", type=int,
                       help="operands of 1..N digits (default 100; the draw's rule cut at N, a diagnostic: the "
                            "manifest's data fingerprint records it)")
    curve.add_argument("--precision", choices=("auto", "fp32", "bf16"), default="auto",
                       help="as for train (default auto: bf16 on a GPU and on a CPU with native bf16)")
    curve.add_argument("--micro-batch-tokens", type=int,
                       help="as for train (default 4096 on a CPU, whole batches on a GPU; 0: whole batches)")
    adapter_arguments(curve)
    curve.add_argument("--stop-after", type=float,
                       help="seconds for the whole command; the same command goes on later")
    curve.add_argument("--quiet", action="store_true")
    curve.set_defaults(handler=run, reexecute_with_jemalloc=True)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from caef_bench.machines import ALIGNED_OPS
    from caef_bench.paths import TINY_CHECKPOINTS
    from caef_bench.train.curve import label, parse_fractions, train_curve
    from caef_bench.train.presets import preset_overrides
    from caef_bench.train.recipe import TrainRequest

    from .common import ops, said_stopped, stoppable

    fractions = parse_fractions(args.fractions)
    request = TrainRequest(
        preset="tiny", out=Path(args.out), seed=args.seed, base=args.base or str(TINY_CHECKPOINTS / "base"),
        executors=(), aligners=(),
        direct=ops(args.ops, ALIGNED_OPS, ALIGNED_OPS), overrides=preset_overrides(vars(args)),
        stop_after_s=args.stop_after, progress=not args.quiet, command=args.command_line, device=args.device,
        workers=args.workers, precision=args.precision, micro_batch_tokens=args.micro_batch_tokens,
        direct_position_scheme=args.position_scheme)
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
