"""Speculative decoding stays exactly greedy, and re-aligns on the draft or the prompt after a miss."""

import pytest

from caef_bench.machines import trace
from caef_bench.models.decoding import greedy_ids, realign, speculative_greedy


def test_realign_proposes_what_follows_the_nearest_match():
    draft = [1, 2, 3, 4, 5, 6, 7, 8, 9]
    # the output's last tokens sit where the draft has them: what follows them there
    assert realign([0, 1, 2, 3], [draft]) == [4, 5, 6, 7, 8, 9]
    # one token inserted: the output is one ahead of the draft, the match one place back
    assert realign([1, 2, 3, 3, 4, 5], [draft]) == [6, 7, 8, 9]
    # of two matches the one nearest where the output ends wins
    repeated = [7, 8, 1, 7, 8, 2, 9, 9, 9, 9, 9, 7, 8, 3]
    assert realign([0, 0, 0, 7, 8], [repeated], ngram=2) == [2, 9, 9, 9, 9, 9, 7, 8, 3]
    # a later source is used when the first has no match
    assert realign([5, 5, 1, 2], [[9, 9, 9], [5, 1, 2, 6]], ngram=2) == [6]


def test_realign_ignores_far_matches_and_short_outputs():
    far = [1, 2, 3] + [0] * 40
    assert realign([9] * 40 + [1, 2, 3], [far], window=16) is None
    assert realign([1, 2], [[1, 2, 3]]) is None  # fewer tokens than the key
    assert realign([4, 1, 2, 3], [[1, 2, 3]]) is None  # a match at the very end leaves nothing to propose


@pytest.fixture(scope="module")
def shipped():
    from caef_bench.models.loading import load

    loaded = load("tiny", device="cpu")
    from caef_bench.models.codec import codec_for

    model = loaded.model
    model.set_adapter("executor_add")
    return model.eval(), codec_for(loaded.tokenizer, loaded.tier.position_scheme)


def test_a_draft_off_by_one_token_costs_a_few_passes_not_one_per_token(shipped):
    model, codec = shipped
    source, _ = trace("add", 31415926535897932384, 27182818284590452353)[4]
    prompt = codec.prompt_ids(source)
    limit = 3 * len(prompt) + 64
    greedy = greedy_ids(model, [prompt], codec, limit)[0]
    assert len(greedy) > 60
    for broken in (greedy[:30] + greedy[31:],  # a token missing from the draft
                   greedy[:30] + [greedy[29]] + greedy[30:],  # a token too many
                   greedy[:-20]):  # the draft stops short (its end is the prompt's)
        out, passes = speculative_greedy(model, codec, prompt, broken, limit)
        assert out == greedy  # exactly greedy whatever the draft
        assert passes <= 8  # plain decoding: one pass per token, 90 here
    # only the confirmed start as the draft, the full draft as a source to realign on
    out, passes = speculative_greedy(model, codec, prompt, greedy[:31], limit, sources=[greedy[:30] + greedy[31:]])
    assert out == greedy and passes <= 8


def test_drafts_checked_together_are_judged_as_each_alone(shipped):
    # rows of different prompt lengths in one pass (logits are taken from the shortest prompt's end on)
    from caef_bench.models.decoding import verify_drafts

    model, codec = shipped
    prompts, drafts = [], []
    for a, b, step in ((31415926535897932384, 27182818284590452353, 4), (12, 34, 1), (987654321, 123456789, 6)):
        source, _ = trace("add", a, b)[step]
        prompt = codec.prompt_ids(source)
        greedy = greedy_ids(model, [prompt], codec, 3 * len(prompt) + 64)[0]
        prompts.append(prompt)
        drafts.append(greedy)
    wrong = next(token for token in drafts[0] if token != drafts[1][5])
    drafts[1] = drafts[1][:5] + [wrong] + drafts[1][6:]  # a wrong token at 5: accepted up to it
    limits = [len(draft) + 1 for draft in drafts]
    together = verify_drafts(model, codec, prompts, drafts, limits)
    alone = [verify_drafts(model, codec, [p], [d], [n])[0] for p, d, n in zip(prompts, drafts, limits)]
    assert together == alone
    assert [ok for ok, _ in together] == [True, False, True] and together[0][1] == drafts[0]
    assert together[1][1] == greedy_ids(model, [prompts[1]], codec, 3 * len(prompts[1]) + 64)[0][:6]
