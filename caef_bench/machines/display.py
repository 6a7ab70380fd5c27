"""Walk a run in execution order (composer steps with their callees' steps nested) for display."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from .composers import ComposerRun
from .executors import Run


@dataclass(frozen=True)
class Event:
    """One executor transition as the runtime meets it."""

    path: str  # "3" for a composer's third step, "3.2" for its callee's second
    depth: int  # 0 for the top machine, 1 inside a call
    machine: str
    step: int  # index of the transition within its machine's run
    input: str
    output: str


def events(run: Run, prefix: str = "", depth: int = 0) -> Iterator[Event]:
    """Transitions in execution order: a composer's call is followed by the callee's whole run."""
    for i in range(len(run)):
        path = f"{prefix}{i + 1}"
        source, target = run.transition(i)
        yield Event(path, depth, run.machine, i, source, target)
        if isinstance(run, ComposerRun) and run.phases[i + 1].callee is not None:
            yield from events(run.phases[i + 1].callee, f"{path}.", depth + 1)


def format_run(run: Run) -> str:
    """Numbered steps, each a state and its command; a callee's steps indented under its call."""
    lines = []

    def show(machine_run: Run, prefix: str, indent: str) -> None:
        for i in range(machine_run.n_steps):
            label = f"{prefix}{i}"
            # A composer's text also holds its callee's start; that is shown nested below.
            state, command = machine_run.text(i).split("\n")[:2]
            lines.append(f"{indent}{label:>6}  {state}")
            lines.append(f"{indent}{'':>6}  {command}")
            if isinstance(machine_run, ComposerRun) and machine_run.phases[i].callee is not None:
                show(machine_run.phases[i].callee, f"{label}.", indent + "        ")

    show(run, "", "")
    return "\n".join(lines)


def traced(operands: list[str], op: str | None = None) -> tuple[str, Run, str | None]:
    """What `caef-bench trace` shows: (label, the run, its aligned answer or None for an auxiliary
    machine) from an expression such as '45+67=', or with `op` from that machine's operands."""
    from . import BY_MACHINE, align_output, lookup, parse_expression
    from .ops import start

    if op:
        operation = lookup(op)
        if len(operands) != operation.arity:
            raise ValueError(f"{op} takes {operation.arity} operand(s), got {len(operands)}")
        machine_run, label = start(op, *operands), f"{op}({', '.join(operands)})"
    else:
        if len(operands) != 1:
            raise ValueError("give one expression such as '45+67=' (quote it), or --op OP A [B]")
        expression = parse_expression(operands[0])
        machine_run, label = start(expression.op, expression.a, expression.b), str(expression)
    # The auxiliary machines (reflection, left mask) have no expression form to align back to.
    answer = align_output(machine_run.text(-1)) if BY_MACHINE[machine_run.machine].symbol else None
    return label, machine_run, answer
