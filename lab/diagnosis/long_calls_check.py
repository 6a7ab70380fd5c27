"""One step of the ADD (or GREATER_THAN) calls that mul_1_10's and div_1_10's problems make on operands of 11 or
more digits, teacher-forced: each SmolLM2 adapter folder's greedy output against the machine's, in bfloat16.
The steps are drawn with seed 0 and shuffled; --skip passes over the first ones (a second, disjoint sample).

    python lab/diagnosis/long_calls_check.py add checkpoints/smollm2-135m-pending,work/try_add_r7 --n 400 --skip 100
"""
import argparse
import random

from caef_bench.data.testsets import load_cell
from caef_bench.evaluate.onestep import generate_in_batches
from caef_bench.machines import run
from caef_bench.models.names import adapter_name
from caef_bench.runtime.hf import load_step_model

MACHINES = {"add": "ADD", "gt": "GREATER_THAN"}

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("op", choices=sorted(MACHINES))
parser.add_argument("folders", help="comma-separated adapter folders (official layout)")
parser.add_argument("--n", type=int, default=100, help="steps to check")
parser.add_argument("--skip", type=int, default=0, help="steps of the shuffled draw passed over first")
args = parser.parse_args()

machine, rng, cases = MACHINES[args.op], random.Random(0), []
for cell, composer in (("mul_1_10", "mul"), ("div_1_10", "div")):
    for row in load_cell(cell):
        for _, callee in run(composer, int(row["a"]), int(row["b"])).calls():
            if callee.machine == machine and max(len(t.digits) for t in callee.snapshot(0).state.tapes) >= 11:
                cases.append(callee.transition(rng.randrange(len(callee))))
rng.shuffle(cases)
cases = cases[args.skip:args.skip + args.n]
print(f"{len(cases)} steps of {machine} calls on operands of 11+ digits", flush=True)
for folder in args.folders.split(","):
    model = load_step_model("smollm2-135m", folder, dtype="bfloat16")
    got = generate_in_batches(model, adapter_name("executor", args.op), [prompt for prompt, _ in cases])
    misses = [(prompt, want, out) for out, (prompt, want) in zip(got, cases) if out != want]
    print(f"{folder}: {len(cases) - len(misses)}/{len(cases)} right", flush=True)
    for prompt, want, out in misses[:5]:
        for label, text in (("prompt", prompt), ("want", want), ("got", out)):
            print(f"  {label + ':':8}{text.replace(chr(10), ' / ')}")
