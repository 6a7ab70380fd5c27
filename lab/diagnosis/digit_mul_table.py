"""Which of DIGIT_MUL's steps executor_digit_mul gets wrong: by (a's digit, the digit, carry) and by column.

    python lab/diagnosis/digit_mul_table.py --checkpoints work/tiny_digit_try [--problems 200] [--digits 20]
    python lab/diagnosis/digit_mul_table.py --checkpoints work/tiny_digit_try --attend 3 [--problems 2]

Teacher-forced: every q1 step of DIGIT_MUL runs on random a of `--digits` digits and every digit 1-9, the
machine's own text fed in, one forward pass a step. A step is wrong where any completion token's argmax is
not the machine's. Prints the rate by the column's product x·d + c (the value whose digit and carry the
step writes), by the column's place in a, by which token is first wrong, and the (x, d, c) columns missed
most. It tells a times-table miss (the same columns wrong wherever they sit) from a read miss (columns
wrong at some places only). With --attend N: for the first N steps, right or wrong, every head's strongest
keys at the query that writes the product digit (token@position id, p(rompt) or c(ompletion)).
"""

from __future__ import annotations

import argparse
import random
from collections import Counter, defaultdict
from itertools import islice

import torch

from caef_bench.machines import run
from caef_bench.models.tokenizer import VOCAB
from caef_bench.runtime.hf import load_step_model
from aligner_attention import _eager  # this folder
from executor_attention import print_heads, teacher_forced

ADAPTER = "executor_digit_mul"


def q1_steps(problems: int, digits: int, seed: int):
    """(x, d, c, column, source, target) of every q1 step that writes a product digit."""
    rng = random.Random(seed)
    for _ in range(problems):
        a = rng.randrange(10 ** (digits - 1), 10 ** digits)
        d = rng.randrange(1, 10)
        machine_run = run("digit_mul", a, d)
        cells = str(a)[::-1]
        carry = 0
        # transition(k) writes column k's command: its target's HEAD1 stands on cell k (k = 0: q0 -> q1)
        for column in range(len(cells)):
            source, target = machine_run.transition(column)
            x = int(cells[column])
            yield x, d, carry, column, source, target
            carry = (x * d + carry) // 10


def attend(step_model, steps, count: int, query_of: str = "digit", top: int = 3) -> None:
    _eager(step_model.model)  # attention weights come from the eager implementation only
    for x, d, c, column, source, target in islice(steps, count):
        prompt_length, ids, positions, out = teacher_forced(step_model, source, target, True, ADAPTER)
        # the digit follows the command line's first `[OUTPUT] ` (the state line's is the first of all), the
        # carry its `[C] `: the query is the space before it
        mark = "[OUTPUT]" if query_of == "digit" else "[C]"
        query = [j for j in range(prompt_length, len(ids)) if VOCAB[ids[j]] == mark][1] + 1
        predicted = VOCAB[int(out.logits[0, query].argmax())]
        print(f"== column {column}: x={x} d={d} c={c}, {query_of} {VOCAB[ids[query + 1]]!r}, predicted {predicted!r}; "
              f"query id {positions[query]}")
        print_heads(torch.stack(out.attentions)[:, 0], query, ids, positions, prompt_length, top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", required=True)
    parser.add_argument("--problems", type=int, default=200)
    parser.add_argument("--digits", type=int, default=20)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--attend", type=int, default=0, help="show the digit query's attention on this many steps")
    parser.add_argument("--query", choices=("digit", "carry"), default="digit", help="--attend: which write's query")
    args = parser.parse_args()
    step_model = load_step_model("tiny", args.checkpoints)
    step_model.activate(ADAPTER)
    if args.attend:
        attend(step_model, q1_steps(args.problems, args.digits, args.seed), args.attend, args.query)
        return
    by_value, by_column, by_triple, by_carry, by_digit = (defaultdict(lambda: [0, 0]) for _ in range(5))
    first_wrong = Counter()
    total = wrong = 0
    for x, d, c, column, source, target in q1_steps(args.problems, args.digits, args.seed):
        prompt_length, ids, _, out = teacher_forced(step_model, source, target, adapter=ADAPTER)
        predicted = out.logits[0].argmax(-1).tolist()
        misses = [j for j in range(prompt_length, len(ids)) if predicted[j - 1] != ids[j]]
        value = x * d + c
        for table, key in ((by_value, value), (by_column, column), (by_triple, (x, d, c)),
                           (by_carry, (column > 0, c)), (by_digit, (column > 0, d))):
            table[key][0] += 1
            table[key][1] += bool(misses)
        total += 1
        if misses:
            wrong += 1
            j = misses[0]
            context = "".join(VOCAB[i] for i in ids[max(prompt_length, j - 4):j])
            first_wrong[f"...{context!r}: {VOCAB[ids[j]]!r}->{VOCAB[predicted[j - 1]]!r}"] += 1
    print(f"{args.checkpoints}: {wrong} of {total} q1 steps with a mispredicted token")
    print("by x·d + c (steps, wrong): " + ", ".join(f"{v}:{n}/{w}" for v, (n, w) in sorted(by_value.items()) if w))
    print("by column: " + ", ".join(f"{k}:{w}/{n}" for k, (n, w) in sorted(by_column.items())))
    print("by (past column 0, carry in): " + ", ".join(f"{k}:{w}/{n}" for k, (n, w) in sorted(by_carry.items())))
    # d = 1 is a copy (its carry is always 0) and column 0 a product with no carry in: misses by d tell a times
    # table (d > 1 past column 0) from a read (d = 1 too)
    print("by (past column 0, the digit d): " + ", ".join(f"{k}:{w}/{n}" for k, (n, w) in sorted(by_digit.items())))
    print("first wrong token (context: expected->predicted):")
    for text, n in first_wrong.most_common(15):
        print(f"  {n:4d}  {text}")
    worst = sorted(by_triple.items(), key=lambda item: -item[1][1] / item[1][0])[:20]
    print("most missed (x, d, c): " + ", ".join(f"{key}:{w}/{n}" for key, (n, w) in worst if w))


if __name__ == "__main__":
    main()
