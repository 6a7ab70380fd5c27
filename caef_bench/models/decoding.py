"""Greedy decoding with the tier's position scheme, batched, with a KV cache.

transformers' generate() derives position ids from the attention mask, which
cannot express coupled positions, so the tiny tier decodes here; the same loop
serves every tier (scheme "standard" gives ordinary positions).
"""

from __future__ import annotations

from caef_bench.models.positions import make_counter, position_ids


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
    counters = [make_counter(codec.scheme) for _ in prompts]
    for row, (ids, counter) in enumerate(zip(prompts, counters)):
        start = width - len(ids)  # left padding keeps every prompt's last token in the last column
        input_ids[row, start:] = torch.tensor(ids)
        mask[row, start:] = 1
        positions[row, start:] = torch.tensor(counter.prompt(ids))
    limits = max_new_tokens if isinstance(max_new_tokens, list) else [max_new_tokens] * batch
    outputs = [[] for _ in prompts]
    done = [limit <= 0 for limit in limits]
    device = model.device
    input_ids, mask, positions = input_ids.to(device), mask.to(device), positions.to(device)
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
            step_ids = torch.tensor(chosen, device=device).unsqueeze(1)
            step_positions = torch.tensor([[c.next(t)] for c, t in zip(counters, chosen)], device=device)
            mask = torch.cat([mask, torch.ones((batch, 1), dtype=torch.long, device=device)], dim=1)
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


LOOKUP_NGRAM = 3  # tokens of the output's end looked up in the draft and the prompt after a miss
LOOKUP_WINDOW = 16  # how far from the aligned place a match may lie (farther ones are chance repeats of digits)
MIN_PROPOSAL = 8  # proposal length after a proposal that failed early (a wrong guess costs a pass over every token it holds)


def realign(out: list[int], sources: list[list[int]], ngram: int = LOOKUP_NGRAM, window: int = LOOKUP_WINDOW) -> list[int] | None:
    """What follows the last `ngram` tokens of `out` in one of `sources`, from the match nearest to
    where `out` ends (a step's texts are aligned token for token but for the few the step changes);
    None when no source holds them within `window` tokens of that place.

    After the model leaves the draft, its own output usually goes on as some text in view: the draft
    shifted by a token (a head marker written one cell off), or the input's own command line (a
    step that keeps going where the machine halts). Proposing that text keeps such a step at a few
    passes instead of one pass per token.
    """
    if len(out) < ngram:
        return None
    key, here = out[-ngram:], len(out)
    best, best_distance = None, window + 1
    for source in sources:
        # end: the index after the match, short of the source's end (a match there leaves nothing to propose)
        for end in range(max(ngram, here - window), min(len(source) - 1, here + window) + 1):
            if source[end - ngram:end] == key and abs(end - here) < best_distance:
                best, best_distance = source[end:], abs(end - here)
    return best


def speculative_greedy(model, codec, prompt: list[int], draft: list[int], max_new_tokens: int,
                       sources: list[list[int]] | None = None) -> tuple[list[int], int]:
    """The model's greedy completion of one prompt, verified against a draft; returns (ids, forward passes).

    Each forward pass feeds the tokens not yet in the cache plus a proposal; the
    model's own argmax at every proposed position decides, so the result is
    exactly the greedy output whatever the draft: a perfect draft costs one pass
    per step, a useless one about one pass per token, as plain decoding. After a
    mismatch the next proposal is what follows the output's last tokens in the
    draft or the prompt (`realign`, also over `sources` when given: e.g. a fuller
    draft of which `draft` is only the confirmed start), or else the rest of the
    draft shifted past the corrected token, so a step that differs from the
    draft in one digit costs two passes.
    """
    import copy

    import torch

    counter = make_counter(codec.scheme)
    lookup = [list(s) + [codec.eos_id] for s in ([draft, prompt] + list(sources or []))]
    pending = list(prompt)  # tokens the cache has not seen yet
    pending_positions = counter.prompt(prompt)
    guess = list(draft) + [codec.eos_id]  # what the output is expected to go on with
    out: list[int] = []
    cache, passes, cap = None, 0, max_new_tokens + 1
    with torch.no_grad():
        while len(out) < max_new_tokens:
            proposal = guess[: min(cap, max_new_tokens - len(out))]
            trial = copy.copy(counter)
            proposal_positions = [trial.next(t) for t in proposal]
            result = model(input_ids=torch.tensor([pending + proposal], device=model.device),
                           position_ids=torch.tensor([pending_positions + proposal_positions], device=model.device),
                           past_key_values=cache, use_cache=True)
            passes += 1
            # chosen[j]: the model's token after the pending tokens and proposal[:j]
            chosen = result.logits[0, len(pending) - 1:].argmax(-1).tolist()
            accepted = 0
            while accepted < len(proposal) and chosen[accepted] == proposal[accepted]:
                accepted += 1
            cache = result.past_key_values
            if len(proposal) > accepted:  # forget the rejected part of the proposal
                cache.crop(accepted - len(proposal))
            for token in proposal[:accepted]:
                counter.next(token)
            for token in proposal[:accepted] + [chosen[accepted]]:
                if token == codec.eos_id:
                    return out, passes
                out.append(token)
                if len(out) >= max_new_tokens:
                    return out, passes
            corrected = chosen[accepted]  # not in the cache yet: it leads the next pass
            pending, pending_positions = [corrected], [counter.next(corrected)]
            held = accepted < len(guess) and corrected == guess[accepted]  # a cut-off proposal, all of it right
            # A proposal that failed early was a poor guess: propose less next time, more again as guesses
            # hold, so a model that has left every draft costs few tokens per pass (as plain decoding)
            # and one that follows them costs few passes.
            cap = 2 * cap if held else max(MIN_PROPOSAL, 2 * accepted)
            guess = guess[accepted + 1:] if held else realign(out, lookup) or guess[accepted + 1:]
    return out, passes


def verify_drafts(model, codec, prompts: list[list[int]], drafts: list[list[int]],
                  max_new_tokens: list[int]) -> list[tuple[bool, list[int]]]:
    """Check many drafts in one batched forward pass: for each row (is the draft exactly the
    model's greedy completion, the model's greedy tokens up to and including the first miss).

    Row i feeds prompt + draft + </s>; the model's argmax at every draft position
    says whether greedy decoding would have produced that token. All of them
    matching (the </s> too) means the greedy completion *is* the draft; otherwise
    the tokens up to the first miss are the start of the greedy completion, a
    better draft for `speculative_greedy` to finish. No KV cache: the batch is
    one pass, right-padded, with each row's own position ids.
    """
    import torch

    rows = [(p, d[:limit] + ([codec.eos_id] if len(d) < limit else []))
            for p, d, limit in zip(prompts, drafts, max_new_tokens)]
    width = max(len(p) + len(d) for p, d in rows)
    batch = len(rows)
    input_ids = torch.full((batch, width), codec.pad_id, dtype=torch.long)
    mask = torch.zeros((batch, width), dtype=torch.long)
    positions = torch.zeros((batch, width), dtype=torch.long)
    for i, (p, d) in enumerate(rows):
        ids = p + d
        input_ids[i, :len(ids)] = torch.tensor(ids)
        mask[i, :len(ids)] = 1
        positions[i, :len(ids)] = torch.tensor(position_ids(ids, codec.scheme))
    device = model.device
    # Logits only from the first position any row's draft is read at: the prompts' others are never read, and
    # the output layer is a large share of a pass for a pretrained vocabulary (SmolLM2's 49,152 x 576).
    first = min(len(p) for p, _ in rows) - 1
    with torch.no_grad():
        logits = model(input_ids=input_ids.to(device), attention_mask=mask.to(device),
                       position_ids=positions.to(device), logits_to_keep=width - first).logits
        chosen = logits.argmax(-1).cpu().tolist()
    results = []
    for i, (p, d) in enumerate(rows):
        guesses = chosen[i][len(p) - 1 - first:len(p) - 1 - first + len(d)]
        accepted = 0
        while accepted < len(d) and guesses[accepted] == d[accepted]:
            accepted += 1
        if accepted == len(d):
            results.append((True, [t for t in d if t != codec.eos_id]))
        else:
            results.append((False, d[:accepted] + [guesses[accepted]]))
    return results
