"""`caef-bench solve` starts with what its problem uses: the adapters it calls, and no evaluation
libraries (lm-eval, pandas, matplotlib). Timing is measured by benchmarks/bench_serving.py, not here."""

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PROBE = """
import json, sys
import caef_bench.runtime.hf as hf
from caef_bench.cli import main

made = []
load = hf.load_step_model
hf.load_step_model = lambda *a, **k: made.append(load(*a, **k)) or made[-1]
code = main(["solve", sys.argv[1]])
heavy = sorted({name.split(".")[0] for name in sys.modules} & {"lm_eval", "pandas", "matplotlib", "fastapi", "datasets"})
print(json.dumps({"code": code, "adapters": sorted(made[0].model.peft_config), "heavy": heavy}))
"""


def test_solve_attaches_only_the_adapters_its_problem_calls_and_imports_no_evaluation_libraries():
    done = subprocess.run([sys.executable, "-c", PROBE, "12+34="], cwd=REPO, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.splitlines()[-1])
    assert report == {"code": 0, "adapters": ["aligner_add", "executor_add"], "heavy": []}
