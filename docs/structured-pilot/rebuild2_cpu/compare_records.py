"""Two records folders side by side on exactly the same problems (the first folder's ids), per cell with
records in the first: how many each got right (scored as the tables score them), and the first's wrong ones.

    python docs/structured-pilot/rebuild2_cpu/compare_records.py work/records/tiny-339126a876b1 work/records/tiny-bad7fd772189
"""

import sys
from pathlib import Path

from caef_bench.evaluate.scoring import is_correct
from caef_bench.runtime import load_records


def main() -> None:
    new, old = Path(sys.argv[1]), Path(sys.argv[2])
    print(f"| cell | problems (the same ids) | {old.name} right | {new.name} right | {new.name} wrong |")
    print("| --- | --- | --- | --- | --- |")
    for path in sorted(new.glob("caef_*.jsonl")):
        ours = {record.id: record for record in load_records(path)}
        if not ours:
            continue
        theirs = {record.id: record for record in load_records(old / path.name)}
        ids = sorted(ours)
        wrong = [i for i in ids if not is_correct(ours[i])]
        print(f"| {path.stem[len('caef_'):]} | {len(ids)} | {sum(is_correct(theirs[i]) for i in ids)} | "
              f"{len(ids) - len(wrong)} | {', '.join(wrong)} |")


if __name__ == "__main__":
    main()
