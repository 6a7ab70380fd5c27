"""each wrong comparison step: no-op (writes the OUTPUT it already holds), overwritten later (a later step writes OUTPUT), or final (decides the answer)"""
import json, re, sys
sys.path.insert(0, "benchmarks/diagnosis")
from long_sum_tops import top_steps
executor, problems, cells = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
cases = {(c, w): (i, o) for c, w, i, o in top_steps(cells, problems, 0, 1, executor)}
for f in sys.argv[4:]:
    for line in open(f):
        m = json.loads(line)
        cell, where = m["cell"], m["where"]
        prob, step = where.rsplit(" step ", 1)
        current = re.search(r"\[OUTPUT\](\w+)", m["input"].split("\n")[0]).group(1)
        wrote = re.search(r"\[OUTPUT\] (\w+)", m["output"].split("\n")[-1])
        if m["expected"].split("\n")[0] != m["output"].split("\n")[0]:
            kind = "state line wrong"
        elif wrote and wrote.group(1) == current and "[OUTPUT]" not in m["expected"].split("\n")[-1]:
            kind = "no-op"
        else:
            later = [cases[cell, f"{prob} step {j}"] for j in range(int(step) + 1, len(cases))
                     if (cell, f"{prob} step {j}") in cases]
            kind = "overwritten later" if any("[OUTPUT]" in o.split("\n")[-1] for _, o in later) else "decides the answer"
        print(m["checkpoints"], where, kind)
