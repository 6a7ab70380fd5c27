"""An executor on the last steps (or every step) of its runs in long problems: where a 100-digit run breaks.

    python lab/diagnosis/long_sum_tops.py --checkpoints A,B [--problems 200] [--last 15] [--seed 1]
    python lab/diagnosis/long_sum_tops.py --checkpoints A --from-test-sets
    python lab/diagnosis/long_sum_tops.py --checkpoints A --executor add --cells mul_1_10 --last 0 \
        --from-test-sets --ids mul_1_10-0063,mul_1_10-0084
    python lab/diagnosis/long_sum_tops.py --checkpoints A --cells repeated_add_100_p1,repeated_sub_100_p1 --last 0
    python lab/diagnosis/long_sum_tops.py --checkpoints A --executor gt --cells repeated_gt_100_p1,gt_100 --last 0

For --problems additions and subtractions of two random 100-digit operands, the last --last
transitions of every ADD run (the addition's own; the subtraction's calls of ADD), each asked of the
candidate with the machine's input; a step counts as the runtime takes it (`machines.split_step_end`).
The one-step gate draws one step of a 101-step run, so a step near the top that fails once in a few
hundred runs passes it (round 2f: 99.9% one step at add_100, 96.5% of runs right); here every such
step of every problem is asked.

--executor (default add) picks whose runs: every run of that machine anywhere in a problem's calls
(gt: a comparison's own run and DIV's calls of GREATER_THAN; left_mask: SUB's calls), each step asked
of that executor's adapter.

The problems are the cells' own generator drawn with --seed instead of the test sets' seed
(`data.testsets.generate_cell`), less any problem of the test set: a candidate chosen by this gate is
not chosen on the problems the tables score it on. --cells (default add_100,sub_100) takes any cell
whose problems run the executor, the repeated-digit ones included (`repeated_add_100_p1`: runs of one
digit); --last 0 asks every step of every run, where a structured run breaks mid-field.
--from-test-sets asks the first --problems of the cells' test sets instead (--ids: the problems named),
to explain an evaluation's failures (round 2f's: exactly its end-to-end failures).
"""

from __future__ import annotations

import argparse
import json

from caef_bench.data.testsets import CELLS, generate_cell, load_cell
from caef_bench.evaluate.onestep import generate_in_batches
from caef_bench.machines import BY_MACHINE, EXECUTOR_OPS, ComposerRun, Run, run, split_step_end
from caef_bench.runtime.hf import load_step_model

PIECE = 1024  # steps asked between two progress lines


def held_out_problems(cell: str, problems: int, seed: int) -> list[dict]:
    """The first `problems` of the cell drawn with `seed`, none of them in its test set."""
    in_test_set = {(p["a"], p["b"]) for p in load_cell(cell)}
    drawn = [p for p in generate_cell(cell, seed) if (p["a"], p["b"]) not in in_test_set][:problems]
    if len(drawn) < problems:
        raise SystemExit(f"{cell} drawn with seed {seed} holds {len(drawn)} problems outside its test set, "
                         f"fewer than --problems {problems}")
    return [{**p, "id": f"{cell}-drawn{seed}-{i + 1:04d}"} for i, p in enumerate(drawn)]


def step_right(output: str, expected: str) -> bool:
    """Whether an executor's output is the machine's next step, as the runtime takes it (up to the step's end)."""
    return split_step_end(output)[0] == expected


def runs_of(machine_run: Run, op: str) -> list[Run]:
    """Every run of `op`'s machine in `machine_run`'s calls, itself included, in the order they run."""
    own = [machine_run] if BY_MACHINE[machine_run.machine].name == op else []
    calls = machine_run.calls() if isinstance(machine_run, ComposerRun) else []
    return own + [inner for _, callee in calls for inner in runs_of(callee, op)]


def top_steps(cells: list[str], problems: int, last: int, seed: int | None = 1,
              executor: str = "add", ids: set[str] | None = None) -> list[tuple[str, str, str, str]]:
    """(cell, "<problem id> call <n> step <i>", input, output) of the last `last` transitions (every one where it is 0) of
    each run of `executor`'s machine; the problems drawn with `seed`, or the test sets' own where it is None
    (those named in `ids` alone, where given)."""
    cases = []
    for cell in cells:
        if cell not in CELLS:
            raise SystemExit(f"unknown cell {cell!r}; known cells: {', '.join(CELLS)}")
        op = CELLS[cell].op
        if seed is None:
            chosen = [p for p in load_cell(cell) if p["id"] in ids] if ids else load_cell(cell)[:problems]
        else:
            chosen = held_out_problems(cell, problems, seed)
        asked = len(cases)
        for problem in chosen:
            # (a composer calls a machine on some operands only: MUL calls no ADD where b is 1)
            machine_runs = runs_of(run(op, int(problem["a"]), int(problem["b"])), executor)
            for call, machine_run in enumerate(machine_runs):
                first = 0 if last == 0 else max(0, len(machine_run) - last)
                cases += [(cell, f"{problem['id']} call {call} step {i}", *machine_run.transition(i))
                          for i in range(first, len(machine_run))]
        if len(cases) == asked:
            raise SystemExit(f"{cell} is a {op} cell: none of its {len(chosen)} problems runs a {executor} machine")
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", required=True, help="comma-separated adapter folders (tiny tier)")
    parser.add_argument("--problems", type=int, default=200)
    parser.add_argument("--executor", default="add", choices=EXECUTOR_OPS,
                        help="whose runs are asked (default add: ADD runs, SUB's calls of ADD among them)")
    parser.add_argument("--cells", default="add_100,sub_100", help="comma-separated cells whose problems run it")
    parser.add_argument("--last", type=int, default=15, help="the last this many steps of each run; 0: every step")
    parser.add_argument("--seed", type=int, default=1, help="the draw of the held-out problems (default 1)")
    parser.add_argument("--from-test-sets", action="store_true",
                        help="the first --problems of the cells' test sets, not held-out ones")
    parser.add_argument("--ids", help="with --from-test-sets: only these problems (comma-separated ids, e.g. an "
                                          "evaluation's wrong ones), whatever --problems says")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", help="also write every wrong step here (where, input, expected, output)")
    args = parser.parse_args()
    cells = args.cells.split(",")
    if args.ids and not args.from_test_sets:
        parser.error("--ids names test-set problems: it needs --from-test-sets")
    ids = set(args.ids.split(",")) if args.ids else None
    cases = top_steps(cells, args.problems, args.last, None if args.from_test_sets else args.seed, args.executor, ids)
    problems = (f"problems {args.ids}" if ids else
                f"the first {args.problems} problems of {', '.join(cells)}" if args.from_test_sets else
                f"{args.problems} held-out problems (seed {args.seed}) of each of {', '.join(cells)}")
    steps = "every step" if args.last == 0 else f"the last {args.last}"
    print(f"{len(cases)} steps: {steps} of every {args.executor} run of {problems}", flush=True)
    for checkpoints in args.checkpoints.split(","):
        model = load_step_model("tiny", checkpoints, device=args.device)
        misses = []
        # In pieces, each piece's misses written as it ends: a run stopped at its time (a device call)
        # keeps what it asked, and says how far it got.
        for start in range(0, len(cases), PIECE):
            piece = cases[start:start + PIECE]
            outputs = generate_in_batches(model, f"executor_{args.executor}", [prompt for _, _, prompt, _ in piece])
            found = [{"checkpoints": checkpoints, "cell": cell, "where": where, "input": prompt, "expected": expected,
                      "output": output}
                     for (cell, where, prompt, expected), output in zip(piece, outputs)
                     if not step_right(output, expected)]
            misses += found
            if args.json:
                with open(args.json, "a", encoding="utf-8") as out:
                    out.writelines(json.dumps(miss) + "\n" for miss in found)
            print(f"{checkpoints}: {start + len(piece)} of {len(cases)} steps asked, {len(misses)} wrong", flush=True)
        wrong = {cell: [m["where"].split(" ")[0] for m in misses if m["cell"] == cell] for cell in cells}
        summary = "; ".join(f"{cell}: {len(ids)} steps wrong, problems {' '.join(sorted(set(ids)))}"
                            for cell, ids in wrong.items() if ids)
        print(f"{checkpoints}: {summary or 'every step right'}", flush=True)
        for miss in misses[:20]:
            print(f"  {miss['where']}", flush=True)


if __name__ == "__main__":
    main()
