"""Per cell, wrong answers of the same problems in two records folders (the first: the reference).

    python docs/structured-pilot/executor_gate_cpu/compare_records.py OLD_RECORDS NEW_RECORDS
"""
import collections
import json
import sys
from pathlib import Path


def right(record):
    return record["outcome"] == "answered" and str(record["answer"]) == str(record["target"])


def records(path):
    return {r["id"]: r for r in map(json.loads, path.read_text().splitlines())}


old_folder, new_folder = map(Path, sys.argv[1:3])
total = collections.Counter()
for new_file in sorted(new_folder.glob("caef_*.jsonl")):
    new, old = records(new_file), records(old_folder / new_file.name)
    if not new:
        continue  # a cell the evaluation did not reach
    wrong_new = [i for i in new if not right(new[i])]
    wrong_old = [i for i in new if not right(old[i])]
    first = collections.Counter(new[i]["first_divergence"]["adapter"] for i in wrong_new if new[i]["first_divergence"])
    print(f"{new_file.stem[5:]}: {len(new)} problems; reference wrong {len(wrong_old)}, this one {len(wrong_new)} {dict(first)}")
    total.update(n=len(new), reference=len(wrong_old), this=len(wrong_new))
print(dict(total))
