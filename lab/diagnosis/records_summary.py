"""Per cell of a records folder (`caef-bench run`'s, or an accelerator call's records.tgz unpacked): problems,
right, and how the wrong ones ended; with --where, the operand digits a misaligned start state got wrong;
with --by-adapter, the adapter whose step first went wrong in each wrong problem, over all cells and per
cell family.

    python lab/diagnosis/records_summary.py work/records/tiny-<weights> [--where] [--by-adapter]
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path

from caef_bench.evaluate.scoring import is_correct
from caef_bench.runtime import ProblemRecord


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records")
    parser.add_argument("--where", action="store_true")
    parser.add_argument("--by-adapter", action="store_true")
    args = parser.parse_args()
    blamed = Counter()
    print("| cell | N | right | wrong: how they ended |\n|---|---|---|---|")
    wrong_digits = Counter()
    for path in sorted(Path(args.records).glob("caef_*.jsonl")):
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        if not records:
            continue
        verdicts = [is_correct(ProblemRecord.from_dict(r)) for r in records]
        right = sum(verdicts)
        ended = Counter(r["outcome"] for r, ok in zip(records, verdicts) if not ok)
        print(f"| {path.stem[5:]} | {len(records)} | {right} | {', '.join(f'{k} {v}' for k, v in ended.most_common())} |")
        family = re.sub(r"_(p1|p2|p3|mixed|round|control)$", "", path.stem[5:])
        for r in (r for r, ok in zip(records, verdicts) if not ok):
            blamed[first_wrong_adapter(r), family] += 1
        for r in records:
            detail = r.get("detail") or ""
            if r["outcome"] == "misaligned" and "copied operand a as " in detail:
                asked = r["expr"].split("-")[0].split("+")[0]
                copied = detail.split(" as ")[1].split(" ")[0]
                for i, (x, y) in enumerate(zip(asked, copied)):
                    if x != y:
                        b = r["expr"][len(asked) + 1:-1]
                        wrong_digits["from b's digit of the same index" if i < len(b) and y == b[i] else "other"] += 1
                        wrong_digits[f"index {10 * (i // 10)}-{10 * (i // 10) + 9}"] += 1
    if args.where:
        print("\nmiscopied digits of a:", dict(sorted(wrong_digits.items())))
    if args.by_adapter:
        adapters = Counter()
        for (adapter, _), count in blamed.items():
            adapters[adapter] += count
        print("\n| first wrong step's adapter | wrong problems | of which, per cell family |\n|---|---|---|")
        for adapter, count in adapters.most_common():
            families = sorted(((n, f) for (a, f), n in blamed.items() if a == adapter), reverse=True)
            print(f"| {adapter} | {count} | {', '.join(f'{f} {n}' for n, f in families)} |")


def first_wrong_adapter(record: dict) -> str:
    """Which adapter's step went wrong first: an aligner's conversion that did not hold the asked operands
    (misaligned), the step that did not parse, or the first step that diverged from the machine's trace."""
    detail = record.get("detail") or ""
    if record["outcome"] == "misaligned":
        return "aligner (I)" if detail.startswith("aligner (I)") else "aligner (O)"
    step = re.match(r"step (\d+) \((\w+)\)", detail)
    if step:
        return "aligner (I)" if step[1] == "0" and step[2].startswith("aligner") else step[2]
    divergence = record.get("first_divergence") or {}
    return divergence.get("adapter") or record["outcome"]


if __name__ == "__main__":
    main()
