"""Whole problems, teacher-forced, on fresh operands: how many problems an adapter would get right end to
end, measured at a tenth of an end-to-end run's cost and on problems no test set holds.

    python lab/diagnosis/fresh_problems.py --out work/smollm2_r5 --adapter executor_add \
        [--base smollm2-135m] [--lengths 5,10] [--n 100] [--seed 777]

For each length, n random operand pairs of that length (both operands; drawn from --seed, never a test
set's), and for each pair every case the adapter meets when CAEF solves it: an executor every transition
of the machine's run, an aligner both conversions (expression -> start state, halt state -> answer). A
problem is right when all its cases are (greedy exact match: verify_drafts under the true prefix), which
is what an end-to-end run gets from that adapter once the other adapters are right. The one-step check
(training_progress.py) scores single steps drawn anywhere; a 10-digit addition needs all 11 of its steps,
and a step type that is one in 28 (a carry making 10) fails one problem in ten there while one-step reads
50/50. Measured against lm-eval at N=100 on SmolLM2: aligner_gt 93/100 here, 92 end to end; executor_add
93/100 here, 91 end to end (docs/smollm2.md). The adapter is read as training_progress.py reads it (a
finished folder or a run's newest checkpoint); nothing is written.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import torch
from training_progress import exact_match, latest_weights, lora_model

SHOWN = 5  # wrong problems printed per length


def problem_cases(kind: str, op: str, a: int, b: int) -> list[tuple[str, str]]:
    """(prompt, completion) of every call CAEF makes to this adapter on a op b."""
    from caef_bench.data.testsets import render_expr, solve
    from caef_bench.machines import run

    machine_run = run(op, a, b)
    if kind == "executor":
        return [machine_run.transition(step) for step in range(len(machine_run))]
    expr = render_expr(op, a, b)
    return [(expr, machine_run.start_text()), (machine_run.text(-1), expr + solve(op, a, b))]


def main() -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from caef_bench.data.testsets import render_expr
    from caef_bench.data.training import draw_operands
    from caef_bench.models.codec import codec_for
    from caef_bench.models.names import split_adapter_name
    from caef_bench.models.tiny import tier_info
    from caef_bench.train.recipe import base_folder

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the training command's --out")
    parser.add_argument("--adapter", required=True, help="executor_<op> or aligner_<op>")
    parser.add_argument("--base", default="smollm2-135m", help="the training command's --base")
    parser.add_argument("--lengths", default="10", help="operand lengths, comma-separated")
    parser.add_argument("--n", type=int, default=100, help="problems per length")
    parser.add_argument("--seed", type=int, default=777)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    kind, op = split_adapter_name(args.adapter)
    if kind not in ("executor", "aligner"):
        raise SystemExit(f"{args.adapter}: an executor or aligner (a LoRA-direct adapter answers directly: "
                         "evaluate.direct)")
    found = latest_weights(Path(args.out), args.adapter)
    if found is None:
        raise SystemExit(f"no weights of {args.adapter} under {args.out}")
    what, source, plan = found
    base = base_folder(args.base)
    codec = codec_for(AutoTokenizer.from_pretrained(base), tier_info(base).get("position_scheme", "standard"))
    model = lora_model(AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32), args.adapter, source, plan)
    for length in (int(n) for n in args.lengths.split(",") if n):
        rng = random.Random(f"fresh/{args.seed}/{op}/{length}")
        wrong = []
        for _ in range(args.n):
            a, b = draw_operands(op, (length, length), rng)
            cases = problem_cases(kind, op, a, b)
            right, first_wrong, _ = exact_match(model, codec, cases, batch=len(cases))
            if right < len(cases):
                wrong.append((render_expr(op, a, b), first_wrong[0]))
        print(f"{args.adapter} ({what}, {args.out}) {length} digits: {args.n - len(wrong)}/{args.n} problems right",
              flush=True)
        for expr, case in wrong[:SHOWN]:
            print(f"    {expr}: expected {case['expected']!r}")
            print(f"    {'':<{len(expr)}}  got      {case['got (to the first miss)']!r}")


if __name__ == "__main__":
    main()
