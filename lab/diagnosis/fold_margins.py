"""How far folding the adapters into the base (`runtime.hf.MergedAdapters`) moves the logits, against how
close the greedy decisions come to a tie: the folded model can decode differently only where a
decision's top-two margin is below twice the largest move.

    python lab/diagnosis/fold_margins.py [--cells add_10,sub_5,gt_5,div_1_10] [--problems 3]

Solves the cells' first problems (and the shipped weights' known wrong or unparseable runs, where a
model is off its course and margins are smallest) traced with peft's switching, then feeds every
step's prompt and output to both models and prints the smallest top-two margins over every decision
and the largest logit difference between them.
"""

from __future__ import annotations

import argparse

import torch

from caef_bench.data.testsets import load_cell
from caef_bench.evaluate.suites import as_problems
from caef_bench.models.positions import position_ids
from caef_bench.runtime import solve_batch
from caef_bench.runtime.hf import load_step_model

# runs the shipped weights get wrong (their committed records): a comparison decided wrongly, an aligner
# (I) output that does not parse, a multiplication answered wrongly
KNOWN_WRONG = {"repeated_lt_10_mixed": ["repeated_lt_10_mixed-0098", "repeated_lt_10_mixed-0185"],
               "repeated_eq_100_p1": ["repeated_eq_100_p1-0002"], "mul_1_10": ["mul_1_10-0082"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", default="add_10,sub_5,gt_5,div_1_10")
    parser.add_argument("--problems", type=int, default=3)
    args = parser.parse_args()
    unfolded = load_step_model("tiny", merge_adapters=False)
    folded = load_step_model("tiny", merge_adapters=True)
    problems = [p for cell, ids in KNOWN_WRONG.items() for p in as_problems(load_cell(cell)) if p.id in ids]
    problems += [p for cell in args.cells.split(",") for p in as_problems(load_cell(cell)[:args.problems])]
    margins, moved = [], 0.0
    for record in solve_batch(problems, unfolded, mode="traced"):
        for step in record.steps:
            codec = unfolded.codec_for(step.adapter)
            prompt = codec.prompt_ids(step.input)
            ids = prompt + codec.completion_ids(step.output + (step.beyond or ""))
            inputs = dict(input_ids=torch.tensor([ids]), position_ids=torch.tensor([position_ids(ids, codec.scheme)]))
            with torch.no_grad():
                unfolded.activate(step.adapter)
                before = unfolded.model(**inputs).logits[0, len(prompt) - 1:-1]
                after = folded.merged.model(step.adapter)(**inputs).logits[0, len(prompt) - 1:-1]
            top = before.topk(2, -1).values
            margins += (top[:, 0] - top[:, 1]).tolist()
            moved = max(moved, (before - after).abs().max().item())
    margins.sort()
    print(f"{len(problems)} problems, {len(margins)} greedy decisions; smallest top-two margins "
          f"{', '.join(f'{m:.4f}' for m in margins[:5])}; largest logit move from folding {moved:.2e}")


if __name__ == "__main__":
    main()
