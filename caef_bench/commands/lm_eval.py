"""`caef-bench lm-eval ...`: lm-evaluation-harness's own command line, caef-bench's models registered.

Its arguments are lm_eval's and pass through untouched (cli.main does not parse them)."""

from __future__ import annotations

import argparse


def register(commands) -> None:
    lm_eval = commands.add_parser(
        "lm-eval", add_help=False,
        help="lm-evaluation-harness's own command line with caef-bench's models registered (caef, caef-direct); "
             "every lm_eval flag works, e.g. --model caef --tasks caef_add_5 --include_path tasks")
    lm_eval.add_argument("lm_eval_args", nargs=argparse.REMAINDER)
    lm_eval.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from caef_bench.evaluate.lm_eval_models import main as lm_eval_main

    lm_eval_main(args.lm_eval_args)
    return 0
