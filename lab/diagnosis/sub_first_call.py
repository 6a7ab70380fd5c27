"""SUB's first call (REFLECTION's start: a field of 9s as long as a, and b) asked of candidate weights, by how
many 9s end an operand: for each k in 0..L-1, N subtractions of an L-digit a whose last k digits are 9s and
a random b below it, and N whose L-digit b ends in k 9s under a random a, from a stream of their own. SUB's
tapes hold a and b reversed, so those 9s open one, and a copy of it can pass for the field of 9s for k
cells. A screen for executor_sub rounds; no evaluation.

    python lab/diagnosis/sub_first_call.py --checkpoints A,B --tier smollm2-135m --dtype bfloat16
        [--lengths 5,10] [--per-size 8] [--show]
"""

from __future__ import annotations

import argparse
import random

from caef_bench.machines import run
from caef_bench.runtime.hf import load_step_model
from caef_bench.train.samplers import nines_below
from long_sum_tops import step_right  # this folder: the one reading of a right step

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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", required=True, help="comma-separated adapter folders of --tier")
    parser.add_argument("--tier", default="tiny")
    parser.add_argument("--dtype", help="a torch dtype to run in instead of the tier's own (SmolLM2's runs: bfloat16)")
    parser.add_argument("--lengths", default="5,10", help="a's lengths, comma-separated")
    parser.add_argument("--per-size", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--show", action="store_true", help="print each wrong step's output beside the machine's")
    args = parser.parse_args()
    lengths = [int(length) for length in args.lengths.split(",")]
    grid = {(length, nines, operand): cases(length, nines, operand, args.per_size, args.seed)
            for length in lengths for nines in range(length) for operand in ("a", "b")}
    for checkpoints in args.checkpoints.split(","):
        model = load_step_model(args.tier, checkpoints, device=args.device, dtype=args.dtype)
        total = right = 0
        for (length, nines, operand), rows in grid.items():
            outputs = model.generate([prompt for _, prompt, _ in rows], "executor_sub")
            wrong = [(label, expected, out.text) for (label, _, expected), out in zip(rows, outputs)
                     if not step_right(out.text, expected)]
            total, right = total + len(rows), right + len(rows) - len(wrong)
            print(f"{checkpoints}  {length} digits, {operand} ending in {nines} 9s: {len(rows) - len(wrong)}/{len(rows)}"
                  + (f"; wrong: {' '.join(label for label, _, _ in wrong)}" if wrong else ""), flush=True)
            if args.show:
                for label, expected, text in wrong:
                    print(f"--- {label}\n  machine: {expected!r}\n  model:   {text!r}", flush=True)
        print(f"{checkpoints}  in all: {right}/{total}", flush=True)


if __name__ == "__main__":
    main()
