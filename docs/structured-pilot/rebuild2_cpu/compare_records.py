"""Two records folders side by side on exactly the same problems (the first folder's ids), per cell with
records in the first: how many each got right, and the first's wrong ones.

    python docs/structured-pilot/rebuild2_cpu/compare_records.py work/records/tiny-339126a876b1 work/records/tiny-bad7fd772189
"""
import json, sys
from pathlib import Path
new, old = Path(sys.argv[1]), Path(sys.argv[2])
print(f"| cell | problems (the same ids) | {old.name} right | {new.name} right | {new.name} wrong |")
print("| --- | --- | --- | --- | --- |")
for f in sorted(new.glob("caef_*.jsonl")):
    rn = {r["id"]: r for r in map(json.loads, f.read_text().splitlines())}
    ro = {r["id"]: r for r in map(json.loads, (old / f.name).read_text().splitlines())}
    ids = sorted(rn)
    if not ids:
        continue
    right = lambda r: r["answer"] == r["target"]
    wrong = [i for i in ids if not right(rn[i])]
    print(f"| {f.stem[5:]} | {len(ids)} | {sum(right(ro[i]) for i in ids)} | {sum(right(rn[i]) for i in ids)} | {', '.join(wrong)} |")
