"""`caef-bench solve`: one expression through a CAEF model, its answer and (--trace) every step."""

from __future__ import annotations

import argparse
import sys


def register(commands) -> None:
    from .common import backend_arguments, solver_arguments

    solve = commands.add_parser("solve", help="solve one expression with a CAEF model")
    solve.add_argument("expr", help="e.g. '123456789*12='")
    solver_arguments(solve)
    solve.add_argument("--trace", action="store_true", help="print every step")
    backend_arguments(solve)
    # solve writes no file: once it has printed, the interpreter's teardown of torch is wall time for nothing
    solve.set_defaults(handler=run, exit_at_once=True)


def run(args: argparse.Namespace) -> int:
    from caef_bench.evaluate.suites import solve_expression
    from caef_bench.machines import parse_expression, typed_expression
    from caef_bench.models.limits import check_supported, windowing

    from .common import step_model

    check_supported(args.tier, args.expr)  # bad input, or operands the tier was not built for, fail here
    expression = parse_expression(typed_expression(args.expr))
    model = step_model(args, ops=[expression.op])  # and an operator it has no adapters for
    record, correct = solve_expression(model, args.expr, windowing(args.tier))
    if args.trace:
        for i, step in enumerate(record.steps, 1):
            indent = "    " * step.depth
            print(f"{i:>4} {step.adapter}\n" + "\n".join(indent + "     " + line for line in step.output.split("\n")))
    # Only an answer to the asked expression is printed: a run whose aligner wrote other operands
    # (outcome "misaligned") says so instead of showing another problem's expression.
    answered = record.outcome == "answered" and record.final
    print(record.final if answered else f"no answer ({record.outcome}{': ' + record.detail if record.detail else ''})")
    if record.first_divergence:
        d = record.first_divergence
        print(f"first divergence from the machine: step {d.step}, {d.error_class}")
    stats = getattr(model, "stats", None)
    cost = f"{stats.forward_passes} forward passes" if stats else f"{model.requests} requests to {model.root}"
    how = f", a window at a time past {windowing(args.tier).past} digits" if record.windowed else ""
    print(f"{record.n_steps} model calls{how}, {cost}, {record.seconds:.2f} s", file=sys.stderr)
    return 0 if correct else 1
