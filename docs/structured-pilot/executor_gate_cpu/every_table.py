"""per cell: problems with a wrong step (steps wrong) of N problems (S steps), from long_sum_tops --json files"""
import json, sys, collections
sys.path.insert(0, "benchmarks/diagnosis")
from long_sum_tops import top_steps
executor, problems, cells = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
files = sys.argv[4:]
steps = collections.Counter(c for c, *_ in top_steps(cells, problems, 0, 1, executor))
rows = collections.defaultdict(lambda: collections.defaultdict(list))
for f in files:
    for line in open(f):
        m = json.loads(line)
        rows[m["checkpoints"]][m["cell"]].append(m["where"].split()[0])
for ck, per in rows.items():
    print(ck, " | ".join(f"{c}: {len(set(per[c]))} ({len(per[c])})" for c in cells))
print("steps", " | ".join(f"{c}: {problems} problems, {steps[c]} steps" for c in cells))
