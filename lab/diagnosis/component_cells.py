"""One step at a time on any cells, the repeated-digit and structured ones included
(docs/structured-operands.md): the gate an adapter passes before a long end-to-end evaluation.

    python lab/diagnosis/component_cells.py --checkpoints DIR --cells 'repeated_sub_100_*,sub_100' [--per-cell 50]
    python lab/diagnosis/component_cells.py --kind executor --op sub --cells 'struct_100,repeated_sub_100_p1'

Aligners: the first problems of a seeded sample converted both ways (expression -> start state, halt
state -> expression with its answer; `evaluate.onestep.aligner_cases`), exact conversions of (I) and
(O) apart. Executors: one transition drawn from each problem (`evaluate.onestep.executor_cases`;
`struct_<n>` cells are the structured samplers' operands, `subwide_<n>` ADD's and LEFT_MASK's steps
on SUB's sum of n + 1 digits). Decoded through the step model's batched greedy decoding, as a run
gets them; the first misses are kept in --json.
"""

from __future__ import annotations

import argparse
import fnmatch
import json

from caef_bench.data.testsets import CELLS, all_cells
from caef_bench.evaluate.onestep import (STRUCTURED, STRUCTURED_LENGTHS, SUB_WIDE, SUB_WIDE_LENGTHS, aligner_cases,
                                         executor_cases, generate_in_batches, score_cases)
from caef_bench.runtime.hf import load_step_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", help="adapter folder (default: the tier's shipped adapters)")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--kind", choices=["aligner", "executor"], default="aligner")
    parser.add_argument("--op", help="the adapter's operator (default: each cell's own; needed for struct_<n>)")
    parser.add_argument("--cells", required=True, help="comma-separated cell names or patterns")
    parser.add_argument("--per-cell", type=int, default=50, help="problems per cell (aligners: half (I), half (O))")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--anonymous", choices=("manifest", "off", "cells", "digits", "expressions"), default="manifest",
                        help="run the adapters under test with anonymous tape cells, and plain digits (models."
                             "anonymous_cells), as their manifests say or as given: an untrained counterfactual")
    args = parser.parse_args()
    names = (all_cells() + [f"{STRUCTURED}_{n}" for n in STRUCTURED_LENGTHS]
             + [f"{SUB_WIDE}_{n}" for n in SUB_WIDE_LENGTHS])
    cells = [cell for cell in names if any(fnmatch.fnmatch(cell, p) for p in args.cells.split(","))]
    if not cells:
        parser.error(f"no cell matches {args.cells!r}")
    if any(cell.startswith((STRUCTURED, SUB_WIDE)) for cell in cells) and not args.op:
        parser.error("struct_<n> and subwide_<n> cells need --op")
    step_model = load_step_model(args.model, args.checkpoints, device=args.device)
    if args.anonymous != "manifest":
        tested = {f"{args.kind}_{args.op or CELLS[cell].op}" for cell in cells}
        digits = {"digits": "all", "expressions": "expressions"}.get(args.anonymous)
        step_model.set_anonymous_cells(tested if args.anonymous == "cells" else (),
                                       {name: digits for name in tested} if digits else {})
    print(f"weights {step_model.fingerprint}, {args.kind}, {args.per_cell} problems per cell, seed {args.seed}, "
          f"anonymous cells: {sorted(step_model.anonymous_cells) or 'none'}, digits: {step_model.anonymous_digits or 'none'}")
    print("| cell | exact | first miss |\n|---|---|---|")
    results = {}
    for cell in cells:
        op = args.op or CELLS[cell].op
        name = f"{args.kind}_{op}"
        step_model.activate(name)
        cases_for = aligner_cases if args.kind == "aligner" else executor_cases
        cases = cases_for(op, cell, args.per_cell, args.seed)
        codec = step_model.codec_for(name)

        def score(some_cases, name=name, codec=codec):  # batched, as `onestep` measures on a step model
            return score_cases(lambda prompts, limits, drafts: generate_in_batches(step_model, name, prompts, limits),
                               some_cases, lambda text: len(codec.completion_ids(text)), keep=3)

        # (aligner cases alternate: even ones expression -> start state, odd ones halt state -> expression)
        parts = {"(I)": score(cases[0::2]), "(O)": score(cases[1::2])} if args.kind == "aligner" else {"": score(cases)}
        results[f"{name}/{cell}"] = parts
        for part, scored in parts.items():
            miss = scored["failures"][:1]
            shown = f"`{miss[0]['prompt'][:40].strip()}…`" if miss else ""
            print(f"| {name} {cell} {part} | {scored['correct']}/{scored['n']} | {shown} |", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"weights": step_model.fingerprint, "kind": args.kind, "per_cell": args.per_cell,
                       "seed": args.seed, "results": results}, fh, indent=1)


if __name__ == "__main__":
    main()
