"""Benchmark (not a test): time to build the addition executor set of the protocol.

    python benchmarks/bench_data_build.py [--max-len 100] [--per-class 20]

20 expressions per (len(a), len(b)) class for lengths 1..100: 200,000 traces,
about a million transitions, written to a temporary folder and removed.
"""

from __future__ import annotations

import argparse
import tempfile
import time

from caef_bench.data.training import BuildConfig, build


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-len", type=int, default=100)
    parser.add_argument("--per-class", type=int, default=20)
    args = parser.parse_args()
    config = BuildConfig(max_len=args.max_len, per_class=args.per_class, ops=("add",), kinds=("executor",))
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        summary = build(out, config, progress=False)
        elapsed = time.perf_counter() - start
    samples = sum(f["samples"] for f in summary["files"].values())
    print(f"add executor data, lengths 1..{args.max_len}, {args.per_class} per class: "
          f"{samples:,} samples in {elapsed:.1f} s ({samples / elapsed:,.0f} samples/s)")


if __name__ == "__main__":
    main()
