"""executor_add on the last steps of long sums, teacher-forced: where a 100-digit addition breaks.

    python benchmarks/diagnosis/long_sum_tops.py --checkpoints A,B [--problems 200] [--last 15]

For the first --problems of Table 1's add_100 and sub_100 cells, the last --last transitions of every
ADD run (add_100's own; SUB's calls of ADD on sub_100), each asked of the candidate with the machine's
input; a step counts as the runtime takes it (`machines.split_step_end`). The one-step gate draws one
step of a 101-step run, so a step near the top that fails once in a few hundred runs passes it (round
2f: 99.9% one step at add_100, 96.5% of runs right); here every such step of every problem is asked.
"""

from __future__ import annotations

import argparse

from caef_bench.data.testsets import load_cell
from caef_bench.evaluate.onestep import generate_in_batches
from caef_bench.machines import run, split_step_end
from caef_bench.runtime.hf import load_step_model


def top_steps(problems: int, last: int) -> list[tuple[str, str, str, str]]:
    """(cell, problem id, input, output) of the last `last` transitions of each ADD run."""
    cases = []
    for cell in ("add_100", "sub_100"):
        for problem in load_cell(cell)[:problems]:
            machine_run = run(cell.split("_")[0], int(problem["a"]), int(problem["b"]))
            adds = [machine_run] if cell == "add_100" else [
                phase.callee for phase in machine_run.phases if phase.callee is not None and phase.callee.machine == "ADD"]
            for add in adds:
                cases += [(cell, problem["id"], *add.transition(i)) for i in range(max(0, len(add) - last), len(add))]
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", required=True, help="comma-separated adapter folders (tiny tier)")
    parser.add_argument("--problems", type=int, default=200)
    parser.add_argument("--last", type=int, default=15)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    cases = top_steps(args.problems, args.last)
    print(f"{len(cases)} steps: the last {args.last} of every ADD run of the first {args.problems} problems "
          f"of add_100 and sub_100", flush=True)
    for checkpoints in args.checkpoints.split(","):
        model = load_step_model("tiny", checkpoints, device=args.device)
        wrong: dict[str, list[str]] = {}
        outputs = generate_in_batches(model, "executor_add", [prompt for _, _, prompt, _ in cases])
        for (cell, problem_id, _, expected), output in zip(cases, outputs):
            if split_step_end(output)[0] != expected:
                wrong.setdefault(cell, []).append(problem_id)
        found = "; ".join(f"{cell}: {len(ids)} steps wrong, problems {' '.join(sorted(set(ids)))}"
                          for cell, ids in wrong.items())
        print(f"{checkpoints}: {found or 'every step right'}", flush=True)


if __name__ == "__main__":
    main()
