"""A comparison executor on the steps that decide: the last steps of N-digit comparisons, per top digit pair.

    python lab/diagnosis/top_pairs.py OP DIGITS PER_PAIR LAST TIERS [TOP_DIGITS_OF_A]

For each top digit pair (a0, b0) (a0 among TOP_DIGITS_OF_A, default 1-9; b0 1-9), PER_PAIR comparisons
of two DIGITS-digit operands with those top digits and random digits below (seed 7), the last LAST
transitions of each run of OP's machine (gt: also DIV's calls) asked of each tier's executor (teacher-forced,
as `long_sum_tops.py` asks them). Prints the wrong steps per pair. A comparison's
answer is its top differing digits', so the step that moves the heads onto the top pair (the third
from the end) decides nearly every random problem: rebuild 2's executor_lt answered 1 < 9 False there.
"""

import random
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from long_sum_tops import runs_of, step_right  # noqa: E402

from caef_bench.evaluate.onestep import generate_in_batches  # noqa: E402
from caef_bench.machines import run  # noqa: E402
from caef_bench.runtime.hf import load_step_model  # noqa: E402


def main() -> None:
    op, digits, per_pair, last = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    tops_of_a = sys.argv[6] if len(sys.argv) > 6 else "123456789"
    rng = random.Random(7)
    cases = []
    for a0 in tops_of_a:
        for b0 in "123456789":
            for _ in range(per_pair):
                a = int(a0 + "".join(rng.choice("0123456789") for _ in range(digits - 1)))
                b = int(b0 + "".join(rng.choice("0123456789") for _ in range(digits - 1)))
                for machine_run in runs_of(run(op, a, b), op):
                    cases += [((a0, b0), *machine_run.transition(i))
                              for i in range(max(0, len(machine_run) - last), len(machine_run))]
    for tier in sys.argv[5].split(","):
        model = load_step_model("tiny", tier, device="cpu")
        outputs = generate_in_batches(model, f"executor_{op}", [prompt for _, prompt, _ in cases])
        wrong = Counter(pair for (pair, _, expected), output in zip(cases, outputs)
                        if not step_right(output, expected))
        print(f"{tier}: {op}, {digits} digits, {len(cases)} steps, {sum(wrong.values())} wrong",
              dict(sorted(wrong.items())), flush=True)


if __name__ == "__main__":
    main()
