"""The repeated-digit suite's cell selection and its report (results/repeated.*), on results made
up here: the tables and the findings must follow the numbers, whichever way they point."""

import json
import re

import pytest
from fault_models import BrokenModel

from caef_bench.data.testsets import load_cell
from caef_bench.evaluate.repeated import cell_parts, control_of, onestep_adapters, run_caef_repeated, select_cells
from caef_bench.report.repeated import comparison, findings, opening, repeated_markdown, with_previous, write_repeated


def test_cells_by_name_and_pattern():
    assert select_cells("repeated_add_10_p1") == ["repeated_add_10_p1"]
    assert select_cells("repeated_gt_*_control") == ["repeated_gt_10_control", "repeated_gt_50_control", "repeated_gt_100_control"]
    # 5 operators x 3 lengths x 6 patterns, and mul and div at 10 digits x 6 patterns
    assert len(select_cells(None)) == 5 * 3 * 6 + 2 * 6
    with pytest.raises(ValueError, match="no repeated-digit cell matches"):
        select_cells("add_10")
    assert cell_parts("repeated_sub_100_mixed") == ("sub", 100, "mixed")
    assert control_of("repeated_sub_100_mixed") == "repeated_sub_100_control"


def test_each_cell_stresses_the_adapters_its_problems_call():
    assert onestep_adapters("repeated_add_50_p2") == [("executor", "add"), ("aligner", "add")]
    assert onestep_adapters("repeated_sub_10_control") == [("executor", "sub"), ("executor", "reflection"),
                                                      ("executor", "left_mask"), ("aligner", "sub")]


def _failure(what, where="aligner (I)"):
    return {"id": "x-0001", "expr": "1+1=", "period": 1, "where": where, "what": what,
            "expected": "⟦1⟧", "got": "⟦⟧"}


def _results(pattern_errors: int, control_errors: int, n: int = 40) -> dict:
    cells = {}
    for cell, errors in (("repeated_add_10_p1", pattern_errors), ("repeated_add_10_control", control_errors)):
        cells[cell] = {"n": n, "answer_errors": errors, "trace_errors": errors, "resumed": 0,
                       "failures": [_failure("missing_repetition" if "p1" in cell else "wrong_digit")] * errors}
    onestep = {"executor_add": {"repeated_add_10_p1": {"n": 20, "correct": 20, "errors": 0, "failures": []},
                                "repeated_add_10_control": {"n": 20, "correct": 20, "errors": 0, "failures": []}}}
    return {"command": "caef-bench run --suite repeated", "tier": "tiny", "checkpoints": None, "weights": "abc",
            "records": "work/records/tiny-abc", "seed": 0, "onestep_per_cell": 20, "seconds": 1.0,
            "cells": list(cells), "onestep": onestep,
            "systems": {"caef-tiny": {"kind": "caef", "limit": n, "cells": cells},
                        "gpt-4o": {"kind": "lm-eval", "limit": 10, "skipped": "needs OPENAI_API_KEY set"}}}


def test_findings_follow_the_numbers():
    worse = findings(_results(30, 2))[0]
    assert "repeated digits cause more errors" in worse and "30/40" in worse and "2/40" in worse
    assert "Extra or missing repetitions of the pattern (the paper's description): 30 of 30" in worse
    assert "no difference this N can show" in findings(_results(3, 2))[0]
    assert "reversed" in findings(_results(0, 12))[0]
    row = comparison(_results(30, 2)["systems"]["caef-tiny"]["cells"])[0]
    assert (row["rate"]["errors"], row["control"]["errors"]) == (30, 2) and row["p"] < 1e-6


def test_findings_name_the_adapters_own_position_schemes():
    """A tier whose aligners carry index hints says so; it is not all the tier's scheme."""
    results = _results(30, 2)
    results.update(position_scheme="coupled-expr")
    assert "position scheme `coupled-expr`)" in findings(results)[0]
    results["adapter_position_schemes"] = {"aligner_add": "coupled-hints", "aligner_sub": "coupled-hints"}
    assert ("position scheme `coupled-expr`; `coupled-hints` for aligner_add, aligner_sub)"
            in findings(results)[0])


def test_findings_count_the_runs_whose_steps_were_cut_where_the_records_say():
    results = _results(30, 2)
    assert "cut there by the runtime" not in findings(results)[0]  # records from before the cut say nothing
    cells = results["systems"]["caef-tiny"]["cells"]
    cells["repeated_add_10_p1"]["runs_with_cut_steps"], cells["repeated_add_10_control"]["runs_with_cut_steps"] = 3, 1
    assert "cut there by the runtime as a stop string would: 4 of 80." in findings(results)[0]


def test_findings_tell_runs_that_left_the_machine_but_answered_right_from_wrong_answers():
    """A traced run can slip off the machine's course and still answer right: the failures it is
    counted among must not read as wrong answers."""
    results = _results(3, 0)
    cells = results["systems"]["caef-tiny"]["cells"]
    assert "not answered right, " not in findings(results)[0]
    cells["repeated_add_10_p1"]["failures"] = ([{**_failure("wrong_digit"), "answer_correct": False}] * 3
                                          + [{**_failure("wrong_digit"), "answer_correct": True}] * 2)
    line = findings(results)[0]
    assert ("Of the 5 failures on repeated digits (3 not answered right, 2 with a step unlike the machine's "
            "that still reached the right one; first divergence where traced)") in line
    assert "3/40" in line  # the error rate still counts wrong answers only


def test_a_previous_reports_caef_numbers_stand_beside_the_new_weights_and_the_change_is_tested():
    new, old = _results(0, 0, n=50), _results(30, 0)
    old.update(weights="old", command="caef-bench run --suite repeated --limit 40")
    old["systems"]["caef-tiny @older"] = {**old["systems"]["caef-tiny"], "kind": "caef, previous weights"}
    merged = with_previous(new, old, "results/repeated.json")
    # the previous report's own CAEF run only (not what it carried), right after the system it stands for
    assert list(merged["systems"]) == ["caef-tiny", "caef-tiny @old", "gpt-4o"]
    lines = findings(merged)
    assert "no difference this N can show" in lines[0]
    assert lines[1].startswith("**`caef-tiny @old`**") and "30/40" in lines[1]
    assert "taken from `results/repeated.json`" in lines[1]
    change = next(line for line in lines if line.startswith("**Before and after**"))
    assert "30/40" in change and "0/50" in change and "these weights (`abc`)" in change
    markdown = repeated_markdown(merged)
    assert "caef-tiny @old: error" in markdown and "Beside them, `caef-tiny @old`" in markdown
    # a report of no weights carries nothing; a rerun of the same weights keeps what that report had carried
    assert with_previous(new, {**old, "weights": None}, "x") is new
    assert with_previous(new, {**new, "command": "an earlier run"}, "x") is new
    rerun = with_previous(new, merged, "results/repeated.json")
    assert list(rerun["systems"]) == ["caef-tiny", "caef-tiny @old", "gpt-4o"]
    assert rerun["systems"]["caef-tiny @old"] == merged["systems"]["caef-tiny @old"]


def test_single_cells_worse_than_their_control_are_counted_and_named():
    results = _results(30, 2)
    assert "Single test cells (operator, length, pattern) worse than their own control at p < 0.05: 1 of 1 (add 10 p1)" \
        in findings(results)[0]
    assert "Single test cells (operator, length, pattern) worse than their own control at p < 0.05: 0 of 1." \
        in findings(_results(1, 0))[0]


def _drop_one_cell_of_a_run(prompt: str, output: str) -> str:
    """Aligner (I) writing a run of a digit one cell short (|8|8|8 as |8|8): the paper's missing repetition."""
    return re.sub(r"\|(\d)\|\1", r"|\1", output, count=1)


def test_the_report_files_follow_the_records(tmp_path):
    """CAEF's runs (the oracle, its aligner (I) miscopying the first 4 period-1 problems), through their records
    to the report: the counts and classes are the records', not numbers written here."""
    miscopied = {row["expr"] for row in load_cell("repeated_add_10_p1")[:4]}
    model = BrokenModel(_drop_one_cell_of_a_run, lambda adapter, prompt: adapter == "aligner_add" and prompt in miscopied)
    cells = run_caef_repeated(model, ["repeated_add_10_p1", "repeated_add_10_control"], 4, tmp_path / "records")
    assert len((tmp_path / "records" / "caef_repeated_add_10_p1.jsonl").read_text().splitlines()) == 4
    results = _results(0, 0)
    results["systems"]["caef-tiny"].update(limit=4, cells=cells)
    paths = write_repeated(results, tmp_path)
    markdown = paths[0].read_text()
    assert "`caef-bench run --suite repeated`" in markdown and "weights `abc`" in markdown
    assert "Not run here: `gpt-4o` (needs OPENAI_API_KEY set)" in markdown
    assert "(4/4)" in markdown and "(0/4)" in markdown  # every miscopied run wrong, no control wrong
    assert "**missing_repetition**" in markdown and "**wrong_digit**" not in markdown
    written = json.loads(paths[1].read_text())["systems"]["caef-tiny"]["cells"]
    assert {cell: (r["n"], r["answer_errors"], r["trace_errors"]) for cell, r in written.items()} == {
        "repeated_add_10_p1": (4, 4, 4), "repeated_add_10_control": (4, 0, 0)}
    assert [(f["where"], f["what"]) for f in written["repeated_add_10_p1"]["failures"]] == [
        ("aligner (I)", "missing_repetition")] * 4
    assert paths[2].read_bytes()[:4] == b"\x89PNG" and paths[2].stat().st_size > 10_000  # the figure


def test_a_per_cell_n_solves_each_cell_to_its_own_n_and_the_report_says_which(tmp_path):
    """--limits caef-tiny=2,caef-tiny@repeated_add_10_p*=5: the issue's 200 at 10 digits beside 50 elsewhere."""
    from caef_bench.evaluate.systems import load_systems, system_limits

    systems = load_systems()
    limits = system_limits("caef-tiny=2,caef-tiny@repeated_add_10_p*=5", systems)
    caef = systems["caef-tiny"]
    assert [caef.problems_per_cell(None, limits, cell) for cell in ("repeated_add_10_p1", "repeated_add_10_control")] == [5, 2]
    assert caef.problems_per_cell(None, limits) == 2 and caef.cell_limits(limits) == {"repeated_add_10_p*": 5}
    with pytest.raises(ValueError, match="per-cell N is for CAEF traced"):  # lm-eval takes one --limit a call
        systems["lora-direct-tiny"].lm_eval_limit(None, system_limits("lora-direct-tiny@repeated_add_*=3", systems))
    with pytest.raises(ValueError, match="SYSTEM@CELL_PATTERN=N"):
        system_limits("caef-tiny@=3", systems)

    oracle = BrokenModel(lambda prompt, output: output, lambda adapter, prompt: False)
    cells = run_caef_repeated(oracle, ["repeated_add_10_p1", "repeated_add_10_control"],
                              lambda cell: caef.problems_per_cell(None, limits, cell), tmp_path / "records")
    assert {cell: r["n"] for cell, r in cells.items()} == {"repeated_add_10_p1": 5, "repeated_add_10_control": 2}
    results = _results(0, 0)
    results["systems"]["caef-tiny"].update(limit=2, cells=cells, cell_limits=caef.cell_limits(limits))
    assert "`caef-tiny` 2 per cell (5 on repeated_add_10_p*, 1 cell)" in repeated_markdown(results)


def test_small_error_rates_keep_the_decimals_their_interval_needs():
    from caef_bench.evaluate.repeated import error_rate
    from caef_bench.report.repeated import _rate_text

    assert _rate_text(error_rate(19, 8450)).startswith("0.22% [0.14, 0.35]")  # not "0% [0, 0]"
    assert _rate_text(error_rate(3, 200)).startswith("1.5% [0.5, 4.3]")
    assert _rate_text(error_rate(135, 208)) == "65% [58, 71] (135/208)"


def test_the_opening_calls_baselines_mostly_wrong_only_when_they_are():
    results = _results(3, 2)

    def baseline(errors: int) -> dict:
        return {"kind": "lm-eval", "limit": 40, "cells": {cell: {"n": 40, "answer_errors": errors, "failures": []}
                                                          for cell in results["cells"]}}

    results["systems"]["lora-direct"] = baseline(30)
    assert "The baselines answer most problems wrong either way" in opening(results)
    results["systems"]["lora-direct"] = baseline(4)  # a baseline that learnt the task
    text = opening(results)
    assert "most problems wrong" not in text and "`lora-direct` 4 of 40 (10%)" in text


def test_findings_split_caefs_misses_into_wrong_answers_and_none():
    results = _results(5, 2)
    results["systems"]["caef-tiny"]["cells"]["repeated_add_10_p1"]["outcomes"] = {
        "ok": 35, "wrong_answer": 1, "misaligned": 3, "unparseable": 1}
    results["systems"]["caef-tiny"]["cells"]["repeated_add_10_control"]["outcomes"] = {"ok": 38, "wrong_answer": 2}
    assert "Of the 5 not answered right, 1 got a wrong answer and 4 none (misaligned 3, unparseable 1)." in \
        findings(results)[0]
    results["systems"]["caef-tiny"]["cells"]["repeated_add_10_p1"]["outcomes"] = {"ok": 40}
    assert "not answered right" not in findings(results)[0]
