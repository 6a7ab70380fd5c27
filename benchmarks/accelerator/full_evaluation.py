"""The paper's N in one accelerator call: Table 1's CAEF rows at N=1000 on all 22 cells and the
repeated-digit cells at N=200, traced, on the shipped weights; then the tables, from the records.

On the accelerator (one call of the device tool, which copies this checkout; .whl/site.tar.xz made
here first by benchmarks/accelerator/device_wheels.sh, and carried):

    benchmarks/accelerator/device_wheels.sh --install && PYTHONUNBUFFERED=1 \\
        python3 benchmarks/accelerator/full_evaluation.py --out work/device_eval --bring-back $OUT

Afterwards, here, from what came back (solves nothing; the committed results/ files):

    python benchmarks/accelerator/full_evaluation.py --assemble /work/.device/.../records.tgz

At a small scale on the CPU (tests/test_full_evaluation.py runs it):

    python benchmarks/accelerator/full_evaluation.py --out work/fe_smoke --device cpu --smoke

What one call does, each stage logged with its time in --out/full_evaluation.log:
1. Records: the weights' records folder (work/records/tiny-<weights>/, the one `caef-bench run`
   resumes from) takes in the committed records of these weights (--seed-records, 20,200 records:
   Table 1 at N=200, the repeated cells at 50 or 200), so only the rest is solved.
2. Precision: the first --check-problems problems of every Table 1 cell are solved as the runtime
   before this script's issue did (float32, peft switching the adapters: "reference") and with each
   faster setting (adapters folded into the base, `runtime.hf.MergedAdapters`: float32, TF32
   matrix products, bfloat16 weights), side by side. The fastest setting whose records are the
   reference's (answers, outcomes, every step's text, first divergences) solves the rest; none
   alike: the reference does. The reference's records are also compared with the committed CPU
   records of the same problems. All of it goes to precision_check.json.
3. Solve: every pending problem of every cell, spread over --processes processes (problems i,
   i+P, i+2P, ... of each cell to process i), each solving all of its cells' problems in the same
   batched rounds (`runtime.solve_to_files`: one call per adapter and round carries problems of
   every cell, passes packed by width) into shards of its own (work/shards/), resumable, its records
   without step texts (what comes back is packed without them anyway). Several
   processes, because between two passes the runtime parses, renders and drafts every step in
   Python. No round starts after the deadline (--minutes, less the time to assemble).
4. Tables: the shards go into the records folder and `caef-bench run --suite caef` and
   `--suite repeated --systems caef-tiny` assemble the tables from them (each cell at the largest N
   every one of its cells has whole), solving nothing. --bring-back packs the records without
   their step texts (records.tgz), the tables (tables.tgz), this log and precision_check.json.

Expected time (docs/runtime.md, "The paper's N on an accelerator", has the arithmetic): after the
committed records, 26,600 problems are pending (17,600 of Table 1, 9,000 repeated-digit), 2.49
million model calls, 0.91 billion tokens, 7.9 PFLOP in float32 with the adapters folded
(`runtime.cost`; everything, committed records included: 42,400 problems, 10.8 PFLOP). At ~30
TFLOP/s, under half the H200's listed 67 for float32 on these 256-wide products, that is ~270 s of
arithmetic; ~90 s where TF32 or bf16 pass the check. The Python between passes, measured on this
project's CPU at 0.13 to 0.26 ms per model call (bench_throughput.py, batched), is ~600 CPU-seconds,
~80 s over 8 processes, beside the arithmetic. With start-up and the records taken in (~60 s), the
precision check (~60-90 s) and the tables (~60-90 s): about 8 minutes in float32, 5 to 6 with TF32
or bf16. Neither the accelerator's per-pass overhead nor its Python speed could be measured here: a
call that runs short of time stops at the deadline, assembles whole cells at a smaller N, and brings
back every finished record (--seed-records takes them in on the next call).
"""

from __future__ import annotations

import argparse
import fnmatch
import io
import json
import multiprocessing as mp
import subprocess
import sys
import tarfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RECORDS = REPO / "results" / "records"  # the committed records: <tier>-<weights>.tgz, one per weights
PARTS = {"table1": 1000, "repeated": 200}  # N per cell: the paper's, and the repeated-digit report's
# Settings tried against the reference, fastest first: (name, fold the adapters, dtype of the folded
# copies, TF32 matrix products)
CANDIDATES = (("bf16", True, "bfloat16", False), ("tf32", True, None, True), ("fp32", True, None, False))
REFERENCE = ("reference", False, None, False)
VERIFY_TOKENS_CUDA = 1 << 18  # padded tokens per verify pass on the accelerator
ASSEMBLE_S = 150  # seconds kept after the last round: merge the shards, assemble the tables, pack
# The committed results' commands (results/*.json "command"), at the paper's N. --assemble runs them.
RESULTS_COMMANDS = (
    ["run", "--suite", "caef", "--limit", "1000", "--device", "cpu", "--out", "results"],
    ["run", "--suite", "repeated", "--systems", "caef-tiny,lora-direct-tiny,lora-direct-tiny-protocol,smollm2-135m-instruct",
     "--limits", "caef-tiny=200,lora-direct-tiny=4,lora-direct-tiny-protocol=50,smollm2-135m-instruct=1",
     "--cells-of", "lora-direct-tiny=rep_*_10_*", "--cells-of", "smollm2-135m-instruct=rep_*_10_*",
     "--onestep-per-cell", "4", "--out", "results", "--device", "cpu"],  # + --previous (the report before)
    ["run", "--suite", "table1", "--out", "results", "--limits", "caef-tiny=1000"],
)


def part_cells(part: str) -> list[str]:
    from caef_bench.data.testsets import repeated_cells, table1_cells

    return table1_cells() if part == "table1" else repeated_cells()


def chosen_cells(part: str, patterns: str) -> list[str]:
    globs = patterns.split(",")
    return [cell for cell in part_cells(part) if any(fnmatch.fnmatch(cell, glob) for glob in globs)]


# --------------------------------------------------------------------------- records


def records_folder(tier: str, checkpoints: str | None) -> tuple[Path, str]:
    """The weights' records folder (made, with its weights.json) and the weights' fingerprint."""
    from caef_bench.models.loading import fingerprints, tier_with_checkpoints
    from caef_bench.paths import WORK_DIR
    from caef_bench.runtime.reuse import write_weights

    weights, adapters = fingerprints(tier_with_checkpoints(tier, checkpoints))
    folder = WORK_DIR / "records" / f"{tier}-{weights}"
    folder.mkdir(parents=True, exist_ok=True)
    write_weights(folder, weights, adapters)
    return folder, weights


def take_in(archive: Path, folder: Path) -> int:
    """Append the records of `archive` (a tgz of <tier>-<weights>/*.jsonl) for this folder's weights whose
    ids the folder does not hold; another weights' records are never mixed in. Returns how many."""
    added = 0
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            parent, _, name = member.name.rpartition("/")
            if parent != folder.name or not name.endswith(".jsonl"):
                continue
            target = folder / name
            held = recorded(target)
            lines = [line for line in tar.extractfile(member).read().decode().splitlines()
                     if line.strip() and json.loads(line)["id"] not in held]
            if lines:
                with target.open("a", encoding="utf-8") as out:
                    out.write("\n".join(lines) + "\n")
                added += len(lines)
    return added


def recorded(path: Path) -> set[str]:
    from caef_bench.runtime import recorded_ids

    return recorded_ids(path)


def pending_of(folder: Path, cells: dict[str, int]) -> dict[str, list[int]]:
    """{cell: indices among its first N problems that the folder does not hold}."""
    from caef_bench.data.testsets import load_cell

    pending = {}
    for cell, limit in cells.items():
        held = recorded(folder / f"caef_{cell}.jsonl")
        indices = [i for i, row in enumerate(load_cell(cell)[:limit]) if row["id"] not in held]
        if indices:
            pending[cell] = indices
    return pending


def whole_n(folder: Path, cells: list[str], limit: int) -> int:
    """The largest N <= limit such that every cell's first N problems are recorded."""
    from caef_bench.data.testsets import load_cell

    n = limit
    for cell in cells:
        held = recorded(folder / f"caef_{cell}.jsonl")
        rows = load_cell(cell)[:limit]
        first_missing = next((i for i, row in enumerate(rows) if row["id"] not in held), len(rows))
        n = min(n, first_missing)
    return n


def merge_shards(shards: Path, folder: Path, cells: list[str]) -> int:
    """Append every shard's records to its cell's file in the records folder (ids held stay as they are)."""
    from caef_bench.runtime import RecordWriter, load_records

    added = 0
    for cell in cells:
        target = folder / f"caef_{cell}.jsonl"
        held = recorded(target)
        with RecordWriter(target) as writer:
            for shard in sorted(shards.glob(f"{cell}.*.jsonl")):
                for record in load_records(shard):  # a line cut by an interrupted call is left out
                    if record.id not in held:
                        writer.write(record)
                        held.add(record.id)
                        added += 1
    return added


def pack_records(folder: Path, archive: Path) -> int:
    """The folder's caef_*.jsonl without step texts (a traced 100-digit record holds hundreds) as one
    tgz: every problem's outcome, answer and first divergence stay, which is what the tables read."""
    count = 0
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(folder.glob("caef_*.jsonl")) + [folder / "weights.json"]:
            if path.name.endswith(".jsonl"):
                lines = [json.dumps({**json.loads(line), "steps": []}, ensure_ascii=False)
                         for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
                data, count = ("\n".join(lines) + "\n").encode() if lines else b"", count + len(lines)
            else:
                data = path.read_bytes()
            info = tarfile.TarInfo(f"{folder.name}/{path.name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return count


# --------------------------------------------------------------------------- the processes


def load(tier: str, checkpoints: str | None, device: str, setting: tuple):
    """The step model under one setting (`CANDIDATES`, `REFERENCE`)."""
    import torch

    from caef_bench.runtime.hf import HFStepModel, load_step_model

    _, fold, dtype, tf32 = setting
    if device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        # more rows per pass than the runtime's default: fewer passes, each a few GB (8 processes fit on
        # the H200's 139 GiB with room to spare); rows of every cell share them
        HFStepModel.verify_tokens = VERIFY_TOKENS_CUDA
    else:
        torch.set_num_threads(1)  # one core each: the processes, not the threads, run side by side
    model = load_step_model(tier, checkpoints, device=device, merge_adapters=fold)
    if dtype:
        model.merged.dtype = getattr(torch, dtype)
    return model


def comparable(record) -> list:
    """What two runs of a problem must share to count as the same: everything but the wall clock."""
    divergence = record.first_divergence
    return [record.answer, record.outcome, record.n_steps, record.n_steps_cut, record.final,
            None if divergence is None else [divergence.step, divergence.error_class, divergence.got],
            [step.output for step in record.steps]]


def _check(job: tuple) -> dict:
    """Solve the sample under one setting; {id: comparable} and the seconds it took."""
    setting, tier, checkpoints, device, sample, folder = job
    from caef_bench.runtime import Problem, solve_to_files

    model = load(tier, checkpoints, device, setting)
    problems = {Path(folder) / f"{setting[0]}_{cell}.jsonl": [Problem(*p) for p in rows] for cell, rows in sample.items()}
    started = time.perf_counter()
    made = solve_to_files(problems, model, mode="traced")
    return {"setting": setting[0], "seconds": round(time.perf_counter() - started, 1),
            "records": {r.id: comparable(r) for records in made.values() for r in records}}


def _solve(job: tuple) -> dict:
    """One process's share of every pending cell, in the same rounds, until done or the deadline."""
    index, processes, setting, tier, checkpoints, device, pending, shards, deadline = job
    from caef_bench.data.testsets import load_cell
    from caef_bench.evaluate.suites import as_problems
    from caef_bench.runtime import solve_to_files

    model = load(tier, checkpoints, device, setting)
    jobs = {}
    for cell, indices in pending.items():
        rows = load_cell(cell)
        mine = [rows[i] for i in indices[index::processes]]
        if mine:
            jobs[Path(shards) / f"{cell}.{index}.jsonl"] = as_problems(mine)
    started = time.perf_counter()
    # keep_steps=False: the records hold no step texts (the tables read outcomes, answers and first divergences,
    # as records packed to come back do), so 3 million steps' texts are neither held in flight nor written
    made = solve_to_files(jobs, model, stop=lambda: time.time() > deadline, mode="traced", keep_steps=False)
    stats = model.stats
    return {"process": index, "seconds": round(time.perf_counter() - started, 1),
            "solved": sum(map(len, made.values())), "asked": sum(map(len, jobs.values())),
            "calls": stats.steps, "verify_passes": stats.verify_passes, "padded_tokens": stats.padded_tokens,
            "real_tokens": stats.real_tokens}


# --------------------------------------------------------------------------- the stages


def check_precision(args, pool, folder: Path, check_folder: Path, say) -> tuple:
    """Stage 2: the fastest setting whose records are the reference's on the sample; and the report."""
    from caef_bench.data.testsets import load_cell
    from caef_bench.runtime import load_records

    cells = chosen_cells("table1", args.table1_cells)
    sample = {cell: [(r["id"], r["expr"], r["answer"]) for r in load_cell(cell)[:args.check_problems]]
              for cell in cells}
    candidates = [c for c in CANDIDATES if args.precision in ("auto", c[0])]
    if not args.device.startswith("cuda"):
        candidates = [c for c in candidates if not c[3]]  # TF32 is the accelerator's
    if args.precision == "reference":
        candidates = []
    jobs = [(setting, args.tier, args.checkpoints, args.device, sample, str(check_folder))
            for setting in [REFERENCE, *candidates]]
    runs = {run["setting"]: run for run in pool.map(_check, jobs)}
    reference = runs["reference"]["records"]
    report = {"sample": {cell: len(rows) for cell, rows in sample.items()},
              "seconds": {name: run["seconds"] for name, run in runs.items()}, "settings": {}}
    chosen = REFERENCE
    for setting in candidates:
        records = runs[setting[0]]["records"]
        differ = sorted(i for i in reference if records.get(i) != reference[i])
        report["settings"][setting[0]] = {"identical": not differ, "differing": differ}
        if not differ and chosen is REFERENCE:
            chosen = setting
    # the same problems as the committed (CPU) records hold them, steps aside (packed records have none)
    committed = {r.id: comparable(r)[:-1] for cell in cells for r in load_records(folder / f"caef_{cell}.jsonl")}
    against = {i: values[:-1] for i, values in reference.items() if i in committed}
    report["against_committed_records"] = {
        "compared": len(against), "differing": sorted(i for i in against if against[i] != committed[i])}
    report["chosen"] = chosen[0]
    say(f"precision: {json.dumps({k: v for k, v in report.items() if k != 'sample'})}")
    return chosen, report


def solve(args, pool, setting, folder: Path, shards: Path, cells: dict[str, int], deadline: float, say) -> dict:
    """Stage 3."""
    from caef_bench.data.testsets import load_cell
    from caef_bench.runtime.cost import Shape, Work, work_of

    pending = pending_of(folder, cells)
    merge_shards(shards, folder, list(cells))  # an earlier call's shards first: they are not solved again
    pending = pending_of(folder, cells)
    if not pending:
        say("solve: nothing pending")
        return {}
    from transformers import AutoConfig

    from caef_bench.models.codec import CaefCodec
    from caef_bench.models.loading import tier_with_checkpoints

    # the tier's sizes, adapters folded; tokens as the CAEF tokenizer counts them (whatever the position scheme)
    shape = Shape.of(AutoConfig.from_pretrained(tier_with_checkpoints(args.tier, args.checkpoints).base))
    codec = CaefCodec()
    estimate = Work()
    for cell, indices in pending.items():
        rows = load_cell(cell)
        sample = [rows[i]["expr"] for i in indices[:5]]
        estimate += work_of(sample, shape, lambda adapter: codec) * (len(indices) / len(sample))
    say(f"solve: {estimate.problems} problems pending in {len(pending)} cells, about {estimate.calls / 1e6:.2f}M model "
        f"calls, {estimate.tokens / 1e9:.2f}G tokens, {estimate.flops / 1e15:.2f} PFLOP; setting {setting[0]}, "
        f"{args.processes} processes, deadline in {deadline - time.time():.0f} s")
    shards.mkdir(parents=True, exist_ok=True)
    jobs = [(i, args.processes, setting, args.tier, args.checkpoints, args.device, pending, str(shards), deadline)
            for i in range(args.processes)]
    runs = pool.map(_solve, jobs)
    total = {key: sum(run[key] for run in runs) for key in ("solved", "asked", "calls", "verify_passes",
                                                            "padded_tokens", "real_tokens")}
    say(f"solve: {json.dumps(total)}; seconds per process {[run['seconds'] for run in runs]}")
    return total


def assemble_here(folder: Path, parts: dict[str, list[str]], limits: dict[str, int], checkpoints: str | None,
                  out: Path, say) -> dict[str, int]:
    """Stage 4: each part's tables at the largest N its cells have whole, from the records alone."""
    made = {}
    for part, cells in parts.items():
        n = whole_n(folder, cells, limits[part])
        made[part] = n
        if n == 0:
            say(f"{part}: no N with every cell whole; no tables")
            continue
        common = ["--limit", str(n), "--device", "cpu", "--cells", ",".join(cells)]
        common += ["--checkpoints", checkpoints] if checkpoints else []
        if part == "table1":
            command = ["run", "--suite", "caef", "--out", str(out / "table1"), *common]
        else:
            command = ["run", "--suite", "repeated", "--systems", "caef-tiny", "--onestep-per-cell", "0",
                       "--out", str(out / "repeated"), *common]
        say(f"{part} at N={n}: caef-bench {' '.join(command)}")
        done = subprocess.run([sys.executable, "-m", "caef_bench", *command], capture_output=True, text=True)
        (out / f"assemble_{part}.log").write_text(done.stdout + done.stderr)
        say(f"{part}: exit {done.returncode}")
    return made


def assemble_results(archive: Path, previous: str | None, say=print) -> int:
    """--assemble: the records brought back into work/records, then the committed results' commands at the
    paper's N (`RESULTS_COMMANDS`), which read them and solve nothing new for CAEF."""
    from caef_bench.paths import WORK_DIR

    with tarfile.open(archive) as tar:
        names = {member.name.split("/")[0] for member in tar.getmembers()}
    for name in sorted(names):
        folder = WORK_DIR / "records" / name
        folder.mkdir(parents=True, exist_ok=True)
        weights = folder / "weights.json"
        if not weights.exists():  # the archive's own weights.json names the adapters
            with tarfile.open(archive) as tar:
                member = tar.getmember(f"{name}/weights.json")
                weights.write_bytes(tar.extractfile(member).read())
        say(f"{take_in(archive, folder)} records taken into {folder}")
    previous = previous or previous_report(say)
    for command in RESULTS_COMMANDS:
        if command[2] == "repeated" and previous:
            command = [*command, "--previous", previous]
        say("caef-bench " + " ".join(command))
        returncode = subprocess.run([sys.executable, "-m", "caef_bench", *command]).returncode
        if returncode:
            return returncode
    return 0


def previous_report(say) -> str | None:
    """The newest committed results/failure_analysis.json made on other weights than the current one (its
    CAEF numbers print beside the new ones, as the committed report's do), written to work/."""
    from caef_bench.paths import WORK_DIR

    current = json.loads((REPO / "results" / "failure_analysis.json").read_text()).get("weights")
    log = subprocess.run(["git", "-C", str(REPO), "log", "--format=%H", "-n", "60", "--", "results/failure_analysis.json"],
                         capture_output=True, text=True).stdout.split()
    for commit in log:
        shown = subprocess.run(["git", "-C", str(REPO), "show", f"{commit}:results/failure_analysis.json"],
                               capture_output=True, text=True)
        if shown.returncode == 0 and json.loads(shown.stdout).get("weights") not in (None, current):
            path = WORK_DIR / "previous_failure_analysis.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(shown.stdout)
            say(f"--previous: results/failure_analysis.json of {commit[:10]} (weights {json.loads(shown.stdout)['weights']})")
            return str(path)
    say("--previous: no committed report of other weights found")
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="the log, precision_check.json and the tables go here")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tier", default="tiny")
    parser.add_argument("--checkpoints")
    parser.add_argument("--processes", type=int, help="solving processes (default 8 on an accelerator, 1 on a CPU)")
    parser.add_argument("--minutes", type=float, default=9.0, help="the whole call's time: no round starts after "
                        f"this less {ASSEMBLE_S} s, kept to assemble and pack")
    parser.add_argument("--precision", default="auto", choices=("auto", "bf16", "tf32", "fp32", "reference"),
                        help="auto: the fastest setting the check finds identical to the reference; a name: "
                             "that one if identical; reference: no check, float32 with peft's switching")
    parser.add_argument("--check-problems", type=int, default=2, help="problems per Table 1 cell in the check")
    parser.add_argument("--seed-records",
                        help="a tgz of these weights' records to take in first (default: the committed ones, "
                             "results/records/<tier>-<weights>.tgz, where they exist; '' for none)")
    parser.add_argument("--parts", default="table1,repeated", help="table1, repeated or both (a, b: the same)")
    parser.add_argument("--table1-limit", type=int, default=PARTS["table1"], help="Table 1's N (the paper's 1000)")
    parser.add_argument("--repeated-limit", type=int, default=PARTS["repeated"], help="the repeated cells' N")
    parser.add_argument("--table1-cells", default="*", help="Table 1 cells (globs, comma-separated)")
    parser.add_argument("--repeated-cells", default="*", help="repeated-digit cells (globs, comma-separated)")
    parser.add_argument("--pack-only", action="store_true",
                        help="solve nothing: merge what the shards hold (a call stopped from outside) and pack it")
    parser.add_argument("--bring-back", help="a folder (the device's $OUT) for records.tgz, tables.tgz, the log "
                                             "and precision_check.json")
    parser.add_argument("--smoke", action="store_true",
                        help="a small run: add_5 and gt_5 at N=201 (the committed records hold 200 of each), "
                             "rep_add_50_p1 at N=51 (they hold 50; a 10-digit repeated cell has only its 200): three "
                             "problems to solve, one problem per cell in the check")
    parser.add_argument("--assemble", metavar="RECORDS_TGZ",
                        help="here, afterwards: take in a call's records.tgz and regenerate results/table1_caef.*, "
                             "failure_analysis.* and table1.* with their committed commands at the paper's N")
    parser.add_argument("--previous", help="--assemble: the failure analysis of earlier weights to print beside "
                                           "(default: the newest committed one of other weights, from git)")
    args = parser.parse_args(argv)
    if args.assemble:
        return assemble_results(Path(args.assemble), args.previous)
    if not args.out:
        parser.error("--out is required (or --assemble)")
    if args.smoke:
        args.table1_cells, args.repeated_cells, args.check_problems = "add_5,gt_5", "rep_add_50_p1", 1
        args.table1_limit, args.repeated_limit = 201, 51
    limits = {"table1": args.table1_limit, "repeated": args.repeated_limit}
    wanted = {{"a": "table1", "b": "repeated"}.get(part, part) for part in args.parts.split(",")}
    args.processes = args.processes or (8 if args.device.startswith("cuda") else 1)
    started = time.time()
    deadline = started + 60 * args.minutes - ASSEMBLE_S
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = open(out / "full_evaluation.log", "a")

    def say(line: str) -> None:
        line = f"[{time.time() - started:6.0f} s] {line}"
        print(line, flush=True)
        log.write(line + "\n")
        log.flush()

    say(f"{' '.join(sys.argv)} on {args.device}")
    folder, weights = records_folder(args.tier, args.checkpoints)
    seed = args.seed_records
    if seed is None:  # the committed records of these weights; other weights have none yet
        seed = str(RECORDS / f"{folder.name}.tgz") if (RECORDS / f"{folder.name}.tgz").is_file() else ""
    if seed:
        say(f"records: {take_in(Path(seed), folder)} taken in from {seed} into {folder}")
    else:
        say(f"records: none committed for {folder.name}; every problem is solved here")
    parts = {part: chosen_cells(part, args.table1_cells if part == "table1" else args.repeated_cells)
             for part in PARTS if part in wanted}
    cells = {cell: limits[part] for part, names in parts.items() for cell in names}
    shards = folder.parent.parent / "shards" / folder.name
    report = {}
    if not args.pack_only:
        context = mp.get_context("spawn")  # CUDA in each child: never fork after it is initialised
        with context.Pool(len(CANDIDATES) + 1) as pool:
            setting, report = check_precision(args, pool, folder, out / "check", say)
        (out / "precision_check.json").write_text(json.dumps(report, indent=1) + "\n")
        with context.Pool(args.processes) as pool:
            solve(args, pool, setting, folder, shards, cells, deadline, say)
    say(f"records: {merge_shards(shards, folder, list(cells))} merged from the shards into {folder}")
    made = assemble_here(folder, parts, limits, args.checkpoints, out, say) if not args.pack_only else {}
    if args.bring_back:
        back = Path(args.bring_back)
        say(f"{pack_records(folder, back / 'records.tgz')} records packed into {back / 'records.tgz'}")
        with tarfile.open(back / "tables.tgz", "w:gz") as tar:
            for part in ("table1", "repeated"):
                if (out / part).is_dir():
                    tar.add(out / part, arcname=part)
        if report:
            (back / "precision_check.json").write_text(json.dumps(report, indent=1) + "\n")
    say(f"done: tables at N={made}")
    if args.bring_back:
        (Path(args.bring_back) / "full_evaluation.log").write_text((out / "full_evaluation.log").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
