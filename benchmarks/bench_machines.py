"""Benchmark (not a test): how fast the machines write transitions.

    python benchmarks/bench_machines.py [--digits 100] [--seconds 5]

Prints transitions per second for whole addition traces with operands of the
given length (every transition rendered, both sides), for sampled access
(first, last and three random middle transitions of each trace, the way the
training-data builder reads them) and, for comparison, for the generic
dataclass renderer that every machine shares.
"""

from __future__ import annotations

import argparse
import platform
import random
import time

from caef_bench.machines import render, run, trace


def _rate(make_problem, count_transitions, seconds: float) -> float:
    done, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        done += count_transitions(*make_problem())
    return done / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--digits", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    low, high = 10 ** (args.digits - 1), 10**args.digits - 1

    def problem():
        return rng.randint(low, high), rng.randint(low, high)

    def whole(a, b):
        return len(trace("add", a, b))

    def sampled(a, b):
        machine = run("add", a, b)
        picks = {0, len(machine) - 1, *(rng.randrange(len(machine)) for _ in range(3))}
        for i in picks:
            machine.transition(i)
        return len(picks)

    def generic(a, b):
        machine = run("add", a, b)
        texts = [render(machine.snapshot(i)) for i in range(machine.n_steps)]
        return len(texts) - 1

    print(f"python {platform.python_version()} on {platform.machine()}, {args.digits}-digit addition, seed {args.seed}")
    for name, fn in (("whole traces", whole), ("sampled steps", sampled), ("generic renderer", generic)):
        print(f"{name:>17}: {_rate(problem, fn, args.seconds):>10,.0f} transitions/s")


if __name__ == "__main__":
    main()
