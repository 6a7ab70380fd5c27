"""`caef-bench trace`: one machine's execution, step by step (the machines alone, no model)."""

from __future__ import annotations

import argparse
import json


def register(commands) -> None:
    trace = commands.add_parser("trace", help="print a machine's execution step by step")
    trace.add_argument("operands", nargs="+", metavar="EXPR",
                       help="an expression such as '89*2=' (or, with --op, the operands)")
    trace.add_argument("--op", help="run one machine directly: add sub mul div gt lt eq reflection left_mask")
    trace.add_argument("--json", action="store_true", help="JSON lines: every transition in execution order")
    trace.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from caef_bench.machines.display import events, format_run, traced

    label, machine_run, answer = traced(args.operands, args.op)
    if args.json:
        for event in events(machine_run):
            print(json.dumps({"kind": "transition", **event.__dict__}, ensure_ascii=False))
        print(json.dumps({"kind": "result", "input": label, "result": answer or machine_run.text(-1).split("\n")[0]}))
        return 0
    print(f"{label}  ({machine_run.machine}, {len(machine_run)} transitions)")
    print(format_run(machine_run))
    print(f"result: {answer}" if answer else f"halt: {machine_run.text(-1).splitlines()[0]}")
    return 0
