"""What the every-step gate's wrong steps add up to: `long_sum_tops.py --json` files read back.

    python lab/diagnosis/wrong_steps.py table --executor gt --problems 10 --cells repeated_gt_100_p1,gt_100 FILE...
    python lab/diagnosis/wrong_steps.py effect --executor gt --problems 10 --cells gt_100 FILE...

`table`: per adapter folder (the files' `checkpoints`) and cell, the problems with a wrong step and the
steps wrong, as lab/research/structured-operands-log.md's gate tables write them: `6 (8)`; then how many steps the
gate asked per cell. `effect`: each wrong step of a comparison executor, by what it does to the answer:
`state line wrong` (the tape or heads moved wrongly), `no-op` (writes the OUTPUT the state already
holds), `overwritten later` (a later step of the same run writes OUTPUT: a misread where the digits
are equal), or `decides the answer` (no later step writes it). A comparison's answer is its most
significant differing digits', so only the last kind reaches an answer.

--executor, --problems and --cells are the ones the files were written with (held-out problems,
--seed 1 and --last 0, long_sum_tops.py's defaults for the gate): the steps are drawn again from them.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from long_sum_tops import top_steps  # noqa: E402

from caef_bench.machines import EXECUTOR_OPS  # noqa: E402

WRITES_OUTPUT = re.compile(r"\[OUTPUT\] (\w+)")


def read_misses(files: list[str]) -> list[dict]:
    return [json.loads(line) for name in files for line in Path(name).read_text().splitlines() if line.strip()]


def problem_and_step(where: str) -> tuple[str, int]:
    """'<id> call <n> step <i>' -> ('<id> call <n>', i): a run, and the step in it."""
    run, step = where.rsplit(" step ", 1)
    return run, int(step)


def gate_table(misses: list[dict], cells: list[str]) -> dict[str, dict[str, tuple[int, int]]]:
    """{checkpoints: {cell: (problems with a wrong step, steps wrong)}} for every cell, 0s included."""
    wrong = defaultdict(lambda: defaultdict(list))
    for miss in misses:
        wrong[miss["checkpoints"]][miss["cell"]].append(miss["where"].split(" ")[0])
    return {checkpoints: {cell: (len(set(per_cell[cell])), len(per_cell[cell])) for cell in cells}
            for checkpoints, per_cell in wrong.items()}


def writes_output(step_text: str) -> bool:
    """Whether a step's command writes a verdict (`[OUTPUT] True`); the halting `CMD [OUTPUT], qH` does not."""
    return WRITES_OUTPUT.search(step_text.split("\n")[-1]) is not None


def step_effect(miss: dict, later_expected: list[str]) -> str:
    """What a comparison executor's wrong step does to the answer, given the machine's later steps of its run."""
    state_line = miss["expected"].split("\n")[0]
    if miss["output"].split("\n")[0] != state_line:
        return "state line wrong"
    # the verdict the state holds after this step (the input's command may have just written it)
    held = re.search(r"\[OUTPUT\](\w+)", state_line)
    wrote = WRITES_OUTPUT.search(miss["output"].split("\n")[-1])
    if wrote and held and wrote[1] == held[1] and not writes_output(miss["expected"]):
        return "no-op"
    if any(writes_output(expected) for expected in later_expected):
        return "overwritten later"
    return "decides the answer"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reading", choices=("table", "effect"))
    parser.add_argument("--executor", required=True, choices=EXECUTOR_OPS)
    parser.add_argument("--problems", type=int, required=True)
    parser.add_argument("--cells", required=True, help="comma-separated, as long_sum_tops.py was given them")
    parser.add_argument("files", nargs="+", help="long_sum_tops.py --json files")
    args = parser.parse_args()
    cells = args.cells.split(",")
    misses = read_misses(args.files)
    steps = top_steps(cells, args.problems, 0, 1, args.executor)
    if args.reading == "table":
        for checkpoints, per_cell in gate_table(misses, cells).items():
            print(checkpoints, " | ".join(f"{cell}: {p} ({s})" for cell, (p, s) in per_cell.items()))
        asked = Counter(cell for cell, *_ in steps)
        print("steps", " | ".join(f"{cell}: {args.problems} problems, {asked[cell]} steps" for cell in cells))
        return
    expected = defaultdict(dict)  # run -> step -> the machine's output
    for _, where, _, output in steps:
        run, step = problem_and_step(where)
        expected[run][step] = output
    kinds = Counter()
    for miss in misses:
        run, step = problem_and_step(miss["where"])
        kind = step_effect(miss, [out for i, out in sorted(expected[run].items()) if i > step])
        kinds[miss["checkpoints"], kind] += 1
        print(miss["checkpoints"], miss["where"], kind)
    for (checkpoints, kind), count in sorted(kinds.items()):
        print(f"{checkpoints}: {kind} {count}")


if __name__ == "__main__":
    main()
