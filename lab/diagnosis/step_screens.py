"""The loop the one-step screens share: candidate adapter folders asked one executor's steps, group by
group, each output read as the machine's (long_sum_tops.step_right). sub_last_steps.py, sub_first_call.py
and typed_steps.py build their groups and hand them here; no evaluation (that is the whole cell).
"""

from __future__ import annotations

import argparse

from caef_bench.runtime.hf import load_step_model
from long_sum_tops import step_right  # this folder: the one reading of a right step


def screen_parser(doc: str) -> argparse.ArgumentParser:
    """The options every screen takes; a screen adds its own (its cases) to them."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--checkpoints", required=True, help="comma-separated adapter folders of --tier")
    parser.add_argument("--tier", default="tiny")
    parser.add_argument("--dtype", help="a torch dtype to run in instead of the tier's own (SmolLM2's runs: bfloat16)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--show", action="store_true", help="print each wrong step's output beside the machine's")
    return parser


def add_length_options(parser: argparse.ArgumentParser, per_size: int) -> None:
    """--lengths and --per-size, for the screens that draw their cases by operand length."""
    parser.add_argument("--lengths", default="5,10", help="a's lengths, comma-separated")
    parser.add_argument("--per-size", type=int, default=per_size)


def screen(args, grid: dict, describe, adapter: str) -> None:
    """Each checkpoint folder's `adapter` on every group of cases in grid ({key: [(label, input, the
    machine's output)]}), a line a group (describe(key) names it) and the total."""
    for checkpoints in args.checkpoints.split(","):
        model = load_step_model(args.tier, checkpoints, device=args.device, dtype=args.dtype)
        total = right = 0
        for key, rows in grid.items():
            outputs = model.generate([prompt for _, prompt, _ in rows], adapter)
            wrong = [(label, expected, out.text) for (label, _, expected), out in zip(rows, outputs)
                     if not step_right(out.text, expected)]
            total, right = total + len(rows), right + len(rows) - len(wrong)
            print(f"{checkpoints}  {describe(key)}: {len(rows) - len(wrong)}/{len(rows)}"
                  + (f"; wrong: {' '.join(label for label, _, _ in wrong)}" if wrong else ""), flush=True)
            if args.show:
                for label, expected, text in wrong:
                    print(f"--- {label}\n  machine: {expected!r}\n  model:   {text!r}", flush=True)
        print(f"{checkpoints}  in all: {right}/{total}", flush=True)
