"""How often an adapter's training draws held a run of one digit against a shorter operand: the pairs
SmolLM2's executors copy wrong (`99999+1=`, docs/smollm2.md), counted in the draws its manifest records.

    python lab/diagnosis/draw_shapes.py checkpoints/smollm2-135m/executors/add [--digit 9] [--run 5]
        [--shorter 3] [--batches 300]

Redraws --batches batches of 64 from the machines with the adapter's recorded mix, longest operand and
seed (`train.sources.MachineSource`, stage 2, no curriculum) and prints
how many held an operand with a run of --run or more of --digit (any digit when not given) against an
operand at least --shorter digits shorter. Nothing is written.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from caef_bench.models.names import split_adapter_name
from caef_bench.train import mix as mixes
from caef_bench.train.sources import MachineSource

BATCH = 64


def run_pattern(digit: str | None, length: int) -> re.Pattern:
    """A run of `length` or more of `digit` (of any one digit when None)."""
    return re.compile(f"({re.escape(digit) if digit else '[0-9]'})\\1{{{length - 1}}}")


def holds(a: str, b: str, run: re.Pattern, shorter: int) -> bool:
    """Whether one operand holds the run and the other is at least `shorter` digits shorter."""
    return any(bool(run.search(x)) and len(x) - len(y) >= shorter for x, y in ((a, b), (b, a)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("adapter", help="an adapter folder with its manifest.json")
    parser.add_argument("--digit", help="the run's digit (default: any)")
    parser.add_argument("--run", type=int, default=5, help="the shortest run counted (default 5)")
    parser.add_argument("--shorter", type=int, default=3, help="how many digits shorter the other operand is")
    parser.add_argument("--batches", type=int, default=300)
    args = parser.parse_args(argv)

    manifest = json.loads((Path(args.adapter) / "manifest.json").read_text())
    kind, op = split_adapter_name(manifest["adapter"])
    preset = manifest["preset"]
    # (adapters trained before the mix record its `<name>_share` settings instead)
    sequential = {name: value for name, value in preset.items() if name in mixes.SEQUENTIAL}
    mix = preset.get("mix") or mixes.from_sequential(kind, op, sequential)
    source = MachineSource([(kind, op)], preset["max_len"], manifest["seed"], mix=mix)
    run = run_pattern(args.digit, args.run)
    held = total = 0
    for step in range(args.batches):
        for sample in source.batch(step, BATCH):
            total += 1
            held += holds(sample["meta"]["a"], sample["meta"]["b"] or "", run, args.shorter)
    print(f"{manifest['adapter']} (seed {manifest['seed']}, mix {mix}): {held} of {total} "
          f"draws ({held / total:.2%}) hold a run of {args.run}+ {args.digit or 'equal digit'}s against an operand "
          f"{args.shorter}+ digits shorter")


if __name__ == "__main__":
    main()
