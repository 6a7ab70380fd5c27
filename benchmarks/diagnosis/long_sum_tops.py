"""executor_add on the last steps of long sums, teacher-forced: where a 100-digit addition breaks.

    python benchmarks/diagnosis/long_sum_tops.py --checkpoints A,B [--problems 200] [--last 15] [--seed 1]
    python benchmarks/diagnosis/long_sum_tops.py --checkpoints A --from-test-sets

For --problems additions and subtractions of two random 100-digit operands, the last --last
transitions of every ADD run (the addition's own; the subtraction's calls of ADD), each asked of the
candidate with the machine's input; a step counts as the runtime takes it (`machines.split_step_end`).
The one-step gate draws one step of a 101-step run, so a step near the top that fails once in a few
hundred runs passes it (round 2f: 99.9% one step at add_100, 96.5% of runs right); here every such
step of every problem is asked.

The problems are drawn with --seed, held out from the test sets, as Table 1's add_100 and sub_100 are
(two operands of 100 digits): a candidate chosen by this gate is not chosen on the problems Table 1
scores it on. --from-test-sets asks the first --problems of those two cells instead, to explain an
evaluation's failures (round 2f's: exactly its end-to-end failures).
"""

from __future__ import annotations

import argparse
import random

from caef_bench.data.testsets import load_cell
from caef_bench.data.training import draw_operands
from caef_bench.evaluate.onestep import generate_in_batches
from caef_bench.machines import run, split_step_end
from caef_bench.runtime.hf import load_step_model


def held_out_problems(cell: str, problems: int, seed: int) -> list[dict]:
    """`problems` pairs of two random operands of the cell's length, none of them in its test set."""
    op, digits = cell.split("_")
    in_test_set = {(p["a"], p["b"]) for p in load_cell(cell)}
    rng = random.Random(f"long_sum_tops:{seed}:{cell}")
    drawn = []
    while len(drawn) < problems:
        a, b = draw_operands(op, (int(digits), int(digits)), rng)
        if (str(a), str(b)) not in in_test_set:
            drawn.append({"id": f"{cell}-drawn{seed}-{len(drawn) + 1:04d}", "a": str(a), "b": str(b)})
    return drawn


def top_steps(problems: int, last: int, seed: int | None = 1) -> list[tuple[str, str, str, str]]:
    """(cell, problem id, input, output) of the last `last` transitions of each ADD run; the problems
    drawn with `seed`, or Table 1's own where it is None."""
    cases = []
    for cell in ("add_100", "sub_100"):
        chosen = load_cell(cell)[:problems] if seed is None else held_out_problems(cell, problems, seed)
        for problem in chosen:
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
    parser.add_argument("--seed", type=int, default=1, help="the draw of the held-out problems (default 1)")
    parser.add_argument("--from-test-sets", action="store_true",
                        help="the first --problems of Table 1's add_100 and sub_100, not held-out ones")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    cases = top_steps(args.problems, args.last, None if args.from_test_sets else args.seed)
    problems = (f"the first {args.problems} problems of add_100 and sub_100" if args.from_test_sets else
                f"{args.problems} held-out 100-digit additions and subtractions (seed {args.seed})")
    print(f"{len(cases)} steps: the last {args.last} of every ADD run of {problems}", flush=True)
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
