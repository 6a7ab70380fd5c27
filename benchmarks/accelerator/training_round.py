"""Training on a lent accelerator, in one prepared call: the CAEF adapters of a plan (round2: all sixteen)
trained further from those of --adapter-init (default the shipped tier) with structured operands in their
draws (docs/research/structured-operands-log.md),
and with --direct the LoRA-direct learning curve (`caef-bench train-curve`, standard position ids, into
RUN/direct_curve) for every operator, in parallel processes that share the GPU and its CPU cores.

    python benchmarks/accelerator/training_round.py --out DIR [--device cuda] [--scale 1] [--minutes 5]
        [--adapter-init checkpoints/tiny] [--plan round2|round2b|rebuild] [--direct]
    python benchmarks/accelerator/training_round.py --assemble-from DIR/caef_adapters.tgz --candidate work/cand

Each stream is one or more `caef-bench train` commands, its phases, one after the other (or one
`train-curve`), each recorded in every manifest it writes;
`--scale` multiplies the CAEF streams' step counts (a CPU smoke run: --scale 0.01 --device cpu
--batch 8); `--minutes` stops every stream at that wall time (the same command goes on from its
checkpoints). What comes back, in the official layout and without optimizer state, to be checked on the
CPU before anything is shipped: DIR/caef_adapters.tgz (executors/, aligners/), DIR/direct_*.tgz (the
curve's snapshots, frac_<n>_<d>/direct/<op>/), DIR/logs.tgz (every stream's log and loss curves).
--assemble-from writes a candidate tier from such an archive, the adapters that finished their plan in
place of --adapter-init's, for a later call to evaluate.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
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
# (docs/research/structured-operands-log.md). Round 2 starts from that pilot tier (--adapter-init) and gives every
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


# Rebuild, from the shipped tier in one call: the candidate tiers of rounds 1-2q lived in a development
# machine's work folder and were lost with it (docs/research/structured-operands-log.md, "Where the candidates went").
# Each stream trains its adapters once with the shares of the last round that kept them in round 2h's
# tier (round 2o's for executor_add), for about as many samples as that adapter's rounds summed
# (rounds 1, 2 and 2b on the H200 in steps of 128, the CPU rounds' steps of 32 counted as a quarter),
# as far as about six minutes allow: by round 2's rates on the H200 (its manifests: 2.2-3.1 steps of
# 128 a second per stream for the executors of long operands, 2.6-7 for the aligners, nine streams
# sharing the GPU; a stream's adapters train one after the other), slowed a tenth by a tenth stream.
# executor_add gets 700 steps where its rounds summed about 1,300. Every share below is one a round of
# that document measured.
def _shares(executors: str, aligners: str, lr: str, **shares: float) -> list[str]:
    flags = [f"--{name.replace('_', '-')}" for name in shares]
    return ["--executors", executors, "--aligners", aligners, "--lr", lr,
            *[part for flag, value in zip(flags, shares.values()) for part in (flag, str(value))]]


_LONG = {"structured_share": 0.5, "structured_long_share": 0.6, "long_share": 0.5}
_SUB_CALLS = {"wide_share": 0.2, "sub_call_share": 0.4}
_ADD_RUNS = {**_LONG, **_SUB_CALLS, "carry_run_share": 0.4}
REBUILD_STREAMS = [
    # executor_add as its rounds went: round 2h's draws first (nine in ten of them long or structured
    # already), then round 2o's top steps at round 2o's rate; the top-steps draws at once, from the
    # shipped add, would leave it one general draw in fifteen for 800 steps, and the short cells untried.
    # With anonymous tape cells (models.anonymous_cells): on the CPU, 240 steps of 32 from the shipped add
    # left 6 of 25 held-out 100-digit runs of one digit with a wrong step (each in the command line's
    # sum, which the gate makes the adapter learn to read another way), the same draws without them 23
    # (docs/research/structured-operands-log.md).
    ("executor_add", [([*_shares("add", "", "2e-4", **_ADD_RUNS), "--anonymous-cells"], 450),
                      ([*_shares("add", "", "1e-4", **_ADD_RUNS, top_steps_share=0.6, top_steps_structured_share=0.6),
                        "--anonymous-cells"], 250)], 1),
    ("executor_sub", [(_shares("sub", "", "1.5e-4", **{**_LONG, "structured_long_share": 0.5}), 650)], 1),
    ("executor_gt", [(_shares("gt", "", "1.5e-4", **_LONG), 850)], 1),
    ("executor_lt", [(_shares("lt", "", "2e-4", **_LONG), 800)], 1),
    ("eq_reflection", [(_shares("eq,reflection", "", "1.5e-4", **_LONG, top_run_share=0.3), 400)], 1),
    ("executor_left_mask", [(_shares("left_mask", "", "1.5e-4", **_LONG, **_SUB_CALLS), 750)], 1),
    ("mul_div", [(_shares("mul,div", "", "2e-4", structured_share=0.7, return_share=0.3), 450)], 1),
    ("aligners_a", [(_shares("", "add,sub", "3e-4", structured_share=0.5, structured_long_share=0.5), 400)], 1),
    ("aligners_b", [(_shares("", "gt,lt", "3e-4", structured_share=0.5, structured_long_share=0.5), 450)], 1),
    ("aligners_c", [(_shares("", "eq,mul,div", "3e-4", structured_share=0.6, structured_long_share=0.6,
                             long_share=0.5), 450)], 1),
]
# Rebuild 2, from the rebuild's tier with the CPU's aligners in place (docs/structured-pilot/rebuild_device
# and aligner_gate_cpu/cpu_adapters.tgz, each put in with --assemble-from, the second over the first, into
# the folder given as --adapter-init; these archives, and rebuild2_device/candidate_adapters.tgz, the tier
# rebuild 2 made, are in git history: docs/research/structured-pilot/ARCHIVES.md): the rebuild's gated executor_add
# got every step of 50 held-out 100-digit runs of one digit and 9,000 random top steps right and stays as
# it is; every other adapter broke repeated-digit problems in its evaluation (docs/research/structured-operands-log.md,
# "The rebuild on the device") and trains on, the executors with anonymous tape cells (but sub, below).
# The aligners: on the CPU, gated in (I) (anonymous cells and plain digits in the sequences that begin
# with an expression), every (I) conversion of all seven came right in 240 steps of 32; (O) on runs of
# one digit needed more steps and, at 100 digits, the gate in (O) too (eq: 400 more steps gated both
# ways, rep_eq_100_p1's (O) 60 of 60; the same draws gated in (I) only, 52). eq, mul and div arrive
# that way and are not trained again; add, sub, gt and lt (gated in (I) there) go on gated both ways.
# executor_mul and executor_div arrive from the CPU with anonymous tape cells (500 steps of 32 each: every
# rep_mul_10 problem right end to end, rep_div_10_p1 49 of 50) and are not trained again either.
# executor_gt, lt, eq and reflection arrive from the CPU gated too (400-480 steps of 32: one step wrong
# of 13,416 on held-out 100-digit structured runs, where the rebuild's gt, eq and reflection got 327 of
# their 10,356 wrong; gt and lt still misread a random comparison's digit pair a few times in a
# thousand steps, docs/research/structured-operands-log.md "The comparison executors gated") and train on from there.
_CELLS, _BOTH_WAYS = ["--anonymous-cells"], ["--anonymous-digits", "all"]
REBUILD_2_STREAMS = [
    ("executor_gt", [(_shares("gt", "", "1.5e-4", **_LONG) + _CELLS, 700)], 1),
    ("executor_lt", [(_shares("lt", "", "2e-4", **_LONG) + _CELLS, 700)], 1),
    ("executor_eq", [(_shares("eq", "", "1.5e-4", **_LONG, top_run_share=0.3) + _CELLS, 450)], 1),
    ("executor_reflection", [(_shares("reflection", "", "1.5e-4", **_LONG, top_run_share=0.3) + _CELLS, 450)], 1),
    # sub alone without the gate: gated, 240 steps of 32 from the rebuild's sub left it below the ungated
    # one on random cells (sub_10 295 of 300 one step, the rebuild's 300), where add's random cells had
    # come back whole at that size; it trains on with its rebuild draws
    ("executor_sub", [(_shares("sub", "", "1.5e-4", **{**_LONG, "structured_long_share": 0.5}), 550)], 1),
    ("executor_left_mask", [(_shares("left_mask", "", "1.5e-4", **_LONG, **_SUB_CALLS) + _CELLS, 650)], 1),
    # (O) relearns its reading of the cells once gated: eq's in 100 steps of 32 on the CPU; 700 of 128 here
    ("aligners_a", [(_shares("", "add,sub", "2e-4", structured_share=0.5, structured_long_share=0.5) + _BOTH_WAYS, 700)], 1),
    ("aligners_b", [(_shares("", "gt,lt", "2e-4", structured_share=0.5, structured_long_share=0.5) + _BOTH_WAYS, 700)], 1),
]
# Rebuild 3, from rebuild 2's tier with the CPU's executor_lt in place (rebuild2_device/candidate_adapters.tgz,
# then rebuild2_cpu/executor_lt.tgz over it, as --adapter-init): every repeated-digit cell and every Table 1
# cell held but mul_1_10 (196/200) and lt_100 (196/200; the CPU's lt, drawn on its deciding steps, mends it).
# mul_1_10's four are rebuild 2's executor_add in MUL's calls (the rebuild's add, trained on without MUL's
# calls in its draws: the shipped add, whose plan had --composer-share 0.3, gets those steps right). It
# trains on from there with MUL's and SUB's calls drawn again at the shipped add's share, beside the
# rebuild's long-run and top-steps draws at lower rates; on the CPU, 200 steps of 32 at a composer share of
# 0.5 mended the four and broke the first step of 12 of 7,915 held-out MUL calls; with these shares, 200 steps
# of 32 got all 7,915 right and 1 of 3,070 steps of 100-digit runs wrong (docs/research/structured-operands-log.md):
# the device's gates (every ADD step of 100 held-out mul_1_10 problems, 100-digit runs, top steps) decide.
REBUILD_3_STREAMS = [
    ("executor_add", [([*_shares("add", "", "1e-4", **_LONG, sub_call_share=0.2, carry_run_share=0.2,
                                 top_steps_share=0.3, top_steps_structured_share=0.6, composer_share=0.3),
                        "--anonymous-cells"], 500)], 1),
]
# A stream trains its phases one after the other, each from the adapters of the phase before (the first
# from --adapter-init): (name, [(settings, steps per adapter), ...], batch-building processes).
def _one_phase(streams: list) -> list:
    return [(name, [(settings, steps)], workers) for name, settings, steps, workers in streams]


PLANS = {"round2": _one_phase(ROUND_2_STREAMS), "round2b": _one_phase(ROUND_2B_STREAMS), "rebuild": REBUILD_STREAMS,
         "rebuild2": REBUILD_2_STREAMS, "rebuild3": REBUILD_3_STREAMS}
# The LoRA-direct curve: one run per operator to its whole budget (the samples of its CAEF executor and
# aligner), snapshots at each fraction; the largest budgets get a process of their own.
DIRECT_STREAMS = [["add"], ["sub"], ["gt", "lt"], ["eq", "mul", "div"]]
FRACTIONS = "1/16,1/8,1/4,1/2,1"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="where the archives go (the device's $OUT)")
    parser.add_argument("--run", default="work/training_round", help="the CAEF streams' folders (resumable)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the CAEF streams' steps")
    parser.add_argument("--batch", type=int, default=128,
                        help="the CAEF streams' batch (a CPU smoke run: 8; six streams of 128 fill 24 GB)")
    parser.add_argument("--direct-steps", type=int, help="the curve runs' steps (default: each whole budget)")
    parser.add_argument("--minutes", type=float, default=5.0, help="stop every stream after this many minutes")
    parser.add_argument("--plan", choices=PLANS, default="round2",
                        help="which streams (round2b: from round 2's tier; rebuild: every adapter from the shipped tier; "
                             "rebuild2: from the rebuild's tier with the CPU's adapters in place, the executors gt, lt, eq, "
                             "reflection, left_mask, sub and the aligners add, sub, gt, lt, most of them gated; rebuild3: "
                             "executor_add from rebuild 2's tier, MUL's calls drawn again)")
    parser.add_argument("--direct", action="store_true", help="also the LoRA-direct curve (round 1 made it)")
    parser.add_argument("--adapter-init", default="checkpoints/tiny",
                        help="the tier whose adapters this round trains further (and the candidate's other adapters)")
    parser.add_argument("--candidate", help="also write the shipped tier with this round's finished adapters "
                                            "in place of its own here (what the same call then evaluates)")
    parser.add_argument("--assemble-from", metavar="ARCHIVE",
                        help="train nothing: write --candidate from --adapter-init with the finished adapters of "
                             "a round's caef_adapters.tgz in place (a later call's evaluation of that round)")
    args = parser.parse_args(argv)
    if args.assemble_from:
        if not args.candidate:
            parser.error("--assemble-from needs --candidate")
        replaced = candidate_from_archive(Path(args.assemble_from), Path(args.candidate), Path(args.adapter_init))
        print(f"candidate {args.candidate}: {', '.join(replaced) or 'no adapter replaced'}", flush=True)
        return 0 if replaced else 1
    if not args.out:
        parser.error("--out is required to train")
    out, run = Path(args.out), Path(args.run)
    curve = run / "direct_curve"
    out.mkdir(parents=True, exist_ok=True)
    logs = run / "logs"  # (packed into logs.tgz: a call brings back at most 8 files)
    logs.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    deadline = started + 60 * args.minutes
    gpu = args.device != "cpu"
    device = ["--device", args.device]
    commands = {}
    streams = PLANS[args.plan]
    for name, phases, workers in streams:
        commands[name] = []
        init = args.adapter_init
        for number, (settings, steps) in enumerate(phases, 1):
            folder = run / name if number == len(phases) else run / f"{name}.phase{number}"
            commands[name].append(([*CAEF, "--batch", str(args.batch), "--adapter-init", str(init), *settings,
                                    "--out", str(folder), "--stage2-steps", str(max(2, round(steps * args.scale))),
                                    "--workers", str(workers if gpu else 0), *device], folder))
            init = folder
    for ops in (DIRECT_STREAMS if args.direct else []):
        commands["direct_" + "_".join(ops)] = [([
            "train-curve", "--ops", ",".join(ops), "--fractions", FRACTIONS, "--out", str(curve), "--quiet",
            "--workers", "1" if gpu else "0", *device,
            *(["--stage2-steps", str(args.direct_steps)] if args.direct_steps else [])], curve)]
    codes = {}
    threads = [threading.Thread(target=lambda name=name, phases=phases: codes.update(
                   {name: _run_phases(phases, logs / f"{name}.log", deadline)}))
               for name, phases in commands.items()]
    for thread in threads:
        thread.start()
    for thread, name in zip(threads, commands):
        thread.join()
        print(f"{name}: exit {codes[name]} after {time.monotonic() - started:.0f} s", flush=True)
    pack(out, run, curve, [name for name, *_ in streams])
    print(f"packed in {time.monotonic() - started:.0f} s", flush=True)
    if args.candidate:
        replaced = assemble_candidate(run, [name for name, *_ in streams], Path(args.candidate),
                                      Path(args.adapter_init))
        print(f"candidate {args.candidate}: {', '.join(replaced) or 'no adapter replaced'}", flush=True)
    return max(codes.values(), default=0)


def _run_phases(phases: list[tuple[list[str], Path]], log_path: Path, deadline: float) -> int:
    """One stream: its `caef-bench` commands one after the other, each stopped at the round's deadline.
    A phase that fails or is stopped leaves the next unstarted (it would start from a partial adapter);
    the same call again goes on from the stopped phase's checkpoint."""
    with open(log_path, "a") as log:
        for number, (command, folder) in enumerate(phases, 1):
            left = deadline - time.monotonic()
            if left <= 0:
                return 0
            full = [sys.executable, "-m", "caef_bench", *command, "--stop-after", f"{left:.0f}"]
            print(" ".join(full[1:]), flush=True)
            code = subprocess.run(full, stdout=log, stderr=subprocess.STDOUT,
                                  env={**os.environ, "PYTHONUNBUFFERED": "1"}).returncode
            if code or (number < len(phases) and not all(map(_complete, _adapter_folders(folder)))):
                return code
    return 0


def _adapter_folders(folder: Path) -> list[Path]:
    return sorted(m.parent for kind in ("executors", "aligners") for m in folder.glob(f"{kind}/*/manifest.json"))


def _complete(adapter: Path) -> bool:
    """Whether an adapter's every training stage ran to its end (not cut by --stop-after)."""
    stages = json.loads((adapter / "manifest.json").read_text())["stages"].values()
    return all(stage.get("complete", True) for stage in stages)


def finished_adapters(run: Path, streams: list[str]) -> list[Path]:
    """The adapter folders this round wrote (each with its manifest), in the official layout under a stream."""
    return [adapter for stream in streams for adapter in _adapter_folders(run / stream)]


def assemble_candidate(run: Path, streams: list[str], candidate: Path,
                       shipped: Path = Path("checkpoints/tiny")) -> list[str]:
    """A copy of the shipped tier with every adapter this round trained to the end of its plan in place of
    the shipped one (one cut short by --minutes is packed for a look, never evaluated as a candidate)."""
    shutil.rmtree(candidate, ignore_errors=True)
    shutil.copytree(shipped, candidate)
    replaced = []
    for folder in finished_adapters(run, streams):
        if not _complete(folder):
            continue
        target = candidate / folder.parent.name / folder.name
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(folder, target, ignore=shutil.ignore_patterns(".runs", "*.pt", "*.tmp"))
        replaced.append(f"{folder.parent.name}/{folder.name}")
    return replaced


def candidate_from_archive(archive: Path, candidate: Path, shipped: Path = Path("checkpoints/tiny")) -> list[str]:
    """assemble_candidate from a round's caef_adapters.tgz (what a call brought back and git keeps): the
    adapters it holds that ran to the end of their plan, in place of `shipped`'s."""
    with tempfile.TemporaryDirectory() as unpacked:
        with tarfile.open(archive) as tar:
            tar.extractall(unpacked, filter="data")
        return assemble_candidate(Path(unpacked), [""], candidate, shipped)


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
        phases = [folder for stream in streams for folder in sorted(run.glob(f"{stream}.phase*"))]
        for folder in [run / stream for stream in streams] + phases + [curve]:
            for path in sorted(folder.rglob("*.jsonl")) + sorted(folder.rglob("manifest.json")):
                tar.add(path, arcname=str(path))


if __name__ == "__main__":
    sys.exit(main())
