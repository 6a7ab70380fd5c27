"""How aligner (I) copies an operand: attention and head ablation on the tiny tier (docs/structured-operands.md).

    python lab/diagnosis/aligner_attention.py attend "1000000000000000+1=" "45+67="
    python lab/diagnosis/aligner_attention.py ablate [--problems 40] [--checkpoints DIR]

`attend`: for each operand cell aligner (I) writes, teacher-forced, the query that predicts it, the
prompt digit that carries the same index hint (the digit to copy), the prediction, and the
attention of the layer's strongest head on that digit against the other prompt digits (same
digit value, other values). `ablate`: aligner_add on structured operands (runs, round numbers,
small b, equal operands) and on random ones of the same lengths: problems whose every start-state
token is predicted right, with no head zeroed and with each (layer, head) output zeroed in turn.
"""

from __future__ import annotations

import argparse

import torch

from caef_bench.machines import align_input
from caef_bench.models.positions import position_ids
from caef_bench.models.tokenizer import VOCAB
from caef_bench.runtime.hf import load_step_model

ALIGNERS = {"+": "add", "-": "sub", ">": "gt", "<": "lt", "*": "mul", "/": "div", "=": "eq"}


def _eager(model) -> None:
    """Attention weights are returned by the eager implementation only."""
    for module in model.modules():
        if hasattr(module, "config") and hasattr(module.config, "_attn_implementation"):
            module.config._attn_implementation = "eager"


def _forward(step_model, adapter: str, expr: str, output_attentions: bool = False):
    step_model.activate(adapter)
    codec = step_model.codec_for(adapter)
    prompt = codec.prompt_ids(expr)
    ids = prompt + codec.completion_ids(align_input(expr))
    positions = position_ids(ids, codec.scheme)
    with torch.no_grad():
        out = step_model.model(input_ids=torch.tensor([ids]), position_ids=torch.tensor([positions]),
                               output_attentions=output_attentions)
    return prompt, ids, positions, out


def attend(step_model, expr: str) -> None:
    adapter = "aligner_" + ALIGNERS[next(c for c in expr if not c.isdigit())]
    prompt, ids, positions, out = _forward(step_model, adapter, expr, output_attentions=True)
    logits, attention = out.logits[0], torch.stack(out.attentions)[:, 0]  # layers, heads, queries, keys
    digits = [i for i in range(len(prompt)) if VOCAB[prompt[i]].isdigit()]
    print(f"== {expr} ({adapter}, {step_model.codec_for(adapter).scheme} ids)")
    for j in range(len(prompt), len(ids)):
        token = VOCAB[ids[j]]
        source = [i for i in digits if positions[i] == positions[j - 1]]
        if not (token.startswith("|") and len(token) == 2) or len(source) != 1:
            continue
        query, source = j - 1, source[0]
        predicted = VOCAB[int(logits[query].argmax())]
        best = None
        for layer in range(attention.shape[0]):
            head = int(attention[layer, :, query, source].argmax())
            weights = attention[layer, head, query]
            on_source = float(weights[source])
            if best is None or on_source > best[2]:
                same = sum(float(weights[i]) for i in digits if i != source and prompt[i] == prompt[source])
                other = sum(float(weights[i]) for i in digits if prompt[i] != prompt[source])
                best = (layer, head, on_source, same, other)
        layer, head, on_source, same, other = best
        flag = "" if predicted == token else "   <-- wrong"
        print(f"  cell {token} from {VOCAB[prompt[source]]}: predicted {predicted}; L{layer}H{head} on it {on_source:.2f}, "
              f"on equal digits elsewhere {same:.2f}, on other digits {other:.2f}{flag}")


def copied_right(step_model, exprs: list[str], adapter: str, heads: list[tuple[int, int]]) -> int:
    """Problems whose every start-state token is predicted right with the given heads' outputs zeroed."""
    model = step_model.model
    config = model.base_model.model.config
    width = config.hidden_size // config.num_attention_heads
    layers = model.base_model.model.model.layers
    hooks = []
    for layer, head in heads:
        def zero(module, args, head=head):
            hidden = args[0].clone()
            hidden[..., head * width:(head + 1) * width] = 0
            return (hidden,)
        hooks.append(layers[layer].self_attn.o_proj.register_forward_pre_hook(zero))
    right = 0
    try:
        for expr in exprs:
            prompt, ids, _, out = _forward(step_model, adapter, expr)
            predicted = out.logits[0].argmax(-1).tolist()
            right += all(predicted[j - 1] == ids[j] for j in range(len(prompt), len(ids)))
    finally:
        for hook in hooks:
            hook.remove()
    return right


def ablate(step_model, problems: int) -> None:
    from caef_bench.data.structured import SAMPLERS
    from caef_bench.data.testsets import named_rng
    from caef_bench.data.training import draw_operands

    rng = named_rng(0, "abl")
    structured, random_ = [], []
    for _ in range(problems):
        n = rng.choice([10, 30, 60])
        a, b = SAMPLERS[rng.choice(["run", "round", "small", "equal"])].pair(rng, "add", (n, n))
        structured.append(f"{a}+{b}=")
        a, b = draw_operands("add", (n, n), rng)
        random_.append(f"{a}+{b}=")
    config = step_model.model.base_model.model.config
    print(f"aligner_add (I), {problems} problems each: start states right (structured, random)")
    for heads in [[]] + [[(layer, head)] for layer in range(config.num_hidden_layers)
                         for head in range(config.num_attention_heads)]:
        label = "none zeroed" if not heads else f"L{heads[0][0]}H{heads[0][1]} zeroed"
        print(f"  {label:14s} {copied_right(step_model, structured, 'aligner_add', heads):3d} "
              f"{copied_right(step_model, random_, 'aligner_add', heads):3d}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["attend", "ablate"])
    parser.add_argument("exprs", nargs="*")
    parser.add_argument("--problems", type=int, default=40)
    parser.add_argument("--checkpoints")
    args = parser.parse_args()
    step_model = load_step_model("tiny", args.checkpoints)
    step_model.activate("aligner_add")  # the adapters attach on first use
    _eager(step_model.model)
    if args.what == "attend":
        for expr in args.exprs:
            attend(step_model, expr)
    else:
        ablate(step_model, args.problems)


if __name__ == "__main__":
    main()
