"""Greedy decoding with the tier's position scheme, batched, with a KV cache.

transformers' generate() derives position ids from the attention mask, which
cannot express coupled positions, so the tiny tier decodes here; the same loop
serves every tier (scheme "standard" gives ordinary positions).
"""

from __future__ import annotations

from caef_bench.models.positions import CoupledCounter


class _StandardCounter:
    def __init__(self):
        self.n = 0

    def next(self, token_id: int) -> int:
        self.n += 1
        return self.n - 1


def _counter(scheme: str):
    return CoupledCounter() if scheme == "coupled" else _StandardCounter()


def greedy_ids(model, prompts: list[list[int]], codec, max_new_tokens: int | list[int]) -> list[list[int]]:
    """Greedy completions (without the final </s>) for a batch of token-id prompts.

    max_new_tokens may differ per prompt: a scorer that knows the expected
    completion stops each row once it is longer than that, since it is wrong anyway.
    """
    import torch

    batch, width = len(prompts), max(len(p) for p in prompts)
    input_ids = torch.full((batch, width), codec.pad_id, dtype=torch.long)
    mask = torch.zeros((batch, width), dtype=torch.long)
    positions = torch.zeros((batch, width), dtype=torch.long)
    counters = [_counter(codec.scheme) for _ in prompts]
    for row, (ids, counter) in enumerate(zip(prompts, counters)):
        start = width - len(ids)  # left padding keeps every prompt's last token in the last column
        input_ids[row, start:] = torch.tensor(ids)
        mask[row, start:] = 1
        positions[row, start:] = torch.tensor([counter.next(i) for i in ids])
    limits = max_new_tokens if isinstance(max_new_tokens, list) else [max_new_tokens] * batch
    outputs = [[] for _ in prompts]
    done = [limit <= 0 for limit in limits]
    with torch.no_grad():
        result = model(input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=True)
        for _ in range(max(limits)):
            chosen = result.logits[:, -1].argmax(-1).tolist()
            for row, token in enumerate(chosen):
                if not done[row]:
                    if token == codec.eos_id:
                        done[row] = True
                    else:
                        outputs[row].append(token)
                        done[row] = len(outputs[row]) >= limits[row]
            if all(done):
                break
            step_ids = torch.tensor(chosen).unsqueeze(1)
            step_positions = torch.tensor([[c.next(t)] for c, t in zip(counters, chosen)])
            mask = torch.cat([mask, torch.ones((batch, 1), dtype=torch.long)], dim=1)
            result = model(input_ids=step_ids, attention_mask=mask, position_ids=step_positions,
                           past_key_values=result.past_key_values, use_cache=True)
    return outputs


def greedy_texts(model, codec, prompts: list[str], max_new_tokens: int | list[int], batch_size: int = 32) -> list[str]:
    """Greedy completion texts; prompts are sorted by length into batches to waste less padding."""
    limits = max_new_tokens if isinstance(max_new_tokens, list) else [max_new_tokens] * len(prompts)
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    texts: list[str] = [""] * len(prompts)
    for start in range(0, len(order), batch_size):
        rows = order[start:start + batch_size]
        completions = greedy_ids(model, [codec.prompt_ids(prompts[i]) for i in rows], codec, [limits[i] for i in rows])
        for row, ids in zip(rows, completions):
            texts[row] = codec.decode(ids)
    return texts
