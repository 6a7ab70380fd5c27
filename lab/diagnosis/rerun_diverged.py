"""The runs of a records folder that left the machine's course, solved again (traced) by the current runtime
on the same weights, each with the outcome and answer it has now against the recorded ones.

    python lab/diagnosis/rerun_diverged.py work/records/tiny-339126a876b1 [--tier tiny] [--checkpoints DIR]
        [--out rerun.json]

What a change to the runtime's checks (such as the one on executors' operand tapes, docs/runtime.md) does to
results made before it, without solving every problem again: a run that followed the machine at every step
(no first divergence) made the machine's own calls, which no check refuses, so only the diverged ones can
change. The committed archives (results/records/*.tgz, step texts emptied) are enough: each record keeps its
expression and its first divergence. Prints each changed run and the counts; nothing else is written but --out.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from caef_bench.runtime import Problem, load_records, solve_batch


def diverged(records: Path) -> list[tuple[str, object]]:
    """(file stem, record) of every record with a first divergence, over the folder's *.jsonl files."""
    return [(path.stem, record) for path in sorted(records.glob("*.jsonl"))
            for record in load_records(path) if record.first_divergence is not None]


def rerun(runs: list[tuple[str, object]], model) -> list[dict]:
    """Each run solved again, traced, in one batch; its recorded and new outcome and answer."""
    # ids are unique within a file, not across them (Table 1's and Table 2's records of one problem)
    problems = [Problem(f"{stem}:{record.id}", record.expr, record.target) for stem, record in runs]
    again = solve_batch(problems, model, mode="traced", keep_steps=False)
    return [{"file": stem, "id": old.id, "expr": old.expr, "target": old.target,
             "recorded": [old.outcome, old.answer], "now": [new.outcome, new.answer], "detail": new.detail,
             "changed": (old.outcome, old.answer) != (new.outcome, new.answer)}
            for (stem, old), new in zip(runs, again)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records", type=Path, help="a records folder (an unpacked results/records/*.tgz)")
    parser.add_argument("--tier", default="tiny")
    parser.add_argument("--checkpoints", help="the weights that made the records (default: the tier's shipped ones)")
    parser.add_argument("--out", type=Path, help="write every rerun run here as JSON")
    args = parser.parse_args(argv)
    from caef_bench.runtime.hf import load_step_model

    runs = diverged(args.records)
    rows = rerun(runs, load_step_model(args.tier, args.checkpoints, speculative=True)) if runs else []
    for row in rows:
        if row["changed"]:
            print(f"{row['file']} {row['id']}: {row['recorded']} -> {row['now']} ({row['detail']})")
    print(f"{len(rows)} runs of {args.records} left the machine's course; {sum(r['changed'] for r in rows)} "
          f"end otherwise now")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
