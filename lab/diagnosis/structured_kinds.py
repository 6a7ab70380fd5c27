"""One-step accuracy of every adapter per structured operand kind against random operands
(docs/structured-operands.md): which components fail on which class of operands.

    python lab/diagnosis/structured_kinds.py [--cases 16] [--lengths 10,50,100] [--only executor_add]
        [--checkpoints DIR]

For each adapter (executors; aligners split into (I), expression to start state, and (O), halt state
to answer), length and kind (`caef_bench.data.structured`), `--cases` cases drawn with a seed named
after all three, decoded greedily in one batch; prints right/total per kind.
"""

from __future__ import annotations

import argparse

from caef_bench.data.structured import KINDS, SAMPLERS
from caef_bench.data.testsets import named_rng, render_expr, solve
from caef_bench.data.training import draw_operands
from caef_bench.machines import OPERATIONS, run
from caef_bench.models.names import adapter_name
from caef_bench.runtime.hf import load_step_model


def length_class(op: str, n: int) -> tuple[int, int]:
    """The operand lengths of a case at length n: mul and div as their 1-10 cells, left_mask one tape."""
    if op in ("mul", "div"):
        return (min(n, 10), 7)
    return (n, 0) if op == "left_mask" else (n, n)


def cases(kind: str, op: str, n: int, part: str, count: int, rng) -> list[tuple[str, str]]:
    drawn = []
    for _ in range(count):
        if kind == "random":
            a, b = draw_operands(op, length_class(op, n), rng)
        else:
            a, b = SAMPLERS[kind].pair(rng, op, length_class(op, n))
        machine_run = run(op, a, b)
        if part == "executor":
            drawn.append(machine_run.transition(rng.randrange(len(machine_run))))
        elif part == "I":
            drawn.append((render_expr(op, a, b), machine_run.start_text()))
        else:
            drawn.append((machine_run.text(-1), render_expr(op, a, b) + solve(op, a, b)))
    return drawn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=16)
    parser.add_argument("--lengths", default="10,50,100")
    parser.add_argument("--only", help="comma-separated substrings of the adapter labels to measure")
    parser.add_argument("--checkpoints")
    args = parser.parse_args()
    model = load_step_model("tiny", args.checkpoints)
    symbols = [op for op in OPERATIONS if OPERATIONS[op].symbol]
    parts = [("executor", op) for op in OPERATIONS] + [("I", op) for op in symbols] + [("O", op) for op in symbols]
    for part, op in parts:
        name = adapter_name("executor" if part == "executor" else "aligner", op)
        label = name + ("" if part == "executor" else f" ({part})")
        if args.only and not any(o in label for o in args.only.split(",")):
            continue
        codec = model.codec_for(name)
        for n in [10] if op in ("mul", "div") else [int(x) for x in args.lengths.split(",")]:
            line = []
            for kind in ("random",) + KINDS:
                if kind != "random" and not SAMPLERS[kind].applies_to(op):
                    continue
                drawn = cases(kind, op, n, part, args.cases, named_rng(0, f"probe/{label}/{kind}/{n}"))
                limits = [len(codec.completion_ids(expected)) + 1 for _, expected in drawn]
                outputs = [c.text for c in model.generate([prompt for prompt, _ in drawn], name, limits)]
                line.append(f"{kind}={sum(o == e for o, (_, e) in zip(outputs, drawn))}/{args.cases}")
            print(f"{label:28s} {n:4d} " + " ".join(line), flush=True)


if __name__ == "__main__":
    main()
