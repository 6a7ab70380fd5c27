"""Benchmark (not a test): `caef-bench solve`'s cold start, and `caef-bench serve` under concurrent clients.

    python benchmarks/bench_serving.py [--repeats 3] [--problems 64] [--solve-problems 3] \
        [--out results/bench_runtime.md]
    python benchmarks/bench_serving.py --rerender --out results/bench_runtime.md   # layout only, no measuring

Every figure is a ratio against a baseline measured in the same run, on the same machine:
- cold start: `caef-bench solve "12+34="` wall time against `python -c "import torch, transformers"`,
  the two alternated --repeats times (medians), with torch's default threads and with OMP_NUM_THREADS=1
  (the rest runs with the environment's setting);
- warm: the same problem as a request to a running `caef-bench serve`, per problem (median of
  sequential requests), against the cold solve;
- throughput: add_10 problems per second through one `caef-bench serve` with 1, 8 and 64 concurrent
  clients, against `caef-bench solve` run once per problem, one after another.
Every answer is checked. --out replaces this benchmark's section of the file (or adds it) and keeps
the rest. The processes it starts inherit the environment: set OMP_NUM_THREADS to compare threads.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from caef_bench.data.testsets import load_cell
from written_report import parse_arguments, write_section

SECTION = "## Start-up and serving"
READING = """How to read it: a cold `solve` pays for importing torch and transformers, then transformers' own
model-loading imports, then the two adapters its problem calls; a warm server pays for the problem
alone. On a CPU a batched round's forward pass costs in proportion to its tokens (each step is one verify
pass over its prompt and draft), so concurrent clients share per-call overhead and start-up, not the
arithmetic: the gain over sequential `solve` is mostly the start-up each process pays. The load
average is printed because on a shared machine every figure moves with it; under contention torch's
default threads spin against each other, which OMP_NUM_THREADS=1 avoids (docs/serving.md)."""
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
CLI = [sys.executable, "-m", "caef_bench"]


def wall(command: list[str], env: dict = ENV) -> float:
    started = time.perf_counter()
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def solve_answer(expr: str, env: dict = ENV) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run([*CLI, "solve", expr], env=env, capture_output=True, text=True)
    return time.perf_counter() - started, done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""


def cold_start(repeats: int, env: dict) -> tuple[float, float]:
    """Medians of (solve "12+34=", import torch, transformers), alternated."""
    imports, solves = [], []
    for _ in range(repeats):
        imports.append(wall([sys.executable, "-c", "import torch, transformers"], env))
        seconds, answer = solve_answer("12+34=", env)
        assert answer == "12+34=46", answer
        solves.append(seconds)
    return statistics.median(solves), statistics.median(imports)


def post(base: str, expr: str) -> str:
    body = json.dumps({"model": "caef-tiny", "prompt": expr}).encode()
    request = urllib.request.Request(base + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=3600) as reply:
        return json.loads(reply.read())["choices"][0]["text"]


def start_server() -> tuple[subprocess.Popen, str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen([*CLI, "serve", "--port", str(port)], env=ENV, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    while True:
        try:
            with urllib.request.urlopen(base + "/health", timeout=5):
                return server, base
        except OSError:
            if server.poll() is not None:
                raise RuntimeError("caef-bench serve did not start") from None
            time.sleep(0.5)


def clients(base: str, rows: list[dict], concurrent: int) -> tuple[float, int]:
    """(seconds, right answers) for `rows` sent by `concurrent` clients, each taking the next problem."""
    started = time.perf_counter()
    with ThreadPoolExecutor(concurrent) as pool:
        answers = list(pool.map(lambda row: post(base, row["expr"]), rows))
    seconds = time.perf_counter() - started
    return seconds, sum(answer == row["answer"] for answer, row in zip(answers, rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="cold starts of each kind (alternated)")
    parser.add_argument("--warm", type=int, default=10, help="sequential warm requests of 12+34=")
    parser.add_argument("--problems", type=int, default=64, help="add_10 problems per concurrency level (8, 64)")
    parser.add_argument("--single", type=int, default=16, help="add_10 problems for the one-client level")
    parser.add_argument("--solve-problems", type=int, default=3, help="add_10 problems solved one process each")
    args = parse_arguments(parser, SECTION, finding, READING)
    if args is None:  # --rerender: laid out again, nothing measured
        return
    load_before = os.getloadavg()
    lines = [f"{platform.machine()}, {os.cpu_count()} CPUs, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, "
             f"load average {load_before[0]:.1f} at the start"]

    unset = {key: value for key, value in ENV.items() if key != "OMP_NUM_THREADS"}
    settings = {"torch's default threads": unset, "OMP_NUM_THREADS=1": {**unset, "OMP_NUM_THREADS": "1"}}
    colds = {}
    for label, env in settings.items():
        colds[label], baseline = cold_start(args.repeats, env)
        lines.append(f"cold start ({label}): solve \"12+34=\" {colds[label]:.2f} s, python -c \"import torch, "
                     f"transformers\" {baseline:.2f} s (medians of {args.repeats}): ratio {colds[label] / baseline:.2f}")
    # the rest runs as this process was started
    cold = colds["OMP_NUM_THREADS=1" if os.environ.get("OMP_NUM_THREADS") == "1" else "torch's default threads"]

    rows = load_cell("add_10")
    sequential = []
    for row in rows[:args.solve_problems]:
        seconds, answer = solve_answer(row["expr"])
        assert answer == row["expr"] + row["answer"], answer
        sequential.append(seconds)
    solve_rate = len(sequential) / sum(sequential)
    lines.append(f"sequential solve, add_10: {len(sequential)} problems in {sum(sequential):.1f} s, "
                 f"{solve_rate:.3f} problems/s")

    server, base = start_server()
    try:
        assert post(base, "12+34=") == "46" and post(base, rows[0]["expr"]) == rows[0]["answer"]  # adapters attached
        warm = []
        for _ in range(args.warm):
            started = time.perf_counter()
            assert post(base, "12+34=") == "46"
            warm.append(time.perf_counter() - started)
        per_problem = statistics.median(warm)
        lines.append(f"warm request through serve, 12+34=: {per_problem:.3f} s per problem (median of {args.warm}): "
                     f"{cold / per_problem:.1f}x faster than the cold solve")
        for concurrent in (1, 8, 64):
            chosen = rows[:args.single if concurrent == 1 else args.problems]
            seconds, right = clients(base, chosen, concurrent)
            assert right == len(chosen), f"{len(chosen) - right} wrong answers at {concurrent} clients"
            rate = len(chosen) / seconds
            lines.append(f"serve, add_10, {concurrent:>2} concurrent clients: {len(chosen)} problems in {seconds:.1f} s, "
                         f"{rate:.2f} problems/s, {rate / solve_rate:.1f}x sequential solve")
        health = json.loads(urllib.request.urlopen(base + "/health", timeout=30).read())
        weights = json.loads(urllib.request.urlopen(base + "/v1/models", timeout=60).read())["data"][0]["caef_weights"]
        lines.append(f"every answer right; the widest round carried {health['widest_round']} problems; "
                     f"weights {weights}; load average {os.getloadavg()[0]:.1f} at the end")
    finally:
        server.terminate()
        server.wait(60)
    print("\n".join(lines))
    if args.out:
        write_section(args.out, SECTION, finding, lines, READING, environment=("OMP_NUM_THREADS",))


def finding(lines: list[str]) -> str:
    """A warm request against a cold solve, and the server's throughput against sequential solves, from the
    printed lines."""
    text = "\n".join(lines)
    warm = re.search(r"^warm request through serve, (\S+): ([\d.]+) s per problem .*?: ([\d.]+)x faster", text, re.M)
    rates = re.findall(r"^serve, (\w+), +(\d+) concurrent clients: .*?, ([\d.]+) problems/s, ([\d.]+)x sequential",
                       text, re.M)
    clients = [int(n) for _, n, _, _ in rates]
    speeds = [float(rate) for _, _, rate, _ in rates]
    gains = [float(gain) for _, _, _, gain in rates]
    return (f"A warm `caef-bench serve` answers `{warm[1]}` in {warm[2]} s, {warm[3]}x faster than a cold "
            f"`caef-bench solve` (which imports torch and loads the model first); on {rates[0][0]} it serves "
            f"{min(speeds):.2f}-{max(speeds):.2f} problems/s at {min(clients)} to {max(clients)} concurrent clients, "
            f"{min(gains):.1f}-{max(gains):.1f}x solving them one `solve` process after another.")


if __name__ == "__main__":
    main()
