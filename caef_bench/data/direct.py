"""Prompts of the paper's baselines, verbatim from the protocol.

LoRA-direct: LLaMA 3.1-8B fine-tuned to answer a fixed prompt with the bare
answer (an integer, or True/False). Instruct/GPT-4o: one chat user turn asking
for the answer on a final ``Answer:`` line (comparisons: "true or false").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from caef_bench.data.testsets import COMPARISON_OPS, load_protocol


def _prompt_kind(op: str) -> str:
    return "comparison" if op in COMPARISON_OPS else "arithmetic"


def direct_prompt(expr: str, op: str) -> str:
    """The LoRA-direct prompt for a templated expression such as ``45+67=``."""
    return load_protocol()["lora_direct"][_prompt_kind(op)].replace("{expr}", expr)


def chat_prompt(expr: str, op: str) -> str:
    """The LLaMA-Instruct / GPT-4o user message for a templated expression."""
    return load_protocol()["instruct_and_gpt4o"][_prompt_kind(op)].replace("{expr}", expr)


def direct_samples(problems: Iterable[Mapping]) -> list[dict]:
    """LoRA-direct fine-tuning/evaluation samples: the prompt, the bare answer as
    completion, and the source problem as ``meta``."""
    return [
        {
            "prompt": direct_prompt(problem["expr"], problem["op"]),
            "completion": problem["answer"],
            "meta": dict(problem),
        }
        for problem in problems
    ]
