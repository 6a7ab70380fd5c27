"""One-step cells: the test sets' cells, and sub9_<n> for the executors that carry REFLECTION's dropped zeros."""

from caef_bench.evaluate.onestep import cells_for, executor_cases
from caef_bench.machines import parse
from caef_bench.report.tables import onestep_markdown


def test_reflection_sub_and_add_executors_get_sub9_cells_and_aligners_do_not():
    assert cells_for("reflection")[-4:] == ["sub9_5", "sub9_10", "sub9_50", "sub9_100"]
    assert "sub9_5" in cells_for("add") and "sub9_5" in cells_for("sub")
    assert not any(c.startswith("sub9") for op in ("gt", "left_mask", "mul") for c in cells_for(op))
    assert not any(c.startswith("sub9") for c in cells_for("add", "aligner"))


def test_sub9_cases_are_the_transitions_that_carry_the_dropped_zeros():
    reflection = executor_cases("reflection", "sub9_10", 40)
    assert all(parse(target).state.q in ("q2", "qH") for _, target in reflection)
    assert any("CMD [OUTPUT] LEFT, q2" in target for _, target in reflection)
    for source, target in executor_cases("sub", "sub9_10", 20):
        assert parse(source).callee.state.halted and parse(target).callee.state.machine == "ADD"
    for source, _ in executor_cases("add", "sub9_50", 20):  # SUB's first ADD: b no longer than a
        a, b = (tape.digits for tape in parse(source).state.tapes)
        assert len(b) <= len(a)
    assert executor_cases("add", "sub9_50", 5) == executor_cases("add", "sub9_50", 5)  # seeded


def test_the_onestep_report_puts_sub9_cells_in_a_table_of_their_own():
    stats = {"n": 10, "correct": 10, "accuracy": 1.0, "ci_low": 0.7, "ci_high": 1.0}
    text = onestep_markdown({"executor_sub": {"sub_5": stats, "sub9_5": {**stats, "accuracy": 0.5}},
                             "executor_gt": {"gt_5": stats}}, "header")
    first, second = text.split("### Subtractions with 9s on top")
    assert "| executor_sub | 100.0" in first and "| executor_gt |" in first
    assert "| executor_sub | 50.0" in second and "executor_gt" not in second
