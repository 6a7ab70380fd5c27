"""Benchmark (not a test): CAEF problems per second against batch size, this runtime against an earlier
one, beside a FLOP estimate and the machine's own matrix rate.

    python benchmarks/bench_throughput.py [--baseline a78309b] [--cells add_10,add_100] [--batches 1,16,64] \\
        [--repeats 2] [--threads 1] [--json work/bench_throughput.json] [--out results/bench_runtime.md]
    python benchmarks/bench_throughput.py --report work/bench_throughput.json --out results/bench_runtime.md

Each measurement is a fresh process (`--worker`) that loads the shipped tiny tier, solves one problem
of the cell to attach its adapters, then times `runtime.Rounds` on the cell's first problems with
`batch_size` prompts per model call (batch 1: one problem's step at a time, as the paper's loop runs;
16 and 64: that many problems moved one step per model call). The baseline is the runtime at git
revision --baseline (a78309b: before batched evaluation, folded adapters and length buckets came
in), exported from git to a temporary folder and imported in place of this checkout's package,
with this checkout's checkpoints (the same weights). Old and new alternate, configuration by
configuration, --repeats times; every process records the load average at its start and end, since on
a shared machine every figure moves with it; problems per CPU-second (process time) moves less.

Every measurement also hashes what it computed (each problem's answer, outcome and step texts), and
the report says whether old and new computed the same. add_100 at batch 16 and 64 is timed over its
first --rounds rounds (default 12 of each problem's 106 model calls) and scaled to the whole problem:
every step of a 100-digit addition has the same width, so a round costs the same throughout.

FLOP estimate (`caef_bench.runtime.cost`): per token, 2 x the weights it passes through (the base's
projections, plus the LoRA factors where an adapter is applied unfolded, and the tied output
projection) and 4 x layers x hidden x the row's width for attention; times the tokens a correct run
processes (each model call's prompt and output, one verify pass). "limit" is the problems per CPU-second this machine's float32 matrix product rate
(measured in the same run, one thread, at the model's own shapes) would give if every FLOP ran at it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SECTION = "## Problems per second against batch size"
BASELINE = "a78309b"  # the runtime before batched evaluation, folded adapters and length buckets
PROBLEMS = {("add_10", 1): 16, ("add_100", 1): 2}  # at batch 1; otherwise one batch of problems
# decode statistics counted over the timed run (the old runtime has the first two only)
COUNTED = ("steps", "forward_passes", "verify_passes", "padded_tokens", "real_tokens", "verify_seconds")
READING = """How to read it: "old" is the runtime at the baseline revision, "new" this checkout's, both on one
thread (--threads) with the same weights; problems/s is wall time, /cpu-s per second of this process's
own CPU time, which moves less with the machine's load. "padded" is the share of computed tokens that
were padding (new only: the old runtime does not count them). The limit column divides the measured
matrix rate by the FLOPs of one problem: no implementation that computes every token of every verify
pass in float32 gets past it on this machine, so new/limit is how much of the CPU the runtime uses."""


# --------------------------------------------------------------------------- one measurement (a process)


def worker(spec: dict) -> dict:
    import torch

    torch.set_num_threads(spec["threads"])
    load = os.getloadavg()[0]
    from caef_bench.data.testsets import load_cell
    from caef_bench.evaluate.suites import as_problems
    from caef_bench.runtime import Rounds
    from caef_bench.runtime.hf import load_step_model

    started = time.perf_counter()
    model = load_step_model("tiny")
    loaded = time.perf_counter() - started
    problems = as_problems(load_cell(spec["cell"])[: spec["problems"]])
    warm = Rounds(model, "traced")
    warm.join(problems[0])
    while warm.active:
        warm.round()
    stats = model.stats
    before = {key: getattr(stats, key, None) for key in COUNTED}  # the warm-up's are not the run's
    rounds = Rounds(model, "traced", batch_size=spec["batch"])
    digest, finished, made = hashlib.sha256(), [], 0
    wall, cpu = time.perf_counter(), time.process_time()
    for problem in problems:
        rounds.join(problem)
    while rounds.active and (not spec["rounds"] or made < spec["rounds"]):
        finished += rounds.round()
        made += 1
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    # scale a cut-off run to whole problems: the rounds it made, of the rounds one problem needs
    from caef_bench.runtime.problem import reference_steps

    calls = len(list(reference_steps(problems[0].expr)))
    share = 1.0 if not rounds.active else made / calls
    for record in sorted(finished, key=lambda r: r.id):
        digest.update(json.dumps([record.id, record.answer, record.outcome, [s.output for s in record.steps]]).encode())
    for attempt in sorted(rounds.active, key=lambda a: a.problem.id):  # cut-off problems: their steps so far
        digest.update(json.dumps([attempt.problem.id, [s.output for s in attempt.record.steps]]).encode())
    counted = {key: None if before[key] is None else getattr(stats, key) - before[key] for key in COUNTED}
    return {"wall": wall, "cpu": cpu, "problems": len(problems) * share, "load_start": load,
            "load_end": os.getloadavg()[0], "load_seconds": loaded, "digest": digest.hexdigest()[:16],
            "correct": sum(r.answer == r.target for r in finished), "finished": len(finished),
            "merged": getattr(model, "merged", None) is not None, "threads": torch.get_num_threads(), **counted}


# --------------------------------------------------------------------------- FLOPs and the matrix rate


def flops_per_problem(cell: str, problems: int, folded: bool) -> float:
    """Model FLOPs of a correct run's verify passes (`runtime.cost`), averaged over the cell's first problems."""
    from caef_bench.data.testsets import load_cell
    from caef_bench.runtime.cost import Shape, work_of
    from caef_bench.runtime.hf import load_step_model

    model = load_step_model("tiny", merge_adapters=False)
    rank = 0
    if not folded:
        model.activate("executor_add")  # attached: its rank is every shipped adapter's (the tiny preset's)
        rank = model.model.peft_config["executor_add"].r
    work = work_of([row["expr"] for row in load_cell(cell)[:problems]], Shape.of(model.model.config, rank),
                   model.codec_for)
    return work.flops / work.problems


def matrix_rate() -> float:
    """float32 FLOP per CPU-second of one thread on the tiny model's projection shapes (median of 5)."""
    import torch

    torch.set_num_threads(1)
    rates = []
    for _ in range(5):
        for rows, inner, outer in ((4096, 256, 256), (4096, 256, 768), (4096, 768, 256)):
            a, w = torch.randn(rows, inner), torch.randn(outer, inner)
            torch.nn.functional.linear(a, w)
            started = time.process_time()
            for _ in range(10):
                torch.nn.functional.linear(a, w)
            rates.append(20 * rows * inner * outer / (time.process_time() - started))
    return statistics.median(rates)


# --------------------------------------------------------------------------- the run


def export_baseline(revision: str, folder: Path) -> Path:
    """The package at `revision`, from git, in `folder` (its own copy: nothing in this checkout changes)."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", revision, "caef_bench"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def measure(code: Path, spec: dict) -> dict:
    env = {**os.environ, "PYTHONPATH": str(code), "CAEF_BENCH_DATA": str(REPO), "OMP_NUM_THREADS": str(spec["threads"]),
           "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, __file__, "--worker", json.dumps({**spec, "code": str(code)})],
                          env=env, capture_output=True, text=True, cwd=str(REPO))
    if done.returncode:
        raise RuntimeError(f"worker {spec} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(args) -> dict:
    cells, batches = args.cells.split(","), [int(b) for b in args.batches.split(",")]
    configs = [(cell, batch) for cell in cells for batch in batches]
    with tempfile.TemporaryDirectory() as tmp:
        codes = {"old": export_baseline(args.baseline, Path(tmp)), "new": REPO}
        results = {"command": args.command, "baseline": args.baseline, "threads": args.threads,
                   "machine": f"{platform.machine()}, {os.cpu_count()} CPUs", "load_start": os.getloadavg()[0],
                   "matrix_rate": matrix_rate(), "measurements": []}
        for repeat in range(args.repeats):
            for cell, batch in configs:
                for version in ("old", "new") if repeat % 2 == 0 else ("new", "old"):  # alternate who goes first
                    spec = {"cell": cell, "batch": batch, "threads": args.threads,
                            "problems": min(PROBLEMS.get((cell, batch), batch), args.problems or batch * 64),
                            "rounds": args.rounds if cell == "add_100" and batch > 1 else 0}
                    found = measure(codes[version], spec)
                    results["measurements"].append({"version": version, "repeat": repeat, **spec, **found})
                    if args.json:  # as it goes: a long run that is stopped keeps what it measured
                        save(results, args.json)
                    print(f"{version} {cell} batch {batch}: {found['problems'] / found['wall']:.3f} problems/s, "
                          f"{found['problems'] / found['cpu']:.3f} per cpu-s, load {found['load_start']:.1f}",
                          file=sys.stderr, flush=True)
        results["load_end"] = os.getloadavg()[0]
    results["flops"] = {cell: {"unfolded": flops_per_problem(cell, 16, folded=False),
                               "folded": flops_per_problem(cell, 16, folded=True)} for cell in cells}
    return results


def report(results: dict) -> str:
    import pandas as pd

    rows = pd.DataFrame(results["measurements"])
    rows["per_s"] = rows["problems"] / rows["wall"]
    rows["per_cpu_s"] = rows["problems"] / rows["cpu"]
    loads = rows[["load_start", "load_end"]].stack()
    lines = [f"{results['machine']}, {results['threads']} torch thread(s); baseline {results['baseline']}; "
             f"load average {loads.min():.1f} to {loads.max():.1f} over the run (median {loads.median():.1f}); "
             f"float32 matrix rate {results['matrix_rate'] / 1e9:.0f} GFLOP per CPU-second (one thread)"]
    table = []
    for (cell, batch), group in rows.groupby(["cell", "batch"], sort=False):
        old, new = group[group.version == "old"], group[group.version == "new"]
        flops = results["flops"][cell]
        limit = results["matrix_rate"] / flops["folded" if new.merged.all() else "unfolded"]
        padded = (new.padded_tokens.sum() - new.real_tokens.sum()) / new.padded_tokens.sum() \
            if new.padded_tokens.notna().all() and new.padded_tokens.sum() else float("nan")
        table.append({
            "cell": cell, "batch": batch, "runs": f"{len(old)}+{len(new)}",
            "old /s": statistics.median(old.per_s), "new /s": statistics.median(new.per_s),
            "old /cpu-s": statistics.median(old.per_cpu_s), "new /cpu-s": statistics.median(new.per_cpu_s),
            "new/old (cpu)": statistics.median(new.per_cpu_s) / statistics.median(old.per_cpu_s),
            "limit /cpu-s": limit, "new/limit": statistics.median(new.per_cpu_s) / limit,
            "GFLOP/problem": flops["folded" if new.merged.all() else "unfolded"] / 1e9,
            "padded": padded,
            "new Python ms/call": statistics.median((new.cpu - new.verify_seconds) / new.steps * 1e3)
            if new.verify_seconds.notna().all() else float("nan"),
            "same outputs": bool(set(old.digest) == set(new.digest) and len(set(new.digest)) == 1),
            "load": f"{group.load_start.min():.1f}-{group.load_end.max():.1f}"})
    frame = pd.DataFrame(table)
    lines.insert(0, finding(frame))
    lines.append(frame.to_markdown(index=False, floatfmt=".3g"))
    cut = rows[rows.rounds > 0]
    if len(cut):
        lines.append(f"add_100 at batch > 1: timed over the first {int(cut.rounds.iloc[0])} rounds, scaled to whole "
                     "problems (see the script's docstring).")
    return "\n\n".join(lines)


def finding(frame) -> str:
    """The report's opening, from its table: per cell, the new runtime's problems per CPU-second against
    the old one's at each batch size, and whether both computed the same."""
    parts = []
    for cell, rows in frame.groupby("cell", sort=False):
        ratios = ", ".join(f"{row['new/old (cpu)']:.2f}x at batch {row['batch']}" for _, row in rows.iterrows())
        best = rows.loc[rows["new /cpu-s"].idxmax()]
        parts.append(f"{cell} {ratios} (most: {best['new /cpu-s']:.3g} problems per CPU-second at batch {best['batch']})")
    same = "the same answers and step texts" if frame["same outputs"].all() else "OUTPUTS THAT DIFFER in some rows"
    return ("Problems per CPU-second of this runtime against the one before batched evaluation, folded "
            "adapters and length buckets, one thread each: "
            + "; ".join(parts) + f"; old and new computed {same}.")


def save(results: dict, path: str) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(results, indent=1) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--baseline", default=BASELINE, help=f"git revision of the old runtime (default {BASELINE})")
    parser.add_argument("--cells", default="add_10,add_100")
    parser.add_argument("--batches", default="1,16,64")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=12, help="add_100 at batch > 1: rounds timed (0: to the end)")
    parser.add_argument("--problems", type=int, help="at most this many problems per measurement (a quick try)")
    parser.add_argument("--json", help="write the measurements here")
    parser.add_argument("--report", metavar="JSON", help="measure nothing: write the report of an earlier --json")
    parser.add_argument("--out", help="replace (or add) this benchmark's section in this Markdown file")
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return
    args.command = "python " + " ".join(shlex.quote(a) for a in sys.argv)
    results = json.loads(Path(args.report).read_text()) if args.report else run(args)
    if args.json and not args.report:
        save(results, args.json)
    text = report(results)
    print(text)
    if args.out:
        from written_report import HOW_MADE, replace_section

        replace_section(Path(args.out), SECTION, f"{SECTION}\n\n{text}\n\n{READING}\n\n{HOW_MADE}\n\n"
                        f"Generated by `{results['command']}`" + (f", reported by `{args.command}`" if args.report
                                                                 else "") + ".\n")


if __name__ == "__main__":
    main()
