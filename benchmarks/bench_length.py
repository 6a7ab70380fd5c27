"""Benchmark (not a test): what operand length costs a CAEF run on this CPU.

    python benchmarks/bench_length.py --op add --lengths 5,10,20,50,100 --n 2 --out results/bench_length.md
    python benchmarks/bench_length.py --rerender --out results/bench_length.md   # layout only, no measuring

For each length it solves --n problems (drawn as the test cells are: data.testsets.length_records) one
at a time on one loaded model and prints the wall time a problem, the model calls a problem, the forward
passes per executor step (speculative decoding: 1.00 when every draft is accepted), the tokens of one
verify pass, and the tokens/s of those passes. A step's verify pass re-reads its whole state, whose
length grows with the operands, and a problem has about as many steps as digits, so a problem's cost
grows about with the square of its length; the fitted exponent says how close. The exact machine's
(stdlib) time per problem is printed beside it, out to 1,000 digits, where no model is run. Lengths past
the tier's limit need --beyond-tier-limits (what a run costs there, right or wrong).
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import re
import shlex
import sys
import time
from pathlib import Path

import torch

from caef_bench.data.testsets import length_records
from caef_bench.evaluate.scoring import is_correct
from caef_bench.evaluate.suites import as_problems
from caef_bench.models.limits import TIER_LIMITS, WINDOWED_OPS
from caef_bench.runtime import solve_batch
from caef_bench.runtime.problem import reference_steps
from caef_bench.runtime.hf import DecodeStats, load_step_model
from written_report import recorded, replace_section, section

HEADING = "# Length benchmark: what operand length costs a CAEF run"
MACHINE_LENGTHS = (5, 10, 20, 50, 100, 200, 500, 1000)
LINE = re.compile(r"^\s*(\w+)\s+(\d+) digits: .*?([\d.]+) s a problem,\s+([\d.]+) passes per executor step")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--checkpoints")
    parser.add_argument("--op", default="add")
    parser.add_argument("--lengths", default="5,10,20,50,100")
    parser.add_argument("--n", type=int, default=2)
    parser.add_argument("--beyond-tier-limits", action="store_true", help="allow lengths past the tier's limit")
    parser.add_argument("--windowed", action="store_true",
                        help="run as the tier runs add and the comparisons now: whole states up to its limit, a window "
                             "of each state at a time past it (runtime.windowed); reported in a section of its own")
    parser.add_argument("--out", help="also write the report to this Markdown file, with the command that made it")
    parser.add_argument("--rerender", action="store_true",
                        help="measure nothing: write --out's part again from the command and report it holds")
    args = parser.parse_args()
    heading, reading = SECTIONS[args.op if args.windowed and args.op in SECTIONS else "windowed" if args.windowed
                                else "whole"]
    if args.rerender:
        command, report = recorded(args.out, heading)
        replace_section(Path(args.out), heading, section(heading, finding(report), report, command, reading))
        return
    lengths = [int(n) for n in args.lengths.split(",")]
    limit = TIER_LIMITS[args.model].max_digits
    windowing = TIER_LIMITS[args.model].windowing if args.windowed else None
    if args.windowed and args.op not in WINDOWED_OPS:
        parser.error(f"--windowed runs {', '.join(WINDOWED_OPS)}, not {args.op}")
    if args.windowed:
        limit = TIER_LIMITS[args.model].windowed_digits or limit
    if max(lengths) > limit and not args.beyond_tier_limits:
        parser.error(f"lengths past the {args.model} tier's {limit} digits need --beyond-tier-limits")
    model = load_step_model(args.model, args.checkpoints, speculative=True, ops=[args.op])
    lines = [f"{args.op}, {args.n} problems a length, one at a time, model {args.model} {args.checkpoints or ''}"
             f"(weights {model.fingerprint}), {platform.machine()}, {torch.get_num_threads()} torch threads, "
             f"load average {os.getloadavg()[0]:.1f} at the start"]
    for digits in lengths:
        problems = as_problems(length_records(args.op, digits, args.n))
        seconds, calls, right, steps, passes = 0.0, 0, 0, 0, 0
        model.stats = DecodeStats()
        for problem in problems:
            start = time.perf_counter()
            [record] = solve_batch([problem], model, mode="free", batch_size=1, windowing=windowing)
            seconds += time.perf_counter() - start
            calls += record.n_steps
            right += is_correct(record)
        for adapter, (n_steps, n_passes, _) in model.stats.by_adapter.items():
            if adapter.startswith("executor"):
                steps, passes = steps + n_steps, passes + n_passes
        stats = model.stats
        width = stats.real_tokens / max(stats.verify_rows, 1)
        rate = stats.real_tokens / max(stats.verify_seconds, 1e-9)
        lines.append(f"{args.op:>4} {digits:>4} digits: {right}/{len(problems)} right, {calls / len(problems):7.1f} calls "
                     f"a problem, {seconds / len(problems):8.2f} s a problem, {passes / max(steps, 1):5.2f} passes per "
                     f"executor step, {width:6.0f} tokens a verify row, {rate:7.0f} tokens/s in verify passes")
    for digits in MACHINE_LENGTHS:
        records = length_records(args.op, digits, args.n)
        start = time.perf_counter()
        calls = sum(1 for row in records for _ in reference_steps(row["expr"]))  # every text a run reads and writes
        lines.append(f"machine {digits:>4} digits: {(time.perf_counter() - start) / len(records) * 1000:8.2f} ms a problem "
                     f"(stdlib, no model; {calls / len(records):.0f} steps, every text rendered)")
    lines.append(f"load average {os.getloadavg()[0]:.1f} at the end")
    print("\n".join(lines))
    if args.out:
        command = "python " + " ".join(shlex.quote(a) for a in sys.argv)
        replace_section(Path(args.out), heading, section(heading, finding(lines), lines, command, reading))


READING = ("How to read it: each executor step is one verify pass over its state and its draft (speculative "
           "decoding), so a step costs in proportion to the state's tokens, about 3 per digit of the operands for "
           "addition, and a problem makes about one step per digit: time a problem grows about with the square of "
           "the length; the exponent is fitted to the two longest lengths measured. The machine's time is the "
           "exact stdlib run: what the arithmetic itself costs, for scale. On a shared machine every time moves "
           "with the load.")


WINDOWED_HEADING = "## Windowed runs: what length costs past the fields of ids"
WINDOWED_READING = ("How to read it: up to the tier's limit a problem runs on whole states, as above; past it each "
                    "executor step reads a window of fixed size (runtime.windowed: 16 cells of each tape), so its "
                    "forward pass costs the same at every length (the tokens a verify row stay put). What still "
                    "grows with the length is the runtime's own work at each step (splicing the window back into the "
                    "whole state, and the machine's next window drafted from it), so a problem's time grows a little "
                    "faster than its length. The aligners' chunks add a few calls (one per 50 digits, each way). On a "
                    "shared machine every time moves with the load.")


# The report's sections, each rewritten by the run that measures it: whole states, windowed runs (add and the
# comparisons, whose executors read a window), and windowed subtraction (its composer steps run in chunks too).
SECTIONS = {
    "whole": (HEADING, READING),
    "windowed": (WINDOWED_HEADING, WINDOWED_READING),
    "sub": ("## Windowed subtraction: what its chunks cost",
            "How to read it: past the tier's limit SUB's five composer steps run in chunks of 50 columns (a "
            "1,000-digit subtraction has 21 a step), and its callees REFLECTION, ADD (twice) and LEFT_MASK a "
            "window at a time (runtime.windowed, docs/long-operands.md), so a subtraction makes about four "
            "times an addition's model calls, each a window or a chunk of fixed size. On a shared machine every "
            "time moves with the load."),
}


def finding(lines: list[str]) -> str:
    """The longest length's time and the growth exponent between the two longest, from the printed lines."""
    points = [(int(m[2]), float(m[3]), float(m[4]), m[1]) for m in map(LINE.match, lines) if m]
    if len(points) < 2:
        return "Too few lengths measured to say how cost grows."
    (n1, t1, _, _), (n2, t2, p2, op) = points[-2], points[-1]
    exponent = math.log(t2 / t1) / math.log(n2 / n1)
    machine = {int(m[1]): float(m[2]) for m in (re.match(r"^machine\s+(\d+) digits:\s+([\d.]+) ms", line) for line in lines) if m}
    longest = max(machine) if machine else None
    return (f"A {n2}-digit {op} takes {t2:.1f} s on this CPU, {t2 / t1:.1f}x a {n1}-digit one: time grows as "
            f"length^{exponent:.1f} there, at {p2:.2f} forward passes per executor step"
            + (f"; at that rate a 1,000-digit {op} would take about {t2 * (1000 / n2) ** exponent / 60:.0f} minutes (an "
               f"extrapolation, not a measurement)" if n2 < 1000 else "")
            + (f"; the exact machine renders every text of a {longest:,}-digit one in {machine[longest]:.0f} ms."
               if longest else "."))


if __name__ == "__main__":
    main()
