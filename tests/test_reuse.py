"""Reusing an earlier run's model calls for adapters that did not change (runtime.reuse)."""

import pytest

from caef_bench.evaluate.scoring import is_correct
from caef_bench.runtime import Completion, Problem, load_records, solve_batch, solve_to_file
from caef_bench.runtime.oracle import OracleModel
from caef_bench.runtime.reuse import ReusedSteps, read_weights, unchanged_adapters, write_weights
from fault_models import BrokenModel, at_step, wrong_digit

PROBLEMS = [Problem("p0", "45+67=", "112"), Problem("p1", "999+1=", "1000")]


class Recorder:
    """Passes calls to a model and keeps every prompt it was asked."""

    def __init__(self, model):
        self.model, self.asked = model, []

    def generate(self, prompts, adapter):
        self.asked += [(adapter, p) for p in prompts]
        return self.model.generate(prompts, adapter)


def test_calls_to_unchanged_adapters_are_answered_from_the_records(tmp_path):
    path = tmp_path / "caef_add_5.jsonl"
    solve_to_file(PROBLEMS, OracleModel(), path, mode="traced")
    earlier = load_records(path)
    model = Recorder(OracleModel())
    again = solve_batch(PROBLEMS, ReusedSteps.from_records(model, path, {"executor_add"}), mode="traced")
    assert {adapter for adapter, _ in model.asked} == {"aligner_add"}  # the executor was never asked
    for before, now in zip(earlier, again):
        assert is_correct(now) and [s.output for s in now.steps] == [s.output for s in before.steps]
        for step in now.steps:
            assert step.reused is (True if step.adapter == "executor_add" else None)
            if step.reused:
                assert step.seconds == 0.0  # no model time was spent on it
    assert '"reused": true' in "".join(r.to_json() for r in again)


def test_a_reused_step_is_the_recorded_output_even_where_that_was_wrong(tmp_path):
    # The records are of the same adapter bytes: what it answered then is what it answers now.
    path = tmp_path / "records.jsonl"
    broken = BrokenModel(wrong_digit, at_step("45+67=", 2))
    solve_to_file(PROBLEMS[:1], broken, path, mode="traced")
    [before] = load_records(path)
    assert not is_correct(before)
    [now] = solve_batch(PROBLEMS[:1], ReusedSteps.from_records(OracleModel(strict=False), path, {"executor_add"}),
                        mode="traced")
    assert [s.output for s in now.steps] == [s.output for s in before.steps]
    assert now.first_divergence == before.first_divergence


def test_prompts_no_record_holds_go_to_the_model_in_one_batch_in_order(tmp_path):
    steps = {("executor_add", "a"): Completion("A", 1, reused=True), ("executor_add", "c"): Completion("C", 1, reused=True)}
    model = Recorder(OracleModel(strict=False))
    model.model.generate = lambda prompts, adapter: [p.upper() + "!" for p in prompts]
    outputs = ReusedSteps(model, steps).generate(["a", "b", "c", "d"], "executor_add")
    assert [getattr(o, "text", o) for o in outputs] == ["A", "B!", "C", "D!"]
    assert model.asked == [("executor_add", "b"), ("executor_add", "d")]
    # another adapter's records never answer: the key is (adapter, prompt)
    assert ReusedSteps(model, steps).generate(["a"], "executor_sub") == ["A!"]


def test_only_the_named_adapters_are_read_from_the_records(tmp_path):
    path = tmp_path / "records.jsonl"
    solve_to_file(PROBLEMS, OracleModel(), path, mode="traced")
    reuse = ReusedSteps.from_records(OracleModel(), path, {"aligner_add"})
    assert reuse.steps and {adapter for adapter, _ in reuse.steps} == {"aligner_add"}
    assert ReusedSteps.from_records(OracleModel(), tmp_path / "missing.jsonl", {"aligner_add"}).steps == {}


def test_weights_file_names_the_weights_and_refuses_to_mix_them(tmp_path):
    adapters = {"executor_add": "e1", "aligner_add": "a1"}
    write_weights(tmp_path, "w1", adapters)
    assert read_weights(tmp_path) == {"weights": "w1", "adapters": adapters, "reused_from": []}
    source = {"folder": "old", "weights": "w0"}
    assert write_weights(tmp_path, "w1", adapters, source)["reused_from"] == [source]
    assert write_weights(tmp_path, "w1", adapters)["reused_from"] == [source]  # a later resume keeps it
    with pytest.raises(ValueError, match="must not be mixed"):
        write_weights(tmp_path, "w2", adapters)
    with pytest.raises(FileNotFoundError, match="none of its steps can be reused"):
        read_weights(tmp_path / "elsewhere")


def test_unchanged_adapters_are_those_with_the_same_fingerprint():
    earlier = {"executor_add": "e1", "aligner_add": "a1", "aligner_gt": "g1"}
    assert unchanged_adapters(earlier, {"executor_add": "e1", "aligner_add": "a2"}) == {"executor_add"}


def test_table2_reads_the_executor_steps_of_table1s_records_of_the_same_cell(tmp_path):
    from caef_bench.evaluate.suites import Reuse, run_caef, run_table2

    run_caef(OracleModel(), ["add_5"], 4, tmp_path)  # writes caef_add_5.jsonl
    model = Recorder(OracleModel())
    results = run_table2(model, ["add_5"], 4, tmp_path, reuse=Reuse(tmp_path, frozenset({"executor_add", "aligner_add"})))
    executor_calls = [prompt for adapter, prompt in model.asked if adapter == "executor_add"]
    assert executor_calls == []  # every executor step came from Table 1's records
    assert results["add_5"]["reused_calls"] == results["add_5"]["model_calls"] > 0
    assert results["add_5"]["executor"]["correct"] == 4
