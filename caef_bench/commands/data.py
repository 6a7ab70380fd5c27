"""`caef-bench data build|testsets`: training samples as JSONL, and the paper's test sets."""

from __future__ import annotations

import argparse


def register(commands) -> None:
    from .common import out_argument, quiet_argument, seed_argument

    data = commands.add_parser("data", help="training data and test sets").add_subparsers(dest="data_command",
                                                                                          required=True)
    build = data.add_parser("build", help="write executor, aligner and LoRA-direct training samples as JSONL")
    out_argument(build, "work/data", "output folder")
    build.add_argument("--max-len", type=int, default=100, help="operand lengths 1..N (default 100)")
    build.add_argument("--per-class", type=int, default=20, help="expressions per (len(a), len(b)) class (default 20)")
    seed_argument(build, "expressions")
    build.add_argument("--ops", help="comma-separated, default all: add,sub,mul,div,gt,lt,eq,reflection,left_mask")
    build.add_argument("--kinds", help="comma-separated, default all: executor,aligner,direct")
    quiet_argument(build)
    build.set_defaults(handler=build_data)
    testsets = data.add_parser("testsets", help="write (or --check) the paper's test sets")
    testsets.add_argument("--out", help="data folder (default: the committed tasks/data)")
    testsets.add_argument("--seed", type=int, help="base seed (default: the one the committed sets use)")
    testsets.add_argument("--check", action="store_true", help="regenerate in memory and compare bytes")
    testsets.set_defaults(handler=write_testsets)


def build_data(args: argparse.Namespace) -> int:
    from caef_bench.data.training import KINDS, BuildConfig, build, format_summary
    from caef_bench.machines import EXECUTOR_OPS

    ops = tuple(args.ops.split(",")) if args.ops else EXECUTOR_OPS
    kinds = tuple(args.kinds.split(",")) if args.kinds else KINDS
    unknown = [o for o in ops if o not in EXECUTOR_OPS] + [k for k in kinds if k not in KINDS]
    if unknown:
        raise ValueError(f"unknown op or kind: {', '.join(unknown)}")
    if args.max_len < 1 or args.per_class < 1:
        raise ValueError("--max-len and --per-class must be >= 1")
    config = BuildConfig(max_len=args.max_len, per_class=args.per_class, seed=args.seed, ops=ops, kinds=kinds)
    print(format_summary(build(args.out, config, progress=not args.quiet)))
    print(f"written to {args.out}/ (summary.json has the config and SHA-256 of every file)")
    return 0


def write_testsets(args: argparse.Namespace) -> int:
    from caef_bench.data.testsets import main as testsets_main

    argv = ["--check"] if args.check else []
    argv += ["--out", args.out] if args.out else []
    argv += ["--seed", str(args.seed)] if args.seed is not None else []
    return testsets_main(argv)
