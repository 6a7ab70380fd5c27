"""What a tier's LoRA-direct adapters answer to problems a person would type rather than the test sets' random
draws: round numbers, runs of 9s (a carry or borrow through every place), equal operands, operands of two
lengths, results shorter than the operands.

    python lab/diagnosis/typed_problems.py --tier smollm2-135m --checkpoints checkpoints/smollm2-135m-direct \
        [--ops add,sub,gt,lt] [--json FILE]

Why: the Table 1 cells draw two random operands of one length, and so do the protocol's direct draws these
adapters were trained on; a random pair rarely carries through a run of places, and never has operands of two
lengths. Each problem's answer is computed (data.testsets.solve), its reply asked with the protocol's LoRA-direct
prompt and scored by the benchmark's rule (evaluate.scoring.score). It reads adapters; it writes only --json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

# (operator, a, b, what kind of input it is): the operands a person types, not answers
TYPED = (
    ("add", 12345, 54321, "no carry"),
    ("add", 45, 67, "the paper's example"),
    ("add", 99999, 1, "runs of 9s, two lengths"),
    ("add", 99999, 99999, "equal operands, every place carries"),
    ("add", 50000, 50000, "round numbers"),
    ("sub", 54321, 12345, "borrows"),
    ("sub", 98765, 43210, "no borrow"),
    ("sub", 10000, 1, "round minus one, two lengths"),
    ("sub", 500, 499, "one-digit result"),
    ("sub", 99999, 99999, "equal operands: zero"),
    ("sub", 1000000000, 1, "ten digits minus one"),
    ("gt", 777, 778, "last digit differs"),
    ("gt", 778, 777, "last digit differs"),
    ("gt", 12345, 12345, "equal operands"),
    ("gt", 100000, 99999, "two lengths"),
    ("lt", 777, 778, "last digit differs"),
    ("lt", 778, 777, "last digit differs"),
    ("lt", 12345, 12345, "equal operands"),
    ("lt", 99999, 100000, "two lengths"),
)


def ask(direct, ops: list[str]) -> list[dict]:
    from caef_bench.data.testsets import render_expr, solve
    from caef_bench.evaluate.scoring import score

    rows = []
    for op in ops:
        problems = [(a, b, kind) for name, a, b, kind in TYPED if name == op]
        exprs, answers = [render_expr(op, a, b) for a, b, _ in problems], [solve(op, a, b) for a, b, _ in problems]
        for (_, _, kind), expr, answer, reply in zip(problems, exprs, answers, direct.ask(op, exprs, answers)):
            rows.append({"op": op, "input": kind, "problem": expr, "answer": answer, "reply": reply.strip(),
                         "right": bool(score(reply, answer, op, "direct"))})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tier", default="tiny", help="the base: tiny, smollm2-135m")
    parser.add_argument("--checkpoints", help="a folder with direct/<op>/ (default: the tier's own)")
    parser.add_argument("--ops", default="add,sub,gt,lt")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()

    from tabulate import tabulate

    from caef_bench.evaluate.direct import load_direct
    from caef_bench.models.loading import tier_with_checkpoints

    ops = [op for op in args.ops.split(",") if op]
    direct = load_direct(tier_with_checkpoints(args.tier, args.checkpoints), ops=ops)
    rows = ask(direct, ops)
    print(tabulate(rows, headers="keys", tablefmt="github"))
    print(f"\n{sum(row['right'] for row in rows)} of {len(rows)} right")
    if args.json:
        args.json.write_text(json.dumps({"tier": args.tier, "checkpoints": args.checkpoints, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
