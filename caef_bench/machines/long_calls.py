"""How many model calls a correct run of LONG_MUL or LONG_DIV makes, against the operands' length
(the design's table, docs/long-mul-div.md), and how many of them hold a tape longer than a window.

    python -m caef_bench.machines.long_calls [PROBLEMS]    # the table, PROBLEMS random problems a row
"""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass

from .composers import composer_steps
from .ops import start
from .text import ExecutorState, split_units

WINDOW = 16  # the cells of each tape a windowed executor step is shown (runtime.windowed, the tiny tier)


@dataclass(frozen=True)
class CallCount:
    """The model calls of a correct run of one problem, by adapter, and how long their texts are."""

    composer: int  # the composer's own transitions
    callees: dict[str, int]  # each callee machine's transitions
    aligners: int  # aligner (I) and aligner (O)
    windowed: int  # executor transitions with a tape (operand or output) over WINDOW cells
    wide_composer: int  # composer transitions whose text holds a register or callee tape over WINDOW cells
    longest_executor: int  # format units (the tiny tier's tokens) of the longest executor input + output
    longest_composer: int  # the same for the composer

    @property
    def executor(self) -> int:
        return sum(self.callees.values())

    @property
    def total(self) -> int:
        return self.composer + self.executor + self.aligners


def _longest_tape(state) -> int:
    if isinstance(state, ExecutorState):
        return max([len(state.output), *(len(t.digits) for t in state.tapes)])
    return max(len(state.a), len(state.b), len(state.output), *(len(r) for r in getattr(state, "registers", ())))


def _units(pair: tuple[str, str]) -> int:
    return sum(len(split_units(text)) for text in pair)


def call_count(op: str, a: int, b: int) -> CallCount:
    """Count the model calls of a correct run of the composer op(a, b): its transitions, every callee's,
    and the two aligner calls a problem makes around them (runtime.reference_step_count's count)."""
    machine_run = start(op, a, b)
    callees: dict[str, int] = {}
    windowed = longest_executor = 0
    for _, callee in machine_run.calls():
        callees[callee.machine] = callees.get(callee.machine, 0) + len(callee)
        if _longest_tape(callee.state(0)) > WINDOW:  # an operand tape too long: every step is windowed
            windowed += len(callee)
        else:
            tapes = [_longest_tape(callee.state(i)) for i in range(callee.n_steps)]
            windowed += sum(1 for i in range(len(callee)) if max(tapes[i], tapes[i + 1]) > WINDOW)
        units = [len(split_units(callee.text(i))) for i in range(callee.n_steps)]
        longest_executor = max(longest_executor, *(units[i] + units[i + 1] for i in range(len(callee))))
    wide = longest_composer = 0
    for i in range(len(machine_run)):
        before, after = machine_run.phases[i], machine_run.phases[i + 1]
        sizes = [_longest_tape(before.state), _longest_tape(after.state)]
        sizes += [_longest_tape(before.callee.halt.state)] if before.callee else []  # its halt, in the input
        sizes += [_longest_tape(after.callee.state(0))] if after.callee else []  # its start, in the output
        wide += max(sizes) > WINDOW
        longest_composer = max(longest_composer, _units(machine_run.transition(i)))
    return CallCount(len(machine_run), callees, 2, windowed, wide, longest_executor, longest_composer)


# The cells of the design's table: (op, digits of a, digits of b).
TABLE_CELLS = (("long_mul", 10, 10), ("long_mul", 20, 20), ("long_mul", 50, 50),
               ("long_div", 40, 20), ("long_div", 100, 10))


def _operand(rng: random.Random, digits: int) -> int:
    return rng.randrange(10 ** (digits - 1), 10**digits)


def call_table(problems: int = 40, seed: int = 0) -> str:
    """The model calls per problem against length, as a Markdown table: the mean over `problems` random
    problems per cell (operands of exactly that many digits, seeded), with the range."""
    rng = random.Random(seed)
    rows = []
    for op, n, m in TABLE_CELLS:
        pairs = [(_operand(rng, n), _operand(rng, m)) for _ in range(problems)]
        counts = [call_count(op, a, b) for a, b in pairs]
        machines = sorted({name for c in counts for name in c.callees})

        def mean(values) -> str:
            values = list(values)
            low, high, average = min(values), max(values), statistics.fmean(values)
            return f"{average:,.0f}" if low == high else f"{average:,.0f} ({low:,}-{high:,})"

        paper = "MUL" if op == "long_mul" else "DIV"
        paper_steps = statistics.fmean(composer_steps(paper, a, b) - 1 for a, b in pairs)
        callee_text = ", ".join(f"{name} {mean(c.callees.get(name, 0) for c in counts)}" for name in machines)
        symbol = "x" if op == "long_mul" else "/"
        rows.append(
            f"| {op} {n}{symbol}{m} | {mean(c.total for c in counts)} | {mean(c.composer for c in counts)} | "
            f"{callee_text} | {mean(c.windowed for c in counts)} | {mean(c.wide_composer for c in counts)} | "
            f"{max(c.longest_executor for c in counts):,} | {max(c.longest_composer for c in counts):,} | "
            f"{paper_steps:.1e} |")
    header = ("| problem (digits) | model calls | composer | executors | executor calls over 16 cells "
              "| composer calls over 16 cells | longest executor call | longest composer call "
              "| the paper's MUL/DIV: composer calls |\n" + "| --- " * 9 + "|")
    return "\n".join([header, *rows])


if __name__ == "__main__":
    import sys

    count = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    print(f"Mean over {count} seeded random problems per row (the range in brackets); the calls include the two")
    print("aligner calls; 'over 16 cells': a tape or register longer than a window; 'longest': format units (the")
    print("tiny tier's tokens) of a call's input and output together; the paper's MUL and DIV make 3b-1 and 3(a//b)+2\n"
          "composer calls alone (composers.composer_steps, less the start).\n")
    print(call_table(count))
