"""lab/diagnosis/rerun_diverged.py: only the runs that left the machine's course are solved again,
and a run whose outcome or answer is not what was recorded is reported as changed."""

import importlib.util
from pathlib import Path

from caef_bench.runtime import Problem, solve_batch
from caef_bench.runtime.oracle import OracleModel
from caef_bench.runtime.records import Divergence

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("rerun_diverged", ROOT / "lab/diagnosis/rerun_diverged.py")
rerun_diverged = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rerun_diverged)


def test_only_diverged_runs_are_solved_again_and_changes_are_named(tmp_path):
    followed, diverged_right, diverged_wrong = solve_batch(
        [Problem("a", "45+67=", "112"), Problem("b", "9>8=", "True"), Problem("c", "20-3=", "17")], OracleModel(),
        mode="traced")
    mark = Divergence(2, "executor_add", "wrong_digit", "expected", "got", 0)
    diverged_right.first_divergence = mark  # (as a run the machine's course would not have made)
    diverged_wrong.first_divergence, diverged_wrong.answer = mark, "18"
    (tmp_path / "caef_x.jsonl").write_text("".join(r.to_json() + "\n" for r in (followed, diverged_right)))
    (tmp_path / "table2_x.jsonl").write_text(diverged_wrong.to_json() + "\n")

    runs = rerun_diverged.diverged(tmp_path)
    assert [(stem, record.id) for stem, record in runs] == [("caef_x", "b"), ("table2_x", "c")]
    model = OracleModel()
    rows = rerun_diverged.rerun(runs, model)
    assert [(row["id"], row["changed"], row["now"]) for row in rows] == [("b", False, ["answered", "True"]),
                                                                          ("c", True, ["answered", "17"])]
    assert rows[1]["recorded"] == ["answered", "18"]
