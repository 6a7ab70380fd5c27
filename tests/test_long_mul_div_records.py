"""results/long_mul_div.json ties to its problems: each system that ran names its problem lines
(records/long_mul_div/<system>.jsonl.gz beside it), every cell holds the first N problems of its committed test
set, and its numbers recount from those lines by the rules the suite counts with (`long_mul_div.cell_summary`:
accuracy and its interval, every miss classified, CAEF's model calls beside the machines' count and its seconds).
Skipped while no report is committed (none is until the long route's adapters are trained)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from caef_bench.data.testsets import load_cell
from caef_bench.evaluate.long_mul_div import cell_summary
from caef_bench.evaluate.table1 import read_problem_lines

RESULTS = Path(__file__).resolve().parents[1] / "results"
REPORT = RESULTS / "long_mul_div.json"


def _recorded_systems():
    if not REPORT.is_file():
        return []
    return [(name, system) for name, system in json.loads(REPORT.read_text())["systems"].items() if system["cells"]]


@pytest.mark.parametrize("name, system", _recorded_systems() or [pytest.param(None, None, marks=pytest.mark.skip(
    reason="no results/long_mul_div.json is committed yet"))])
def test_the_committed_report_recounts_from_its_records(name, system):
    lines = read_problem_lines(RESULTS / system["records"])
    assert {line["cell"] for line in lines} == set(system["cells"]), name
    for cell, reported in system["cells"].items():
        mine = [line for line in lines if line["cell"] == cell]
        rows = load_cell(cell)[:reported["n"]]
        assert [(line["id"], line["expr"], line["target"]) for line in mine] == \
            [(row["id"], row["expr"], row["answer"]) for row in rows], (name, cell)
        assert cell_summary(mine, system.get("style")) == reported, (name, cell)


def test_a_system_not_run_has_no_numbers_only_its_reasons():
    if not REPORT.is_file():
        pytest.skip("no results/long_mul_div.json is committed yet")
    for name, system in json.loads(REPORT.read_text())["systems"].items():
        assert not set(system["cells"]) & set(system["not_run"]), name
        assert all(reason.strip() for reason in system["not_run"].values()), name
        assert ("records" in system) == bool(system["cells"]), name
