"""The suites behind `caef-bench run`: Table 2 (components) and Table 1's CAEF rows (end to end).

Every problem's record goes to a JSONL file per cell, so an interrupted run
resumes without redoing or losing problems.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from caef_bench.data.testsets import CELLS, load_cell, table1_cells
from caef_bench.evaluate.failures import record_failures
from caef_bench.evaluate.scoring import accuracy, is_correct, text_accuracy, verdict
from caef_bench.machines import parse_expression, result, routed, run, typed_expression
from caef_bench.models.names import aligner_name, operator_adapters
from caef_bench.runtime import Problem, load_records, solve_batch, solve_to_files
from caef_bench.runtime.hf import RoutedModel
from caef_bench.runtime.oracle import OracleModel
from caef_bench.paths import WORK_DIR
from caef_bench.runtime.reuse import ReusedSteps, read_weights, unchanged_adapters, write_weights

# table1: every system of baselines/ through lm-eval (evaluate.table1); repeated: the repeated-digit
# study (evaluate.repeated); long_mul_div: the long route's cells (evaluate.long_mul_div)
SUITES = ("table2", "caef", "table1", "repeated", "long_mul_div")


def cell_problems(cell: str, limit: int | None) -> list[dict]:
    problems = load_cell(cell)
    return problems[:limit] if limit else problems


def solve_expression(model, expr: str, windowing=None, route: str = "paper"):
    """One expression as a person types it ("12 + 34": run as 12+34=), traced; its target is the
    machines' answer. Returns the record and whether it is right, by the rule every system is scored by.
    windowing: how the tier runs ADD and the comparisons past its whole states (models.limits.windowing);
    route: the machines that answer it (runtime.Problem.route; models.limits.route_within_tier picks it)."""
    expr = typed_expression(expr)
    expression = parse_expression(expr)
    record = solve_batch([Problem("cli", expr, str(result(expression.op, expression.a, expression.b)), route=route)],
                         model, mode="traced", windowing=windowing)[0]
    return record, is_correct(record)


def as_problems(rows: list[dict], route: str = "paper") -> list[Problem]:
    """Test-set rows as the runtime takes them, each with its answer as the target, on `route`
    (runtime.Problem.route: "long" runs `*` and `//` on LONG_MUL and LONG_DIV)."""
    return [Problem(row["id"], row["expr"], row["answer"], route=route) for row in rows]


def solve_cell(problems: list[Problem], model, path: Path, reuse: Reuse | None = None,
               reuse_from: tuple[str, ...] = (), **options) -> tuple[list, int]:
    """Every problem's record, solving (with a progress bar) only those the file does not hold yet;
    and how many it held already (read, not solved, by this call). With `reuse`, calls to the
    adapters it names are answered from the file of the same name in its folder, and from the
    files named in `reuse_from` there, where they hold them."""
    return solve_cells({path.stem: (problems, path)}, model, reuse, reuse_from, **options)[path.stem]


def solve_cells(jobs: dict[str, tuple[list[Problem], Path]], model, reuse: Reuse | None = None,
                reuse_from: tuple[str, ...] = (), on_cell=None, **options) -> dict[str, tuple[list, int]]:
    """`solve_cell` for several cells at once, {cell: (problems, records file)}: every problem of every
    cell in the same rounds (`runtime.solve_to_files`), so each model call carries all of them, and
    each record goes to its cell's file as it finishes, as one cell at a time would write it.
    `on_cell(cell, records, resumed)` is called as each cell's last problem finishes (a cell with
    nothing left to solve: at once); `reuse_from` names files in the reuse folder that answer every
    cell's calls too. Returns {cell: (its records in problem order, how many were read, not solved)}."""
    from tqdm import tqdm

    done = {cell: {r.id for r in load_records(path)} for cell, (_, path) in jobs.items()}
    resumed = {cell: sum(p.id in done[cell] for p in problems) for cell, (problems, _) in jobs.items()}
    left = {cell: len(problems) - resumed[cell] for cell, (problems, _) in jobs.items()}
    cell_of = {path: cell for cell, (_, path) in jobs.items()}
    results = {}

    def finish(cell: str) -> None:
        problems, path = jobs[cell]
        by_id = {r.id: r for r in load_records(path)}
        results[cell] = ([by_id[p.id] for p in problems], resumed[cell])
        if on_cell is not None:
            on_cell(cell, *results[cell])

    for cell in [cell for cell, n in left.items() if n == 0]:
        finish(cell)
    if any(left.values()):
        if reuse is not None:
            names = dict.fromkeys([path.name for _, path in jobs.values()] + list(reuse_from))
            model = ReusedSteps.from_records(model, [reuse.folder / name for name in names], reuse.adapters)
        total = sum(len(problems) for problems, _ in jobs.values())
        label = next(iter(jobs)) if len(jobs) == 1 else f"{len(jobs)} cells"
        with tqdm(total=total, initial=sum(resumed.values()), desc=label, unit="problem", leave=False) as bar:
            def recorded(path, _record) -> None:
                bar.update(1)
                cell = cell_of[Path(path)]
                left[cell] -= 1
                if left[cell] == 0:
                    finish(cell)

            solve_to_files({path: problems for problems, path in jobs.values()}, model, recorded, **options)
    return {cell: results[cell] for cell in jobs}


@dataclass(frozen=True)
class Reuse:
    """Where an earlier run's records are, and the adapters whose calls may be answered from them
    (those unchanged since: runtime.reuse)."""

    folder: Path
    adapters: frozenset[str]


def _reuse_counts(records, prefix: str = "") -> dict:
    """Model calls (to adapters named `prefix`…) in a cell's records, and how many of them were
    read from an earlier run's."""
    steps = [step for record in records for step in record.steps if step.adapter.startswith(prefix)]
    return {"model_calls": len(steps), "reused_calls": sum(bool(step.reused) for step in steps)}


def _summary(records) -> dict:
    return accuracy({"correct": is_correct(r)} for r in records)


def _exact_traces(records) -> dict:
    """Right answers reached with every step the machine's (traced records: no first divergence)."""
    return accuracy({"correct": is_correct(r) and r.first_divergence is None} for r in records)


def run_caef(model, cells, limit, records_dir: Path, progress=None, reuse: Reuse | None = None,
             per_cell: bool = False, max_in_flight: int | None = None) -> dict:
    """End-to-end, free-running: aligner (I), the executors, aligner (O), all from the model; `limit` is
    N for every cell, or a function of the cell (the repeated suite's --limits NAME@PATTERN=N).

    Every cell's problems are solved in the same rounds (`solve_cells`: each model call carries
    problems of all cells, at most `max_in_flight` problems at once), or with `per_cell` one cell after
    another; the records are the same either way."""
    rows = {cell: cell_problems(cell, limit(cell) if callable(limit) else limit) for cell in cells}
    results = {}

    def summarise(cell: str, records: list, resumed: int) -> None:
        results[cell] = {"end_to_end": _summary(records), "exact trace": _exact_traces(records),
                         "outcomes": _outcomes(records), "resumed": resumed, "carried": carried_counts(records),
                         **_reuse_counts(records),
                         # runs with a step cut at its command's last word (the model missed its end of text)
                         "runs_with_cut_steps": sum(record.n_steps_cut > 0 for record in records),
                         # every wrong answer and every run off the machine's course, at its first divergence
                         "failures": record_failures(records, {row["id"]: row for row in rows[cell]})}
        if progress:
            progress(cell, results[cell])

    jobs = {cell: (as_problems(rows[cell]), records_dir / f"caef_{cell}.jsonl") for cell in cells}
    if per_cell:
        for cell, (problems, path) in jobs.items():
            summarise(cell, *solve_cell(problems, model, path, reuse, mode="traced"))
    else:
        solve_cells(jobs, model, reuse, on_cell=summarise, mode="traced", max_in_flight=max_in_flight)
    return {cell: results[cell] for cell in cells}


def carried_counts(records) -> dict[str, int]:
    """{weights: records carried from that weights' records folder} (`copy_records`); empty if none."""
    return dict(Counter(record.carried_from for record in records if record.carried_from))


def _outcomes(records) -> dict:
    counts: dict[str, int] = {}
    for record in records:
        judged = verdict(record)
        counts[judged] = counts.get(judged, 0) + 1
    return counts


def _aligner_accuracy(model, op: str, cases: list[tuple[str, str]]) -> dict:
    """One aligner direction over a cell: (prompt, the machines' text) cases, scored as every
    component is (whole texts, `scoring.text_accuracy`)."""
    outputs = model.generate([prompt for prompt, _ in cases], aligner_name(op))
    scored = text_accuracy(cases, [getattr(o, "text", o) for o in outputs])
    return {key: value for key, value in scored.items() if key != "failures"}  # (Table 2 keeps numbers only)


TABLE2_RECORDS = "table2_"  # run_table2's records files: table2_<cell>.jsonl


def reusable_adapters(records_file: Path, adapters) -> frozenset[str]:
    """Of `adapters`, those whose steps in `records_file` are a model's answers: in Table 2's records
    the aligners' steps are the machines' (run_table2 runs the executors alone), so none of them."""
    if Path(records_file).name.startswith(TABLE2_RECORDS):
        return frozenset(a for a in adapters if not a.startswith("aligner_"))
    return frozenset(adapters)


def run_table2(model, cells, limit, records_dir: Path, progress=None, reuse: Reuse | None = None) -> dict:
    """Per cell: executor accuracy given the correct start (the machines align; a problem counts when
    the model's executors reach the right halt state), aligner (I) and aligner (O) exact match."""
    oracle = OracleModel(strict=False)
    executors_only = RoutedModel(model, {"aligner_": oracle})
    if reuse is not None:  # Table 2's aligner steps are the machines' here, not read from any records
        reuse = Reuse(reuse.folder, frozenset(a for a in reuse.adapters if not a.startswith("aligner_")))
    results = {}
    for cell in cells:
        problems = cell_problems(cell, limit)
        op = problems[0]["op"]
        # Table 1's traced records of the same cell hold the same executor calls wherever its
        # aligner (I) was right: with --reuse-steps their executor steps answer these too.
        records, resumed = solve_cell(as_problems(problems), executors_only,
                                      records_dir / f"{TABLE2_RECORDS}{cell}.jsonl", reuse,
                                      reuse_from=(f"caef_{cell}.jsonl",), mode="traced")
        runs = [run(op, int(p["a"]), int(p["b"])) for p in problems]
        results[cell] = {
            "executor": _summary(records),
            "executor, exact trace": _exact_traces(records),
            "aligner (I)": _aligner_accuracy(model, op, [(p["expr"], r.start_text()) for p, r in zip(problems, runs)]),
            "aligner (O)": _aligner_accuracy(model, op, [(r.text(-1), p["expr"] + p["answer"]) for p, r in zip(problems, runs)]),
            "outcomes": _outcomes(records),
            "failures": record_failures(records, {p["id"]: p for p in problems}),  # the executors' (aligners are the machines')
            "resumed": resumed,  # executor runs read from the records; the aligner columns are always recomputed
            **_reuse_counts(records, "executor_"),  # (the aligner steps in these records are the machines')
        }
        if progress:
            progress(cell, results[cell])
    return results


def default_cells() -> list[str]:
    return table1_cells()


def check_cells(cells: list[str] | None) -> list[str]:
    """The cells asked for (default: every Table 1 cell); an unknown one is an error naming the known."""
    known = default_cells()
    unknown = [cell for cell in cells or () if cell not in known]
    if unknown:
        raise ValueError(f"unknown cell(s) {', '.join(unknown)}; expected some of {','.join(known)}")
    return list(cells) if cells else known


# --------------------------------------------------------------------------- a suite's run, from request to results


RESULT_NAMES = {"table2": "table2", "caef": "table1_caef"}  # each suite's results file, <name>.md / <name>.json
RUNNERS = {"table2": run_table2, "caef": run_caef}


@dataclass(frozen=True)
class SuiteRequest:
    """A CAEF suite as a command asks for it (`caef-bench run --suite table2|caef`)."""

    suite: str
    tier: str
    command: str  # recorded with the results
    cells: tuple[str, ...]
    limit: int | None = None
    checkpoints: str | None = None
    records: Path | None = None  # default: work/records/<tier>-<weights>/
    reuse_steps: Path | None = None  # an earlier run's records folder, for calls to unchanged adapters
    keep_unchanged: bool = False  # carry over the earlier results file's cells whose adapters did not change
    max_in_flight: int | None = None  # caef: at most this many problems at once (None: all of them)


@dataclass
class SuiteResults:
    """What a suite run made: the results document (as its JSON file holds it) and what its report says
    of where the numbers come from."""

    suite: str
    document: dict
    records: Path
    reuse_sources: list = field(default_factory=list)  # [{"folder", "weights"}] of reused steps
    kept: dict = field(default_factory=dict)  # cells carried over from earlier results (with their `made_by`)

    @property
    def name(self) -> str:
        return RESULT_NAMES[self.suite]


def records_folder(model, tier: str, given: str | Path | None = None, reused_from: dict | None = None
                   ) -> tuple[Path, list]:
    """Where a run's per-problem records go, and the earlier runs its records reuse steps from.

    The default folder is per weights (work/records/<tier>-<weights>/), so records of other weights are
    never resumed into these results; its weights.json names them (runtime.reuse)."""
    folder = Path(given or WORK_DIR / "records" / f"{tier}-{model.fingerprint}")
    folder.mkdir(parents=True, exist_ok=True)
    return folder, write_weights(folder, model.fingerprint, model.adapter_fingerprints, reused_from)["reused_from"]


def steps_to_reuse(folder: str | Path, model) -> tuple[Reuse, dict, list[str]]:
    """`--reuse-steps FOLDER`: the adapters whose calls its records may answer (unchanged since), the
    folder as results name it, and the adapters that changed."""
    earlier = read_weights(folder)
    reuse = Reuse(Path(folder), frozenset(unchanged_adapters(earlier["adapters"], model.adapter_fingerprints)))
    changed = sorted(set(model.adapter_fingerprints) - reuse.adapters)
    return reuse, {"folder": str(folder), "weights": earlier["weights"]}, changed


def reusing(folder: str | Path | None, model, say=print) -> tuple[Reuse | None, dict | None]:
    """`steps_to_reuse` for a run given `--reuse-steps FOLDER` (None: nothing reused), said as it starts."""
    if not folder:
        return None, None
    reuse, source, changed = steps_to_reuse(folder, model)
    say(f"reusing steps of {len(reuse.adapters)} unchanged adapters from {folder} "
        f"(weights {source['weights']}); changed or new: {', '.join(changed) or 'none'}")
    return reuse, source


def run_suite(model, request: SuiteRequest, out: Path, progress=None, say=print) -> SuiteResults:
    """Solve (or read from the records) every cell of a CAEF suite and assemble its results document."""
    import json
    import time

    reuse, source = reusing(request.reuse_steps, model, say)
    records, sources = records_folder(model, request.tier, request.records, source)
    started = time.perf_counter()
    flight = {"max_in_flight": request.max_in_flight} if request.max_in_flight else {}
    results = RUNNERS[request.suite](model, list(request.cells), request.limit, records, progress, reuse, **flight)
    name = RESULT_NAMES[request.suite]
    kept, dropped = {}, {}
    if request.keep_unchanged:
        earlier_file = out / f"{name}.json"
        if not earlier_file.is_file():
            raise FileNotFoundError(f"--keep-unchanged: no earlier results at {earlier_file}")
        kept, dropped = carry_over(json.loads(earlier_file.read_text()), model.adapter_fingerprints, request.cells)
        if dropped:
            say(f"not kept from {earlier_file} (an adapter they call changed; run them): {', '.join(dropped)}")
        if kept:
            order = default_cells()
            results = dict(sorted({**kept, **results}.items(), key=lambda item: order.index(item[0])))
    document = {"command": request.command, "tier": request.tier, "checkpoints": request.checkpoints,
                "weights": model.fingerprint, "limit": request.limit, "adapters": model.adapter_fingerprints,
                "seconds": round(time.perf_counter() - started, 1),
                # what the report says of where its numbers come from, so it can be written again from this file
                "records": str(records), "reuse_sources": sources, "results": results}
    if request.keep_unchanged:
        document["dropped"] = dropped  # so the table says which cells are missing and why, run after run
    return SuiteResults(request.suite, document, records, sources, kept)


def cell_adapters(cell: str) -> set[str]:
    """Every adapter a run of the cell's problems calls: its aligner, its executor and the executors
    its composer calls (sub_100: aligner_sub, executor_sub, executor_reflection, executor_add, ...);
    a repeated-digit cell's (repeated_sub_100_p1) are its operator's; a long multiplication or division
    cell's (mul_20x20) are the long route's, the only route that runs operands past the paper's limits."""
    spec = CELLS[cell]
    return set(operator_adapters(routed(spec.op, "long") if spec.suite == "long_muldiv" else spec.op))


def copy_records(source: Path, folder: Path, weights: str, adapters: dict[str, str], cells: list[str]
                  ) -> dict[str, int]:
    """Copy into `folder` (these weights' records) the records of `source` (other weights') for every
    cell whose adapters (`cell_adapters`) are all byte-identical in both: a greedy decode is a function
    of the adapter, base, position scheme and prompt (runtime.reuse), so solving those problems again
    would write the same records. Each copy says where it came from (`carried_from`), the folder's
    weights.json names the source, and a problem these weights hold already is never overwritten.
    Returns {cell: records carried}; a cell calling a changed adapter is refused, not skipped."""
    from caef_bench.runtime.records import RecordWriter

    earlier = read_weights(source)
    unchanged = unchanged_adapters(earlier["adapters"], adapters)
    changed = {cell: sorted(cell_adapters(cell) - unchanged) for cell in cells}
    changed = {cell: names for cell, names in changed.items() if names}
    if changed:
        raise ValueError("these cells call adapters that differ from the source's, so its records are not what "
                         "these weights would write: " + "; ".join(f"{cell} ({', '.join(names)})"
                                                                    for cell, names in changed.items()))
    folder.mkdir(parents=True, exist_ok=True)
    write_weights(folder, weights, adapters)  # refuses a folder of other weights before anything is written
    carried = {}
    for cell in cells:
        path = folder / f"caef_{cell}.jsonl"
        held = {record.id for record in load_records(path)}
        copies = [replace(record, carried_from=record.carried_from or earlier["weights"])
                  for record in load_records(source / path.name) if record.id not in held]
        with RecordWriter(path) as writer:
            for record in copies:
                writer.write(record)
        carried[cell] = len(copies)
    write_weights(folder, weights, adapters, {"folder": str(source), "weights": earlier["weights"],
                                              "records_of": sorted(cell for cell, n in carried.items() if n)})
    return carried


def carry_over(earlier: dict, adapters: dict[str, str], cells_run: list[str]) -> tuple[dict, list[str]]:
    """The cells of an earlier results file (`caef-bench run`'s JSON) that stay valid for these weights.

    A cell is kept when every adapter it calls (`cell_adapters`) has the same fingerprint in both
    (same base, bytes and position scheme: the same greedy output on every prompt, runtime.reuse),
    so its numbers are what solving it again would give; each kept cell records the command and
    weights that made it. Returns (kept cells, {cell: the weights its dropped numbers were made on} for
    those dropped because an adapter changed, now or by an earlier --keep-unchanged run, and not run now).
    """
    before = earlier.get("adapters")
    if before is None:
        raise ValueError("the earlier results file does not record its adapters' fingerprints; "
                         "its cells cannot be checked against these weights")
    kept = {}
    dropped = {cell: weights for cell, weights in earlier.get("dropped", {}).items() if cell not in cells_run}
    for cell, cell_result in earlier["results"].items():
        if cell in cells_run:
            continue
        origin = cell_result.get("made_by") or {"command": earlier["command"], "weights": earlier["weights"],
                                                "limit": earlier.get("limit")}
        if all(before.get(name) == adapters.get(name) for name in cell_adapters(cell)):
            kept[cell] = {**cell_result, "made_by": origin}
        else:
            dropped[cell] = origin["weights"]
    return kept, dropped
