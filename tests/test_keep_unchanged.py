"""`caef-bench run --keep-unchanged`: cells of an earlier results file stay only where every adapter
they call is byte-identical; the others must be run again."""

import pytest

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
    assert set(kept) == {"add_5", "gt_5"} and dropped == ["sub_5"]
    assert kept["gt_5"]["made_by"] == {"command": "caef-bench run --suite caef", "weights": "w0", "limit": 10}
    # a cell kept twice keeps its first origin
    again, _ = carry_over({**earlier, "command": "later", "results": kept}, now, cells_run=[])
    assert again["gt_5"]["made_by"]["command"] == "caef-bench run --suite caef"


def test_cells_this_command_runs_are_not_carried_and_a_file_without_fingerprints_is_refused():
    earlier = _earlier()
    kept, dropped = carry_over(earlier, earlier["adapters"], cells_run=["add_5"])
    assert set(kept) == {"sub_5", "gt_5"} and dropped == []
    with pytest.raises(ValueError, match="fingerprints"):
        carry_over({**earlier, "adapters": None}, earlier["adapters"], cells_run=[])
