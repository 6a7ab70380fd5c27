"""Training on a lent accelerator, in one prepared call: the CAEF adapters of a plan (round2: all sixteen)
trained further from those of --adapter-init (default the shipped tier) with structured operands in their
draws (docs/structured-operands.md),
and with --direct the LoRA-direct learning curve (`caef-bench train-curve`, standard position ids, into
RUN/direct_curve) for every operator, in parallel processes that share the GPU and its CPU cores.

    python benchmarks/accelerator/training_round.py --out DIR [--device cuda] [--scale 1] [--minutes 5]
        [--adapter-init checkpoints/tiny] [--plan round2|round2b] [--direct]

Each stream is one `caef-bench train` or `train-curve` command (recorded in every manifest it writes);
`--scale` multiplies the CAEF streams' step counts (a CPU smoke run: --scale 0.01 --device cpu
--batch 8); `--minutes` stops every stream at that wall time (the same command goes on from its
checkpoints). What comes back, in the official layout and without optimizer state, to be checked on the
CPU before anything is shipped: DIR/caef_adapters.tgz (executors/, aligners/), DIR/direct_*.tgz (the
curve's snapshots, frac_<n>_<d>/direct/<op>/), DIR/logs.tgz (every stream's log and loss curves).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

CAEF = ["train", "--preset", "tiny", "--base", "checkpoints/tiny/base", "--eval-per-cell", "0", "--quiet",
        "--position-scheme", "coupled-hints"]


# Round 2 (name, settings, steps per adapter, batch-building processes: the machines draw a batch of
# 128 in 15-70 ms on one core, the GPU is what bounds a step). Round 1 (160-200 steps of 128,
# structured share 0.4-0.5, lengths uniform) left the 100-digit repeated cells failing at aligner (I);
# CPU pilots from round 1's weights with half or more of the structured draws two operands of one
# length above 50 digits (--structured-long-share 0.5-0.6, 240-300 steps of 32) mended most of the
# aligners and moved the comparison executors' 100-digit p1 steps from 15-30% to 57-84%
# (docs/structured-operands.md). Round 2 starts from that pilot tier (--adapter-init) and gives every
# adapter three to four times round 1's steps: nine streams, one or two executors or two or three
# aligners each, sized by round 1's rates on the H200 (2-6 steps of 128 a second per stream, ten
# streams sharing the GPU) to end in about five and a half minutes.
# Each keeps its plan's other shares (train.presets.TINY_ADAPTER_PLANS).
def _stream(executors: str, aligners: str, lr: str, long_share: str = "0.6") -> list[str]:
    return ["--executors", executors, "--aligners", aligners, "--structured-share", "0.5",
            "--structured-long-share", long_share, "--lr", lr]


ROUND_2_STREAMS = [
    ("executor_add", _stream("add", "", "2e-4"), 600, 1),
    ("executor_sub", _stream("sub", "", "2e-4", "0.5"), 600, 1),
    ("executor_gt", _stream("gt", "", "2e-4"), 800, 1),
    ("executor_lt", _stream("lt", "", "2e-4"), 800, 1),
    ("eq_reflection", _stream("eq,reflection", "", "2e-4"), 400, 1),
    ("helpers", _stream("left_mask,mul,div", "", "2e-4"), 300, 1),
    ("aligners_a", _stream("", "add,sub", "3e-4", "0.5"), 400, 1),
    ("aligners_b", _stream("", "gt,lt", "3e-4", "0.5"), 450, 1),
    ("aligners_c", _stream("", "eq,mul,div", "3e-4", "0.5"), 400, 1),
]


# Round 2b, from round 2's tier: the executors that broke round 2's 100-digit subtractions end to end
# (LEFT_MASK's head written after the first digit, then ADD's and REFLECTION's steps) and the
# structured 100-digit cells its one-step gate left below 99.9% (sub, gt, eq), with half of all draws
# from operands above 50 digits (--long-share) and a lower rate; about three minutes on the H200.
def _long_stream(executors: str) -> list[str]:
    return [*_stream(executors, "", "1.5e-4"), "--long-share", "0.5"]


ROUND_2B_STREAMS = [
    ("executor_left_mask", _long_stream("left_mask"), 500, 1),
    ("executor_add", _long_stream("add"), 400, 1),
    ("executor_reflection", _long_stream("reflection"), 450, 1),
    ("executor_sub", _long_stream("sub"), 350, 1),
    ("gt_eq", _long_stream("gt,eq"), 200, 1),
]
PLANS = {"round2": ROUND_2_STREAMS, "round2b": ROUND_2B_STREAMS}
# The LoRA-direct curve: one run per operator to its whole budget (the samples of its CAEF executor and
# aligner), snapshots at each fraction; the largest budgets get a process of their own.
DIRECT_STREAMS = [["add"], ["sub"], ["gt", "lt"], ["eq", "mul", "div"]]
FRACTIONS = "1/16,1/8,1/4,1/2,1"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="where the archives go (the device's $OUT)")
    parser.add_argument("--run", default="work/training_round", help="the CAEF streams' folders (resumable)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the CAEF streams' steps")
    parser.add_argument("--batch", type=int, default=128,
                        help="the CAEF streams' batch (a CPU smoke run: 8; six streams of 128 fill 24 GB)")
    parser.add_argument("--direct-steps", type=int, help="the curve runs' steps (default: each whole budget)")
    parser.add_argument("--minutes", type=float, default=5.0, help="stop every stream after this many minutes")
    parser.add_argument("--plan", choices=PLANS, default="round2", help="which streams (round2b: from round 2's tier)")
    parser.add_argument("--direct", action="store_true", help="also the LoRA-direct curve (round 1 made it)")
    parser.add_argument("--adapter-init", default="checkpoints/tiny",
                        help="the tier whose adapters this round trains further (and the candidate's other adapters)")
    parser.add_argument("--candidate", help="also write the shipped tier with this round's finished adapters "
                                            "in place of its own here (what the same call then evaluates)")
    args = parser.parse_args(argv)
    out, run = Path(args.out), Path(args.run)
    curve = run / "direct_curve"
    out.mkdir(parents=True, exist_ok=True)
    logs = run / "logs"  # (packed into logs.tgz: a call brings back at most 8 files)
    logs.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    gpu = args.device != "cpu"
    stop = ["--stop-after", str(60 * args.minutes), "--device", args.device]
    commands = {}
    streams = PLANS[args.plan]
    for name, settings, steps, workers in streams:
        commands[name] = [*CAEF, "--batch", str(args.batch), "--adapter-init", args.adapter_init, *settings,
                          "--out", str(run / name),
                          "--stage2-steps", str(max(2, round(steps * args.scale))), "--workers",
                          str(workers if gpu else 0), *stop]
    for ops in (DIRECT_STREAMS if args.direct else []):
        commands["direct_" + "_".join(ops)] = [
            "train-curve", "--ops", ",".join(ops), "--fractions", FRACTIONS, "--out", str(curve), "--quiet",
            "--workers", "1" if gpu else "0", *stop,
            *(["--stage2-steps", str(args.direct_steps)] if args.direct_steps else [])]
    procs = []
    for name, command in commands.items():
        full = [sys.executable, "-m", "caef_bench", *command]
        print(" ".join(full[1:]), flush=True)
        log = open(logs / f"{name}.log", "w")
        procs.append((name, subprocess.Popen(full, stdout=log, stderr=subprocess.STDOUT,
                                             env={**os.environ, "PYTHONUNBUFFERED": "1"}), log))
    codes = {}
    for name, proc, log in procs:
        codes[name] = proc.wait()
        log.close()
        print(f"{name}: exit {codes[name]} after {time.monotonic() - started:.0f} s", flush=True)
    pack(out, run, curve, [name for name, *_ in streams])
    print(f"packed in {time.monotonic() - started:.0f} s", flush=True)
    if args.candidate:
        replaced = assemble_candidate(run, [name for name, *_ in streams], Path(args.candidate),
                                      Path(args.adapter_init))
        print(f"candidate {args.candidate}: {', '.join(replaced) or 'no adapter replaced'}", flush=True)
    return max(codes.values(), default=0)


def finished_adapters(run: Path, streams: list[str]) -> list[Path]:
    """The adapter folders this round wrote (each with its manifest), in the official layout under a stream."""
    return sorted(m.parent for stream in streams for kind in ("executors", "aligners")
                  for m in (run / stream / kind).glob("*/manifest.json"))


def assemble_candidate(run: Path, streams: list[str], candidate: Path,
                       shipped: Path = Path("checkpoints/tiny")) -> list[str]:
    """A copy of the shipped tier with every adapter this round trained to the end of its plan in place of
    the shipped one (one cut short by --minutes is packed for a look, never evaluated as a candidate)."""
    shutil.rmtree(candidate, ignore_errors=True)
    shutil.copytree(shipped, candidate)
    replaced = []
    for folder in finished_adapters(run, streams):
        stages = json.loads((folder / "manifest.json").read_text())["stages"].values()
        if not all(stage.get("complete", True) for stage in stages):
            continue
        target = candidate / folder.parent.name / folder.name
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(folder, target, ignore=shutil.ignore_patterns(".runs", "*.pt", "*.tmp"))
        replaced.append(f"{folder.parent.name}/{folder.name}")
    return replaced


def _no_run_state(info: tarfile.TarInfo):
    return None if "/.runs" in info.name or info.name.endswith((".pt", ".tmp")) else info


def pack(out: Path, run: Path, curve: Path, streams: list[str]) -> None:
    """Finished adapters in the official layout (no optimizer state), in archives under 16 MiB each."""
    with tarfile.open(out / "caef_adapters.tgz", "w:gz") as tar:
        for stream in streams:
            for folder in finished_adapters(run, [stream]):
                tar.add(folder, arcname=str(folder.relative_to(run / stream)), filter=_no_run_state)
    direct_archives = (("direct_a", ("add", "sub", "gt", "lt")), ("direct_b", ("eq", "mul", "div")))
    for name, ops in direct_archives if curve.is_dir() else ():  # (no curve without --direct)
        with tarfile.open(out / f"{name}.tgz", "w:gz") as tar:
            for snapshot in sorted(curve.glob("frac_*/direct/*")):
                if snapshot.name in ops:
                    tar.add(snapshot, arcname=str(snapshot.relative_to(curve)), filter=_no_run_state)
    with tarfile.open(out / "logs.tgz", "w:gz") as tar:  # every stream's log and loss curves, finished or not
        tar.add(run / "logs", arcname="logs")
        for folder in [run / stream for stream in streams] + [curve]:
            for path in sorted(folder.rglob("*.jsonl")) + sorted(folder.rglob("manifest.json")):
                tar.add(path, arcname=str(path))


if __name__ == "__main__":
    sys.exit(main())
