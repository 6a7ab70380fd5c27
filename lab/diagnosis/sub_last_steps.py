"""SUB's last step (LEFT_MASK's result copied into SUB's halt state) asked of candidate weights, by the
difference's length: for each size 1..L, N subtractions of an L-digit a whose difference has that many
digits, half structured and half random (train.samplers.difference_pair), from a stream of their own.
A screen for executor_sub rounds aimed at that step; no evaluation (that is the whole cell).

    python lab/diagnosis/sub_last_steps.py --checkpoints A,B --tier smollm2-135m --dtype bfloat16
        [--lengths 5,10] [--per-size 10] [--show]
"""

from __future__ import annotations

import random

from caef_bench.machines import run
from caef_bench.train.samplers import difference_pair
from step_screens import add_length_options, screen, screen_parser  # this folder: the shared screen loop


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


def main() -> None:
    parser = screen_parser(__doc__)
    add_length_options(parser, per_size=10)
    args = parser.parse_args()
    lengths = [int(length) for length in args.lengths.split(",")]
    grid = {(length, size): cases(length, size, args.per_size, args.seed)
            for length in lengths for size in range(1, length + 1)}
    screen(args, grid, lambda key: f"a of {key[0]} digits, difference of {key[1]}", "executor_sub")


if __name__ == "__main__":
    main()
