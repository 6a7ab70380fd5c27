"""`caef-bench solve`: one expression through a CAEF tier, its answer and (--trace) every step."""

from __future__ import annotations

import argparse
import sys


def register(commands) -> None:
    from .common import backend_arguments, solver_arguments

    solve = commands.add_parser("solve", help="solve one expression with a CAEF tier")
    solve.add_argument("expr", help="e.g. '123456789*12='")
    solver_arguments(solve)
    solve.add_argument("--trace", action="store_true", help="print every step")
    backend_arguments(solve)
    # solve writes no file: once it has printed, the interpreter's teardown of torch is wall time for nothing
    solve.set_defaults(handler=run, exit_at_once=True)


def run(args: argparse.Namespace) -> int:
    from caef_bench.evaluate.suites import solve_expression
    from caef_bench.machines import parse_expression, routed
    from caef_bench.models.limits import supported_problem, windowing

    from .common import step_model

    # bad input, or operands the tier was not built for, fail here; mul and div past the paper's limits
    # take the long route where the tier's limits and adapters have it (asked of the adapters only then)
    expr, route = supported_problem(args.tier, args.expr, lambda: _adapters(args))
    expression = parse_expression(expr)
    model = step_model(args, ops=[routed(expression.op, route)])  # and an operator it has no adapters for
    record, correct = solve_expression(model, args.expr, windowing(args.tier), route)
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


def _adapters(args: argparse.Namespace):
    """The adapters the model `solve` is about to run has, before it loads: the tier's folder on disk, or
    what the server at --base-url lists (None: a bare base, or a server that lists none)."""
    if args.backend == "openai":
        if not args.base_url:
            return None  # step_model says what is missing
        from caef_bench.runtime.endpoint import EndpointStepModel

        return EndpointStepModel(args.base_url).available_adapters
    from caef_bench.models.loading import available_adapters, tier_with_checkpoints

    return available_adapters(tier_with_checkpoints(args.tier, args.checkpoints))
