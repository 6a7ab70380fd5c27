"""`caef-bench train`: the tiny tier's base, then one LoRA adapter per machine and aligner."""

from __future__ import annotations

import argparse


def register(commands) -> None:
    from .common import adapter_arguments, out_argument, training_arguments

    train = commands.add_parser("train", help="train CAEF adapters (and the tiny tier's base)")
    train.add_argument("--preset", default="tiny",
                       help="tiny (default), smollm2, llama (caef_bench/train/presets/*.yaml), or a preset file of "
                            "your own (.yaml)")
    out_argument(train, "checkpoints/tiny", "output folder, official adapter layout (the tiny tier's by default)")
    train.add_argument("--base", help="base model folder, or a tier's name (smollm2-135m): required except for "
                                      "the tiny preset")
    train.add_argument("--data", help="`caef-bench data build` folder to train from (default: draw from the machines)")
    train.add_argument("--executors", help="comma-separated ops (default all nine; also the long route's "
                                           "digit_mul, long_mul, long_div: docs/long-mul-div.md)")
    train.add_argument("--aligners", help="comma-separated ops (default all seven; also long_mul, long_div)")
    train.add_argument("--direct", help="comma-separated ops for the LoRA-direct baseline (default none)")
    train.add_argument("--stage1-steps", type=int, help="override the preset's stage-1 steps per adapter")
    train.add_argument("--time-budget", type=float,
                       help="seconds per training run in this invocation; the same command goes on later")
    train.add_argument("--eval-per-cell", type=int, default=50, help="one-step evaluation cases per test cell (0: none)")
    training_arguments(train)
    train.add_argument("--base-init", help="tiny preset: pre-train the base further, starting from this base folder")
    train.add_argument("--adapter-init", help="train each adapter further, starting from the one of the same name "
                                              "in this folder (official layout, e.g. checkpoints/tiny)")
    train.add_argument("--adapter-init-op", metavar="OP",
                       help="with --adapter-init: start every adapter from that folder's adapter of OP, a sibling "
                            "machine's (lt and eq from gt: the same tapes and verdict register)")
    train.add_argument("--share", action="append", metavar="NAME=X",
                       help="X of each adapter's draws from NAME, over its plan's (repeatable, or NAME=X,NAME=X); "
                            "of the draws: " + _shares("draws") + "; of a part of them: " + _shares(None)
                            + "; the rest of the draws are the protocol's on random operands (caef_bench/train/mix.py)")
    adapter_arguments(train)
    train.add_argument("--processes", type=int, default=1, metavar="N",
                       help="train the adapters in N processes side by side, each a share of them into the same "
                            "--out (for a GPU one process cannot fill; the base, if trained, first)")
    # jemalloc before torch is imported: the allocator is fixed when a process starts (train.allocator)
    train.set_defaults(handler=run, reexecute_with_jemalloc=True)


def _shares(of: str | None) -> str:
    """The shares of the draws (of="draws"), or those of a part of them with what they are part of."""
    from caef_bench.train.mix import SHARES

    if of:
        return ", ".join(name for name, share in SHARES.items() if share.of == of)
    return ", ".join(f"{name} ({share.of})" for name, share in SHARES.items() if share.of != "draws")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from caef_bench.evaluate.onestep import one_step_check
    from caef_bench.machines import ALIGNED_OPS, EXECUTOR_OPS, LONG_ALIGNED_OPS, LONG_EXECUTOR_OPS
    from caef_bench.train.presets import preset, preset_overrides, run_settings
    from caef_bench.train.recipe import TrainRequest, check_draws, format_summary, run_training

    from .common import ops, said_stopped, stoppable

    chosen = preset(args.preset)
    request = TrainRequest(
        preset=args.preset, out=Path(args.out), seed=args.seed, base=args.base,
        data=Path(args.data) if args.data else None,
        # the long route's adapters train when named; the defaults are the paper's operators
        executors=ops(args.executors, EXECUTOR_OPS + LONG_EXECUTOR_OPS, EXECUTOR_OPS),
        aligners=ops(args.aligners, ALIGNED_OPS + LONG_ALIGNED_OPS, ALIGNED_OPS),
        direct=ops(args.direct, ALIGNED_OPS, ()), overrides=preset_overrides(vars(args)),
        time_budget_s=args.time_budget, stop_after_s=args.stop_after,
        # --eval-per-cell 0: no check (the manifest then records none, rather than 0 of 0 as 0%)
        one_step_check=one_step_check(args.eval_per_cell, args.seed) if args.eval_per_cell > 0 else None,
        progress=not args.quiet, command=args.command_line, device=args.device,
        workers=args.workers, precision=args.precision, micro_batch_tokens=args.micro_batch_tokens,
        base_init=Path(args.base_init) if args.base_init else None,
        adapter_init=Path(args.adapter_init) if args.adapter_init else None, adapter_init_op=args.adapter_init_op,
        **run_settings(vars(args)),
    )
    if args.adapter_init_op and not args.adapter_init:
        raise ValueError("--adapter-init-op names an adapter in the --adapter-init folder: pass --adapter-init too")
    if chosen.name != "tiny" and not args.base:
        raise ValueError(f"preset {chosen.name!r} trains adapters on a given base: pass --base PATH")
    check_draws(request)
    if args.processes > 1:
        from caef_bench.train.processes import train_in_processes

        adapters = [(kind, op) for kind, chosen in (("executor", request.executors), ("aligner", request.aligners),
                                                    ("direct", request.direct)) for op in chosen]
        return train_in_processes(args.command_line, adapters, args.processes,
                                  train_base=chosen.name == "tiny" and not args.base)
    summary, code = stoppable(lambda: run_training(request))
    if summary is None:
        return code
    print(format_summary(summary, args.out))
    return said_stopped(summary)
