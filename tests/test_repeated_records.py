"""The repeated-digit report's lm-eval systems keep their problems: one line each in
records/repeated/<system>.jsonl.gz beside the report (cell, id, period, expression, target, reply, verdict),
and every cell of such a system recounts from them: N, wrong answers and each wrong reply's failure class, by
the rule the suite counts with (`repeated.baseline_cell`), each cell's lines the first N problems of its
committed test set. CAEF's rows recount from their runtime records in tests/test_report_records.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from caef_bench.data.testsets import load_cell
from caef_bench.evaluate import repeated
from caef_bench.evaluate.failures import failure_entry, reply_failure
from caef_bench.evaluate.systems import load_systems
from caef_bench.evaluate.table1 import expected_n, read_problem_lines

RESULTS = Path(__file__).resolve().parents[1] / "results"


def _sample(doc: dict, reply: str) -> dict:
    return {"doc": doc, "filtered_resps": [reply], "exact_match": float(reply == doc["answer"])}


def test_a_baselines_problems_are_written_beside_its_cells_and_recount_to_them(tmp_path, monkeypatch):
    system = load_systems()["lora-direct-tiny"]
    docs = {cell: load_cell(cell)[:2] for cell in ("repeated_add_10_p1", "repeated_gt_10_control")}
    samples = {cell: [_sample(rows[0], rows[0]["answer"]), _sample(rows[1], "12")] for cell, rows in docs.items()}
    monkeypatch.setattr(repeated, "run_system", lambda system, cells, limit, work, progress: {
        "command": "caef-bench lm-eval …", "limit": limit, "cells": {}})
    monkeypatch.setattr(repeated, "read_samples", lambda folder, system, cells: {c: samples[c] for c in cells})

    entry = repeated.run_baseline_repeated(system, list(docs), 2, tmp_path / "work", lambda line: None,
                                           out=tmp_path / "report")
    assert entry["records"] == "records/repeated/lora-direct-tiny.jsonl.gz"
    lines = read_problem_lines(tmp_path / "report" / entry["records"])
    assert [(line["cell"], line["id"], line["period"], line["expr"], line["target"], line["correct"])
            for line in lines] == [(cell, row["id"], row["period"], row["expr"], row["answer"], i == 0)
                                   for cell, rows in docs.items() for i, row in enumerate(rows)]
    assert [line["reply"] for line in lines] == [docs["repeated_add_10_p1"][0]["answer"], "12",
                                                 docs["repeated_gt_10_control"][0]["answer"], "12"]
    # each cell as the samples themselves classify it (the problem's own fields, read in the system's style)
    for cell, rows in docs.items():
        wrong = rows[1]
        assert entry["cells"][cell] == {"n": 2, "answer_errors": 1, "failures": [failure_entry(wrong, reply_failure(
            wrong["expr"], wrong["answer"], "12", wrong["op"], entry["style"]))]}
    assert "records" not in repeated.run_baseline_repeated(system, list(docs), 2, tmp_path / "work", lambda _: None)


def _recorded_systems():
    return [pytest.param(report, system, id=f"{report.relative_to(RESULTS)}: {name}")
            for report in sorted(RESULTS.rglob("repeated.json"))
            for name, system in json.loads(report.read_text())["systems"].items()
            if str(system.get("records", "")).endswith(".jsonl.gz")]


@pytest.mark.parametrize("report, system", _recorded_systems() or [pytest.param(None, None, marks=pytest.mark.skip(
    reason="no lm-eval system of a committed repeated-digit report has problem lines yet"))])
def test_the_committed_report_recounts_from_its_problem_lines(report, system):
    lines = read_problem_lines(report.parent / system["records"])
    assert list(dict.fromkeys(line["cell"] for line in lines)) == list(system["cells"])
    for cell, reported in system["cells"].items():
        mine = [line for line in lines if line["cell"] == cell]
        rows = load_cell(cell)[:expected_n(cell, system["limit"])]
        assert [(line["id"], line["period"], line["expr"], line["target"]) for line in mine] == \
            [(row["id"], row["period"], row["expr"], row["answer"]) for row in rows], cell
        assert repeated.baseline_cell(mine, system["style"]) == reported, cell
