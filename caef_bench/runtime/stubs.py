"""Stand-in models for testing the runtime: an oracle that answers from the machines, and broken ones.

`MachineModel` answers every prompt a correct CAEF run makes, by recomputing
it with the machines: an executor prompt is parsed, the machine's run is
rebuilt from the operands on its tapes, and the step whose text is the prompt
is looked up by index (so a step costs O(1) renders, not a search of the
run). It answers only states on a machine's true course; any other prompt (the
continuation of a broken model's mistake, say) raises `OracleError`, or with
strict=False gets the empty completion, which the runtime records as
unparseable.

`BrokenModel` wraps the oracle and replaces its answer by a `fault` whenever
a `trigger` fires: a wrong digit at step k, garbage, its own input back (it
never halts), a call to a machine that does not exist, ...
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Callable

from caef_bench.machines import (
    BY_MACHINE,
    ComposerRun,
    ComposerState,
    FormatError,
    Run,
    align_input,
    align_output,
    parse,
    parse_expression,
    render,
    run,
)
from caef_bench.machines.executors import AddRun, CompareRun, LeftMaskRun, ReflectionRun
from caef_bench.machines.text import COMPARISONS, from_tape

from .engine import reference_steps


class OracleError(ValueError):
    """The prompt is not a step of any correct run (or not one for this adapter)."""


class MachineModel:
    """An oracle StepModel: the machines' own next text for every prompt.

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
            kind, _, op = adapter.partition("_")
            if kind == "aligner":
                return _align(prompt, op)
            if kind == "executor":
                return _execute(prompt, op)
            raise OracleError(f"unknown adapter {adapter!r}")
        except (OracleError, FormatError, ValueError) as error:
            if self.strict:
                raise OracleError(f"{adapter}: no answer for {prompt!r}: {error}") from None
            return ""


_EXPRESSION_LIKE = re.compile(r"[0-9]+[^0-9\n]+[0-9]+=")


def _align(prompt: str, op: str) -> str:
    """Aligner (I) for an expression prompt, aligner (O) for a halt text."""
    if _EXPRESSION_LIKE.fullmatch(prompt):
        if parse_expression(prompt).op != op:
            raise OracleError(f"an expression for another aligner than aligner_{op}")
        return align_input(prompt)
    if BY_MACHINE[parse(prompt).machine].name != op:
        raise OracleError(f"a halt state for another aligner than aligner_{op}")
    return align_output(prompt)


def _execute(prompt: str, op: str) -> str:
    snapshot = parse(prompt)
    if BY_MACHINE[snapshot.machine].name != op:
        raise OracleError(f"a {snapshot.machine} state for executor_{op}")
    state = snapshot.state
    if isinstance(state, ComposerState):
        machine_run = _composer_run(op, state.a, state.b)
        index = _composer_step(machine_run, snapshot)
        matches = index is not None and render(machine_run.input_snapshot(index)) == prompt
    else:
        machine_run = _executor_run(state.machine, tuple(tape.digits for tape in state.tapes))
        index = machine_run.step_of(state)
        matches = 0 <= index < machine_run.n_steps and machine_run.text(index) == prompt
    if not matches:
        raise OracleError("not a step of the machine's run on these operands")
    if index + 1 >= machine_run.n_steps:
        raise OracleError("a halt state has no next step")
    return machine_run.text(index + 1)


# Runs are rebuilt from the tapes at every step; caching keeps that O(1) per step for a
# batch in flight (about one entry per problem and callee, a few hundred bytes each).
@lru_cache(maxsize=65536)
def _executor_run(machine: str, tapes: tuple[str, ...]) -> Run:
    if machine == "ADD":
        return AddRun(*tapes)
    if machine in COMPARISONS:
        return CompareRun(machine, *tapes)
    if machine == "REFLECTION":
        return ReflectionRun(*tapes)
    return LeftMaskRun(*tapes)


@lru_cache(maxsize=4096)
def _composer_run(op: str, a: str, b: str) -> ComposerRun:
    return run(op, from_tape(a), from_tape(b))


def _composer_step(machine_run: ComposerRun, snapshot) -> int | None:
    for index, phase in enumerate(machine_run.phases):
        if phase.state == snapshot.state and phase.command == snapshot.command:
            return index
    return None


# --------------------------------------------------------------------------- broken models

Trigger = Callable[[str, str], bool]  # (adapter, prompt) -> whether the fault strikes
Fault = Callable[[str, str], str]  # (prompt, the correct output) -> the output emitted


class BrokenModel:
    """The oracle, except that `fault` replaces its answer wherever `trigger` fires."""

    def __init__(self, fault: Fault, trigger: Trigger, base: MachineModel | None = None):
        self.fault, self.trigger = fault, trigger
        # Not strict: after a fault the run leaves the machine's course and the oracle has no answer.
        self.base = base or MachineModel(strict=False)
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


__all__ = [
    "BrokenModel", "Fault", "MachineModel", "OracleError", "Trigger", "at_step", "drop_callee_lines", "echo",
    "empty", "garbled", "on_adapter", "on_executors", "replace_text", "wrong_digit",
]
