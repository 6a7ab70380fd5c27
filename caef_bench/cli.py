"""Command-line interface: thin wrappers around the stages in caef_bench/."""

from __future__ import annotations

import argparse
import json
import sys


def _trace(args: argparse.Namespace) -> int:
    from .machines import BY_MACHINE, align_output, lookup, parse_expression
    from .machines import run as start_run
    from .machines.display import events, format_run

    if args.op:
        operation = lookup(args.op)
        if len(args.operands) != operation.arity:
            raise ValueError(f"{args.op} takes {operation.arity} operand(s), got {len(args.operands)}")
        machine_run = start_run(args.op, *args.operands)
        label = f"{args.op}({', '.join(args.operands)})"
    else:
        if len(args.operands) != 1:
            raise ValueError("give one expression such as '45+67=' (quote it), or --op OP A [B]")
        expression = parse_expression(args.operands[0])
        machine_run = start_run(expression.op, expression.a, expression.b)
        label = str(expression)
    halt_text = machine_run.text(-1)
    # The auxiliary machines (reflection, left mask) have no expression form to align back to.
    answer = align_output(halt_text) if BY_MACHINE[machine_run.machine].symbol else None
    if args.json:
        for event in events(machine_run):
            print(json.dumps({"kind": "transition", **event.__dict__}, ensure_ascii=False))
        print(json.dumps({"kind": "result", "input": label, "result": answer or halt_text.split("\n")[0]}))
        return 0
    print(f"{label}  ({machine_run.machine}, {len(machine_run)} transitions)")
    print(format_run(machine_run))
    print(f"result: {answer}" if answer else f"halt: {halt_text.splitlines()[0]}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="caef-bench", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    trace = commands.add_parser("trace", help="print a machine's execution step by step")
    trace.add_argument("operands", nargs="+", metavar="EXPR",
                       help="an expression such as '89*2=' (or, with --op, the operands)")
    trace.add_argument("--op", help="run one machine directly: add sub mul div gt lt eq reflection left_mask")
    trace.add_argument("--json", action="store_true", help="JSON lines: every transition in execution order")
    trace.set_defaults(handler=_trace)
    return parser


def _keep_expressions_positional(argv: list[str]) -> list[str]:
    """argparse reads "-5+3=" as an unknown option; mark it as an operand so it gets a real error."""
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if len(arg) > 1 and arg[0] == "-" and arg[1].isdigit():
            return argv[:i] + ["--"] + argv[i:]
    return argv


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(_keep_expressions_positional(list(sys.argv[1:] if argv is None else argv)))
    try:
        return args.handler(args)
    except ValueError as error:
        # Bad input is the user's to fix: one clear line, exit code 2, no traceback.
        print(f"caef-bench: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
