"""SUB's first call (REFLECTION's start: a field of 9s as long as a, and b) asked of candidate weights, by how
many 9s end an operand: for each k in 0..L-1, N subtractions of an L-digit a whose last k digits are 9s and
a random b below it, and N whose L-digit b ends in k 9s under a random a, from a stream of their own. SUB's
tapes hold a and b reversed, so those 9s open one, and a copy of it can pass for the field of 9s for k
cells. A screen for executor_sub rounds; no evaluation.

    python lab/diagnosis/sub_first_call.py --checkpoints A,B --tier smollm2-135m --dtype bfloat16
        [--lengths 5,10] [--per-size 6] [--show]
"""

from __future__ import annotations

import random

from caef_bench.machines import run
from caef_bench.train.samplers import nines_below
from step_screens import add_length_options, screen, screen_parser  # this folder: the shared screen loop

CALL_STEP = 0  # SUB's transition into its call of REFLECTION (the records' step 1: its output)


def cases(length: int, nines: int, operand: str, n: int, seed: int) -> list[tuple[str, str, str]]:
    """(label, the machine's input, its output) at SUB's call of REFLECTION for n subtractions whose
    `operand` (a or b) ends in `nines` 9s."""
    rng = random.Random(f"sub_first_call/{seed}/{length}/{nines}/{operand}")
    rows = []
    for _ in range(n):
        if operand == "a":
            a = nines_below(rng, length, nines)
            b = rng.randint(0, a)
        else:
            b = nines_below(rng, length, nines)
            a = rng.randint(b, 10 ** length - 1)
        source, target = run("sub", a, b).transition(CALL_STEP)
        rows.append((f"{a}-{b}", source, target))
    return rows


def main() -> None:
    parser = screen_parser(__doc__)
    add_length_options(parser, per_size=6)
    args = parser.parse_args()
    lengths = [int(length) for length in args.lengths.split(",")]
    grid = {(length, nines, operand): cases(length, nines, operand, args.per_size, args.seed)
            for length in lengths for nines in range(length) for operand in ("a", "b")}
    screen(args, grid, lambda key: f"{key[0]} digits, {key[2]} ending in {key[1]} 9s", "executor_sub")


if __name__ == "__main__":
    main()
