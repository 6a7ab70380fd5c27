"""Every Table 1 result keeps its problems: one line each (cell, expression, target, reply, verdict, and a
CAEF tier's runtime record), and the committed table's numbers recount from them."""

import json
from pathlib import Path

import pytest

from caef_bench.evaluate import table1
from caef_bench.evaluate.systems import load_systems
from caef_bench.runtime.records import ProblemRecord

RESULTS = Path(__file__).resolve().parents[1] / "results"


def _sample(expr, answer, reply):
    return {"doc": {"expr": expr, "answer": answer}, "filtered_resps": [reply], "exact_match": float(reply == answer)}


def test_a_systems_problems_are_written_beside_its_cells_and_recount_to_them(tmp_path, monkeypatch):
    system = load_systems()["caef-smollm2-135m"]
    samples = {"add_5": [_sample("12345+11111=", "23456", "23456"), _sample("99999+1=", "100000", "")],
               "gt_5": [_sample("54321>12345=", "True", "True")]}
    monkeypatch.setattr(table1, "read_samples", lambda folder, system, cells: {c: samples[c] for c in cells})
    monkeypatch.setattr(table1, "expected_n", lambda cell, limit: len(samples[cell]))
    monkeypatch.setattr(table1, "system_weights", lambda system: "w0")
    # the CAEF runtime's record of one problem, where the system's model_args say its records are
    records = tmp_path / "caef_records"
    monkeypatch.setattr(type(system), "resolved_model_args",
                        lambda self: {"tier": "smollm2-135m", "records": str(records)})
    (records / "smollm2-135m-w0").mkdir(parents=True)
    record = ProblemRecord(id="x", expr="99999+1=", mode="traced", outcome="misaligned", detail="aligner copied a",
                           n_steps=3, windowed={"width": 10, "back": 4, "chunk": 9})
    (records / "smollm2-135m-w0" / "lm_eval.jsonl").write_text(record.to_json() + "\n")

    result = table1.run_system(system, ["add_5", "gt_5"], 2, tmp_path / "work", progress=lambda line: None,
                               out=tmp_path / "report")
    assert result["records"] == "records/table1/caef-smollm2-135m.jsonl.gz"
    lines = table1.read_problem_lines(tmp_path / "report" / result["records"])
    assert [(line["cell"], line["expr"], line["correct"]) for line in lines] == [
        ("add_5", "12345+11111=", True), ("add_5", "99999+1=", False), ("gt_5", "54321>12345=", True)]
    assert lines[1]["caef"]["outcome"] == "misaligned" and lines[1]["caef"]["windowed"]["width"] == 10
    assert "caef" not in lines[0]  # no runtime record of it: the reply alone
    for cell, stats in result["cells"].items():
        mine = [line for line in lines if line["cell"] == cell]
        assert (stats["n"], stats["correct"]) == (len(mine), sum(line["correct"] for line in mine))
    # written again from the same lines: the same bytes (a rerun leaves a committed file unchanged)
    before = (tmp_path / "report" / result["records"]).read_bytes()
    table1.write_problem_lines(lines, tmp_path / "again.jsonl.gz")
    assert (tmp_path / "again.jsonl.gz").read_bytes() == before


def test_a_rerun_of_some_cells_keeps_the_other_cells_lines(tmp_path):
    out = tmp_path / "report"
    earlier = [{"cell": "add_50", "expr": "1+2=", "correct": True}, {"cell": "gt_50", "expr": "3>2=", "correct": True}]
    table1.write_problem_lines(earlier, out / "records/table1/s.jsonl.gz")
    lines = table1.earlier_problem_lines(out, ["s", "t"])
    assert lines == {"s": earlier}
    table1.write_problem_lines([{"cell": "add_50", "expr": "1+2=", "correct": False}], out / "records/table1/s.jsonl.gz")
    results = {"s": {"records": "records/table1/s.jsonl.gz", "cells": {"add_50": {}, "gt_50": {}},
                     "kept_cells": [{"cells": ["gt_50"], "command": "…"}]}}
    table1.keep_earlier_lines(results, lines, out)
    assert table1.read_problem_lines(out / "records/table1/s.jsonl.gz") == [
        {"cell": "gt_50", "expr": "3>2=", "correct": True}, {"cell": "add_50", "expr": "1+2=", "correct": False}]


def _recorded_systems():
    document = json.loads((RESULTS / "table1.json").read_text())
    return [(name, system) for name, system in document["systems"].items() if "records" in system]


@pytest.mark.parametrize("name, system", _recorded_systems() or [pytest.param(None, None, marks=pytest.mark.skip(
    reason="no system of the committed table has records yet"))])
def test_the_committed_table1_recounts_from_its_records(name, system):
    lines = table1.read_problem_lines(RESULTS / system["records"])
    # every cell of this run has its lines; a cell kept from an earlier run (kept_cells) has them where that
    # run wrote any, and what lines there are recount
    kept = {cell for group in system.get("kept_cells", []) for cell in group["cells"]}
    recorded = {line["cell"] for line in lines}
    assert set(system["cells"]) - kept <= recorded <= set(system["cells"]), name
    for cell, stats in system["cells"].items():
        if cell not in recorded:
            continue
        mine = [line for line in lines if line["cell"] == cell]
        assert (len(mine), sum(line["correct"] for line in mine)) == (stats["n"], stats["correct"]), (name, cell)
        wrong = [line for line in mine if not line["correct"]]
        assert [e["expr"] for e in stats["examples"]] == [line["expr"] for line in wrong][:len(stats["examples"])]


def test_the_table_notes_which_cells_a_caef_tier_ran_windowed():
    results = {"caef-smollm2-135m": {"model": "caef", "tier": "smollm2-135m",
                                     "cells": {"add_10": {}, "add_50": {}, "gt_100": {}, "sub_50": {}, "mul_1_10": {}}},
               "caef-tiny": {"model": "caef", "tier": "tiny", "cells": {"add_100": {}, "gt_100": {}}},
               "lora-direct-smollm2-135m": {"model": "caef-direct", "tier": "smollm2-135m", "cells": {"add_50": {}}}}
    [note] = table1.windowed_notes(results)
    assert "(`caef-smollm2-135m`): add_50, gt_100 ran a window at a time" in note
    assert "past 10 digits each executor step sees 10 cells" in note and "9 digits a call" in note
