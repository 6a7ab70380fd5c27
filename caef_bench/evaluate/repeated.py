"""The repeated-digit suite behind `caef-bench run --suite repeated`.

Three measurements on the repeated-digit test sets (`repeated_<op>_<n>_<p1|p2|p3|mixed|round|control>`):
- CAEF end to end, traced, through the runtime (`suites.run_caef`: one records file per cell under
  the weights' records folder, so a rerun resumes and a larger --limit solves only the new problems);
  each failed run is classified at its first divergence (`failures.classify_record`).
- every other system of baselines/ through lm-eval (`table1.run_system`: its own work folder and
  request cache, a cell whose samples are complete is not run again), on the repeated cells in the
  system's own prompt style (caef_repeated, caef_repeated_direct, caef_repeated_chat); each wrong
  answer classified from the answer alone (`failures.reply_failure`). Its problems go, one line each
  (cell, id, period, expression, target, reply, verdict), to records/repeated/<system>.jsonl.gz beside
  the results document, and its cells are counted from those lines (`baseline_cell`), as a reader
  recounts them (tests/test_repeated_records.py).
- one-step stress: each executor and aligner on single transitions drawn from the repeated-digit
  problems, the random controls included (`onestep.repeated_cells_for`), so that a copying error
  shows where an end-to-end run never reaches the step (its aligner (I) failed first) or gets past it.
  Results are kept per adapter and cell in a JSON file beside the records: a rerun measures only what
  is missing.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from caef_bench.data.testsets import load_cell, match_cells, repeated_cells
from caef_bench.evaluate.failures import classify_step, failure_entry, reply_failure
from caef_bench.evaluate.onestep import SUB_CALLEES, aligner_cases, executor_cases, repeated_cells_for, score_cases
from caef_bench.evaluate.scoring import wilson_interval
from caef_bench.evaluate.suites import Reuse, records_folder, reusing, run_caef
from caef_bench.evaluate.systems import System
from caef_bench.evaluate.table1 import problem_lines, read_samples, run_system, system_folder, write_problem_lines
from caef_bench.models.names import adapter_name, split_adapter_name

CONTROL = "control"
STYLE_OF_GROUP = {"caef_table1": "bare", "caef_table1_direct": "direct", "caef_table1_chat": "chat"}
RECORDS = Path("records") / "repeated"  # each lm-eval system's problem lines, beside the results document


def select_cells(patterns: str | None) -> list[str]:
    """Repeated-digit cells by name or shell pattern ('repeated_add_*,repeated_gt_10_p1'); all 102 by default."""
    every = repeated_cells()
    return match_cells(patterns, every, "repeated-digit") if patterns else every


def cell_parts(cell: str) -> tuple[str, int, str]:
    """'repeated_add_10_p1' -> ('add', 10, 'p1')."""
    _, op, n, pattern = cell.split("_")
    return op, int(n), pattern


def control_of(cell: str) -> str:
    op, n, _ = cell_parts(cell)
    return f"repeated_{op}_{n}_{CONTROL}"


# --------------------------------------------------------------------------- CAEF end to end


def run_caef_repeated(model, cells: list[str], limit, records_dir: Path, progress=None, per_cell: bool = False,
                      reuse: Reuse | None = None, max_in_flight: int | None = None) -> dict:
    """CAEF traced on every cell (resumable records), each cell's failures classified; `limit` is N for
    every cell, or a function of the cell; every cell's problems in the same rounds (at most `max_in_flight`
    at once) unless `per_cell`; with `reuse`, calls to unchanged adapters answered from an earlier run's
    records of the same cells."""
    # (each cell's failures are classified there)
    summaries = run_caef(model, cells, limit, records_dir, progress, reuse=reuse, per_cell=per_cell,
                         max_in_flight=max_in_flight)
    results = {}
    for cell in cells:
        summary = summaries[cell]
        results[cell] = {"n": summary["end_to_end"]["n"],
                         "answer_errors": summary["end_to_end"]["n"] - summary["end_to_end"]["correct"],
                         "trace_errors": summary["exact trace"]["n"] - summary["exact trace"]["correct"],
                         "outcomes": summary["outcomes"], "resumed": summary["resumed"], "carried": summary["carried"],
                         "runs_with_cut_steps": summary["runs_with_cut_steps"],
                         "model_calls": summary["model_calls"], "reused_calls": summary["reused_calls"],
                         "failures": summary["failures"]}
    return results


# --------------------------------------------------------------------------- baselines through lm-eval


def baseline_cell(lines: list[dict], style: str) -> dict:
    """A baseline's cell from its problem lines alone: N, wrong answers, and each wrong reply classified as
    read in the system's prompt `style` (`failures.reply_failure`), in the lines' order."""
    return {"n": len(lines), "answer_errors": sum(not line["correct"] for line in lines),
            "failures": [failure_entry(line, reply_failure(line["expr"], line["target"], line["reply"],
                                                           cell_parts(line["cell"])[0], style))
                         for line in lines if not line["correct"]]}


def run_baseline_repeated(system: System, cells: list[str], limit: int | None, work: Path, progress=print,
                          out: Path | None = None) -> dict:
    """One system of baselines/ on the repeated cells through lm-eval (resumable), each wrong answer
    classified; with `out` (the results document's folder), its problem lines written there
    (records/repeated/<system>.jsonl.gz), the entry's `records`."""
    ran = run_system(system, cells, limit, work, progress)
    samples = read_samples(system_folder(system, work, ran.get("weights")), system, cells)
    style = STYLE_OF_GROUP[system.tasks]
    lines = problem_lines(system, {cell: samples[cell] for cell in cells}, ran.get("weights"), ("id", "period"))
    results = {cell: baseline_cell([line for line in lines if line["cell"] == cell], style) for cell in cells}
    entry = {"command": ran["command"], "limit": ran["limit"], "style": style, "cells": results}
    if ran.get("weights"):  # a tier's adapters (LoRA-direct): retrained ones make this row stale, and say so
        entry["weights"] = ran["weights"]
    if out is not None:
        entry["records"] = str(RECORDS / f"{system.name}.jsonl.gz")  # (from the document's folder)
        write_problem_lines(lines, out / entry["records"])
    return entry


# --------------------------------------------------------------------------- one-step stress


def onestep_adapters(cell: str) -> list[tuple[str, str]]:
    """(kind, op) of every adapter a cell's problems call: its executor (SUB's callees too) and its aligner."""
    op, _, _ = cell_parts(cell)
    executors = [op, *SUB_CALLEES] if op == "sub" else [op]
    return [("executor", name) for name in executors if cell in repeated_cells_for(name)] + [("aligner", op)]


def _direction(prompt: str) -> str:
    """An aligner case's direction: an expression prompt ('45+67=') is (I), a halt state (O)."""
    return "I" if prompt.endswith("=") and "\n" not in prompt else "O"


def onestep_component(kind: str, op: str, direction: str | None = None) -> str:
    """'executor_add', 'aligner_add (I)', 'aligner_add (O)'."""
    return adapter_name(kind, op) + (f" ({direction})" if kind == "aligner" else "")


def measure_onestep(step_model, kind: str, op: str, cell: str, per_cell: int, seed: int) -> dict:
    """Exact match of one adapter's single steps on one cell, split by direction for an aligner; the wrong
    outputs kept whole (prompt, expected, got), to be classified when the results are read."""
    adapter = adapter_name(kind, op)
    cases = (executor_cases if kind == "executor" else aligner_cases)(op, cell, per_cell, seed)
    codec = step_model.codec_for(adapter)

    def generate(prompts, limits, drafts):  # drafts: the model's drafter proposes the machine's step itself
        return [completion.text for completion in step_model.generate(prompts, adapter, limits)]

    groups: dict[str, list] = {}
    for case in cases:
        groups.setdefault(onestep_component(kind, op, _direction(case[0]) if kind == "aligner" else None), []).append(case)
    results = {}
    for component, group in groups.items():
        scored = score_cases(generate, group, lambda text: len(codec.completion_ids(text)), keep=None)
        results[component] = {"n": scored["n"], "correct": scored["correct"], "wrong": scored["failures"]}
    return results


def classify_onestep(component: str, cell: str, measured: dict) -> dict:
    """One component's measurement on one cell with every wrong output classified (`failures.classify_step`)."""
    adapter, _, direction = component.partition(" (")
    direction = direction.rstrip(")") or None
    problems = {p["expr"]: p for p in load_cell(cell)}
    failures = []
    for wrong in measured["wrong"]:
        failure = classify_step(adapter, wrong["expected"], wrong["got"], direction)
        # An aligner case names its problem (its expression); an executor's transition does not.
        expr = {"I": wrong["prompt"], "O": wrong["expected"].rpartition("=")[0] + "="}.get(direction)
        problem = problems.get(expr) or {"id": "", "expr": f"(a step of {cell})", "period": None}
        failures.append(failure_entry(problem, failure))
    return {"n": measured["n"], "correct": measured["correct"], "errors": measured["n"] - measured["correct"],
            "failures": failures}


def run_onestep_repeated(step_model, cells: list[str], per_cell: int, seed: int, store: Path, progress=None) -> dict:
    """{component: {cell: result}} for every adapter of every cell; `store` keeps what was measured
    (per weights, N and seed), so a rerun measures only the missing (adapter, cell) pairs."""
    settings = {"weights": step_model.fingerprint, "per_cell": per_cell, "seed": seed}
    kept = json.loads(store.read_text()) if store.is_file() else {}
    measured = kept.get("measured", {}) if all(kept.get(k) == v for k, v in settings.items()) else {}
    for cell in cells:
        for kind, op in onestep_adapters(cell):
            key = f"{kind}_{op}|{cell}"
            if key not in measured:
                measured[key] = measure_onestep(step_model, kind, op, cell, per_cell, seed)
                store.parent.mkdir(parents=True, exist_ok=True)
                store.write_text(json.dumps({**settings, "measured": measured}) + "\n")
            if progress:
                progress(key, measured[key])
    results: dict[str, dict] = {}
    for cell in cells:
        for kind, op in onestep_adapters(cell):
            for component, result in measured[f"{kind}_{op}|{cell}"].items():
                results.setdefault(component, {})[cell] = classify_onestep(component, cell, result)
    return results


def error_rate(errors: int, n: int) -> dict:
    """k errors of n with the Wilson 95% interval of the error rate."""
    low, high = wilson_interval(errors, n)
    return {"n": n, "errors": errors, "rate": errors / n if n else 0.0, "ci_low": low, "ci_high": high}


# --------------------------------------------------------------------------- the suite, from request to results


@dataclass(frozen=True)
class RepeatedRequest:
    """`caef-bench run --suite repeated` as a command asks for it."""

    command: str
    tier: str  # CAEF's tier, unless its system file names one
    cells: tuple[str, ...]
    systems: tuple[System, ...]  # in the order they run
    work: Path  # lm-eval outputs of the baselines, the one-step store
    checkpoints: str | None = None
    records: Path | None = None  # CAEF's records folder; default per weights (suites.records_folder)
    limit: int | None = None  # problems per cell for every system (default each system's own)
    limits: dict = field(default_factory=dict)  # {system name: problems per cell}, over `limit`
    cells_of: dict = field(default_factory=dict)  # {system name: its cells}, a slow system on fewer
    seed: int = 0
    onestep_per_cell: int = 0  # 0: no one-step stress
    onestep_cells: tuple[str, ...] | None = None  # default: every cell of the run
    speculative: bool = True
    device: str | None = None
    dtype: str | None = None  # CAEF's tier in another torch dtype than its own
    reuse_steps: Path | None = None  # an earlier run's records folder, for calls to unchanged adapters
    out: Path | None = None  # the results document's folder: each lm-eval system's problem lines go there
    max_in_flight: int | None = None  # CAEF: at most this many problems at once (None: all of them)

    def limit_of(self, system: System, cell: str | None = None) -> int | None:
        return system.problems_per_cell(self.limit, self.limits, cell)


def run_repeated(request: RepeatedRequest, say=print) -> dict:
    """Every system on the repeated-digit cells, then the one-step stress: the results document that
    `report.repeated.write_repeated` reads."""
    from caef_bench.runtime.hf import load_step_model

    started = time.perf_counter()
    results = {"command": request.command, "tier": request.tier, "checkpoints": request.checkpoints,
               "seed": request.seed, "onestep_per_cell": request.onestep_per_cell, "cells": list(request.cells),
               "systems": {}}
    step_model = None
    for system in request.systems:
        limit, own_cells = request.limit_of(system), request.cells_of.get(system.name, list(request.cells))
        cell_limits = system.cell_limits(request.limits)
        base = {"kind": "caef" if system.model == "caef" else "lm-eval", "paper_row": system.paper_row,
                "description": system.description, "limit": limit, "n_cells": len(own_cells)}
        if cell_limits:
            base["cell_limits"] = cell_limits
        # CAEF runs on the run's adapter folder where it names one (the LoRA-direct systems keep their own)
        reason = system.unavailable(own_cells, request.checkpoints if system.model == "caef" else None)
        if reason:
            say(f"{system.name}: skipped, {reason}")
            results["systems"][system.name] = {**base, "skipped": reason}
            continue
        if system.model != "caef":
            limit = system.lm_eval_limit(request.limit, request.limits)
            ran = run_baseline_repeated(system, own_cells, limit, request.work, say, request.out)
            results["systems"][system.name] = {**base, **ran}
            continue
        # CAEF runs through the runtime itself, traced, so every failure has its first divergence.
        tier = system.resolved_model_args().get("tier", request.tier)
        step_model = step_model or load_step_model(tier, request.checkpoints, speculative=request.speculative,
                                                   device=request.device, dtype=request.dtype)
        reuse, source = reusing(request.reuse_steps, step_model, say)
        records, sources = records_folder(step_model, tier, request.records, source)
        results.update(tier=tier, weights=step_model.fingerprint, adapters=step_model.adapter_fingerprints,
                       position_scheme=getattr(step_model.codec, "scheme", None),
                       # CAEF's own adapters; LoRA-direct ones in the same folder play no part here
                       adapter_position_schemes={name: codec.scheme for name, codec in sorted(step_model.codecs.items())
                                                 if split_adapter_name(name)[0] != "direct"},
                       records=str(records), reuse_sources=sources)
        say(f"{system.name}: {len(own_cells)} cells, {limit or 'all'} problems each"
            + "".join(f" ({n} on {pattern})" for pattern, n in cell_limits.items())
            + f", traced (records: {records}/)")
        cells_done = run_caef_repeated(step_model, own_cells, lambda cell: request.limit_of(system, cell), records,
                                       reuse=reuse, max_in_flight=request.max_in_flight, progress=lambda cell, r: say(
            f"  {cell}: {r['end_to_end']['n'] - r['end_to_end']['correct']}/{r['end_to_end']['n']} wrong"))
        results["systems"][system.name] = {**base, "records": str(records), "cells": cells_done}
    if request.onestep_per_cell:
        if step_model is None:
            step_model = load_step_model(request.tier, request.checkpoints, device=request.device, dtype=request.dtype)
            results.update(weights=step_model.fingerprint, adapters=step_model.adapter_fingerprints)
        store = request.work / f"onestep-{step_model.fingerprint}.json"
        cells = [cell for cell in request.onestep_cells if cell in request.cells] if request.onestep_cells \
            else list(request.cells)
        results["onestep_cells"] = len(cells)
        say(f"one-step stress: {request.onestep_per_cell} cases per adapter and cell (kept in {store})")
        results["onestep"] = run_onestep_repeated(step_model, cells, request.onestep_per_cell, request.seed, store,
                                                  progress=lambda key, r: say(f"  {key}: " + ", ".join(
                                                      f"{c} {v['n'] - v['correct']}/{v['n']} wrong" for c, v in r.items())))
    results.setdefault("weights", None)
    results.setdefault("records", None)
    results["seconds"] = round(time.perf_counter() - started, 1)
    return results
