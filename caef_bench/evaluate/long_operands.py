"""Accuracy against operand length past the paper's 100 digits: where a tier stops, and why.

    python -m caef_bench.evaluate.long_operands --beyond-tier-limits --ops add,gt --lengths 101,105,110 --n 20
    python -m caef_bench.evaluate.long_operands --machines-only      # the exact machines on the long cells
    python -m caef_bench.evaluate.long_operands --one-step --ops add --lengths 20,100,200 --n 20 \
        [--checkpoints TIER] [--position-scheme coupled-hints/256]   # single steps, teacher-forced

A tier refuses operands past what it was built for (models.limits); this research run does not: with
`--beyond-tier-limits` (required for any length past the tier's limit, so that nobody runs it by
accident) it solves problems there through the runtime directly, traced, and records where each run
first left the machine's course (aligner (I), an executor step, aligner (O)) and how. The user-facing
limit stays where it is; `results/long_operands.md` says what was measured beyond it.

Problems: the committed long cells (tasks/data/<op>_<n>.jsonl, n = 200, 500, 1,000) at those lengths,
and at any other length `data.testsets.length_records`, drawn as the committed cells are (equal
lengths, seeded by the cell's name), so every probe is regenerable. Records go to
work/long_operands/<op>_<n>.jsonl and a rerun resumes from them; beside the results document they are
packed without their step texts (records/long_operands/<windowed|beyond>/<op>_<n>.jsonl.gz under its
folder), which each point names, so that its numbers recount problem by problem. The within-limit points of the report
(5 to 100 digits) are the committed Table 1 cells' tiny-tier results (results/table1_caef.json), read,
not rerun, with the weights they were measured on.
"""

from __future__ import annotations

import argparse
import copy
import fcntl
import json
import shlex
import sys
import time
from collections import Counter
from pathlib import Path

from caef_bench.data.testsets import (CELLS, DEFAULT_SEED, LENGTH_OPS, LONG_LENGTHS, TABLE1_LENGTHS, length_records,
                                      load_cell)
from caef_bench.evaluate.scoring import accuracy, is_correct, verdict
from caef_bench.models.limits import TIER_LIMITS, WINDOWED_OPS, OperandLimits
from caef_bench.models.positions import checked_scheme, field_cells, split_scheme
from caef_bench.paths import replace_text

RESULTS_JSON = Path("results/long_operands.json")
RECORDS_DIR = Path("work/long_operands")
TABLE1_CAEF = Path("results/table1_caef.json")
RESEARCH_FLAG = "--beyond-tier-limits"

# The literature's length generalisation: (method, task, trained on, reported at).
# Figures are the papers' as reported; nothing here is measured by this suite.
ANCHORS = (
    {"method": "Abacus embeddings (McLeish et al. 2024)", "task": "addition", "trained_digits": 20,
     "reported_digits": 100, "reported": "~99% at 100 digits"},
    {"method": "position coupling (Cho et al. 2024)", "task": "addition", "trained_digits": 30,
     "reported_digits": 200, "reported": "generalises from 30 to 200 digits"},
    {"method": "the literature on multiplication", "task": "multiplication", "trained_digits": None,
     "reported_digits": None, "reported": "only 2-3x its training length"},
)


def where_it_failed(record) -> str:
    """Where a traced run first left the machine's course: 'aligner (I)', 'executor', 'aligner (O)'
    with the error class ('executor: unparseable'); 'none' for a run that never did."""
    divergence = record.first_divergence
    if divergence is None:
        return "none"
    if divergence.adapter.startswith("aligner"):
        stage = "aligner (I)" if divergence.step == 0 else "aligner (O)"
    else:
        stage = "executor"
    return f"{stage}: {divergence.error_class}"


def first_divergence_cells(record) -> int | None:
    """For an executor's first divergence, the step index in the execution (1 = the first executor step):
    how far into the tape the run got."""
    divergence = record.first_divergence
    return divergence.step if divergence is not None and not divergence.adapter.startswith("aligner") else None


def summarise(records) -> dict:
    """Accuracy with its Wilson interval, the runs' outcomes, where they first failed, and their cost."""
    failed_at = [first_divergence_cells(r) for r in records]
    return {
        **accuracy({"correct": is_correct(r)} for r in records),
        "exact_traces": sum(is_correct(r) and r.first_divergence is None for r in records),
        "outcomes": dict(Counter(verdict(r) for r in records)),
        "first_failure": dict(Counter(where_it_failed(r) for r in records if r.first_divergence is not None)),
        "executor_failure_steps": sorted(s for s in failed_at if s is not None),
        "steps_mean": round(sum(r.n_steps for r in records) / max(len(records), 1), 1),
    }


def problems_at(op: str, digits: int, n: int, seed: int = DEFAULT_SEED) -> list[dict]:
    """The first n problems of the committed cell `<op>_<digits>`, or drawn the same way where none is."""
    cell = f"{op}_{digits}"
    if cell in CELLS and seed == DEFAULT_SEED:
        return load_cell(cell)[:n]
    return length_records(op, digits, n, seed)


def packed(record) -> dict:
    """A record without its step texts (it keeps its first divergence and its step count): what a report's
    numbers recount from, small enough to commit."""
    return {**record.to_dict(), "steps": []}


def pack(records, path: Path) -> None:
    """The records `packed`, gzipped, one line each."""
    from caef_bench.evaluate.table1 import write_problem_lines

    write_problem_lines([packed(record) for record in records], path)


def measure(model, op: str, digits: int, n: int, records_dir: Path = RECORDS_DIR, seed: int = DEFAULT_SEED,
            windowing=None, packed: Path | None = None, max_in_flight: int | None = None) -> dict:
    """Solve n problems of op at `digits` digits (traced, free-running), resuming from its records file.
    windowing: run operands longer than its `past` digits a window at a time (runtime.windowed).
    packed: where the records go packed (`pack`). max_in_flight: at most this many problems at a time, so
    that records come as problems finish (all at once, they all finish together at the end)."""
    from caef_bench.evaluate.suites import as_problems, solve_cell

    rows = problems_at(op, digits, n, seed)
    records_dir.mkdir(parents=True, exist_ok=True)
    passes, calls = model.stats.forward_passes, model.stats.steps
    start = time.perf_counter()
    records, resumed = solve_cell(as_problems(rows), model, records_dir / f"{op}_{digits}.jsonl", mode="traced",
                                  windowing=windowing, max_in_flight=max_in_flight)
    stats = summarise(records)
    if packed is not None:
        pack(records, packed)
    stats["resumed"] = resumed
    stats["seconds_solving"] = round(time.perf_counter() - start, 1)
    stats["forward_passes"] = model.stats.forward_passes - passes
    stats["calls_solving"] = model.stats.steps - calls  # the calls of the problems solved now (not the resumed)
    return stats


def machine_check(cells: list[str]) -> dict:
    """The exact machines (stdlib, no model) on committed cells: the answer aligner (O)'s rule reads off
    each halt state against the ground truth (Python's ints), the model calls a correct run makes, and
    the longest text one of them reads."""
    from caef_bench.machines import parse_expression, run
    from caef_bench.machines.aligner import align_output
    from caef_bench.runtime.problem import reference_step_count, reference_steps

    out = {}
    for cell in cells:
        rows = load_cell(cell)
        start = time.perf_counter()
        right, calls, longest = 0, [], 0
        for row in rows:
            expression = parse_expression(row["expr"])
            machine_run = run(expression.op, expression.a, expression.b)
            right += align_output(machine_run.text(-1)) == row["expr"] + row["answer"]
            calls.append(reference_step_count(machine_run))
            longest = max(longest, max(len(step.input) for step in reference_steps(row["expr"])))
        out[cell] = {"n": len(rows), "correct": right, "model_calls_mean": round(sum(calls) / len(calls), 1),
                     "longest_input_chars": longest, "seconds": round(time.perf_counter() - start, 2)}
    return out


def within_limits(path: Path = TABLE1_CAEF, ops=LENGTH_OPS) -> dict:
    """The tiny tier's end-to-end accuracy on Table 1's length cells, read from the committed suite results."""
    document = json.loads(path.read_text())
    points = {op: {str(n): document["results"][f"{op}_{n}"]["end_to_end"] for n in TABLE1_LENGTHS
                   if f"{op}_{n}" in document["results"]} for op in ops}
    return {"source": str(path), "command": document["command"], "weights": document["weights"], "points": points}


def one_step_cases(op: str, digits: int, n: int, seed: int = DEFAULT_SEED) -> dict[str, list[tuple[str, str]]]:
    """{adapter name: [(prompt, expected)]} for the first n problems at `digits` digits (problems_at): one
    executor transition drawn from each problem's run (the operator's own machine), and the aligner's
    conversions, (I) and (O) alternating, as evaluate.onestep draws them."""
    from caef_bench.data.testsets import named_rng
    from caef_bench.evaluate.onestep import conversion_cases
    from caef_bench.machines import run

    rng = named_rng(seed, f"long_operands/one_step/{op}/{digits}")
    pairs = [(int(row["a"]), int(row["b"])) for row in problems_at(op, digits, n, seed)]
    executor = []
    for a, b in pairs:
        machine_run = run(op, a, b)
        executor.append(machine_run.transition(rng.randrange(len(machine_run))))
    aligner = conversion_cases(op, pairs)
    return {f"executor_{op}": executor, f"aligner_{op}": aligner}


def one_step(step_model, op: str, digits: int, n: int, seed: int = DEFAULT_SEED) -> dict:
    """Exact match of single steps at `digits` digits, teacher-forced (one_step_cases). Cheap where an
    end-to-end run is not: a step of a 1,000-digit problem is one pass."""
    from caef_bench.evaluate.onestep import generate_in_batches, score_cases

    out = {}
    for name, cases in one_step_cases(op, digits, n, seed).items():
        step_model.activate(name)
        codec = step_model.codec_for(name)
        generate = lambda prompts, limits, drafts: generate_in_batches(step_model, name, prompts, limits)  # noqa: E731
        out[name] = {**score_cases(generate, cases, lambda text: len(codec.completion_ids(text)), keep=2),
                     "scheme": codec.scheme}  # the ids this adapter ran under
    return out


def under_scheme(step_model, scheme: str) -> None:
    """Run every adapter of `step_model` under another position scheme (research: how the weights
    read positions; e.g. the shipped tier under a field stride it was not trained with)."""
    from dataclasses import replace

    split_scheme(scheme)
    step_model.codec = replace(step_model.codec, scheme=scheme)
    step_model.codecs = {name: replace(codec, scheme=scheme) for name, codec in step_model.codecs.items()}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m caef_bench.evaluate.long_operands", description=__doc__.splitlines()[0])
    parser.add_argument("--tier", default="tiny")
    parser.add_argument("--checkpoints")
    parser.add_argument("--ops", default="add,gt", help="comma-separated: add, sub, gt, lt, eq")
    parser.add_argument("--lengths", default="", help="comma-separated operand lengths to solve, e.g. 101,105,110")
    parser.add_argument("--n", type=int, default=20, help="problems per (operator, length)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument(RESEARCH_FLAG, dest="beyond", action="store_true",
                        help="solve past the tier's operand limit (research only: the tier was not built for it)")
    parser.add_argument("--windowed", action="store_true",
                        help="whole runs of add, gt, lt and eq as the tier runs them past its fields of ids: a window "
                             "of each state at a time (runtime.windowed); records in RECORDS/windowed/")
    parser.add_argument("--machines-only", action="store_true", help="only the exact machines on the long cells")
    parser.add_argument("--one-step", action="store_true",
                        help="single steps, teacher-forced, at --lengths (n problems drawn as the test cells are), "
                             "instead of whole runs")
    parser.add_argument("--position-scheme", type=checked_scheme,
                        help="with --one-step: run the adapters under this scheme instead of their own "
                             "(e.g. coupled-hints/256: is what they learned tied to the field stride?)")
    parser.add_argument("--max-in-flight", type=int, metavar="N",
                        help="solve at most N problems at a time (default: all), so that a stopped run keeps the "
                             "records of those finished")
    parser.add_argument("--records", type=Path, default=RECORDS_DIR)
    parser.add_argument("--out", type=Path, default=RESULTS_JSON,
                        help="the results document to update (measurements are merged into it)")
    parser.add_argument("--costs-from", type=Path, metavar="DOCUMENT",
                        help="the document of the run that solved these problems (another --out): where this run "
                             "solves none, its seconds and forward passes are kept (default: --out's own)")
    return parser


def _laid_over(base: dict, over: dict) -> dict:
    """`base` with `over`'s values wherever `over` has one, dict by dict."""
    merged = copy.deepcopy(base)
    for key, value in over.items():
        merged[key] = (_laid_over(merged[key], value) if isinstance(value, dict) and isinstance(merged.get(key), dict)
                       else copy.deepcopy(value))
    return merged


def save_document(path: Path, document: dict, written: list[tuple[str, ...]], command: str) -> None:
    """Writes this run's measurements into the document as it is on disk now, under a lock.

    Several runs may share one --out (a 1,000-digit point takes hours; two run side by side): each read the
    document when it started, so writing its whole copy back would undo the points another run stored
    meanwhile. Only the key paths in `written` (what this run set) are taken from its copy; everything else
    stays as on disk, and what the disk lacks comes from this run's copy."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        on_disk = json.loads(path.read_text()) if path.is_file() else {}
        merged = _laid_over(document, on_disk)
        for keys in written:
            source, target = document, merged
            for key in keys[:-1]:
                source, target = source[key], target.setdefault(key, {})
            target[keys[-1]] = copy.deepcopy(source[keys[-1]])
        commands = merged.setdefault("commands", [])
        if command not in commands:
            commands.append(command)
        replace_text(path, json.dumps(merged, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    ops = [op for op in args.ops.split(",") if op]
    lengths = [int(n) for n in args.lengths.split(",") if n]
    if unknown := [op for op in ops if op not in LENGTH_OPS]:
        parser.error(f"unknown operator(s) {', '.join(unknown)}; this run takes {', '.join(LENGTH_OPS)}")
    limits = TIER_LIMITS.get(args.tier, OperandLimits())
    beyond = [n for n in lengths if n > limits.max_digits]
    if args.position_scheme and not args.one_step:
        parser.error("--position-scheme is for --one-step probes (whole runs use the tier's own ids)")
    if args.windowed and (wrong := [op for op in ops if op not in WINDOWED_OPS]):
        parser.error(f"--windowed runs {', '.join(WINDOWED_OPS)} only, not {', '.join(wrong)}")
    if args.windowed and args.one_step:
        parser.error("--windowed is for whole runs, not --one-step probes")
    if beyond and not args.beyond and not args.one_step and not args.windowed:
        parser.error(f"lengths {beyond} are past the {args.tier} tier's {limits.max_digits} digits; "
                     f"pass {RESEARCH_FLAG} to measure it there anyway")

    document = json.loads(args.out.read_text()) if args.out.is_file() else {}
    costs = json.loads(args.costs_from.read_text()) if args.costs_from else None
    document.setdefault("tier", args.tier)
    document["seed"] = args.seed
    document["limit_digits"] = limits.max_digits
    document["trained_digits"] = {op: [1, 100] for op in LENGTH_OPS}  # the protocol's training ranges
    document["anchors"] = list(ANCHORS)
    document["within"] = within_limits()
    written: list[tuple[str, ...]] = [("tier",), ("seed",), ("limit_digits",), ("trained_digits",), ("anchors",),
                                      ("within",)]
    command = "python -m caef_bench.evaluate.long_operands " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    if args.machines_only:
        document["machines"] = machine_check([f"{op}_{n}" for op in LENGTH_OPS for n in LONG_LENGTHS])
        written.append(("machines",))
        for cell, stats in document["machines"].items():
            print(f"{cell}: machine {stats['correct']}/{stats['n']}, {stats['model_calls_mean']} calls a run, "
                  f"longest input {stats['longest_input_chars']} chars, {stats['seconds']} s", flush=True)
    if lengths and args.one_step:
        from caef_bench.runtime.hf import load_step_model

        model = load_step_model(args.tier, args.checkpoints, speculative=True, ops=ops)
        from caef_bench.models.names import adapter_name

        scheme = args.position_scheme or model.codec_for(adapter_name("executor", ops[0])).scheme
        # the tier's own stride, for a document no whole run has written yet (the report reads it)
        document.setdefault("field_stride", split_scheme(model.codec.scheme)[1])
        if args.position_scheme:
            under_scheme(model, args.position_scheme)
        probes = document.setdefault("one_step", {})
        label = f"{model.fingerprint} under {scheme}"
        probe = probes.setdefault(label, {"weights": model.fingerprint, "checkpoints": args.checkpoints or "shipped",
                                          "scheme": scheme, "own_scheme": args.position_scheme is None,
                                          "field_cells": field_cells(scheme), "points": {}})
        for op in ops:
            for n in lengths:
                probe["points"].setdefault(op, {})[str(n)] = result = one_step(model, op, n, args.n, args.seed)
                written.append(("one_step", label, "points", op, str(n)))
                print(f"{op} {n} digits: " + ", ".join(
                    f"{name} {r['correct']}/{r['n']} ({r['scheme']})" for name, r in result.items()), flush=True)
                save_document(args.out, document, written, command)
    elif lengths:
        import torch

        from caef_bench.runtime.hf import load_step_model

        model = load_step_model(args.tier, args.checkpoints, speculative=True, ops=ops)
        from caef_bench.models.names import operator_adapters

        document["weights"] = model.fingerprint
        document["field_stride"] = split_scheme(model.codec.scheme)[1]  # the ids runs were measured under
        document["adapters"] = {**document.get("adapters", {}), **{
            name: model.adapter_fingerprints[name] for op in ops for name in operator_adapters(op)}}
        # the threads the runs were timed on: windowed runs keep theirs apart from the whole-state probes'
        (document.setdefault("window", {}) if args.windowed else document)["torch_threads"] = torch.get_num_threads()
        beyond_points = document.setdefault("windowed" if args.windowed else "beyond", {})
        written += [("weights",), ("field_stride",), ("window", "torch_threads") if args.windowed else ("torch_threads",)]
        written += [("adapters", name) for op in ops for name in operator_adapters(op)]
        if args.windowed:
            written += [("windowed_ops",), ("windowed_digits",)] + [("window", key) for key in (
                "back", "width", "chunk", "past_digits")]
            shape = limits.windowing
            document["windowed_ops"], document["windowed_digits"] = list(limits.windowed_ops), limits.windowed_digits
            document["window"].update({"back": shape.back, "width": shape.width, "chunk": shape.chunk,
                                       "past_digits": shape.past})
        records_dir = args.records / "windowed" if args.windowed else args.records
        packed_dir = Path("records") / "long_operands" / ("windowed" if args.windowed else "beyond")
        for op in ops:
            for n in lengths:
                packed = packed_dir / f"{op}_{n}.jsonl.gz"  # relative to the document's folder
                stats = measure(model, op, n, args.n, records_dir, args.seed,
                                windowing=limits.windowing if args.windowed else None,
                                packed=args.out.parent / packed, max_in_flight=args.max_in_flight)
                stats["records"] = str(packed)
                earlier = (costs or document).get("windowed" if args.windowed else "beyond", {}).get(op, {}).get(str(n), {})
                if stats["resumed"] == stats["n"] and earlier.get("n") == stats["n"]:
                    # nothing solved now: the run that solved them says what they cost
                    stats.update({key: earlier[key] for key in ("seconds_solving", "forward_passes", "calls_solving",
                                                                "resumed") if key in earlier})
                    if "calls_solving" not in earlier:
                        stats.pop("calls_solving")
                beyond_points.setdefault(op, {})[str(n)] = stats
                written.append(("windowed" if args.windowed else "beyond", op, str(n)))
                print(f"{op} {n} digits: {stats['correct']}/{stats['n']} right, first failures "
                      f"{stats['first_failure']}, {stats['seconds_solving']} s", flush=True)
                save_document(args.out, document, written, command)  # a stopped run keeps what it measured
    save_document(args.out, document, written, command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
