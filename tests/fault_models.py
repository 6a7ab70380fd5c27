"""Broken models for testing the runtime: the oracle, with a fault wherever a trigger fires.

`BrokenModel` wraps the oracle (caef_bench.runtime.oracle) and replaces its
answer by a `fault` whenever a `trigger` fires: a wrong digit at step k,
garbage, its own input back (it never halts), a call to a machine that does
not exist, ...
"""

from __future__ import annotations

from typing import Callable

from caef_bench.runtime.problem import reference_steps
from caef_bench.runtime.oracle import OracleModel

Trigger = Callable[[str, str], bool]  # (adapter, prompt) -> whether the fault strikes
Fault = Callable[[str, str], str]  # (prompt, the correct output) -> the output emitted


class BrokenModel:
    """The oracle, except that `fault` replaces its answer wherever `trigger` fires."""

    def __init__(self, fault: Fault, trigger: Trigger, base: OracleModel | None = None):
        self.fault, self.trigger = fault, trigger
        # Not strict: after a fault the run leaves the machine's course and the oracle has no answer.
        self.base = base or OracleModel(strict=False)
        self.calls = self.base.calls
        self.faults = 0

    def generate(self, prompts: list[str], adapter: str) -> list[str]:
        outputs = self.base.generate(prompts, adapter)
        for i, prompt in enumerate(prompts):
            if self.trigger(adapter, prompt):
                outputs[i] = self.fault(prompt, outputs[i])
                self.faults += 1
        return outputs


# Triggers


def at_step(expr: str, k: int) -> Trigger:
    """Fires at step k of a correct run on expr (0 is aligner (I)): its prompt is unique in that run."""
    step = list(reference_steps(expr))[k]
    return lambda adapter, prompt: adapter == step.adapter and prompt == step.input


def on_adapter(adapter_name: str) -> Trigger:
    return lambda adapter, prompt: adapter == adapter_name


def on_executors(adapter: str, prompt: str) -> bool:
    return adapter.startswith("executor_")


# Faults


def wrong_digit(prompt: str, output: str) -> str:
    """Add one to the last digit cell of the state line (the output register where it has digits)."""
    state_line, newline, rest = output.partition("\n")
    position = state_line.rfind("|")
    if position < 0 or not state_line[position + 1:position + 2].isdigit():
        raise ValueError(f"no digit cell to corrupt in {state_line!r}")
    digit = str((int(state_line[position + 1]) + 1) % 10)
    return state_line[:position + 1] + digit + state_line[position + 2:] + newline + rest


def garbled(prompt: str, output: str) -> str:
    return "#" + output[: len(output) // 2]


def echo(prompt: str, output: str) -> str:
    """The input back: for an executor, a state that never moves, so the run never halts."""
    return prompt


def empty(prompt: str, output: str) -> str:
    return ""


def replace_text(old: str, new: str) -> Fault:
    """Replace a piece of the correct output ("[CALL] ADD" -> "[CALL] NOPE", say)."""

    def fault(prompt: str, output: str) -> str:
        if old not in output:
            raise ValueError(f"{old!r} is not in {output!r}")
        return output.replace(old, new, 1)

    return fault


def drop_callee_lines(prompt: str, output: str) -> str:
    """A composer's call without the callee's start state and command."""
    return "\n".join(output.split("\n")[:2])


class Interrupted(Exception):
    pass


class DiesAfter(OracleModel):
    """The oracle, killed after a number of generate calls (as a ^C or a lost machine would)."""

    def __init__(self, calls: int):
        super().__init__()
        self.left = calls

    def generate(self, prompts, adapter):
        if self.left == 0:
            raise Interrupted
        self.left -= 1
        return super().generate(prompts, adapter)


class Recording(OracleModel):
    """The oracle, keeping every prompt it was asked."""

    def __init__(self):
        super().__init__()
        self.prompts = []

    def generate(self, prompts, adapter):
        self.prompts.extend(prompts)
        return super().generate(prompts, adapter)
