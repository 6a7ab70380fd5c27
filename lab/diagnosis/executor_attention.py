"""Where executor_add's step text goes wrong on long runs, and what its heads attend there (docs/structured-operands.md).

    python lab/diagnosis/executor_attention.py scan --checkpoints DIR --cells repeated_add_100_p1,add_100 [--problems 4]
    python lab/diagnosis/executor_attention.py attend --checkpoints DIR --cell repeated_add_100_p1 --problem 1 --step 1
    python lab/diagnosis/executor_attention.py mass --checkpoints DIR --cells repeated_add_100_p1,add_100 --problems 2

Teacher-forced: every step of every ADD run of held-out problems (`long_sum_tops.top_steps`, the same
draw), the machine's own text fed in, one forward pass a step. A step's first mispredicted token is
where greedy decoding would leave the machine's text. `scan` counts, per cell, the steps with one and
where the first one sits (the state line's fields: header, a, b, carry, output; or the command line),
with the commonest (expected -> predicted) pairs. `attend` prints, for each mispredicted token of one
step, every head's strongest keys: token@position id, p(rompt) or c(ompletion). `mass`: at the
completion's second token (after `ADD`: no tape cell to copy there), each layer's attention on the
tape cells, runs of one digit against random operands of the same lengths and ids.
--anonymous-cells on|off runs executor_add with layer 0 reading tape cells alike (models.anonymous_cells)
or without, whatever its manifest says: the counterfactual on weights trained either way.
"""

from __future__ import annotations

import argparse
from collections import Counter

import torch

from aligner_attention import _eager
from long_sum_tops import top_steps
from caef_bench.models.positions import position_ids
from caef_bench.models.tokenizer import TOKEN_ID, VOCAB
from caef_bench.runtime.hf import load_step_model

STATE_FIELDS = {3: "a", 4: "b", 5: "carry", 6: "output"}  # ADD's state line: "ADD, q1,  a b [C]c out"
_NEWLINE, _SPACE = TOKEN_ID["\n"], TOKEN_ID[" "]


def teacher_forced(step_model, source: str, target: str, attentions: bool = False, adapter: str = "executor_add"):
    """(prompt length, ids, position ids, model output) of one step with the machine's text fed in."""
    codec = step_model.codec_for(adapter)
    prompt = codec.prompt_ids(source)
    ids = prompt + codec.completion_ids(target)
    positions = position_ids(ids, codec.scheme)
    with torch.no_grad():
        out = step_model.model(input_ids=torch.tensor([ids]), position_ids=torch.tensor([positions]),
                               output_attentions=attentions)
    return len(prompt), ids, positions, out


def wrong_tokens(prompt_length: int, ids: list[int], out) -> list[int]:
    predicted = out.logits[0].argmax(-1).tolist()
    return [j for j in range(prompt_length, len(ids)) if predicted[j - 1] != ids[j]]


def place(ids: list[int], prompt_length: int, j: int) -> str:
    """Which part of the completion token j is in: a field of the state line, or the command line."""
    before = ids[prompt_length:j]
    if _NEWLINE in before:
        return "command line"
    return STATE_FIELDS.get(sum(1 for i in before if i == _SPACE), "header")


def scan(step_model, cells: list[str], problems: int, seed: int) -> None:
    for cell in cells:
        cases = top_steps([cell], problems, 0, seed)
        broken, places, pairs = [], Counter(), Counter()
        for _, where, source, target in cases:
            prompt_length, ids, _, out = teacher_forced(step_model, source, target)
            wrong = wrong_tokens(prompt_length, ids, out)
            if wrong:
                j = wrong[0]
                broken.append(where)
                places[place(ids, prompt_length, j)] += 1
                pairs[(VOCAB[ids[j]], VOCAB[int(out.logits[0, j - 1].argmax())])] += 1
        print(f"{cell}: {len(broken)} of {len(cases)} steps with a mispredicted token "
              f"({len({w.split(' ')[0] for w in broken})} of {problems} problems)")
        if broken:
            print("  first wrong token in: " + ", ".join(f"{name} {n}" for name, n in places.most_common()))
            print("  expected -> predicted: " + ", ".join(f"{e!r}->{p!r} {n}" for (e, p), n in pairs.most_common(6)))
            print("  first broken steps: " + "; ".join(broken[:6]))


def attend(step_model, cell: str, problem: int, step: int, seed: int, top: int = 4, tokens: int = 3) -> None:
    where_prefix = f"-{problem:04d} call 0 step {step}"
    cases = [c for c in top_steps([cell], problem, 0, seed) if c[1].endswith(where_prefix)]
    if not cases:
        raise SystemExit(f"no step {step} of problem {problem} in {cell}")
    _, where, source, target = cases[0]
    prompt_length, ids, positions, out = teacher_forced(step_model, source, target, attentions=True)
    attention = torch.stack(out.attentions)[:, 0]  # layers, heads, queries, keys
    wrong = wrong_tokens(prompt_length, ids, out)
    print(f"== {where}: {len(wrong)} of {len(ids) - prompt_length} completion tokens mispredicted")
    for j in wrong[:tokens]:
        query = j - 1
        p = torch.softmax(out.logits[0, query], -1)
        context = "".join(VOCAB[i] for i in ids[max(prompt_length, j - 10):j])
        print(f"-- {place(ids, prompt_length, j)}: after {context!r} expected {VOCAB[ids[j]]!r} "
              f"(p {float(p[ids[j]]):.3f}), predicted {VOCAB[int(p.argmax())]!r} (p {float(p.max()):.2f}); "
              f"query id {positions[query]}")
        print_heads(attention, query, ids, positions, prompt_length, top)


def print_heads(attention, query: int, ids: list[int], positions: list[int], prompt_length: int, top: int) -> None:
    """Every head's `top` strongest keys at one query: token@position id, p(rompt) or c(ompletion), weight."""
    for layer in range(attention.shape[0]):
        for head in range(attention.shape[1]):
            weights, keys = attention[layer, head, query].topk(top)
            described = ", ".join(f"{VOCAB[ids[k]]!r}@{positions[k]}{'c' if k >= prompt_length else 'p'} "
                                  f"{float(w):.2f}" for w, k in zip(weights, keys.tolist()))
            print(f"   L{layer}H{head}: {described}")


def cell_mass(step_model, cells: list[str], problems: int, step: int, seed: int) -> None:
    """At one query, the completion's second (after `ADD`, predicting `,`: nothing to copy from a tape),
    each layer's attention mass on the prompt's and completion's tape cells, the mean over its heads."""
    for cell in cells:
        for _, where, source, target in [c for c in top_steps([cell], problems, 0, seed)
                                         if c[1].endswith(f" call 0 step {step}")]:
            prompt_length, ids, _, out = teacher_forced(step_model, source, target, attentions=True)
            attention = torch.stack(out.attentions)[:, 0]  # layers, heads, queries, keys
            is_cell = torch.tensor([VOCAB[i].startswith("|") for i in ids], dtype=attention.dtype)
            query = prompt_length  # the completion's first token, `ADD`
            mass = (attention[:, :, query, :] * is_cell).sum(-1).mean(-1)
            right = float(torch.softmax(out.logits[0, query], -1)[ids[query + 1]])
            print(f"{where}: p({VOCAB[ids[query + 1]]!r}) {right:.3f}; attention on cells by layer "
                  + " ".join(f"{float(m):.2f}" for m in mass))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("scan", "attend", "mass"))
    parser.add_argument("--checkpoints", default="checkpoints/tiny")
    parser.add_argument("--cells", default="repeated_add_100_p1,add_100", help="scan, mass: comma-separated add and sub cells")
    parser.add_argument("--problems", type=int, default=4, help="scan, mass: held-out problems per cell")
    parser.add_argument("--cell", default="repeated_add_100_p1", help="attend: the cell")
    parser.add_argument("--problem", type=int, default=1, help="attend: the held-out problem's number (from 1)")
    parser.add_argument("--step", type=int, default=1, help="attend, mass: the step of the first ADD run")
    parser.add_argument("--seed", type=int, default=1, help="the draw of the held-out problems (long_sum_tops)")
    parser.add_argument("--anonymous-cells", choices=("manifest", "on", "off"), default="manifest",
                        help="run executor_add with anonymous tape cells (models.anonymous_cells) as its manifest "
                             "says, or on or off whatever it says")
    args = parser.parse_args()
    step_model = load_step_model("tiny", args.checkpoints)
    if args.anonymous_cells != "manifest":
        step_model.set_anonymous_cells({"executor_add"} if args.anonymous_cells == "on" else ())
    step_model.activate("executor_add")
    print(f"{args.checkpoints}: executor_add with anonymous cells "
          f"{'on' if 'executor_add' in step_model.anonymous_cells else 'off'}", flush=True)
    if args.mode == "scan":
        scan(step_model, args.cells.split(","), args.problems, args.seed)
        return
    _eager(step_model.model)  # attention weights come from the eager implementation only
    if args.mode == "mass":
        cell_mass(step_model, args.cells.split(","), args.problems, args.step, args.seed)
    else:
        attend(step_model, args.cell, args.problem, args.step, args.seed)


if __name__ == "__main__":
    main()
