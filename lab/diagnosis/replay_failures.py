"""The failed runs of one evaluation, asked again of candidate weights: first the step each run broke at
(the machine's input there, which the runtime saw exactly until that step), then, with --end-to-end, the
whole problem solved again, traced. A candidate that mends a step may break another, so this screens
candidates; it is no evaluation (that is the whole cell, `caef-bench run`).

    python lab/diagnosis/replay_failures.py work/records/tiny-<weights> --checkpoints A,B
        [--cells 'repeated_sub_*'] [--end-to-end DIR] [--tier smollm2-135m --dtype bfloat16]
        [--all-steps executor_div]

With --all-steps ADAPTER, every step that adapter took in the records' runs, right or wrong, up to each run's
first divergence (where the runtime still saw the machine's own input), is asked again: a candidate that
mends the broken steps is screened on the hundreds it must keep right too.

Records of an accelerator call (records.tgz, step texts dropped) are enough: each failed record keeps its
expression and its first divergence.
"""

from __future__ import annotations

import argparse
import fnmatch
from collections import defaultdict
from pathlib import Path

from caef_bench.evaluate.scoring import is_correct
from caef_bench.runtime import Problem, ProblemRecord, load_records, reference_steps, solve_to_file
from caef_bench.runtime.hf import load_step_model
from long_sum_tops import step_right  # this folder: the one reading of a right step


def cell_records(records: Path, cells: str) -> list[ProblemRecord]:
    return [record for path in sorted(records.glob("caef_*.jsonl"))
            if any(fnmatch.fnmatch(path.stem[len("caef_"):], pattern) for pattern in cells.split(","))
            for record in load_records(path)]


def broken_steps(records: list[ProblemRecord]) -> dict[str, list[tuple[str, str, str]]]:
    """adapter -> (problem id, the machine's input, the machine's output) at each run's first divergence."""
    steps = defaultdict(list)
    for record in records:
        divergence = record.first_divergence
        if divergence is None:  # an error before any model call (a problem outside the machines)
            continue
        step = list(reference_steps(record.expr))[divergence.step]
        if step.output != divergence.expected:
            raise ValueError(f"{record.id}: the records were not made on this machine text")
        steps[divergence.adapter].append((record.id, step.input, step.output))
    return steps


def every_step_of(records: list[ProblemRecord], adapter: str) -> list[tuple[str, str, str]]:
    """(problem id, the machine's input, the machine's output) at every step `adapter` took on the machine's
    course: all of a right run's, and a wrong run's up to and with its first divergence."""
    rows = []
    for record in records:
        last = record.first_divergence.step if record.first_divergence else len(record.steps) - 1
        for index, (taken, step) in enumerate(zip(record.steps[:last + 1], reference_steps(record.expr))):
            if taken.adapter == adapter:
                if taken.input != step.input:
                    raise ValueError(f"{record.id}: step {index}'s input is not the machine's")
                rows.append((f"{record.id}@{index}", step.input, step.output))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", type=Path)
    parser.add_argument("--checkpoints", required=True, help="comma-separated adapter folders of --tier")
    parser.add_argument("--tier", default="tiny")
    parser.add_argument("--dtype", help="a torch dtype to run in instead of the tier's own (SmolLM2's runs: bfloat16)")
    parser.add_argument("--cells", default="*", help="comma-separated cell patterns")
    parser.add_argument("--end-to-end", type=Path, help="also solve the failed problems again, records here")
    parser.add_argument("--all-steps", metavar="ADAPTER", help="ask every step of this adapter in the runs instead")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--only", help="--all-steps: ask only these steps (comma-separated id@step, as printed)")
    parser.add_argument("--show", action="store_true", help="print each still-wrong step's output beside the machine's")
    args = parser.parse_args()
    records = cell_records(args.records, args.cells)
    failed = [record for record in records if not is_correct(record)]
    print(f"{len(failed)} failed runs in {args.records}")
    if args.all_steps:
        steps = {args.all_steps: every_step_of(records, args.all_steps)}
        if args.only:
            only = set(args.only.split(","))
            steps[args.all_steps] = [row for row in steps[args.all_steps] if row[0] in only]
        print(f"{len(steps[args.all_steps])} steps of {args.all_steps} on the machine's course")
    else:
        steps = broken_steps(failed)
    asked = "steps" if args.all_steps else "broken steps"
    for checkpoints in args.checkpoints.split(","):
        model = load_step_model(args.tier, checkpoints, device=args.device, dtype=args.dtype)
        for adapter, rows in sorted(steps.items()):
            outputs = model.generate([prompt for _, prompt, _ in rows], adapter)
            # the step as the runtime takes it (step_right), against the machine's
            still = [pid for (pid, _, expected), out in zip(rows, outputs) if not step_right(out.text, expected)]
            print(f"{checkpoints}  {adapter}: {asked} right: {len(rows) - len(still)} of {len(rows)}"
                  + (f"; still wrong: {' '.join(still)}" if still else ""), flush=True)
            if args.show:
                for (pid, prompt, expected), out in zip(rows, outputs):
                    if pid in still:
                        print(f"--- {pid}\n{prompt}\n  machine: {expected!r}\n  model:   {out.text!r}", flush=True)
        if args.end_to_end:
            path = args.end_to_end / f"{Path(checkpoints).name}.jsonl"
            solved = solve_to_file([Problem(r.id, r.expr, r.target) for r in failed], model, path, mode="traced")
            right = [r for r in solved if is_correct(r)]
            print(f"{checkpoints}  end to end: {len(right)} of {len(solved)} failed problems now right "
                  f"(records: {path})", flush=True)


if __name__ == "__main__":
    main()
