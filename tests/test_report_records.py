"""Each committed report ties to its problems' records: the report's numbers recount from them.

A run names its records folder (`records`: work/records/<tier>-<weights>); where that folder is committed as
results/records/<tier>-<weights>.tgz, every per-cell number the records determine is counted again here from
them, by the rules the suites count with (`scoring.is_correct`, `scoring.verdict`, `failures.record_failures`,
`suites.carried_counts`), each cell's problems being the first N of its committed test set. Everything else
in results/, a whole report or a part of one (a system, the one-step stress, a column), is listed below with
why its numbers cannot be recounted yet, and a report that is neither recounted nor listed fails
`test_every_report_is_recounted_or_listed`: what is checkable problem by problem is what this file recounts.
Table 1's systems with a `records` key recount from their gzipped problem lines in tests/test_table1_records.py,
long_mul_div.json's in tests/test_long_mul_div_records.py, the lm-eval systems of repeated.json in
tests/test_repeated_records.py.
The archives are unpacked into pytest's temporary folder, never into the tree.
"""

from __future__ import annotations

import fnmatch
import json
import tarfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from caef_bench.evaluate.failures import record_failures
from caef_bench.evaluate.scoring import accuracy, is_correct, verdict
from caef_bench.evaluate.suites import TABLE2_RECORDS, carried_counts, cell_problems
from caef_bench.runtime.records import load_records

RESULTS = Path(__file__).resolve().parents[1] / "results"
ARCHIVES = RESULTS / "records"

_LM_EVAL = "an lm-eval run: its sample logs (work/table1/ or work/repeated/) are not committed"
_ONESTEP = "the one-step stress: single transitions drawn and scored at run time, no problem records"
_SMOLLM2 = ("its records (work/records/smollm2-135m-b8efc34532e5) are not committed; only the tiny tier's "
            "(results/records/tiny-339126a876b1.tgz) are")
# Every report (results/…, relative) or part of one ("report: system") whose numbers no committed record holds.
NO_RECORDS = {
    "direct_capacity.json": "its snapshots' evaluations were made before eval-curve kept each problem's reply; "
                            "the snapshots (work/capacity/) are not kept here, and eval-curve on them again packs "
                            "the problems beside the report",
    "long_operands.json: one_step": _ONESTEP,
    "long_operands.json: machines": "the exact machines against Python's integers: no model, nothing to record",
    "long_operands.json: within": "table1_caef.json's cells, read from it (recounted with it here)",
    "lora_direct_curve.json": "its snapshots' evaluations were made before eval-curve kept each problem's reply; "
                              "the snapshots (work/h200/…, work/direct_dev/) are not kept here, and eval-curve on "
                              "them again packs the problems beside the report; its CAEF column is "
                              "table1_caef.json's, recounted here",
    "onestep.json": _ONESTEP,
    "bench_length.md": "timings on one machine, no problem records",
    "bench_runtime.md": "timings on one machine, no problem records",
    "bench_training.md": "training throughput on one machine, no problem records",
    "table1.json: caef-tiny": "its lm-eval run's records (work/records/lm-eval/) are not committed; its answers "
                              "are the caef suite's records of the same weights (reuse_steps), which "
                              "test_table1s_caef_row_agrees_with_the_caef_suites_records checks it against",
    "repeated.json: caef-tiny @c55d8d3edcfa": "earlier weights' run kept for comparison; its records "
                                              "(work/records/tiny-c55d8d3edcfa) are not committed",
    "repeated.json: onestep": _ONESTEP,
    "smollm2-135m/table2.json": _SMOLLM2,
    "smollm2-135m/repeated.json: caef-smollm2-135m": _SMOLLM2,
    "smollm2-135m/repeated.json: lora-direct-smollm2-135m": _LM_EVAL,
    "smollm2-135m/repeated.json: onestep": _ONESTEP,
}
# The fields of a recounted cell that its records do not determine.
UNCOUNTED_FIELDS = {
    "resumed": "how many of the run's problems were read from records it found, not solved: a fact of the run",
    "model_calls": "the archive's records have their steps emptied; the JSON keeps the count of the run",
    "reused_calls": "the archive's records have their steps emptied; the JSON keeps the count of the run",
    "aligner (I)": "Table 2 scores the aligners on the machines' texts at report time; the records are the "
                   "executors' runs (their aligner steps are the machines')",
    "aligner (O)": "as aligner (I)",
    "failures: depth": "a failure's call depth, where the archive's record does not keep it beside its first "
                       "divergence: it was read from the steps, which the archive empties",
}


# The reports whose systems keep their problem lines (records/<suite>/<system>.jsonl.gz beside them), and the test
# that recounts them (in a repeated-digit report the lm-eval systems' only: CAEF's records are recounted here).
PROBLEM_LINES_TESTS = {"table1.json": "tests/test_table1_records.py",
                       "long_mul_div.json": "tests/test_long_mul_div_records.py",
                       "repeated.json": "tests/test_repeated_records.py",
                       "lora_direct_curve.json": "tests/test_direct_records.py",
                       "direct_capacity.json": "tests/test_direct_records.py"}


def archive_of(records: str | None) -> Path | None:
    """The committed archive of a run's records folder (work/records/tiny-339126a876b1 ->
    results/records/tiny-339126a876b1.tgz), or None."""
    path = ARCHIVES / f"{Path(records).name}.tgz" if records else None
    return path if path is not None and path.exists() else None


# --------------------------------------------------------------------------- the reports and their parts


def reports() -> dict[str, dict | None]:
    """{report: its JSON} of every report in results/ (a Markdown report without a JSON beside it: None)."""
    found = {}
    for path in sorted(RESULTS.rglob("*.json")):
        found[str(path.relative_to(RESULTS))] = json.loads(path.read_text())
    for path in sorted(RESULTS.rglob("*.md")):
        if path.name != "README.md" and not path.with_suffix(".json").exists():
            found[str(path.relative_to(RESULTS))] = None
    return found


@dataclass(frozen=True)
class Cell:
    """One cell of a report whose records are committed: where its records are and what the report says."""

    part: str  # "table2.json", "repeated.json: caef-tiny"
    name: str
    archive: Path
    file: str  # the records file in the archive's folder
    limit: int  # the first N problems of the cell's test set
    shape: str  # how the report keeps the cell: "caef", "table2" or "repeated"
    reported: dict


def _suite_cells(part: str, document: dict) -> list[Cell]:
    """A `caef-bench run --suite caef|table2` report's cells (suites.run_caef, suites.run_table2)."""
    prefix = {"caef": "caef_", "table2": TABLE2_RECORDS}[document["suite"]]
    return [Cell(part, cell, archive_of(document["records"]), f"{prefix}{cell}.jsonl", document["limit"],
                 document["suite"], reported) for cell, reported in document["results"].items()]


def _repeated_cells(part: str, system: dict) -> list[Cell]:
    """CAEF's cells in a repeated-digit report (repeated.run_caef_repeated): N by the system's per-cell
    limits (--limits NAME@PATTERN=N), else its limit."""
    def limit(cell: str) -> int:
        return next((n for pattern, n in (system.get("cell_limits") or {}).items()
                     if fnmatch.fnmatchcase(cell, pattern)), system["limit"])

    return [Cell(part, cell, archive_of(system["records"]), f"caef_{cell}.jsonl", limit(cell), "repeated", reported)
            for cell, reported in system["cells"].items()]


def parts() -> dict[str, list[Cell] | str | None]:
    """Every report, or part of one, with numbers: {part: the cells recounted here, or the test that
    recounts them, or None where no committed record holds them}."""
    found: dict[str, list[Cell] | str | None] = {}
    for report, document in reports().items():
        if Path(report).name == "long_operands.json":  # each section: every point names its packed records
            for section in ("within", "machines", "beyond", "one_step", "windowed"):
                points = [p for by_length in (document.get(section) or {}).values() for p in by_length.values()] \
                    if section in ("beyond", "windowed") else []
                if points and all("records" in p for p in points):
                    found[f"{report}: {section}"] = "tests/test_long_operands_records.py"
                elif document.get(section):
                    found[f"{report}: {section}"] = None
            continue
        if document is not None and str(document.get("records", "")).endswith(".jsonl.gz"):  # a line a problem
            found[report] = PROBLEM_LINES_TESTS.get(Path(report).name)
            continue
        if document is None or "systems" not in document:
            recounted = document is not None and document.get("suite") in ("caef", "table2") \
                and archive_of(document.get("records"))
            found[report] = _suite_cells(report, document) if recounted else None
            continue
        for name, system in document["systems"].items():
            if not system.get("cells"):  # skipped: no numbers
                continue
            part = f"{report}: {name}"
            if str(system.get("records", "")).endswith(".jsonl.gz"):  # its problem lines: records/<suite>/<system>…
                found[part] = PROBLEM_LINES_TESTS.get(Path(report).name)
            else:
                recounted = system.get("kind", "").startswith("caef") and archive_of(system.get("records"))
                found[part] = _repeated_cells(part, system) if recounted else None
        if document.get("onestep"):
            found[f"{report}: onestep"] = None
    return found


def recounted_parts() -> dict[str, list[Cell]]:
    return {part: how for part, how in parts().items() if isinstance(how, list)}


# --------------------------------------------------------------------------- recounting


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory):
    """The records folder of an archive, unpacked once into a temporary folder."""
    folders: dict[Path, Path] = {}

    def folder(archive: Path) -> Path:
        if archive not in folders:
            into = tmp_path_factory.mktemp("records")
            with tarfile.open(archive) as packed:
                packed.extractall(into, filter="data")
            assert [path.name for path in into.iterdir()] == [archive.name.removesuffix(".tgz")], \
                f"{archive.name} holds one folder, named as the archive"
            folders[archive] = into / archive.name.removesuffix(".tgz")
        return folders[archive]

    return folder


def cell_records(folder: Path, cell: Cell) -> tuple[list, list[dict]]:
    """The records of the first N problems of the cell's test set, in problem order, and those problems;
    each record is of its problem (expression and target)."""
    rows = cell_problems(cell.name, cell.limit)
    by_id = {record.id: record for record in load_records(folder / cell.file)}
    missing = [row["id"] for row in rows if row["id"] not in by_id]
    assert not missing, f"{cell.part} {cell.name}: {len(missing)} problems have no record in {cell.file}: {missing[:3]}"
    records = [by_id[row["id"]] for row in rows]
    assert [(r.expr, r.target) for r in records] == [(row["expr"], row["answer"]) for row in rows], \
        f"{cell.part} {cell.name}: a record is not of its test set's problem"
    return records, rows


def recount(cell: Cell, records: list, rows: list[dict]) -> dict:
    """What the cell's records say, in the fields the report keeps them in."""
    answers = accuracy({"correct": is_correct(r)} for r in records)
    exact = accuracy({"correct": is_correct(r) and r.first_divergence is None} for r in records)
    counted = {"outcomes": dict(Counter(verdict(r) for r in records)),
               "failures": record_failures(records, {row["id"]: row for row in rows})}
    if cell.shape in ("caef", "repeated"):
        counted |= {"carried": carried_counts(records),
                    "runs_with_cut_steps": sum(r.n_steps_cut > 0 for r in records)}
    if cell.shape == "caef":
        return {"end_to_end": answers, "exact trace": exact, **counted}
    if cell.shape == "table2":
        return {"executor": answers, "executor, exact trace": exact, **counted}
    return {"n": answers["n"], "answer_errors": answers["n"] - answers["correct"],
            "trace_errors": exact["n"] - exact["correct"], **counted}


def _without_unknown_depth(entry: dict, counted: dict) -> dict:
    """A reported failure without its depth where the records do not say it (UNCOUNTED_FIELDS)."""
    return {key: value for key, value in entry.items() if key != "depth" or "depth" in counted}


def disagreements(cell: Cell, counted: dict) -> list[str]:
    """Where the report's cell and its recount differ, one line each; the report's fields the records
    do not determine are UNCOUNTED_FIELDS, any other field not recounted is a disagreement too."""
    found = [f"{cell.part} {cell.name}: field {key!r} is neither recounted nor in UNCOUNTED_FIELDS"
             for key in cell.reported if key not in counted and key not in UNCOUNTED_FIELDS]
    for key, mine in counted.items():
        theirs = cell.reported.get(key)
        if isinstance(mine, dict) and "ci_low" in mine:  # an accuracy: counts exactly, its rates to rounding
            same = theirs is not None and (theirs["n"], theirs["correct"]) == (mine["n"], mine["correct"]) \
                and theirs == pytest.approx(mine, rel=1e-12, abs=1e-15)
        elif key == "failures" and isinstance(theirs, list) and len(theirs) == len(mine):
            same = [_without_unknown_depth(entry, counted) for entry, counted in zip(theirs, mine)] == mine
        else:
            same = theirs == mine
        if not same:
            found.append(f"{cell.part} {cell.name} {key}: the report says {theirs!r}, its records {mine!r}")
    return found


@pytest.mark.parametrize("part", sorted(recounted_parts()))
def test_the_reports_numbers_recount_from_its_records(part, unpacked):
    found = []
    for cell in recounted_parts()[part]:
        records, rows = cell_records(unpacked(cell.archive), cell)
        found += disagreements(cell, recount(cell, records, rows))
    assert not found, "\n".join(found)


def test_each_archive_holds_the_records_of_recounted_cells_and_no_others(unpacked):
    """The tie both ways: every file of a committed archive is a recounted cell's, and holds that cell's
    problems only (a record no report counts would be a number no one checks)."""
    read: dict[Path, dict[str, set[str]]] = {}
    for cells in recounted_parts().values():
        for cell in cells:
            ids = {row["id"] for row in cell_problems(cell.name, cell.limit)}
            read.setdefault(cell.archive, {}).setdefault(cell.file, set()).update(ids)
    assert set(read) == set(ARCHIVES.glob("*.tgz")), "an archive no report's records folder names"
    for archive, files in read.items():
        folder = unpacked(archive)
        assert {path.name for path in folder.iterdir()} == set(files), archive.name
        for file, ids in files.items():
            assert {record.id for record in load_records(folder / file)} == ids, f"{archive.name}: {file}"


def test_every_report_is_recounted_or_listed():
    """A new report in results/ (or a new system in one) must either recount from committed records here
    (or in tests/test_table1_records.py) or say in NO_RECORDS why it cannot yet."""
    found = parts()
    unlisted = [part for part, how in found.items() if how is None and part not in NO_RECORDS]
    assert not unlisted, f"reports with neither committed records nor an entry in NO_RECORDS: {unlisted}"
    recounted_but_listed = [part for part, how in found.items() if how is not None and part in NO_RECORDS]
    assert not recounted_but_listed, f"these recount now: take them out of NO_RECORDS: {recounted_but_listed}"
    stale = sorted(set(NO_RECORDS) - set(found))
    assert not stale, f"NO_RECORDS lists what results/ no longer has: {stale}"


def test_table1s_caef_row_agrees_with_the_caef_suites_records(unpacked):
    """Table 1's CAEF row on the tiny tier ran through lm-eval, answered from the caef suite's records of the
    same weights (baselines/caef-tiny.yaml: reuse_steps): its n, right answers and examples are those records'."""
    system = json.loads((RESULTS / "table1.json").read_text())["systems"]["caef-tiny"]
    archive = archive_of(f"tiny-{system['weights']}")
    assert archive is not None
    found = []
    for name, reported in system["cells"].items():
        cell = Cell("table1.json: caef-tiny", name, archive, f"caef_{name}.jsonl", system["limit"], "caef", reported)
        records, _ = cell_records(unpacked(archive), cell)
        wrong = [{"expr": r.expr, "answer": r.target, "reply": r.answer} for r in records if not is_correct(r)]
        mine = (len(records), len(records) - len(wrong), wrong[:len(reported["examples"])])
        if (reported["n"], reported["correct"], reported["examples"]) != mine:
            found.append(f"table1.json caef-tiny {name}: the report says {reported['n']}, {reported['correct']}, "
                         f"{reported['examples']}; the caef suite's records {mine}")
    assert not found, "\n".join(found)
