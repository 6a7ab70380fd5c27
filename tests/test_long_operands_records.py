"""results/long_operands.json ties to its problems: every point that names packed records
(records/long_operands/<section>/<op>_<n>.jsonl.gz beside it) recounts from them by the rules the report
counts with (`long_operands.summarise`), and holds the first N problems of the cell it measured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from caef_bench.evaluate.long_operands import problems_at, summarise
from caef_bench.evaluate.table1 import read_problem_lines
from caef_bench.runtime.records import ProblemRecord

RESULTS = Path(__file__).resolve().parents[1] / "results"
DOCUMENT = json.loads((RESULTS / "long_operands.json").read_text())
POINTS = {f"{section} {op}_{n}": point for section in ("beyond", "windowed")
          for op, by_length in (DOCUMENT.get(section) or {}).items() for n, point in by_length.items()
          if "records" in point}
# what a run says about itself rather than about its problems
OF_THE_RUN = ("resumed", "seconds_solving", "forward_passes", "calls_solving", "records")


@pytest.mark.parametrize("name", sorted(POINTS) or [pytest.param(None, marks=pytest.mark.skip(
    reason="no point of the committed report names packed records yet"))])
def test_a_points_numbers_recount_from_its_packed_records(name):
    point = POINTS[name]
    op, n = name.split()[1].split("_")
    lines = read_problem_lines(RESULTS / point["records"])
    assert [line["id"] for line in lines] == [row["id"] for row in problems_at(op, int(n), point["n"])]
    assert all(line["steps"] == [] for line in lines)  # packed: the step texts stay in work/
    records = [ProblemRecord.from_dict(line) for line in lines]
    assert summarise(records) == {key: value for key, value in point.items() if key not in OF_THE_RUN}
