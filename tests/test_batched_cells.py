"""Every cell's problems in the same rounds (`suites.solve_cells`, the default of `run --suite caef` and of
the repeated suite's CAEF runs), with the adapters folded into the base (`hf.MergedAdapters`, the tiny
tier's default), write the records that the runtime before them wrote: one cell at a time, through
peft's adapter switching (`--per-cell`, `merge_adapters=False`).

On the shipped tiny tier, on cells that mix operators, lengths, a composer's calls and runs the model gets
wrong (a wrong answer decided at a comparison's last steps, an aligner (I) output that does not parse):
every record file holds the same lines in the same order, byte for byte once the wall-clock fields are
set aside (a record's `seconds` and `model_seconds`, each step's `seconds`), and the suite's per-cell
results are the same.
"""

import json

import pytest

from caef_bench.data.testsets import load_cell
from caef_bench.evaluate.suites import as_problems, run_caef, solve_cell, solve_cells
from caef_bench.runtime.hf import load_step_model

WALL_CLOCK = ("seconds", "model_seconds")  # and each step's "seconds"


def _pick(cell: str, ids: list[str] | None = None, first: int = 0) -> list:
    rows = load_cell(cell)
    chosen = rows[:first] + [row for row in rows if ids and row["id"] in ids]
    return as_problems(chosen)


# (cell, problems): the repeated_lt_10_mixed pair answers wrongly (the shipped weights' committed records say
# so) and repeated_eq_100_p1-0002's aligner (I) output does not parse: the verify pass then hands those rows
# to the one-row decoder beside the batched rows of other cells.
JOBS = {
    "add_5": dict(first=3),
    "sub_5": dict(first=2),  # a composer: its calls to reflection, add and left_mask at depth 1
    "gt_10": dict(first=2),
    "repeated_lt_10_mixed": dict(ids=["repeated_lt_10_mixed-0098", "repeated_lt_10_mixed-0185"], first=1),
    "repeated_eq_100_p1": dict(ids=["repeated_eq_100_p1-0002"]),
}


def without_wall_clock(line: str) -> str:
    record = json.loads(line)
    for key in WALL_CLOCK:
        record[key] = 0
    for step in record["steps"]:
        step["seconds"] = 0
    return json.dumps(record, ensure_ascii=False)


def lines(path) -> list[str]:
    return [without_wall_clock(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def model():
    loaded = load_step_model("tiny")
    assert loaded.merged is not None  # the tiny tier's default
    return loaded


@pytest.fixture(scope="module")
def unfolded():
    return load_step_model("tiny", merge_adapters=False)


def test_cells_solved_together_write_the_records_of_cells_solved_one_at_a_time(model, unfolded, tmp_path):
    jobs = {cell: _pick(cell, **pick) for cell, pick in JOBS.items()}
    apart, together = tmp_path / "apart", tmp_path / "together"
    for cell, problems in jobs.items():
        solve_cell(problems, unfolded, apart / f"caef_{cell}.jsonl", mode="traced")
    finished = []
    calls_before = model.stats.steps
    solved = solve_cells({cell: (problems, together / f"caef_{cell}.jsonl") for cell, problems in jobs.items()},
                         model, on_cell=lambda cell, records, resumed: finished.append(cell), mode="traced")
    assert model.stats.steps > calls_before
    assert sorted(finished) == sorted(jobs)  # each cell reported as its last problem finished
    for cell, problems in jobs.items():
        expected = lines(apart / f"caef_{cell}.jsonl")
        assert len(expected) == len(problems)
        assert lines(together / f"caef_{cell}.jsonl") == expected, cell
        records, resumed = solved[cell]
        assert [r.id for r in records] == [p.id for p in problems] and resumed == 0
    outcomes = {r.outcome for cell in jobs for r in solved[cell][0]}
    assert {"answered", "unparseable"} <= outcomes
    wrong = [r.id for r in solved["repeated_lt_10_mixed"][0] if r.answer != r.target]
    assert wrong == ["repeated_lt_10_mixed-0098", "repeated_lt_10_mixed-0185"]


def test_a_second_call_reads_every_cell_from_its_records_and_solves_nothing(model, tmp_path):
    jobs = {cell: (_pick(cell, first=1), tmp_path / f"caef_{cell}.jsonl") for cell in ("add_5", "eq_5")}
    first = solve_cells(jobs, model, mode="traced")
    calls = model.stats.steps
    again = solve_cells(jobs, model, mode="traced")
    assert model.stats.steps == calls
    assert {cell: resumed for cell, (_, resumed) in again.items()} == {"add_5": 1, "eq_5": 1}
    assert {cell: [r.answer for r in records] for cell, (records, _) in again.items()} == \
           {cell: [r.answer for r in records] for cell, (records, _) in first.items()}


def test_the_caef_suite_gives_the_same_results_either_way(model, unfolded, tmp_path):
    cells = ["add_5", "lt_5"]
    apart = run_caef(unfolded, cells, 2, tmp_path / "apart", per_cell=True)
    together = run_caef(model, cells, 2, tmp_path / "together")
    assert list(together) == cells
    assert together == apart
