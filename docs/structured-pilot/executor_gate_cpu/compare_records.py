"""Per cell, wrong answers of the same problems in two records folders (the first: the reference).

    python docs/structured-pilot/executor_gate_cpu/compare_records.py OLD_RECORDS NEW_RECORDS
"""
import collections
import json
import sys
from pathlib import Path

sys.path.insert(0, "benchmarks/diagnosis")
from records_summary import first_wrong_adapter  # noqa: E402

from caef_bench.evaluate.scoring import is_correct  # noqa: E402
from caef_bench.runtime import ProblemRecord  # noqa: E402


def right(record: dict) -> bool:
    return is_correct(ProblemRecord.from_dict(record))


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
    first = collections.Counter(first_wrong_adapter(new[i]) for i in wrong_new)
    print(f"{new_file.stem[5:]}: {len(new)} problems; reference wrong {len(wrong_old)}, this one {len(wrong_new)} {dict(first)}")
    total.update(n=len(new), reference=len(wrong_old), this=len(wrong_new))
print(dict(total))
