"""The long multiplication and division suite behind `caef-bench run --suite long_mul_div`.

The chosen systems of baselines/ on the four long cells (mul_20x20, mul_50x50, div_40by20, div_100by10;
`data.testsets.long_muldiv_cells`), every problem kept:

- a CAEF system (model `caef`) runs in this process, traced, each problem on the route its tier takes it
  (`models.limits.route_within_tier`: past the paper's mul/div limits the long route, LONG_MUL and
  LONG_DIV, where the tier's limits and the model's adapters have it). A cell its tier refuses is not run,
  the refusal its reason, before any model loads. Records go to one file per cell in its weights' records
  folder (`suites.solve_cells`), so a rerun solves only the problems they lack;
- every other system runs through lm-eval (`table1.run_system`: sample logs and a request cache per
  system, a cell whose samples are complete is not run again) in its own prompt style
  (caef_long_muldiv, caef_long_muldiv_direct, caef_long_muldiv_chat); a cell it has no adapters for is
  not run, with the reason.

Each system's problems go to records/long_mul_div/<system>.jsonl.gz beside the results document, one line
each (`problem_line`: the reply and its verdict, and for CAEF the runtime's record without its step
texts), and every number of a cell is `cell_summary` of its lines, so that a committed report recounts
from its records (tests/test_long_mul_div_records.py).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from caef_bench.data.testsets import CELLS, long_muldiv_cells, match_cells
from caef_bench.evaluate.failures import failure_entry, record_failures, reply_failure
from caef_bench.evaluate.long_operands import packed
from caef_bench.evaluate.repeated import STYLE_OF_GROUP
from caef_bench.evaluate.scoring import accuracy, is_correct, verdict
from caef_bench.evaluate.suites import as_problems, cell_problems, records_folder, reusing, solve_cells
from caef_bench.evaluate.systems import System
from caef_bench.evaluate.table1 import (problem_lines, read_samples, run_system, system_folder, system_weights,
                                        write_problem_lines)
from caef_bench.machines import parse_expression, routed, run
from caef_bench.paths import WORK_DIR
from caef_bench.runtime.problem import reference_step_count
from caef_bench.runtime.records import ProblemRecord

SUITE = "long_mul_div"
DEFAULT_SYSTEMS = ("caef-tiny", "lora-direct-smollm2-135m", "lora-direct-tiny-protocol")
RECORDS = Path("records") / SUITE  # each system's problem lines, beside the results document
ANCHORS = "protocol/long_mul_div_anchors.json"  # the literature's reach on multiplication (package data)
# The standard a tier's long route is held to: at least 99% right on at least this many problems
# of each cell.
STANDARD_ACCURACY = 0.99
STANDARD_N = {"mul_20x20": 100, "mul_50x50": 20, "div_40by20": 50, "div_100by10": 20}


def select_cells(patterns: str | None) -> list[str]:
    """The long cells by name or shell pattern ('mul_*'); all four by default."""
    every = long_muldiv_cells()
    return match_cells(patterns, every, "long multiplication and division") if patterns else every


def anchors() -> list[dict]:
    """The literature's reported reach on multiplication, each with its source (caef_bench/protocol/)."""
    return json.loads(resources.files("caef_bench").joinpath(ANCHORS).read_text())["anchors"]


def cell_lengths(cell: str) -> dict:
    """{"op", "a_digits", "b_digits", "size"} of a long cell (mul_20x20: 20 digits times 20)."""
    spec = CELLS[cell]
    return {"op": spec.op, "a_digits": spec.digits, "b_digits": spec.b_digits, "size": spec.size}


def expected_calls(expr: str, route: str) -> int:
    """The model calls a correct run of `expr` on `route` makes (both aligner calls, every transition,
    callees included: what `machines.long_calls` tabulates)."""
    expression = parse_expression(expr)
    return reference_step_count(run(routed(expression.op, route), expression.a, expression.b))


# --------------------------------------------------------------------------- a cell's numbers, from its lines


def problem_line(cell: str, record: ProblemRecord) -> dict:
    """A CAEF run as its problem line: what table1's lines hold (cell, expression, target, reply, verdict) with
    the problem's id, and the runtime's record without its step texts (route, outcome, first divergence,
    n_steps, seconds)."""
    return {"cell": cell, "id": record.id, "expr": record.expr, "target": record.target, "reply": record.answer or "",
            "correct": is_correct(record), "caef": packed(record)}


def _mean(values: list[float], digits: int) -> float | None:
    return round(sum(values) / len(values), digits) if values else None


def cell_summary(lines: list[dict], style: str | None = None) -> dict:
    """A cell's numbers from its problem lines alone: accuracy with its Wilson 95% interval and every miss
    classified as the repeated-digit study does it. CAEF's lines (with the runtime's record): each run's first
    divergence (`failures.record_failures`), its outcomes, exact traces, model calls a problem beside the
    machines' count for a correct run, and model seconds a problem (its share of the batched calls). A
    baseline's: each wrong reply read in its prompt `style` (`failures.reply_failure`)."""
    summary = accuracy(lines)
    records = [ProblemRecord.from_dict(line["caef"]) for line in lines if "caef" in line]
    if not records:
        summary["failures"] = [failure_entry(line, reply_failure(line["expr"], line["target"], line["reply"],
                                                                 CELLS[line["cell"]].op, style))
                               for line in lines if not line["correct"]]
        return summary
    return {**summary, "exact_traces": sum(is_correct(r) and r.first_divergence is None for r in records),
            "outcomes": dict(Counter(verdict(r) for r in records)),
            "failures": record_failures(records, {line["id"]: line for line in lines}),
            "model_calls_mean": _mean([r.n_steps for r in records], 1),
            "expected_calls_mean": _mean([expected_calls(r.expr, r.route or "paper") for r in records], 1),
            "model_seconds_mean": _mean([r.model_seconds for r in records], 3)}


# --------------------------------------------------------------------------- the request


@dataclass(frozen=True)
class LongMulDivRequest:
    """`caef-bench run --suite long_mul_div` as a command asks for it."""

    command: str
    systems: tuple[System, ...]  # in the order they run
    cells: tuple[str, ...] = tuple(long_muldiv_cells())
    work: Path = WORK_DIR / SUITE  # lm-eval's outputs and request caches, per system
    tier: str = "tiny"  # CAEF's tier, unless its system file names one
    checkpoints: str | None = None  # CAEF's adapters, over its system file's
    records: Path | None = None  # CAEF's records folder; default per weights (suites.records_folder)
    limit: int | None = None  # problems per cell for every system (default: every problem of the cell)
    limits: dict = field(default_factory=dict)  # {system name: problems per cell}, over `limit`
    cells_of: dict = field(default_factory=dict)  # {system name: its cells}, a slow system on fewer
    speculative: bool = True
    device: str | None = None
    dtype: str | None = None  # CAEF's tier in another torch dtype than its own
    reuse_steps: Path | None = None  # an earlier run's records folder, for calls to unchanged adapters
    # CAEF on the long route where its tier's limits do not take it yet (measuring_limits): the run that
    # measures what the tier's limits may then say
    measure_long_route: bool = False

    def __post_init__(self):
        if patterns := [key for key in self.limits if "@" in key]:
            raise ValueError(f"--limits {', '.join(patterns)}: this suite takes one N per system (SYSTEM=N)")

    def limit_of(self, system: System) -> int | None:
        """A system's N per cell here: --limits by name, else --limit, else the whole cell (a system file's
        own `limit` is Table 1's on a CPU; the long route's standard asks for the cells' N)."""
        return self.limits.get(system.name, self.limit)

    def cells_for(self, system: System) -> list[str]:
        return self.cells_of.get(system.name, list(self.cells))


def why_not(system: System, cells: list[str]) -> str | None:
    """Why a system cannot run `cells` here: a GPU, a variable, a model package, and for LoRA-direct on a tier
    of ours the adapters of the cells' operators, whatever its file requires (CAEF's adapters are its routes'
    to check, `cell_routes`: asked with no cells); None when it can."""
    try:
        return system.unavailable(cells) or (system.missing_adapters(cells) if system.model == "caef-direct" else None)
    except FileNotFoundError as missing:  # its checkpoints are not on this machine
        return str(missing)


# --------------------------------------------------------------------------- CAEF in this process


def caef_adapters(tier: str, checkpoints: str | None, model_args: dict):
    """The adapters a CAEF system's model has, read from its folder without loading it; None for an endpoint
    (asked when its model is made, `runtime.backends.step_model`)."""
    if model_args.get("backend", "hf") != "hf":
        return None
    from caef_bench.models.loading import available_adapters, tier_with_checkpoints

    return available_adapters(tier_with_checkpoints(tier, checkpoints))


def caef_model(tier: str, checkpoints: str | None, model_args: dict, request: LongMulDivRequest, ops: list[str]):
    """A CAEF system's step model (its backend's), refusing operators whose adapters it lacks."""
    from caef_bench.runtime.backends import step_model

    return step_model(model_args.get("backend", "hf"), tier, checkpoints, speculative=request.speculative,
                      device=request.device, base_url=model_args.get("base_url"), ops=ops, dtype=request.dtype)


def _caef_weights(tier: str, checkpoints: str | None, model_args: dict, dtype: str | None = None) -> str | None:
    """The weights fingerprint of a CAEF system that did not run (in `dtype` where given); None where this
    machine cannot see them."""
    if model_args.get("backend", "hf") != "hf":
        return None
    from caef_bench.models.loading import tier_with_checkpoints, weights_fingerprint

    try:
        return weights_fingerprint(tier_with_checkpoints(tier, checkpoints, dtype))
    except (FileNotFoundError, ValueError):
        return None


MEASURING = "a measurement run (caef-bench run --suite long_mul_div --measure-long-route)"


def measuring_limits(tier: str, cells: list[str]):
    """The tier's limits with a long route that takes every problem of `cells`, for a run that measures the
    long route before the tier's file gives it one (the limits `solve` and `serve` keep are the file's);
    the long route's adapters are still required."""
    from dataclasses import replace

    from caef_bench.models.limits import TIER_LIMITS, OperandLimits

    limits = TIER_LIMITS.get(tier, OperandLimits())
    lengths = [cell_lengths(cell) for cell in cells]
    longest = {op: [(n["a_digits"], n["b_digits"]) for n in lengths if n["op"] == op] for op in ("mul", "div")}
    return replace(limits, long_mul_digits=max([limits.long_mul_digits, *(max(pair) for pair in longest["mul"])]),
                   long_div_digits=max([limits.long_div_digits, *(a for a, _ in longest["div"])]),
                   long_divisor_digits=max([limits.long_divisor_digits, *(b for _, b in longest["div"])]),
                   long_measured=MEASURING)


def cell_routes(tier: str, cells: list[str], limit: int | None, adapters, limits=None
                ) -> tuple[dict[str, str], dict[str, str]]:
    """({cell: the route its problems run on}, {cell: why its tier refuses it}), by the tier's limits (or
    `limits`) and the adapters the model has (`adapters`: a function, asked only where the long route would
    take a problem)."""
    from caef_bench.models.limits import BeyondTierError, route_within_tier

    routes, refused = {}, {}
    for cell in cells:
        try:
            found = {route_within_tier(tier, parse_expression(row["expr"]), limits, adapters=adapters)
                     for row in cell_problems(cell, limit)}
        except BeyondTierError as refusal:
            refused[cell] = str(refusal)
            continue
        if len(found) != 1:  # (the long cells are past the paper's limits: every problem takes the long route)
            raise ValueError(f"{cell}: its problems run on more than one route ({', '.join(sorted(found))})")
        routes[cell] = found.pop()
    return routes, refused


def run_caef_system(system: System, request: LongMulDivRequest, say=print) -> tuple[dict, dict[str, list[dict]]]:
    """(its entry: tier, weights, route per cell, `not_run` with reasons; {cell: its problem lines})."""
    from caef_bench.models.limits import MissingAdaptersError

    args = system.resolved_model_args()
    tier, checkpoints = args.get("tier", request.tier), request.checkpoints or args.get("checkpoints")
    cells, limit = request.cells_for(system), request.limit_of(system)
    entry = {"tier": tier}
    reason = why_not(system, [])
    if reason:
        return {**entry, "weights": None, "not_run": dict.fromkeys(cells, reason)}, {}
    known = []  # the adapters, read once and only where a route asks for them

    def adapters():
        if not known:
            known.append(caef_adapters(tier, checkpoints, args))
        return known[0]

    limits = measuring_limits(tier, cells) if request.measure_long_route else None
    if limits is not None:
        entry["measured_past_tier_limits"] = MEASURING
    try:
        routes, not_run = cell_routes(tier, cells, limit, adapters, limits)
    except FileNotFoundError as missing:  # no weights for the tier here
        return {**entry, "weights": None, "not_run": dict.fromkeys(cells, str(missing))}, {}
    if not routes:
        return {**entry, "weights": _caef_weights(tier, checkpoints, args, request.dtype), "not_run": not_run}, {}
    ops = sorted({routed(CELLS[cell].op, route) for cell, route in routes.items()})
    try:
        model = caef_model(tier, checkpoints, args, request, ops)
    except MissingAdaptersError as refusal:  # an endpoint that does not serve the long route's adapters
        return {**entry, "weights": None, "not_run": {**not_run, **dict.fromkeys(routes, str(refusal))}}, {}
    reuse, source = reusing(request.reuse_steps, model, say)
    records, sources = records_folder(model, tier, request.records, source)
    say(f"{system.name}: {', '.join(routes)}, {limit or 'all'} problems each, traced (records: {records}/)")
    jobs = {cell: (as_problems(cell_problems(cell, limit), route), records / f"caef_{cell}.jsonl")
            for cell, route in routes.items()}
    solved = solve_cells(jobs, model, reuse, mode="traced")
    entry.update(weights=model.fingerprint, adapters=model.adapter_fingerprints,
                 records_folder=str(records), reuse_sources=sources, routes=routes,
                 resumed={cell: resumed for cell, (_, resumed) in solved.items()}, not_run=not_run)
    return entry, {cell: [problem_line(cell, record) for record in records] for cell, (records, _) in solved.items()}


# --------------------------------------------------------------------------- the others through lm-eval


def run_lm_eval_system(system: System, request: LongMulDivRequest, say=print) -> tuple[dict, dict[str, list[dict]]]:
    """(its entry: prompt style, weights, lm-eval's command, `not_run` with reasons; {cell: its problem lines})."""
    cells = request.cells_for(system)
    not_run = {cell: reason for cell in cells if (reason := why_not(system, [cell]))}
    runnable = [cell for cell in cells if cell not in not_run]
    entry = {"style": STYLE_OF_GROUP[system.tasks], "not_run": not_run}
    if not runnable:
        try:  # its weights all the same, where this machine has them
            entry["weights"] = system_weights(system)
        except (FileNotFoundError, ValueError):
            entry["weights"] = None
        return entry, {}
    ran = run_system(system, runnable, request.limit_of(system), request.work, say)
    entry.update(weights=ran.get("weights"), command=ran["command"])
    samples = read_samples(system_folder(system, request.work, ran.get("weights")), system, runnable)
    lines = {}
    for cell in runnable:
        order = {row["expr"]: (i, row["id"]) for i, row in enumerate(cell_problems(cell, request.limit_of(system)))}
        cell_lines = sorted(problem_lines(system, {cell: samples[cell]}, ran.get("weights")),
                            key=lambda line: order[line["expr"]][0])
        lines[cell] = [{"cell": cell, "id": order[line["expr"]][1], **line} for line in cell_lines]
    return entry, lines


# --------------------------------------------------------------------------- the suite


def run_long_mul_div(request: LongMulDivRequest, out: Path, say=print) -> dict:
    """Every system of the request on its cells; each system's problem lines written under `out`
    (records/long_mul_div/<system>.jsonl.gz); the results document `report.long_mul_div` lays out."""
    started = time.perf_counter()
    document = {"suite": SUITE, "command": request.command, "cells": {cell: cell_lengths(cell) for cell in request.cells},
                "standard": {"accuracy": STANDARD_ACCURACY, "n": STANDARD_N}, "anchors": anchors(), "systems": {}}
    for system in request.systems:
        caef = system.model == "caef"
        entry, lines = (run_caef_system if caef else run_lm_eval_system)(system, request, say)
        entry = {"kind": "caef" if caef else "lm-eval", "paper_row": system.paper_row,
                 "description": system.description, "model": system.model, "limit": request.limit_of(system),
                 **entry, "cells": {cell: cell_summary(cell_lines, entry.get("style"))
                                    for cell, cell_lines in lines.items()}}
        for cell, reason in entry["not_run"].items():
            say(f"{system.name}: {cell} not run, {reason}")
        for cell, stats in entry["cells"].items():
            say(f"{system.name}: {cell} {stats['correct']}/{stats['n']} right")
        if lines:
            entry["records"] = str(RECORDS / f"{system.name}.jsonl.gz")  # (from the document's folder)
            write_problem_lines([line for cell_lines in lines.values() for line in cell_lines], out / entry["records"])
        document["systems"][system.name] = entry
    document["seconds"] = round(time.perf_counter() - started, 1)
    return document
