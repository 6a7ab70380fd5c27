"""The LoRA-direct baseline on a lent accelerator, in one prepared call: every operator's learning curve
(`caef-bench train-curve`, draws that follow the test protocol, snapshots at 1/16 ... 1 of its budget)
in parallel processes sharing the device, each stopped at --minutes (the same command goes on from its
checkpoint in the next call), then every snapshot on its operator's Table 1 cells (`caef-bench
eval-curve`), then the report.

    python benchmarks/accelerator/direct_adapters.py --out DIR [--device cuda] [--minutes 6] [--eval-minutes 2]
        [--ops add,sub,mul,div,gt,lt,eq] [--per-cell 100] [--resume resume.tgz]
        [-- extra train-curve flags, e.g. --adapter full]
    python benchmarks/accelerator/direct_adapters.py --out work/direct_smoke --device cpu --smoke
    python benchmarks/accelerator/direct_adapters.py --out work/direct_cpu_b32 --pack-only   # a CPU run, to go on

Sizing (issue 61): a direct sample is ~250 tokens under the protocol's draws (data.direct.LENGTH_RULE),
budgets are 187k (div) to 687k (add) samples, 3.3M in all: ~0.8G tokens. The earlier curve trained
~220k tokens/s per stream on an H200 with seven streams sharing it (checkpoints/tiny/direct manifests:
77M tokens in 353 s), so the whole budget is ~10 minutes of seven streams at that rate, the 1/4 points
about three. The script prints each stream's tokens/s after its first minute and what fraction of the
budget each operator reached; what did not finish goes on in the next call with the same command.
What comes back under DIR: curve.tgz (every snapshot frac_*/direct/<op>/, no optimizer state),
resume.tgz (each run's checkpoint, optimizer state included: ~2 MB an operator), evaluation.json,
lora_direct_curve.{md,json,png} and logs/. A call on another machine (a later session's: each starts
bare) goes on where this one stopped with `--resume` naming the two archives it carries, curve.tgz's
snapshots and resume.tgz's runs unpacked into DIR/curve first. A run made elsewhere goes on the same way:
`--pack-only` packs its folder, and the call passes the run's own train-curve flags after `--` (a checkpoint
is continued only under the plan that started it: the same batch and rate), e.g. `-- --batch 32`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import time
from pathlib import Path

OPS = "add,sub,mul,div,gt,lt,eq"
FRACTIONS = "1/16,1/8,1/4,1/2,1"


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "caef_bench", *args]


def stream_command(op: str, run: Path, device: str, minutes: float, smoke: bool, extra: list[str]) -> list[str]:
    """The train-curve command of one operator's stream."""
    size = ["--stage2-steps", "4", "--batch", "4"] if smoke else []
    workers = "0" if device == "cpu" else "2"  # the machines' Python builds batches; the GPU waits otherwise
    return _cli("train-curve", "--ops", op, "--fractions", FRACTIONS, "--out", str(run / "curve"),
                "--device", device, "--workers", workers, "--stop-after", str(minutes * 60), "--quiet", *size, *extra)


def eval_command(run: Path, device: str, per_cell: int) -> list[str]:
    return _cli("eval-curve", "--curve", str(run / "curve"), "--out", str(run / "evaluation.json"),
                "--per-cell", str(per_cell), "--device", device)


def train_streams(run: Path, ops: list[str], device: str, minutes: float, smoke: bool, extra: list[str]) -> list[dict]:
    """One train-curve process per operator, all at once; returns each one's exit code and log."""
    logs = run / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    processes = []
    for op in ops:
        command = stream_command(op, run, device, minutes, smoke, extra)
        log = (logs / f"train_{op}.log").open("w")
        processes.append({"op": op, "command": command, "log": log, "process": subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT)})
    for stream in processes:
        stream["code"] = stream["process"].wait()
        stream["log"].close()
    return [{"op": s["op"], "command": " ".join(s["command"][2:]), "exit": s["code"]} for s in processes]


def reached(run: Path, ops: list[str]) -> dict:
    """op -> the snapshots it has, with their samples and training tokens/s."""
    found = {}
    for op in ops:
        found[op] = {}
        for manifest_path in sorted((run / "curve").glob(f"frac_*/direct/{op}/manifest.json")):
            manifest = json.loads(manifest_path.read_text())
            stage = manifest["stages"]["stage2"]
            found[op][manifest_path.parts[-4]] = {
                "samples": manifest["samples"], "fraction_of_budget": round(manifest["curve"]["fraction_of_budget"], 4),
                "tokens_per_s": round(stage["tokens"] / max(stage["wall_time_s"], 1e-9))}
    return found


def evaluate(run: Path, device: str, minutes: float, per_cell: int) -> int:
    command = eval_command(run, device, per_cell)
    with (run / "logs" / "eval.log").open("w") as log:
        try:
            return subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, timeout=minutes * 60).returncode
        except subprocess.TimeoutExpired:  # evaluation.json is written after every cell: a rerun goes on
            return 124


def pack(run: Path) -> Path:
    """curve.tgz (the snapshots) and resume.tgz (each run's checkpoint) in `run`; returns the first."""
    archive = run / "curve.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted((run / "curve").glob("frac_*/direct/*/*")):
            if path.is_file():
                tar.add(path, arcname=str(path.relative_to(run / "curve")))
    with tarfile.open(run / "resume.tgz", "w:gz") as tar:
        for path in sorted((run / "curve" / ".runs").rglob("*")):
            if path.is_file():
                tar.add(path, arcname=str(path.relative_to(run / "curve")))
    return archive


def unpack(run: Path, archives: list[str]) -> None:
    """An earlier call's curve.tgz and resume.tgz into run/curve, where its train-curve commands go on."""
    (run / "curve").mkdir(parents=True, exist_ok=True)
    for archive in archives:
        with tarfile.open(archive) as tar:
            tar.extractall(run / "curve", filter="data")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="the run's folder (reused: a second call goes on)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--minutes", type=float, default=6.0, help="training wall time of this call")
    parser.add_argument("--eval-minutes", type=float, default=2.0, help="evaluation wall time of this call")
    parser.add_argument("--ops", default=OPS)
    parser.add_argument("--per-cell", type=int, default=100)
    parser.add_argument("--smoke", action="store_true", help="a CPU try of every step: 4 steps of 4 samples")
    parser.add_argument("--resume", action="append", default=[], metavar="ARCHIVE",
                        help="an earlier call's curve.tgz or resume.tgz, unpacked first (twice for both)")
    parser.add_argument("--pack-only", action="store_true",
                        help="only pack OUT's curve into OUT/curve.tgz and OUT/resume.tgz (a run made elsewhere, "
                             "e.g. on a CPU, for a call to go on with: its train-curve flags go after --)")
    parser.add_argument("extra", nargs="*", help="after --: more train-curve flags (e.g. --adapter full)")
    args = parser.parse_args(argv)
    run, ops = Path(args.out), args.ops.split(",")
    if args.pack_only:
        print(f"packed {pack(run)} and {run / 'resume.tgz'}")
        return 0
    run.mkdir(parents=True, exist_ok=True)
    unpack(run, args.resume)
    started = time.perf_counter()
    streams = train_streams(run, ops, args.device, args.minutes, args.smoke, args.extra)
    trained = time.perf_counter() - started
    progress = reached(run, ops)
    print(json.dumps({"streams": streams, "train_seconds": round(trained), "reached": progress}, indent=1))
    code = evaluate(run, args.device, args.eval_minutes, 2 if args.smoke else args.per_cell)
    report = subprocess.run(_cli("report-curve", "--evaluation", str(run / "evaluation.json"), "--out", str(run)),
                            capture_output=True, text=True)
    print(f"evaluation exit {code}; report exit {report.returncode}; archive {pack(run)}")
    (run / "summary.json").write_text(json.dumps({"streams": streams, "train_seconds": round(trained),
                                                  "reached": progress, "eval_exit": code}, indent=1) + "\n")
    return 0 if all(s["exit"] == 0 for s in streams) else 1


if __name__ == "__main__":
    sys.exit(main())
