"""`caef-bench run --keep-unchanged`: cells of an earlier results file stay only where every adapter
they call is byte-identical; the others must be run again."""

import pytest

from caef_bench.data.testsets import table1_cells
from caef_bench.evaluate.suites import carry_over, cell_adapters


def test_a_cell_calls_its_aligner_its_executor_and_its_composers_callees():
    assert cell_adapters("add_100") == {"aligner_add", "executor_add"}
    assert cell_adapters("sub_5") == {"aligner_sub", "executor_sub", "executor_reflection", "executor_add",
                                      "executor_left_mask"}
    assert cell_adapters("mul_1_10") == {"aligner_mul", "executor_mul", "executor_lt", "executor_add"}
    assert cell_adapters("div_1_10") == {"aligner_div", "executor_div", "executor_gt", "executor_add"}


def _earlier():
    adapters = {name: "old" for cell in ("add_5", "sub_5", "gt_5") for name in cell_adapters(cell)}
    results = {cell: {"end_to_end": {"n": 10, "correct": 10}} for cell in ("add_5", "sub_5", "gt_5")}
    return {"command": "caef-bench run --suite caef", "weights": "w0", "limit": 10, "adapters": adapters,
            "results": results}


def test_only_cells_whose_adapters_are_all_unchanged_are_kept_with_the_command_that_made_them():
    earlier = _earlier()
    now = {**earlier["adapters"], "executor_reflection": "new"}  # sub calls it; add and gt do not
    kept, dropped = carry_over(earlier, now, cells_run=[])
    assert set(kept) == {"add_5", "gt_5"} and dropped == {"sub_5": "w0"}
    assert kept["gt_5"]["made_by"] == {"command": "caef-bench run --suite caef", "weights": "w0", "limit": 10}
    # a cell kept twice keeps its first origin
    again, _ = carry_over({**earlier, "command": "later", "results": kept}, now, cells_run=[])
    assert again["gt_5"]["made_by"]["command"] == "caef-bench run --suite caef"


def test_cells_this_command_runs_are_not_carried_and_a_file_without_fingerprints_is_refused():
    earlier = _earlier()
    kept, dropped = carry_over(earlier, earlier["adapters"], cells_run=["add_5"])
    assert set(kept) == {"sub_5", "gt_5"} and dropped == {}
    with pytest.raises(ValueError, match="fingerprints"):
        carry_over({**earlier, "adapters": None}, earlier["adapters"], cells_run=[])


def test_a_dropped_cell_stays_named_until_a_run_solves_it_and_the_table_says_so():
    from pathlib import Path

    from caef_bench.evaluate.suites import SuiteResults
    from caef_bench.report.tables import suite_header

    earlier = _earlier()
    now = {**earlier["adapters"], "executor_reflection": "new"}
    kept, dropped = carry_over(earlier, now, cells_run=[])
    # the next run (on the same weights) no longer sees sub_5 in the results, only in "dropped"
    later = {**earlier, "weights": "w1", "adapters": now, "results": kept, "dropped": dropped}
    _, still = carry_over(later, now, cells_run=["add_5"])
    assert still == {"sub_5": "w0"}
    _, solved = carry_over(later, now, cells_run=["sub_5"])
    assert solved == {}
    document = {**later, "tier": "tiny", "checkpoints": None, "results": {**kept}, "dropped": still}
    header = suite_header(SuiteResults("caef", document, Path("records"), [], {"gt_5": kept["gt_5"]}))
    dropped_part, unsolved_part = header.partition("Not in this table: ")[2].split("; ")
    assert dropped_part == "sub_5 (their numbers, on weights `w0`, were dropped: an adapter they call has changed since)"
    unsolved = unsolved_part.removesuffix(" (not solved on these weights).").split(", ")
    assert unsolved[:2] == ["add_10", "add_50"] and len(unsolved) == len(table1_cells()) - 3  # every other cell named
    assert "gt_5" not in unsolved and "add_5" not in unsolved


# --------------------------------------------------------------------------- copy-records


def test_a_repeated_digit_cell_calls_its_operators_adapters():
    assert cell_adapters("repeated_sub_100_p1") == cell_adapters("sub_100")
    assert cell_adapters("repeated_div_10_round") == cell_adapters("div_1_10")


def _records_folder(folder, weights, adapters, cells):
    from caef_bench.runtime import ProblemRecord
    from caef_bench.runtime.reuse import write_weights

    folder.mkdir(parents=True)
    write_weights(folder, weights, adapters)
    for cell, ids in cells.items():
        (folder / f"caef_{cell}.jsonl").write_text("".join(
            ProblemRecord(i, "2>1=", "traced", "True", "True", outcome="answered").to_json() + "\n" for i in ids))


def test_records_are_carried_only_for_cells_whose_adapters_are_unchanged_and_say_so(tmp_path):
    from caef_bench.evaluate.suites import carried_counts, copy_records
    from caef_bench.runtime import load_records
    from caef_bench.runtime.reuse import read_weights

    old = {name: "old" for cell in ("gt_5", "repeated_gt_10_p1", "sub_5") for name in cell_adapters(cell)}
    _records_folder(tmp_path / "old", "w0", old, {"gt_5": ["g1", "g2"], "repeated_gt_10_p1": ["r1"], "sub_5": ["s1"]})
    now = {**old, "executor_add": "new"}  # sub calls ADD, gt does not
    new = tmp_path / "new"
    _records_folder(new, "w1", now, {"gt_5": ["g2"]})  # solved here already: kept as it is
    with pytest.raises(ValueError, match=r"sub_5 \(executor_add\)"):
        copy_records(tmp_path / "old", new, "w1", now, ["gt_5", "sub_5"])
    assert [r.id for r in load_records(new / "caef_gt_5.jsonl")] == ["g2"]  # a refusal writes nothing
    assert copy_records(tmp_path / "old", new, "w1", now, ["gt_5", "repeated_gt_10_p1"]) == {"gt_5": 1, "repeated_gt_10_p1": 1}
    records = load_records(new / "caef_gt_5.jsonl")
    assert [(r.id, r.carried_from) for r in records] == [("g2", None), ("g1", "w0")]
    assert carried_counts(records) == {"w0": 1}
    assert read_weights(new)["reused_from"][-1] == {"folder": str(tmp_path / "old"), "weights": "w0",
                                                    "records_of": ["gt_5", "repeated_gt_10_p1"]}
    # carried again: nothing new, and a folder of other weights is refused
    assert copy_records(tmp_path / "old", new, "w1", now, ["gt_5"]) == {"gt_5": 0}
    with pytest.raises(ValueError, match="must not be mixed"):
        copy_records(tmp_path / "old", new, "w2", now, ["gt_5"])


def test_the_tables_say_which_problems_were_carried_and_from_which_weights():
    from caef_bench.report.tables import carried_text

    assert carried_text({"gt_5": {"carried": {}}}) == ""
    text = carried_text({"gt_5": {"carried": {"w0": 200}}, "eq_5": {"carried": {"w0": 200}},
                         "lt_5": {"carried": {"w9": 200}}})
    assert "400 problem records of gt_5, eq_5 from the records of weights `w0`" in text
    assert "200 problem records of lt_5 from the records of weights `w9`" in text and "byte-identical" in text
