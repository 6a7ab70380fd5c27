"""What a CAEF run costs a model: its calls, tokens and FLOPs, counted from the machines' own run.

A correct run makes one model call per step (`engine.reference_steps`), and speculative decoding
verifies each in one forward pass over the step's prompt and output; so a problem's work is the sum
over its steps of the FLOPs of a pass over that many tokens. The benchmarks compare measured speed
with it (benchmarks/bench_throughput.py), and it sizes an evaluation before it runs on an accelerator.
"""

from __future__ import annotations

from dataclasses import dataclass

from .problem import reference_steps


@dataclass(frozen=True)
class Shape:
    """What a pass's FLOPs depend on: a Llama's sizes, and the LoRA rank of an adapter applied unfolded
    (0 when the adapters are folded into the weights: `hf.MergedAdapters`)."""

    hidden: int
    layers: int
    ffn: int
    vocab: int
    lora_rank: int = 0

    @classmethod
    def of(cls, config, lora_rank: int = 0) -> Shape:
        return cls(config.hidden_size, config.num_hidden_layers, config.intermediate_size, config.vocab_size,
                   lora_rank)

    def flops(self, width: int) -> float:
        """FLOPs of one row of `width` tokens in a forward pass: per token, 2 x the weights it passes
        through (q, k, v, o, gate, up, down, the LoRA factors of each, the tied output projection)
        and 4 x hidden x width per layer of attention (every query against every key of the row)."""
        projections = 4 * self.hidden * self.hidden + 3 * self.hidden * self.ffn
        lora = self.lora_rank * (4 * 2 * self.hidden + 3 * (self.hidden + self.ffn))
        per_token = 2 * self.layers * (projections + lora) + 2 * self.hidden * self.vocab
        return width * (per_token + 4 * self.layers * self.hidden * width)


@dataclass
class Work:
    """Model calls, tokens and FLOPs of correct runs."""

    problems: int = 0
    calls: int = 0
    tokens: int = 0
    flops: float = 0.0

    def __add__(self, other: Work) -> Work:
        return Work(self.problems + other.problems, self.calls + other.calls, self.tokens + other.tokens,
                    self.flops + other.flops)

    def __mul__(self, factor: float) -> Work:
        return Work(round(self.problems * factor), round(self.calls * factor), round(self.tokens * factor),
                    self.flops * factor)


def work_of(exprs, shape: Shape, codec_for) -> Work:
    """The work of a correct run of each expression: one verify pass per model call over its prompt and
    output (`codec_for(adapter)` gives the ids the adapter runs with)."""
    total = Work()
    for expr in exprs:
        total.problems += 1
        for step in reference_steps(expr):
            codec = codec_for(step.adapter)
            width = len(codec.prompt_ids(step.input)) + len(codec.completion_ids(step.output))
            total.calls += 1
            total.tokens += width
            total.flops += shape.flops(width)
    return total


__all__ = ["Shape", "Work", "work_of"]
