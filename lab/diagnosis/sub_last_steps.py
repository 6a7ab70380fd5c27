"""SUB's last step (LEFT_MASK's result copied into SUB's halt state) asked of candidate weights, by the
difference's length: for each size 1..L, N subtractions of an L-digit a whose difference has that many
digits, half structured and half random (train.samplers.difference_pair), from a stream of their own.
A screen for executor_sub rounds aimed at that step; no evaluation (that is the whole cell).

    python lab/diagnosis/sub_last_steps.py --checkpoints A,B --tier smollm2-135m --dtype bfloat16
        [--lengths 5,10] [--per-size 10] [--show]
"""

from __future__ import annotations

import argparse
import random

from caef_bench.machines import run
from caef_bench.runtime.hf import load_step_model
from caef_bench.train.samplers import difference_pair
from long_sum_tops import step_right  # this folder: the one reading of a right step


def cases(length: int, size: int, n: int, seed: int) -> list[tuple[str, str, str]]:
    """(label, the machine's input, its output) at SUB's last step of n subtractions."""
    rng = random.Random(f"sub_last_steps/{seed}/{length}/{size}")
    rows = []
    for _ in range(n):
        a, b = difference_pair(rng, length, size)
        machine_run = run("sub", a, b)
        source, target = machine_run.transition(len(machine_run) - 1)
        rows.append((f"{a}-{b}", source, target))
    return rows


def screen_parser(doc: str) -> argparse.ArgumentParser:
    """The options both SUB screens take (this one and sub_first_call.py)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--checkpoints", required=True, help="comma-separated adapter folders of --tier")
    parser.add_argument("--tier", default="tiny")
    parser.add_argument("--dtype", help="a torch dtype to run in instead of the tier's own (SmolLM2's runs: bfloat16)")
    parser.add_argument("--lengths", default="5,10", help="a's lengths, comma-separated")
    parser.add_argument("--per-size", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--show", action="store_true", help="print each wrong step's output beside the machine's")
    return parser


def screen(args, grid: dict, describe) -> None:
    """Each checkpoint folder's executor_sub on every group of cases in grid ({key: rows}), a line a group
    (describe(key) names it) and the total."""
    for checkpoints in args.checkpoints.split(","):
        model = load_step_model(args.tier, checkpoints, device=args.device, dtype=args.dtype)
        total = right = 0
        for key, rows in grid.items():
            outputs = model.generate([prompt for _, prompt, _ in rows], "executor_sub")
            wrong = [(label, expected, out.text) for (label, _, expected), out in zip(rows, outputs)
                     if not step_right(out.text, expected)]
            total, right = total + len(rows), right + len(rows) - len(wrong)
            print(f"{checkpoints}  {describe(key)}: {len(rows) - len(wrong)}/{len(rows)}"
                  + (f"; wrong: {' '.join(label for label, _, _ in wrong)}" if wrong else ""), flush=True)
            if args.show:
                for label, expected, text in wrong:
                    print(f"--- {label}\n  machine: {expected!r}\n  model:   {text!r}", flush=True)
        print(f"{checkpoints}  in all: {right}/{total}", flush=True)


def main() -> None:
    args = screen_parser(__doc__).parse_args()
    lengths = [int(length) for length in args.lengths.split(",")]
    grid = {(length, size): cases(length, size, args.per_size, args.seed)
            for length in lengths for size in range(1, length + 1)}
    screen(args, grid, lambda key: f"a of {key[0]} digits, difference of {key[1]}")


if __name__ == "__main__":
    main()
