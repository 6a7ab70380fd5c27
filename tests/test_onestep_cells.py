"""One-step cells: the test sets' cells, and sub9_<n> for the executors that carry REFLECTION's dropped zeros."""

import pytest

from caef_bench.evaluate.onestep import cells_for, executor_cases
from caef_bench.machines import parse
from caef_bench.report.tables import onestep_markdown


def test_reflection_sub_and_add_executors_get_sub9_cells_and_aligners_do_not():
    assert cells_for("reflection")[-8:-4] == ["sub9_5", "sub9_10", "sub9_50", "sub9_100"]
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
    drawn = executor_cases("add", "sub9_50", 5)  # seeded: the same seed draws the same cases, another others
    assert drawn == executor_cases("add", "sub9_50", 5, seed=0) != executor_cases("add", "sub9_50", 5, seed=1)


def test_reflection_gets_its_last_steps_on_the_test_problems():
    from caef_bench.data.testsets import load_cell
    from caef_bench.machines import run

    assert cells_for("reflection")[-4:] == ["subtail_5", "subtail_10", "subtail_50", "subtail_100"]
    assert not any(c.startswith("subtail") for op in ("sub", "add", "left_mask") for c in cells_for(op))
    cases = executor_cases("reflection", "subtail_50", 60)
    tails = set()
    for problem in load_cell("sub_50"):
        reflection = run("sub", int(problem["a"]), int(problem["b"])).phases[1].callee
        tails.update(reflection.transition(i) for i in range(reflection.n_q1_end - 1, len(reflection)))
    assert set(cases) <= tails  # the test problems' own REFLECTION runs, from the step that writes CMD q2 on
    sources = [parse(source).state.q for source, _ in cases]
    assert "q1" in sources and "q2" in sources  # the step into q2 and those after it
    assert any(target.endswith("CMD q2") for _, target in cases)  # (a top digit to keep: the usual case)


def test_add_and_left_mask_get_their_steps_on_subs_sum_of_one_more_digit(monkeypatch):
    import re

    from caef_bench.data.testsets import load_cell
    from caef_bench.evaluate import onestep
    from caef_bench.machines import run

    assert cells_for("add")[-2:] == cells_for("left_mask")[-2:] == ["subwide_50", "subwide_100"]
    assert not any(c.startswith("subwide") for op in ("sub", "reflection", "gt") for c in cells_for(op))
    assert not any(c.startswith("subwide") for c in cells_for("add", "aligner"))
    problems = load_cell("sub_100")[:6]
    monkeypatch.setattr(onestep, "load_cell", lambda cell: problems if cell == "sub_100" else load_cell(cell))

    def widest(text: str) -> int:
        return max(len(re.findall(r"\|\d", field)) for field in text.split("\n")[0].split(" "))

    for op, per_problem in (("add", 6), ("left_mask", 4)):
        wanted = set()  # the problems' own calls: ADD's last three steps, LEFT_MASK's first and last three
        for problem in problems:
            phases = run("sub", int(problem["a"]), int(problem["b"])).phases
            for callee in ([phases[2].callee, phases[3].callee] if op == "add" else [phases[4].callee]):
                steps = set(range(len(callee) - 3, len(callee))) | ({0} if op == "left_mask" else set())
                wanted.update(callee.transition(step) for step in steps)
        every = executor_cases(op, "subwide_100", 6, every_step=True)
        drawn = executor_cases(op, "subwide_100", 6)
        assert set(every) == wanted and len(every) == 6 * per_problem
        assert len(drawn) == 6 and set(drawn) <= wanted  # one drawn from each problem
        assert any(widest(source) == 101 for source, _ in every)  # the sum's field of 101 cells
    halts = [target for _, target in executor_cases("left_mask", "subwide_100", 6, every_step=True)]
    assert sum(target.endswith("Halt state.") for target in halts) == 6  # each LEFT_MASK call ends once


def test_the_onestep_report_puts_sub9_cells_in_a_table_of_their_own():
    stats = {"n": 10, "correct": 10, "accuracy": 1.0, "ci_low": 0.7, "ci_high": 1.0}
    text = onestep_markdown({"executor_sub": {"sub_5": stats, "sub9_5": {**stats, "accuracy": 0.5}},
                             "executor_gt": {"gt_5": stats}}, "header")
    first, second = text.split("### Subtractions with 9s on top")
    assert "| executor_sub | 100.0" in first and "| executor_gt |" in first
    assert "| executor_sub | 50.0" in second and "executor_gt" not in second
    text = onestep_markdown({"executor_add": {"add_100": stats, "subwide_100": {**stats, "accuracy": 0.9}}}, "header")
    first, wide = text.split("### ADD's and LEFT_MASK's steps on SUB's sum")
    assert "| executor_add | " in first and "90.0" not in first and "| 90.0 |" in wide


def test_measure_adapters_skips_what_was_measured_and_keeps_the_order_asked(monkeypatch):
    from caef_bench.evaluate import onestep

    class StepModel:
        model, active = "weights", []

        def activate(self, name):
            self.active.append(name)

        def codec_for(self, name):
            return f"codec of {name}"

    calls, saved, shown = [], [], []
    monkeypatch.setattr(onestep, "one_step_accuracy", lambda *call: calls.append(call) or {"add_5": call[2]})
    earlier = {"aligner_add": {"add_5": "earlier"}, "executor_gt": {"gt_5": "earlier"}}
    results = onestep.measure_adapters(StepModel(), [("executor", "add"), ("aligner", "add")], 3, 7, earlier,
                                       save=lambda r: saved.append(list(r)), progress=lambda n, c: shown.append(n))
    assert calls == [("weights", "codec of executor_add", "executor", "add", 3, 7, False, None)]
    assert StepModel.active == ["executor_add"] and shown == ["executor_add", "aligner_add"]
    assert saved == [["aligner_add", "executor_gt", "executor_add"]]  # after each adapter measured
    assert list(results) == ["executor_add", "aligner_add", "executor_gt"]  # the order asked, then the rest
    assert results["aligner_add"] == {"add_5": "earlier"}


def test_earlier_results_are_reused_only_for_the_same_weights_n_and_seed(tmp_path):
    from caef_bench.evaluate.onestep import earlier_results, write_results

    settings = {"weights": "abc", "per_cell": 2, "seed": 0, "adapters": {"executor_add": "x"}}
    results = {"executor_add": {"add_5": {"n": 2, "correct": 2, "accuracy": 1.0, "ci_low": 0.3, "ci_high": 1.0}}}
    write_results(tmp_path, "caef-bench onestep", settings, results, "cpu", onestep_markdown)
    assert earlier_results(tmp_path, settings) == results
    assert earlier_results(tmp_path, {**settings, "adapters": {"executor_add": "y"}}) == results  # older files lack them
    assert earlier_results(tmp_path, {**settings, "per_cell": 3}) == {}
    assert earlier_results(tmp_path / "nowhere", settings) == {}
    assert "weights `abc`, device cpu" in (tmp_path / "onestep.md").read_text()


def test_every_step_takes_each_transition_of_the_problems_drawn():
    from caef_bench.data.testsets import load_cell
    from caef_bench.machines import run

    one = executor_cases("add", "add_10", 3)
    every = executor_cases("add", "add_10", 3, every_step=True)
    runs = {p["expr"]: run("add", int(p["a"]), int(p["b"])) for p in load_cell("add_10")}
    drawn = [r for r in runs.values() if r.transition(0) in every]
    assert len(drawn) == 3 and len(every) == sum(len(r) for r in drawn)
    assert set(one) <= set(every)  # the same problems, one transition of each before
    tail = executor_cases("reflection", "subtail_10", 2, every_step=True)
    assert all(parse(target).state.q in ("q1", "q2", "qH") for _, target in tail) and len(tail) >= 2 * 3


def test_every_step_accuracy_counts_each_wrong_transition():
    from fault_models import BrokenModel

    from caef_bench.evaluate.onestep import every_step_accuracy

    cases = executor_cases("add", "add_5", 2, every_step=True)
    broken_prompt = cases[3][0]
    model = BrokenModel(lambda prompt, output: output + "|0", lambda adapter, prompt: prompt == broken_prompt)
    results = every_step_accuracy(model, "add", 2, seed=0)
    assert set(results) == set(cells_for("add"))
    assert (results["add_5"]["n"], results["add_5"]["correct"]) == (len(cases), len(cases) - 1)
    assert results["add_5"]["failures"][0]["prompt"] == broken_prompt
    assert all(r["accuracy"] == 1.0 for cell, r in results.items() if cell != "add_5")


def test_structured_cells_come_only_when_asked_and_hold_structured_operands():
    from caef_bench.evaluate.onestep import aligner_cases, structured_problems

    assert not any(c.startswith("struct_") for c in cells_for("add") + cells_for("mul", "aligner"))
    assert cells_for("add", "aligner", structured=True)[-3:] == ["struct_10", "struct_50", "struct_100"]
    assert cells_for("div", structured=True) == ["div_1_10", "struct_1_10"]
    pairs = structured_problems("add", "struct_50", 200)
    assert pairs == structured_problems("add", "struct_50", 200)  # seeded
    assert all(max(len(str(a)), len(str(b))) == 50 for a, b in pairs)
    assert sum(len(str(b)) < 50 for _, b in pairs) > 50  # n-digit a with shorter b too (1000000000000000+1=)
    assert any(a == b for a, b in pairs) and any(str(a).count("0") > 40 or str(a).count("9") > 40 for a, _ in pairs)
    cases = aligner_cases("sub", "struct_10", 10)
    assert [prompt.endswith("=") for prompt, _ in cases] == [True, False] * 5  # (I) and (O) alternating
    for prompt, _ in cases[::2]:
        a, b = prompt[:-1].split("-")
        assert int(a) >= int(b)
    for source, target in executor_cases("left_mask", "struct_100", 10):
        assert parse(source).state.machine == "LEFT_MASK"


def test_max_len_measures_the_cells_of_short_operands_alone(monkeypatch):
    from caef_bench.cli import build_parser
    from caef_bench.evaluate import onestep

    scored = []
    monkeypatch.setattr(onestep, "score_cases", lambda generate, cases, count: scored.append(len(cases)) or {})
    cells = onestep._score_cells(None, None, "executor", "add", 2, 0, False, max_len=10)
    assert set(cells) == {cell for cell in onestep.cells_for("add") if onestep.cell_digits(cell) <= 10}
    assert "add_10" in cells and "add_50" not in cells and scored == [2] * len(cells)
    assert build_parser().parse_args(["onestep", "--max-len", "10"]).max_len == 10
    with pytest.raises(ValueError, match="--max-len picks one-step cells"):  # before any model loads
        onestep.measure_tier("tiny", None, [("executor", "add")], 2, 0, every_step=True, max_len=10)


def test_a_renamed_cell_draws_the_steps_of_the_stream_it_was_published_with(monkeypatch):
    """The repeated-digit cells keep the `rep_…` streams their test sets were published with; their one-step
    draws are seeded by the same stream, so a cell's name can change without changing a committed number."""
    from dataclasses import replace

    from caef_bench.data import testsets
    from caef_bench.evaluate import onestep
    from caef_bench.evaluate.onestep import aligner_cases

    spec = testsets.CELLS["repeated_sub_100_p1"]
    assert spec.stream == "rep_sub_100_p1"
    monkeypatch.setitem(testsets.CELLS, "renamed_sub_100_p1", replace(spec))  # the same problems, another name
    monkeypatch.setattr(onestep, "load_cell", lambda name: testsets.load_cell(name.replace("renamed_", "repeated_")))
    for op in ("sub", "reflection"):
        assert executor_cases(op, "renamed_sub_100_p1", 4) == executor_cases(op, "repeated_sub_100_p1", 4)
    assert aligner_cases("sub", "renamed_sub_100_p1", 4) == aligner_cases("sub", "repeated_sub_100_p1", 4)
