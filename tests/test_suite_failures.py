"""The CAEF suites keep every failed run with its first divergence, and their tables list them."""

from fault_models import BrokenModel, at_step, wrong_digit

from caef_bench.data.testsets import load_cell
from caef_bench.evaluate.suites import run_caef, run_table2
from caef_bench.report.tables import failures_markdown
from caef_bench.runtime.oracle import OracleModel


def test_a_wrong_step_is_kept_with_its_problem_step_component_and_answer(tmp_path):
    first = load_cell("add_5")[1]
    broken = BrokenModel(wrong_digit, at_step(first["expr"], 3))
    results = run_caef(broken, ["add_5"], 3, tmp_path)
    (failure,) = results["add_5"]["failures"]
    assert failure["id"] == first["id"] and failure["expr"] == first["expr"]
    assert failure["step"] == 3 and failure["component"] == "executor_add" and failure["where"] == "executor"
    assert failure["target"] == first["answer"] and failure["n_steps"] > 3
    assert "⟦" in failure["expected"] and "⟦" in failure["got"]  # the field, cut to its difference
    assert results["add_5"]["exact trace"]["correct"] == 2

    text = failures_markdown(results)
    assert f"`{first['id']}`" in text and "first off at step 3 of" in text and "executor_add" in text
    assert f"for `{first['answer']}`" in text or "right answer" in text


def test_clean_cells_say_so_and_kept_cells_without_lists_are_named(tmp_path):
    results = run_caef(OracleModel(), ["sub_5"], 2, tmp_path)
    assert results["sub_5"]["failures"] == []
    assert "None: every run answered right" in failures_markdown(results)
    kept_from_an_older_run = {"end_to_end": {"n": 200, "correct": 200}}
    text = failures_markdown({**results, "gt_100": kept_from_an_older_run})
    assert "Not listed here" in text and "gt_100" in text


def test_table2_keeps_the_executors_failures(tmp_path):
    first = load_cell("add_5")[0]
    broken = BrokenModel(wrong_digit, at_step(first["expr"], 2))
    results = run_table2(broken, ["add_5"], 2, tmp_path)
    (failure,) = results["add_5"]["failures"]
    assert failure["id"] == first["id"] and failure["step"] == 2 and failure["component"] == "executor_add"
