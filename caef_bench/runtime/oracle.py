"""The oracle StepModel: the machines' own next text for every prompt a correct CAEF run makes.

It drafts for speculative decoding (`hf.HFStepModel`), checks Table 2's
one-step cells, and stands in for a trained model in tests. The answers come
from `caef_bench.machines.next_text`; the oracle only routes an adapter name
("executor_add", "aligner_sub") to it. It answers only states on a machine's
true course; any other prompt (the continuation of a model's mistake, say)
raises `OracleError`, or with strict=False gets the empty completion, which
the runtime records as unparseable.
"""

from __future__ import annotations

from caef_bench.machines import next_text
from caef_bench.models.names import split_adapter_name


class OracleError(ValueError):
    """The prompt is not a step of any correct run (or not one for this adapter)."""


class OracleModel:
    """A StepModel that answers from the machines.

    calls lists (adapter, number of prompts) for every generate call, so tests
    can count the batching.
    """

    def __init__(self, strict: bool = True):
        self.strict = strict
        self.calls: list[tuple[str, int]] = []

    def generate(self, prompts: list[str], adapter: str) -> list[str]:
        self.calls.append((adapter, len(prompts)))
        return [self.complete(prompt, adapter) for prompt in prompts]

    def complete(self, prompt: str, adapter: str) -> str:
        try:
            kind, op = split_adapter_name(adapter)  # "executor_left_mask" -> ("executor", "left_mask")
            return next_text(kind, op, prompt)
        except ValueError as error:  # OffCourse, FormatError, an unknown kind, the machines' domain checks
            if self.strict:
                raise OracleError(f"{adapter}: no answer for {prompt!r}: {error}") from None
            return ""


__all__ = ["OracleError", "OracleModel"]
