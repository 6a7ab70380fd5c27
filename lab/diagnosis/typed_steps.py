"""Every step of one operator's executor, halt step included, on typed expressions of that operator,
teacher-forced (each step's input is the machine's, not the model's last output). For a composer (sub,
mul, div) these are its own steps: its calls' steps belong to the callees' executors. A screen of typed
problems for executor rounds; the end-to-end run of the same problems is lab/lanes/typed.sh.

    python lab/diagnosis/typed_steps.py --checkpoints A,B --tier smollm2-135m --dtype bfloat16
        '5000000000-4999999999=' '1000000001-999999999=' [--show]
"""

from __future__ import annotations

from caef_bench.machines import parse_expression, run
from step_screens import screen, screen_parser  # this folder: the shared screen loop


def cases(expression: str) -> list[tuple[str, str, str]]:
    """(label, the machine's input, its output) for every step of the expression's own machine."""
    parsed = parse_expression(expression)
    machine_run = run(parsed.op, parsed.a, parsed.b)
    return [(f"{expression} step {i + 1}", *machine_run.transition(i)) for i in range(len(machine_run))]


def main() -> None:
    parser = screen_parser(__doc__)
    parser.add_argument("expressions", nargs="+", help="expressions of one operator, e.g. 45-7=")
    args = parser.parse_args()
    ops = {parse_expression(expression).op for expression in args.expressions}
    if len(ops) != 1:
        parser.error(f"the expressions must share one operator, got {' '.join(sorted(ops))}")
    grid = {expression: cases(expression) for expression in args.expressions}
    screen(args, grid, lambda expression: expression, adapter=f"executor_{ops.pop()}")


if __name__ == "__main__":
    main()
