"""The LoRA-direct studies' reports (results/lora_direct_curve.json, results/direct_capacity.json) against the
problems packed beside them: each cell's N and count recount from its lines, each line's verdict is the
scorer's on its reply, and its problems are the first N of the committed test cell."""

import json
from pathlib import Path

import pytest

from caef_bench.data.testsets import load_cell
from caef_bench.evaluate.scoring import score
from caef_bench.evaluate.table1 import read_problem_lines

RESULTS = Path(__file__).resolve().parents[1] / "results"


def _disagreements(label: str, cell: str, stats: dict, lines: list[dict]) -> list[str]:
    expected = load_cell(cell)[:stats["n"]]
    wrong = []
    if [line["id"] for line in lines] != [problem["id"] for problem in expected]:
        wrong.append(f"{label} {cell}: its lines are not the cell's first {stats['n']} problems")
    if sum(line["correct"] for line in lines) != stats["correct"]:
        wrong.append(f"{label} {cell}: {sum(line['correct'] for line in lines)} right in its lines, "
                     f"{stats['correct']} in the report")
    op = cell.partition("_")[0]
    wrong += [f"{label} {cell} {line['id']}: verdict {line['correct']} on reply {line['reply']!r}"
              for line, problem in zip(lines, expected)
              if line["correct"] != score(line["reply"], problem["answer"], op, "direct")]
    return wrong


def curve_disagreements(report: dict, lines: list[dict]) -> list[str]:
    """Where lora_direct_curve.json's cells and their problem lines disagree (every cell must have lines)."""
    by_cell: dict[tuple, list] = {}
    for line in lines:
        by_cell.setdefault((line["run"], line["snapshot"], line["cell"]), []).append(line)
    wrong = []
    for points in report["points"].values():
        for point in points:
            snapshot = f"{point['op']}/{point['label']}"
            for cell, stats in point["cells"].items():
                found = by_cell.pop((point["run"], snapshot, cell), [])
                wrong += _disagreements(f"{point['run']} {snapshot}", cell, stats, found)
    return wrong + [f"lines of no cell of the report: {key}" for key in by_cell]


def capacity_disagreements(report: dict, lines: list[dict]) -> list[str]:
    """Where direct_capacity.json's points and their problem lines disagree."""
    by_point: dict[tuple, list] = {}
    for line in lines:
        by_point.setdefault((line["arm"], line["samples"], line["cell"]), []).append(line)
    wrong = []
    for arm in report["arms"]:
        for point in arm["points"]:
            found = by_point.pop((arm["setting"], point["samples"], report["cell"]), [])
            wrong += _disagreements(f"{arm['setting']} at {point['samples']}", report["cell"], point, found)
    return wrong + [f"lines of no point of the report: {key}" for key in by_point]


RECOUNTS = {"lora_direct_curve.json": curve_disagreements, "direct_capacity.json": capacity_disagreements}


@pytest.mark.parametrize("name", [name for name in RECOUNTS
                                  if json.loads((RESULTS / name).read_text()).get("records")])
def test_the_committed_reports_recount_from_their_problems(name):
    report = json.loads((RESULTS / name).read_text())
    assert RECOUNTS[name](report, read_problem_lines(RESULTS / report["records"])) == []
