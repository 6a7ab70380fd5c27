"""The full-size CAEF evaluation on a lent accelerator, in one prepared call: Table 1's CAEF rows at the
paper's N=1000 on all 22 cells (part a) and the repeated-digit cells at N=200 (part b), traced, on the
shipped weights; each part's tables written as soon as it ends.

    python benchmarks/accelerator/full_evaluation.py --out DIR [--device cuda] [--parts a,b]
        [--table1-limit 1000] [--repeated-limit 200] [--table1-cells '*'] [--repeated-cells '*'] [--processes 12] [--minutes 8] [--smoke]

The runtime solves a cell's problems in batched rounds, but between two model calls it parses, renders
and drafts every step in Python: on a GPU that, not the model, bounds a single process. So the problems
are cut into chunks (cheapest first within a part, by the machines' own step counts) that several
processes solve side by side, each into a records file of its own under work/shards/; a chunk is one
`runtime.solve_to_file` call, so a second call of this script resumes every chunk where it stopped.
When a part's chunks are done, they are merged into the weights' records folder
(work/records/<tier>-<weights>/caef_<cell>.jsonl, the files `caef-bench run` resumes from) and the
suite's own command assembles the tables from them, solving nothing again:

    caef-bench run --suite caef --limit 1000 --out DIR/table1                       (part a)
    caef-bench run --suite repeated --systems caef-tiny --limit 200 \\
        --onestep-per-cell 0 --out DIR/repeated                                     (part b)

--smoke solves a few problems per cell on whatever device is given and prints the model calls and
forward passes per part, to size a device call before spending it (docs/reproducibility.md).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import multiprocessing as mp
import os
import subprocess
import sys
import time
from pathlib import Path

PARTS = {"a": "table1", "b": "repeated"}


def part_cells(part: str) -> list[str]:
    from caef_bench.data.testsets import repeated_cells, table1_cells

    return table1_cells() if part == "a" else repeated_cells()


def stage_cells(part: str, pattern: str, wanted: str) -> list[str]:
    """A stage's cells: the part's cells that match the stage's pattern and one of the wanted globs."""
    globs = wanted.split(",")
    return [cell for cell in part_cells(part)
            if fnmatch.fnmatch(cell, pattern) and any(fnmatch.fnmatch(cell, glob) for glob in globs)]


def problem_cost(problem: dict) -> int:
    """Model calls of a correct run, each weighted by its text's length (a step's tokens): what one solve costs."""
    from caef_bench.machines import run
    from caef_bench.runtime.engine import reference_step_count

    digits = len(problem["a"]) + len(problem["b"])
    return reference_step_count(run(problem["op"], int(problem["a"]), int(problem["b"]))) * (40 + 2 * digits)


def chunks_of(pending: dict[str, list[int]], pieces: int) -> list[dict]:
    """Each cell's pending problems (indices into its test set) as chunks of about 1/pieces of the whole
    cost each; a chunk never spans two cells."""
    from caef_bench.data.testsets import load_cell

    costs = {}
    for cell, indices in pending.items():
        rows = load_cell(cell)
        costs[cell] = [problem_cost(rows[index]) for index in indices]
    target = max(1.0, sum(map(sum, costs.values())) / pieces)
    chunks = []
    for cell, indices in pending.items():
        chunk, cost = [], 0
        for position, (index, one) in enumerate(zip(indices, costs[cell])):
            chunk.append(index)
            cost += one
            if cost >= target or position == len(indices) - 1:
                chunks.append({"cell": cell, "indices": chunk, "cost": cost})
                chunk, cost = [], 0
    return chunks


_MODEL = None


def _load(tier: str, checkpoints: str | None, device: str) -> None:
    global _MODEL
    import torch

    from caef_bench.runtime.hf import load_step_model

    torch.set_num_threads(1)  # one core each: the processes, not the threads, are what run side by side
    _MODEL = load_step_model(tier, checkpoints, device=device)


def _solve_chunk(job: tuple[dict, str, float]) -> dict:
    chunk, shards, deadline = job
    if time.time() > deadline:
        return {**chunk, "skipped": True}
    from caef_bench.data.testsets import load_cell
    from caef_bench.evaluate.suites import as_problems
    from caef_bench.runtime import solve_to_file

    every = load_cell(chunk["cell"])
    rows = [every[index] for index in chunk["indices"]]
    path = Path(shards) / f"{chunk['cell']}.{chunk['indices'][0]:04d}-{chunk['indices'][-1]:04d}.jsonl"
    started = time.perf_counter()
    calls = _MODEL.stats.steps
    solve_to_file(as_problems(rows), _MODEL, path, mode="traced")
    return {**chunk, "seconds": round(time.perf_counter() - started, 1), "calls": _MODEL.stats.steps - calls}


def merge_shards(shards: Path, records: Path, cells: list[str]) -> dict[str, int]:
    """Append each chunk's records to its cell's file in the weights' records folder (ids already there are
    kept as they are); returns the records per cell after merging."""
    counts = {}
    records.mkdir(parents=True, exist_ok=True)
    for cell in cells:
        target = records / f"caef_{cell}.jsonl"
        seen = set()
        if target.exists():
            seen = {json.loads(line)["id"] for line in target.read_text().splitlines() if line.strip()}
        with target.open("a") as out:
            for chunk_file in sorted(shards.glob(f"{cell}.*.jsonl")):
                for line in chunk_file.read_text().splitlines():
                    try:
                        record = json.loads(line)
                    except json.JSONDecodeError:  # a line cut by an interrupted call: solved again next time
                        continue
                    if record["id"] not in seen:
                        out.write(line + "\n")
                        seen.add(record["id"])
        counts[cell] = len(seen)
    return counts


def weights_folder(tier: str, checkpoints: str | None) -> Path:
    from caef_bench.models.loading import tier_with_checkpoints, weights_fingerprint
    from caef_bench.paths import WORK_DIR

    return WORK_DIR / "records" / f"{tier}-{weights_fingerprint(tier_with_checkpoints(tier, checkpoints))}"


# What the call solves, in order: (part, cells, problems per cell). Each stage's tables are assembled when
# it ends, so a call cut short by its time still leaves whole cells: first what the repeated-digit
# analysis needs (N=50 per cell, 200 at 10 digits), then Table 1 at N=200, then at the paper's 1000, then
# the repeated cells at 200.
STAGES = (("b", "rep_*", 50), ("b", "rep_*_10_*", 200), ("a", "*", 200), ("a", "*", 1000), ("b", "rep_*", 200))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tier", default="tiny")
    parser.add_argument("--checkpoints")
    parser.add_argument("--parts", default="a,b")
    parser.add_argument("--table1-limit", type=int, default=1000, help="part a's largest N (the paper's)")
    parser.add_argument("--repeated-limit", type=int, default=200, help="part b's largest N")
    parser.add_argument("--table1-cells", default="*",
                        help="part a's cells (globs, comma-separated): e.g. '*_50,*_100' leaves the cheap cells to a CPU")
    parser.add_argument("--repeated-cells", default="*",
                        help="part b's cells (globs, comma-separated): e.g. 'rep_mul_10_*,rep_div_10_*', the cells "
                             "a CPU pilot of two adapters changes")
    parser.add_argument("--processes", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    parser.add_argument("--minutes", type=float, default=8.0, help="no chunk starts after this")
    parser.add_argument("--bring-back", help="a folder (the device's $OUT) for records.tgz: every record of "
                                             "these weights without its step texts, from which `caef-bench run` "
                                             "assembles the same tables elsewhere")
    parser.add_argument("--pack-only", action="store_true",
                        help="solve nothing: merge what the chunks finished (a call stopped from outside) and pack it")
    parser.add_argument("--smoke", action="store_true", help="3 problems per cell: count the work, size the call")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    deadline = started + 60 * args.minutes
    caps = {"a": args.table1_limit, "b": args.repeated_limit}
    records = weights_folder(args.tier, args.checkpoints)
    shards = records.parent.parent / "shards" / records.name
    shards.mkdir(parents=True, exist_ok=True)
    log = open(out / "full_evaluation.log", "a")
    if args.pack_only:
        counts = merge_shards(shards, records, [c for part in args.parts.split(",") for c in part_cells(part)])
        print(f"{sum(counts.values())} records in {records}", flush=True)
        if args.bring_back:
            print(f"{pack_records(records, Path(args.bring_back) / 'records.tgz')} records packed", flush=True)
        return 0

    def say(line: str) -> None:
        line = f"[{time.time() - started:6.0f} s] {line}"
        print(line, flush=True)
        log.write(line + "\n")
        log.flush()

    say(f"{' '.join(sys.argv)}; records {records}; {args.processes} processes on {args.device}")
    context = mp.get_context("spawn")  # CUDA in each child: never fork after it is initialised
    with context.Pool(args.processes, initializer=_load, initargs=(args.tier, args.checkpoints, args.device)) as pool:
        for part, pattern, limit in STAGES:
            limit = 3 if args.smoke else min(limit, caps[part])
            if part not in args.parts.split(",") or time.time() > deadline:
                continue
            cells = stage_cells(part, pattern, args.table1_cells if part == "a" else args.repeated_cells)
            merge_shards(shards, records, cells)
            pending = {cell: _pending(records, cell, limit) for cell in cells}
            pending = {cell: indices for cell, indices in pending.items() if indices}
            chunks = chunks_of(pending, 4 * args.processes)
            chunks.sort(key=lambda c: c["cost"], reverse=True)  # the longest first: the pool ends level
            say(f"stage {part} {pattern} N={limit}: {len(cells)} cells, {len(chunks)} chunks to solve")
            solved = list(pool.imap_unordered(_solve_chunk, [(c, str(shards), deadline) for c in chunks]))
            skipped = [c for c in solved if c.get("skipped")]
            calls = sum(c.get("calls", 0) for c in solved)
            seconds = sum(c.get("seconds", 0.0) for c in solved)
            counts = merge_shards(shards, records, cells)
            complete = [cell for cell in cells if counts[cell] >= limit]
            say(f"stage {part} N={limit}: {len(solved) - len(skipped)} chunks solved ({calls} model calls in "
                f"{seconds:.0f} process-seconds), {len(skipped)} left for a second call; "
                f"{len(complete)} of {len(cells)} cells complete")
            if complete:
                _assemble(part, complete, limit, out, args, say)
    if args.bring_back:
        say(f"{pack_records(records, Path(args.bring_back) / 'records.tgz')} records packed")
    say("done")
    return 0


def pack_records(records: Path, archive: Path) -> int:
    """records/*.jsonl without step texts (a traced 100-digit record holds hundreds) as one archive; the
    outcome, answer and first divergence of every problem stay, which is what the tables read."""
    import io
    import tarfile

    count = 0
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(records.glob("*.jsonl")):
            lines = []
            for line in path.read_text().splitlines():
                if line.strip():
                    record = json.loads(line)
                    record["steps"] = []
                    lines.append(json.dumps(record, ensure_ascii=False))
            data = ("\n".join(lines) + "\n").encode() if lines else b""
            info = tarfile.TarInfo(f"{records.name}/{path.name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
            count += len(lines)
    return count


def _pending(records: Path, cell: str, limit: int) -> list[int]:
    """Indices among the cell's first `limit` problems that its records file does not hold yet."""
    path = records / f"caef_{cell}.jsonl"
    done = {json.loads(line)["id"] for line in path.read_text().splitlines() if line.strip()} if path.exists() else set()
    return [index for index, row in enumerate(_rows(cell, limit)) if row["id"] not in done]


def _rows(cell: str, limit: int) -> list[dict]:
    from caef_bench.data.testsets import load_cell

    return load_cell(cell)[:limit]


def _assemble(part: str, cells: list[str], limit: int, out: Path, args, say) -> None:
    """The suite's own command over the merged records: it solves nothing (every problem is recorded)."""
    common = ["--limit", str(limit), "--device", "cpu", "--cells", ",".join(cells)]
    if args.checkpoints:
        common += ["--checkpoints", args.checkpoints]
    if part == "a":
        command = ["--suite", "caef", "--out", str(out / "table1"), *common]
    else:
        command = ["--suite", "repeated", "--systems", "caef-tiny", "--onestep-per-cell", "0",
                   "--out", str(out / "repeated"), *common]
    full = [sys.executable, "-m", "caef_bench", "run", *command]
    say(" ".join(full[1:]))
    result = subprocess.run(full, capture_output=True, text=True)
    (out / f"assemble_{part}.log").write_text(result.stdout + result.stderr)
    say(f"part {part}: tables written to {out / PARTS[part]} (exit {result.returncode})")


if __name__ == "__main__":
    sys.exit(main())
