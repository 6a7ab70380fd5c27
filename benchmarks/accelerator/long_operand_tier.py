"""Issue 66 on a lent accelerator, in one prepared call: a tiny tier whose position ids reach 1,000 digits
a field, trained on the protocol's 1-100 digits with randomised positions, then probed at 10 to 1,000.

    python benchmarks/accelerator/long_operand_tier.py --out DIR [--device cuda] [--base-minutes 3.5]
        [--adapter-minutes 3] [--probe-minutes 1.5] [--stride 1024] [--offsets 896]
    python benchmarks/accelerator/long_operand_tier.py --out work/long_smoke --device cpu --smoke

Why the base too (docs/long-operands.md; results/long_operands.md, "Single steps"): the shipped weights
read "the same cell in the next field" as the fixed RoPE offset of their field stride, 128 (run under a
stride of 256 they get the steps wrong), and on the CPU a LoRA alone, trained from the shipped
executor_add under a stride of 1,024 with offsets, did not get there in 100 steps of 32. So the call:

1. base: the shipped tiny base pre-trained further (`caef-bench train --base-init`) on every machine's
   transitions under `coupled-hints/STRIDE`, each sample's ids but <s>'s and <sep>'s shifted by an
   offset in 0..OFFSETS (models.positions), into DIR/tier/base, stopped at --base-minutes;
2. adapters: the length operators' executors (and SUB's REFLECTION and LEFT_MASK) and aligners, each from
   the shipped one (--adapter-init checkpoints/tiny) on that base with the same offsets and its plan's
   draws, in parallel streams sharing the device, into DIR/tier, stopped at --adapter-minutes;
3. probes (`python -m caef_bench.evaluate.long_operands`, into DIR/long_operands.json): single steps,
   teacher-forced, at 10, 100, 200, 500 and 1,000 digits, then whole runs at 200 digits and up, until
   --probe-minutes.
Every command goes on from its checkpoints when the call is made again. mul and div keep stride 128 and
are not in this tier (it refuses them: their adapters are missing).

Sizing: the shipped base trained 2,800 steps of 128 in 199 s on an H100 with 14 batch workers (its
manifest), ~14 steps/s: 3.5 minutes is ~2,900 steps, about half of all its pre-training so far. The
adapter streams ran 2-6 steps of 128 a second each, ten sharing an H200 (training_round.py).
What comes back under DIR: tier.tgz (base and adapters, no optimizer state), long_operands.json,
logs/, summary.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import time
from pathlib import Path

LENGTH_OPS = "add,sub,gt,lt,eq"
PROBE_LENGTHS = "10,100,200,500,1000"
RUN_LENGTHS = (200, 500, 1000)
# (name, settings): each adapter keeps its plan's draws (train.presets); the executors and aligners run
# gated as the shipped ones were trained (their manifests), SUB's composer ungated
STREAMS = [
    ("executor_add", ["--executors", "add", "--aligners", "", "--anonymous-cells"]),
    ("executor_sub", ["--executors", "sub", "--aligners", ""]),
    ("executor_gt", ["--executors", "gt", "--aligners", "", "--anonymous-cells"]),
    ("executor_lt", ["--executors", "lt", "--aligners", "", "--anonymous-cells"]),
    ("eq_reflection", ["--executors", "eq,reflection", "--aligners", "", "--anonymous-cells"]),
    ("executor_left_mask", ["--executors", "left_mask", "--aligners", "", "--anonymous-cells"]),
    ("aligners_add_sub", ["--executors", "", "--aligners", "add,sub", "--anonymous-digits", "all"]),
    ("aligners_gt_lt", ["--executors", "", "--aligners", "gt,lt", "--anonymous-digits", "all"]),
    ("aligner_eq", ["--executors", "", "--aligners", "eq", "--anonymous-digits", "all"]),
]
SMOKE_STREAMS = [STREAMS[0], STREAMS[6]]


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "caef_bench", *args]


def base_command(tier: Path, device: str, minutes: float, stride: int, offsets: int, smoke: bool) -> list[str]:
    """Pre-train the shipped base further under the long scheme (every machine's transitions: no adapters)."""
    steps, batch, workers = (["3"], ["4"], "0") if smoke else (["3000"], ["128"], "14")
    return _cli("train", "--preset", "tiny", "--out", str(tier), "--base-init", "checkpoints/tiny/base",
                "--executors", "", "--aligners", "", "--position-scheme", f"coupled-hints/{stride}",
                "--position-offsets", str(offsets), "--base-steps", *steps, "--base-lr", "3e-4",
                "--curriculum-steps", "0", "--batch", *batch, "--device", device, "--workers", workers,
                "--eval-per-cell", "0", "--stop-after", str(minutes * 60), "--quiet")


def stream_command(settings: list[str], tier: Path, device: str, minutes: float, offsets: int,
                   smoke: bool) -> list[str]:
    """One stream's adapters, from the shipped ones, on the long base."""
    steps, batch, workers = ("2", "4", "0") if smoke else ("600", "128", "1")
    return _cli("train", "--preset", "tiny", "--base", str(tier / "base"), "--out", str(tier),
                "--adapter-init", "checkpoints/tiny", "--position-offsets", str(offsets), "--stage2-steps", steps,
                "--batch", batch, "--lr", "2e-4", "--device", device, "--workers", workers, "--eval-per-cell", "0",
                "--stop-after", str(minutes * 60), "--quiet", *settings)


def probe_commands(tier: Path, run: Path, smoke: bool) -> list[list[str]]:
    """Single steps at every probe length, then whole runs past 100 digits (resumable records)."""
    n, lengths = ("2", "10,200") if smoke else ("20", PROBE_LENGTHS)
    ops = "add" if smoke else LENGTH_OPS
    out = ["--checkpoints", str(tier), "--out", str(run / "long_operands.json")]
    commands = [_cli_module("--one-step", "--ops", ops, "--lengths", lengths, "--n", n, *out)]
    for digits in (RUN_LENGTHS[:1] if smoke else RUN_LENGTHS):
        commands.append(_cli_module("--beyond-tier-limits", "--ops", "add" if smoke else "add,sub,gt",
                                    "--lengths", str(digits), "--n", "1" if smoke else "20",
                                    "--records", str(run / "records"), *out))
    return commands


def _cli_module(*args: str) -> list[str]:
    return [sys.executable, "-m", "caef_bench.evaluate.long_operands", *args]


def _run(command: list[str], log: Path, timeout: float | None = None) -> int:
    with log.open("a") as handle:
        handle.write(f"$ {' '.join(command[1:])}\n")
        handle.flush()
        try:
            return subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:  # every stage keeps what it finished: the next call goes on
            return 124


def train_streams(streams, tier: Path, logs: Path, device: str, minutes: float, offsets: int, smoke: bool) -> list[dict]:
    processes = []
    for name, settings in streams:
        command = stream_command(settings, tier, device, minutes, offsets, smoke)
        log = (logs / f"{name}.log").open("a")
        log.write(f"$ {' '.join(command[1:])}\n")
        log.flush()
        processes.append((name, command, log, subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)))
    done = []
    for name, command, log, process in processes:
        done.append({"stream": name, "command": "python -m " + " ".join(command[2:]), "exit": process.wait()})
        log.close()
    return done


def pack(tier: Path, run: Path) -> Path:
    """The tier's weights, manifests and loss curves, without the runs' optimizer state."""
    archive = run / "tier.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(tier.rglob("*")):
            if path.is_file() and ".runs" not in path.relative_to(tier).parts:
                tar.add(path, arcname=str(path.relative_to(tier)))
    return archive


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="the run's folder (reused: a second call goes on)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--base-minutes", type=float, default=3.5)
    parser.add_argument("--adapter-minutes", type=float, default=3.0)
    parser.add_argument("--probe-minutes", type=float, default=1.5)
    parser.add_argument("--stride", type=int, default=1024, help="ids per field: fields of up to STRIDE - 1 cells")
    parser.add_argument("--offsets", type=int, default=896,
                        help="each training sample's ids shifted by 0..N: 896 + a 101-digit field + the "
                             "command line stay within a 1,024-id field")
    parser.add_argument("--smoke", action="store_true", help="a CPU try of every stage at a few steps")
    args = parser.parse_args(argv)
    run = Path(args.out)
    tier, logs = run / "tier", run / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    summary: dict = {"stride": args.stride, "offsets": args.offsets, "device": args.device}
    started = time.perf_counter()
    summary["base_exit"] = _run(base_command(tier, args.device, args.base_minutes, args.stride, args.offsets, args.smoke),
                                logs / "base.log")
    summary["base_seconds"] = round(time.perf_counter() - started)
    if not (tier / "base" / "manifest.json").is_file():
        print(f"no base was written (exit {summary['base_exit']}): see {logs / 'base.log'}")
        (run / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
        return 1
    streams = SMOKE_STREAMS if args.smoke else STREAMS
    summary["streams"] = train_streams(streams, tier, logs, args.device, args.adapter_minutes, args.offsets, args.smoke)
    summary["adapter_seconds"] = round(time.perf_counter() - started) - summary["base_seconds"]
    probe_deadline = time.perf_counter() + args.probe_minutes * 60
    summary["probes"] = []
    for command in probe_commands(tier, run, args.smoke):
        left = probe_deadline - time.perf_counter()
        if left <= 5:
            break
        summary["probes"].append({"command": "python -m " + " ".join(command[2:]), "exit": _run(command, logs / "probes.log", left)})
    summary["archive"] = str(pack(tier, run))
    (run / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    return 0 if summary["base_exit"] == 0 and all(s["exit"] == 0 for s in summary["streams"]) else 1


if __name__ == "__main__":
    sys.exit(main())
