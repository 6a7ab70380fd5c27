"""The journal of model calls: a run killed mid-problem resumes its problems in flight from their last call."""

from __future__ import annotations

import json

import pytest

from caef_bench.runtime import Problem, load_records, solve_batch, solve_to_file, solve_to_files
from caef_bench.runtime.engine import CallNotKept
from caef_bench.runtime.journal import Journal, journal_path, read_journal
from caef_bench.runtime.oracle import OracleModel
from caef_bench.runtime.problem import Completion
from caef_bench.runtime.reuse import ReusedSteps
from fault_models import DiesAfter, Interrupted, Recording

PROBLEMS = [Problem(f"p{i}", expr, "") for i, expr in enumerate(["4531-1504=", "89*4=", "1234//56=", "98765+4321="])]


def test_a_killed_run_resumes_mid_problem_and_its_records_are_an_unbroken_runs(tmp_path):
    path = tmp_path / "caef_mixed.jsonl"
    with pytest.raises(Interrupted):
        solve_to_file(PROBLEMS, DiesAfter(30), path, mode="traced")
    assert load_records(path) == []  # no problem ended: without the journal all 30 calls were lost
    journal = journal_path(path)
    assert journal.name == "caef_mixed.calls"
    made_before = len(journal.read_text().splitlines())
    assert made_before >= 30  # every prompt of the 30 calls (the oracle answers them all)

    model = Recording()
    solve_to_file(PROBLEMS, model, path, mode="traced")
    unbroken = solve_batch(PROBLEMS, OracleModel(), mode="traced")
    total = sum(len(record.steps) for record in unbroken)
    assert len(model.prompts) == total - made_before  # the journal's calls are not made again
    resumed = {record.id: record for record in load_records(path)}
    for record in unbroken:
        again = resumed[record.id]
        assert (again.answer, again.outcome) == (record.answer, record.outcome)
        assert [(s.adapter, s.input, s.output) for s in again.steps] == [(s.adapter, s.input, s.output) for s in record.steps]
        assert not any(step.reused for step in again.steps)  # these weights' own calls, not an earlier run's
    assert not journal.exists()


def test_a_step_read_back_keeps_the_model_time_it_took(tmp_path):
    path = tmp_path / "caef_add.jsonl"
    Journal(path).write("p0", "aligner_add", "12+34=", Completion("start text", 5), 0.25)
    calls = read_journal(journal_path(path), unfinished={"p0"})
    assert calls == {("aligner_add", "12+34="): Completion("start text", 5, seconds=0.25)}
    assert read_journal(journal_path(path), unfinished=set()) == {}  # a recorded problem's calls are done with


def test_each_records_file_keeps_its_own_journal(tmp_path):
    first, second = tmp_path / "caef_a.jsonl", tmp_path / "caef_b.jsonl"
    with pytest.raises(Interrupted):
        solve_to_files({first: PROBLEMS[:2], second: PROBLEMS[2:]}, DiesAfter(12), mode="traced")
    problems_in = {path: {json.loads(line)["problem"] for line in journal_path(path).read_text().splitlines()}
                   for path in (first, second)}
    assert problems_in == {first: {"p0", "p1"}, second: {"p2", "p3"}}
    solve_to_files({first: PROBLEMS[:2], second: PROBLEMS[2:]}, OracleModel(), mode="traced")
    assert not journal_path(first).exists() and not journal_path(second).exists()


def test_a_stopped_run_keeps_its_journal_and_a_cut_line_is_dropped(tmp_path):
    path = tmp_path / "caef_div.jsonl"
    solve_to_file(PROBLEMS, OracleModel(), path, mode="traced", stop=iter([False] * 5 + [True]).__next__)
    journal = journal_path(path)
    kept = journal.read_text()
    assert kept and load_records(path) == []
    journal.write_text(kept + '{"problem": "p0", "adapt')  # killed mid-write
    solve_to_file(PROBLEMS, OracleModel(), path, mode="traced")
    assert len(load_records(path)) == len(PROBLEMS) and not journal.exists()


def test_steps_read_back_pass_the_drafts_of_the_calls_they_do_not_hold():
    class Drafted:
        def generate(self, prompts, adapter, drafts=None):
            return [f"{prompt}:{draft}" for prompt, draft in zip(prompts, drafts)]

    model = ReusedSteps(Drafted(), {("executor_add", "b"): Completion("held", seconds=0.1)})
    assert model.generate(["a", "b", "c"], "executor_add", drafts=["x", "y", "z"]) == [
        "a:x", Completion("held", seconds=0.1), "c:z"]


def test_a_journal_that_cannot_be_written_stops_the_run_and_fails_no_problem(tmp_path, monkeypatch):
    path = tmp_path / "caef_sub.jsonl"
    write = Journal.write
    calls = iter(range(10_000))

    def disk_fills_up(self, *call):
        if next(calls) >= 25:
            raise OSError(28, "No space left on device")
        write(self, *call)

    monkeypatch.setattr(Journal, "write", disk_fills_up)
    with pytest.raises(CallNotKept, match="No space left on device"):
        solve_to_file(PROBLEMS, OracleModel(), path, mode="traced")
    assert all(record.outcome != "error" for record in load_records(path))  # no problem ends as failed
    monkeypatch.setattr(Journal, "write", write)
    solve_to_file(PROBLEMS, OracleModel(), path, mode="traced")
    resumed = {record.id: (record.outcome, record.answer) for record in load_records(path)}
    unbroken = solve_batch(PROBLEMS, OracleModel(), mode="traced")
    assert resumed == {record.id: (record.outcome, record.answer) for record in unbroken}
