"""Aligner (I) and (O) one conversion at a time on any test cells, the repeated-digit ones included
(docs/structured-operands.md): the gate an aligner passes before a long end-to-end evaluation.

    python benchmarks/diagnosis/aligner_cells.py --checkpoints DIR --cells 'rep_sub_100_*,sub_100' [--per-cell 50]

For each cell, the first problems of a seeded sample converted both ways (expression -> start state,
halt state -> expression with its answer; `evaluate.onestep.aligner_cases`), through the step model's
batched greedy decoding as a run gets them: exact conversions of (I) and of (O), and the first misses.
"""

from __future__ import annotations

import argparse
import fnmatch
import json

from caef_bench.data.testsets import all_cells
from caef_bench.evaluate.onestep import _generate_in_batches, aligner_cases
from caef_bench.evaluate.scoring import text_accuracy
from caef_bench.runtime.hf import load_step_model


def cell_op(cell: str) -> str:
    """The operator of a test cell: add_100 -> add, rep_sub_100_p1 -> sub."""
    parts = cell.split("_")
    return parts[1] if parts[0] == "rep" else parts[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", help="adapter folder (default: the tier's shipped adapters)")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--cells", required=True, help="comma-separated cell names or patterns")
    parser.add_argument("--per-cell", type=int, default=50, help="problems per cell (half (I), half (O))")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    patterns = args.cells.split(",")
    cells = [cell for cell in all_cells() if any(fnmatch.fnmatch(cell, p) for p in patterns)]
    if not cells:
        parser.error(f"no cell matches {args.cells!r}")
    step_model = load_step_model(args.model, args.checkpoints, device=args.device)
    print(f"weights {step_model.fingerprint}, {args.per_cell} problems per cell, seed {args.seed}")
    print("| cell | (I) exact | (O) exact | first miss of (I) |\n|---|---|---|---|")
    results = {}
    for cell in cells:
        name = "aligner_" + cell_op(cell)
        step_model.activate(name)
        cases = aligner_cases(cell_op(cell), cell, args.per_cell, args.seed)
        codec = step_model.codec_for(name)
        limits = [len(codec.completion_ids(expected)) + 1 for _, expected in cases]
        outputs = _generate_in_batches(step_model, name, [prompt for prompt, _ in cases], limits)
        directions = {"I": text_accuracy(cases[0::2], outputs[0::2], keep=3),
                      "O": text_accuracy(cases[1::2], outputs[1::2], keep=3)}
        results[cell] = directions
        miss = directions["I"]["failures"][:1]
        shown = f"`{miss[0]['prompt'][:40]}…`" if miss else ""
        print(f"| {cell} | {directions['I']['correct']}/{directions['I']['n']} | "
              f"{directions['O']['correct']}/{directions['O']['n']} | {shown} |", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"weights": step_model.fingerprint, "per_cell": args.per_cell, "seed": args.seed,
                       "results": results}, fh, indent=1)


if __name__ == "__main__":
    main()
