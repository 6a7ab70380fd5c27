"""The LoRA-direct learning curve: one training run per operator with snapshots at fractions of its
budget, their in-process evaluation, and the report (micro models)."""

import json
import subprocess
import sys
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import pytest
import torch

from caef_bench.models.tiny import TinyShape, build_tiny_base, save_tiny_base
from caef_bench.train.curve import label, parse_fractions, snapshot_steps, train_curve
from caef_bench.train.loop import RunOptions, RunPlan, train
from caef_bench.train.recipe import TrainRequest
from micro_model import micro_tiny_base  # noqa: F401  (pytest fixture)

MICRO = TinyShape(hidden=32, layers=2, heads=2, ffn=64, max_positions=8192)
QUIET = RunOptions(progress=False)
REPO = Path(__file__).resolve().parent.parent


def _curve_request(out, base, **choices) -> TrainRequest:
    # a budget of 8 steps of 4 samples: fractions 1/4, 1/2, 1 are steps 2, 4, 8
    settings = {"direct": ("add",), "overrides": {"stage2_steps": 8, "stage2_batch": 4, "max_len": 6}, **choices}
    return TrainRequest(preset="tiny", out=out, base=str(base), executors=(), aligners=(), progress=False,
                        command="caef-bench train-curve (test)", **settings)


def _lora(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "adapter_model.safetensors"))


# ---------------------------------------------------------------- the training loop's stop_at

def test_a_run_stopped_at_a_step_and_continued_is_the_run_that_went_straight_on(tmp_path):
    from caef_bench.models.codec import CaefCodec
    from caef_bench.train.batches import collate

    samples = [{"prompt": "1+2=", "completion": "3"}, {"prompt": "45+67=", "completion": "112"}]
    make = lambda step: collate(samples, CaefCodec("coupled"))  # noqa: E731
    plan = RunPlan(steps=6, lr=3e-3, warmup=2)
    straight = build_tiny_base(MICRO, seed=0)
    train(straight, make, tmp_path / "straight", plan, QUIET)
    stopped = build_tiny_base(MICRO, seed=0)
    first = train(stopped, make, tmp_path / "stopped", plan, replace(QUIET, stop_at=4))
    assert first.steps == 4 and not first.stopped_early
    assert json.loads((tmp_path / "stopped/checkpoint/state.json").read_text())["step"] == 4
    again = build_tiny_base(MICRO, seed=0)  # a new process: the same plan goes on from the checkpoint
    assert train(again, make, tmp_path / "stopped", plan, QUIET).steps == 6
    for (name, a), (_, b) in zip(straight.named_parameters(), again.named_parameters()):
        assert torch.allclose(a, b, atol=1e-6), name


# ---------------------------------------------------------------- the curve's training

def test_fractions_are_parsed_in_order_and_bad_ones_refused():
    assert parse_fractions("1/4,1/16,1,1/4") == [Fraction(1, 16), Fraction(1, 4), Fraction(1)]
    assert label(Fraction(1, 16)) == "frac_1_16" and label(Fraction(1)) == "frac_1"
    assert snapshot_steps([Fraction(1, 512), Fraction(1)], 466_240, 128) == [(Fraction(1, 512), 8), (Fraction(1), 3643)]
    for bad, message in (("0", r"not in \(0, 1\]"), ("3/2", r"not in \(0, 1\]"), ("1/0", "divides by zero"),
                         ("half", "fractions such as")):
        with pytest.raises(ValueError, match=message):
            parse_fractions(bad)


def test_the_curve_takes_a_snapshot_at_each_fraction_each_the_start_of_the_longer_run(tmp_path, micro_tiny_base):
    summary = train_curve(_curve_request(tmp_path / "curve", micro_tiny_base), parse_fractions("1/4,1/2,1"))
    assert summary["stopped"] is None
    snapshots = summary["snapshots"]["add"]
    assert {name: m["samples"] for name, m in snapshots.items()} == {"frac_1_4": 8, "frac_1_2": 16, "frac_1": 32}
    quarter = json.loads((tmp_path / "curve/frac_1_4/direct/add/manifest.json").read_text())
    assert quarter["position_scheme"] == "standard" and quarter["seed"] == 0
    assert quarter["command"] == "caef-bench train-curve (test)"
    assert quarter["curve"]["fraction"] == "1/4" and quarter["curve"]["fraction_of_budget"] == 0.25
    assert quarter["curve"]["budget_samples"] == 32 and quarter["curve"]["schedule"] == "constant after warm-up"
    assert quarter["preset"]["decay"] == "constant"
    assert quarter["stages"]["stage2"]["steps"] == 2 and quarter["stages"]["stage2"]["complete"]
    assert (tmp_path / "curve/frac_1/direct/add/adapter_config.json").is_file()

    # The same snapshots from runs asked for fewer fractions: a snapshot does not depend on the later ones.
    alone = train_curve(_curve_request(tmp_path / "alone", micro_tiny_base), parse_fractions("1/2"))
    assert set(alone["snapshots"]["add"]) == {"frac_1_2"}
    for name, tensor in _lora(tmp_path / "curve/frac_1_2/direct/add").items():
        assert torch.equal(tensor, _lora(tmp_path / "alone/frac_1_2/direct/add")[name]), name
    # ... and asking for more of them later goes on with the same run, to the same weights.
    train_curve(_curve_request(tmp_path / "alone", micro_tiny_base), parse_fractions("1/2,1"))
    for name, tensor in _lora(tmp_path / "curve/frac_1/direct/add").items():
        assert torch.allclose(tensor.float(), _lora(tmp_path / "alone/frac_1/direct/add")[name].float(), atol=1e-2)


def test_a_stopped_curve_goes_on_and_a_fraction_the_run_has_passed_is_refused(tmp_path, micro_tiny_base):
    request = _curve_request(tmp_path / "curve", micro_tiny_base, stop_after_s=0.0)
    first = train_curve(request, parse_fractions("1/4,1/2"))
    assert first["stopped"] and "direct_add" in first["stopped"] and first["snapshots"]["add"] == {}
    goes_on = train_curve(replace(request, stop_after_s=None), parse_fractions("1/4,1/2"))
    assert goes_on["stopped"] is None and set(goes_on["snapshots"]["add"]) == {"frac_1_4", "frac_1_2"}
    with pytest.raises(ValueError, match="past step 3"):
        train_curve(replace(request, stop_after_s=None), parse_fractions("3/8"))


def test_the_train_curve_command_builds_its_request_from_the_flags(monkeypatch, capsys):
    import caef_bench.train.curve as curve
    from caef_bench.cli import main
    from caef_bench.paths import TINY_CHECKPOINTS

    seen = []
    monkeypatch.setattr(curve, "train_curve", lambda request, fractions: seen.append((request, fractions))
                        or {"snapshots": {}, "stopped": None})
    assert main(["train-curve", "--ops", "add,gt", "--fractions", "1/8,1/16", "--out", "w", "--batch", "64",
                 "--workers", "3", "--device", "cpu", "--quiet"]) == 0
    request, fractions = seen[0]
    assert request.direct == ("add", "gt") and request.executors == () and request.aligners == ()
    assert fractions == [Fraction(1, 16), Fraction(1, 8)] and request.base == str(TINY_CHECKPOINTS / "base")
    assert request.overrides["stage2_batch"] == 64 and request.workers == 3
    assert request.direct_position_scheme == "standard" and request.command.startswith("caef-bench train-curve")
    assert "max_len" not in request.overrides
    assert main(["train-curve", "--ops", "add", "--set", "max_len=10", "--quiet"]) == 0
    assert seen[1][0].overrides["max_len"] == 10
    assert main(["train-curve", "--fractions", "2"]) == 2
    assert "not in (0, 1]" in capsys.readouterr().err


# ---------------------------------------------------------------- the curve's evaluation

def test_replies_are_cut_where_the_direct_tasks_stop_them():
    text = (REPO / "tasks/_bare_template_yaml").read_text()
    assert 'until: ["\\n"]' in text and "_bare_template_yaml" in (REPO / "tasks/_direct_template_yaml").read_text()
    from caef_bench.evaluate.direct import STOP

    assert STOP == "\n"


def test_a_replys_verdict_does_not_depend_on_tokens_past_the_answer_and_its_slack():
    from caef_bench.evaluate.direct import ANSWER_SLACK, DirectModel
    from caef_bench.evaluate.scoring import score
    from caef_bench.models.codec import CaefCodec

    direct = DirectModel(model=None, codecs={"add": CaefCodec("standard"), "gt": CaefCodec("standard")})
    assert direct.answer_limit("add", "112") == 3 + ANSWER_SLACK
    # Whatever a reply goes on with past the limit, the scorer's verdict on its first `limit`
    # tokens is its verdict on the whole reply (one token per digit here).
    for full, target in (("112", "112"), ("1120000000000000", "112"), ("112 and more", "112"), ("11", "112"),
                         ("True then", "True"), ("Truest of all", "True")):
        limit = direct.answer_limit("add", target)
        assert score(full[:limit], target, "add" if target.isdigit() else "gt", "direct") == \
            score(full, target, "add" if target.isdigit() else "gt", "direct"), full


def test_the_curve_evaluation_scores_every_snapshot_and_measures_only_what_it_lacks(tmp_path, micro_tiny_base,
                                                                                    monkeypatch):
    import caef_bench.evaluate.direct_curve as direct_curve

    curve = tmp_path / "curve"
    train_curve(_curve_request(curve, micro_tiny_base), parse_fractions("1/2,1"))
    out = tmp_path / "eval.json"
    record = direct_curve.evaluate_curve(curve, out, per_cell=3, cells=["add_5", "add_100"], batch_size=2,
                                         command="eval (test)", progress=lambda line: None)
    assert set(record["points"]) == {"add/frac_1_2", "add/frac_1"}
    point = record["points"]["add/frac_1_2"]
    assert point["samples"] == 16 and point["fraction"] == "1/2" and point["position_scheme"] == "standard"
    assert set(point["cells"]) == {"add_5", "add_100"} and point["cells"]["add_5"]["n"] == 3
    assert {"accuracy", "ci_low", "ci_high", "examples"} <= set(point["cells"]["add_5"])
    assert [problem["id"] for problem in point["cells"]["add_5"]["problems"]] == ["add_5-0000", "add_5-0001", "add_5-0002"]
    assert json.loads(out.read_text()) == record and record["command"] == "eval (test)"

    measured = []
    real = direct_curve.evaluate_cell
    monkeypatch.setattr(direct_curve, "evaluate_cell", lambda *a: measured.append(a[2]) or real(*a))
    record = direct_curve.evaluate_curve(curve, out, per_cell=3, cells=["add_5", "add_10", "add_100"], batch_size=2,
                                         command="eval (add_10)", progress=lambda line: None)
    assert measured == ["add_10", "add_10"]  # one new cell per snapshot; the rest kept
    # the point names both commands that scored it, though the record's command is the last one
    assert record["points"]["add/frac_1"]["scored_by"] == ["eval (test)", "eval (add_10)"]
    measured.clear()
    direct_curve.evaluate_curve(curve, out, per_cell=4, cells=["add_5"], progress=lambda line: None)
    assert measured == ["add_5", "add_5"]  # another N: measured again
    measured.clear()
    again = direct_curve.evaluate_curve(curve, out, per_cell=4, cells=["add_5"], device="elsewhere",
                                        command="eval (nothing new)", progress=lambda line: None)
    assert measured == [] and again["device"] == "cpu"  # nothing measured: the cells' own command and device stay
    assert again["command"] != "eval (nothing new)" and again["points"]["add/frac_1"]["batch"] == 4
    assert [device.split(" (")[0] for device in again["points"]["add/frac_1"]["train_devices"]] == ["cpu"]
    assert "eval (nothing new)" not in again["points"]["add/frac_1"]["scored_by"]

    with pytest.raises(ValueError, match="not the one the snapshots were trained on"):
        other = tmp_path / "other_base"
        save_tiny_base(build_tiny_base(MICRO, seed=1), other, "coupled-hints")
        direct_curve.evaluate_curve(curve, out, per_cell=1, base=other, progress=lambda line: None)
    with pytest.raises(FileNotFoundError, match="no learning-curve snapshots"):
        direct_curve.evaluate_curve(tmp_path / "nothing", out, progress=lambda line: None)


def test_the_curve_evaluation_runs_without_lm_eval_or_pandas(tmp_path, micro_tiny_base):
    # The accelerator machine that trains the curve may have torch, transformers and peft alone.
    curve = tmp_path / "curve"
    train_curve(_curve_request(curve, micro_tiny_base), parse_fractions("1"))
    code = ("import sys; sys.modules['lm_eval'] = sys.modules['pandas'] = None\n"
            "from caef_bench.cli import main\n"
            f"sys.exit(main(['eval-curve', '--curve', {str(curve)!r}, '--limit', '2', '--cells', 'add_5', "
            f"'--device', 'cpu']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads((curve / "evaluation.json").read_text())["points"]["add/frac_1"]["cells"]["add_5"]["n"] == 2


# ---------------------------------------------------------------- the report

def _cell(correct, n=100):
    from caef_bench.evaluate.scoring import accuracy

    return accuracy([{"correct": i < correct} for i in range(n)])


def _evaluation(snapshots=(("frac_1_16", 29_184, 10), ("frac_1", 466_304, 90)), batch=128,
                train_device="NVIDIA H200", train_command="caef-bench t", base_weights="b45e") -> dict:
    points = {}
    for label_, samples, add_5 in snapshots:
        fraction = label_.removeprefix("frac_").replace("_", "/")
        points[f"add/{label_}"] = {"op": "add", "label": label_, "fraction": fraction, "samples": samples,
                                   "budget_samples": 466_240, "fraction_of_budget": samples / 466_240,
                                   "adapter": "abc", "position_scheme": "standard", "train_command": train_command,
                                   "seed": 0, "batch": batch, "final_loss": 1.0, "train_seconds": 1.0,
                                   "train_device": train_device, "cells": {"add_5": _cell(add_5), "add_100": _cell(0)}}
    return {"command": "caef-bench eval-curve", "curve": "work/c", "per_cell": 100, "base": "checkpoints/tiny/base",
            "base_weights": base_weights, "device": "cuda", "points": points}


def test_the_report_puts_the_curve_beside_caef_and_the_paper_in_three_files(tmp_path):
    from caef_bench.report.direct_curve import write_curve_report

    evaluation = tmp_path / "eval.json"
    evaluation.write_text(json.dumps(_evaluation()))
    paths = write_curve_report([evaluation], tmp_path / "out", "caef-bench report-curve",
                               REPO / "results" / "table1_caef.json")
    assert [p.name for p in paths] == ["lora_direct_curve.md", "lora_direct_curve.json", "lora_direct_curve.png"]
    markdown = paths[0].read_text()
    assert "`caef-bench report-curve`" in markdown and "`caef-bench eval-curve`" in markdown
    assert "`caef-bench t` (seed 0, standard position ids)" in markdown and "`b45e`" in markdown
    assert "### Addition (budget 466,240 samples)" in markdown
    assert "| 29,184 " in markdown and "10.0 [5.5, 17.4]" in markdown  # Wilson interval of 10/100
    assert "CAEF (ours)" in markdown and "92.1" in markdown  # the paper's LoRA-direct at add_5
    record = json.loads(paths[1].read_text())
    assert [p["samples"] for p in record["points"]["add"]] == [29_184, 466_304]
    assert record["paper"]["add"]["5"] == 92.1 and record["caef"]["cells"]["add_5"]["n"] == 200
    assert paths[2].stat().st_size > 10_000
    with pytest.raises(FileNotFoundError, match="eval-curve"):
        write_curve_report([tmp_path / "missing.json"], tmp_path / "out", "cmd")


def test_the_reports_problems_go_beside_it_and_come_back_when_a_later_report_reads_it(tmp_path):
    from caef_bench.data.testsets import load_cell
    from caef_bench.evaluate.table1 import read_problem_lines
    from caef_bench.report.direct_curve import write_curve_report
    from test_direct_records import curve_disagreements

    evaluation = _evaluation()
    for point in evaluation["points"].values():
        for cell, stats in point["cells"].items():
            stats["problems"] = [{"id": problem["id"], "reply": problem["answer"] if i < stats["correct"] else "0",
                                  "correct": i < stats["correct"]} for i, problem in enumerate(load_cell(cell)[:100])]
    path = tmp_path / "eval.json"
    path.write_text(json.dumps(evaluation))
    record = json.loads(write_curve_report([path], tmp_path / "out", "cmd")[1].read_text())
    assert record["records"] == "records/lora_direct_curve.jsonl.gz"
    assert "Each problem's reply and verdict: `records/lora_direct_curve.jsonl.gz`." in \
        (tmp_path / "out" / "lora_direct_curve.md").read_text()
    assert all("problems" not in stats for points in record["points"].values() for p in points
               for stats in p["cells"].values())
    lines = read_problem_lines(tmp_path / "out" / record["records"])
    assert len(lines) == 2 * 2 * 100 and curve_disagreements(record, lines) == []
    lines[0]["correct"] = not lines[0]["correct"]
    assert len(curve_disagreements(record, lines)) == 2  # its count and its verdict
    # a report made from this one (its runs' folders gone) packs the same problems again
    again = json.loads(write_curve_report([tmp_path / "out" / "lora_direct_curve.json"], tmp_path / "again",
                                          "cmd")[1].read_text())
    assert read_problem_lines(tmp_path / "again" / again["records"]) == read_problem_lines(tmp_path / "out" /
                                                                                            record["records"])
    path.write_text(json.dumps(_evaluation()))  # an evaluation made before evaluations kept their problems
    assert "records" not in json.loads(write_curve_report([path], tmp_path / "old", "cmd")[1].read_text())


def test_a_second_run_of_the_same_budgets_is_shown_beside_the_first_named_by_its_batch_and_device(tmp_path):
    from caef_bench.report.direct_curve import curve_findings, write_curve_report
    from caef_bench.report.render import render_markdown

    first, second = tmp_path / "h200.json", tmp_path / "cpu.json"
    first.write_text(json.dumps(_evaluation(snapshots=(("frac_1_16", 29_184, 0),))))
    second.write_text(json.dumps(_evaluation(snapshots=(("frac_1_64", 7_296, 0), ("frac_3_64", 21_856, 42)), batch=32,
                                             train_device="cpu (AMD EPYC, 1 threads, system allocator)",
                                             train_command="caef-bench t --batch 32")))
    paths = write_curve_report([first, second], tmp_path / "out", "caef-bench report-curve")
    record = json.loads(paths[1].read_text())
    assert [run["label"] for run in record["runs"]] == ["batch 128, NVIDIA H200", "batch 32, CPU"]
    assert [(p["run"], p["samples"]) for p in record["points"]["add"]] == \
        [("batch 128, NVIDIA H200", 29_184), ("batch 32, CPU", 7_296), ("batch 32, CPU", 21_856)]
    markdown = paths[0].read_text()
    row = next(line for line in markdown.splitlines() if "21,856" in line)
    assert row.split("|")[1].strip() == "batch 32, CPU" and "42.0 [32.8, 51.8]" in row
    assert "**batch 32, CPU.**" in markdown and "`caef-bench t --batch 32` (seed 0" in markdown
    assert "`caef-bench eval-curve` scored its snapshots" in markdown  # points that do not say who scored them
    findings = curve_findings(record)
    assert "0% at 1/16 of its budget (batch 128, NVIDIA H200; its only snapshot)" in findings
    assert "0% at 1/64 of its budget and 0-42% at 3/64 (batch 32, CPU)" in findings
    assert render_markdown(record) == ("lora_direct_curve.md", markdown)  # the JSON alone renders the report
    other_base = tmp_path / "other.json"
    other_base.write_text(json.dumps(_evaluation(base_weights="0ther")))
    with pytest.raises(ValueError, match="different bases"):
        write_curve_report([first, other_base], tmp_path / "out", "cmd")

    by_op = _evaluation(snapshots=(("frac_1_64", 7_296, 0),), batch=32)  # the CPU run's add and sub scored apart
    sub = {**by_op["points"]["add/frac_1_64"], "op": "sub", "scored_by": ["caef-bench eval-curve --ops sub"]}
    by_op["points"]["add/frac_1_64"]["scored_by"] = ["caef-bench eval-curve --ops add"]
    by_op["points"]["sub/frac_1_64"] = sub
    second.write_text(json.dumps(by_op))
    markdown = write_curve_report([first, second], tmp_path / "out", "caef-bench report-curve")[0].read_text()
    assert "`caef-bench eval-curve --ops add` and `caef-bench eval-curve --ops sub` scored its snapshots" in markdown


def test_snapshots_too_close_for_their_labels_slant_them_and_leave_a_tick_unnamed():
    from caef_bench.report.direct_curve import snapshot_ticks

    apart = {"1/16": 43_008, "1/8": 86_016, "1/4": 172_032}
    assert snapshot_ticks(apart) == (list(apart.values()), ["1/16", "1/8", "1/4"], False)
    close = {"1/16": 42_944, "5/64": 53_664, "3/32": 64_384, "1/8": 85_856, "9/64": 96_576, "5/32": 107_328}
    positions, labels, crowded = snapshot_ticks(close)
    assert crowded and positions == list(close.values())
    assert labels == ["1/16", "5/64", "3/32", "1/8", "", "5/32"]  # 9/64 lies an eighth past 1/8: its tick stays unnamed
    rounder_last = {"3/16": 128_768, "7/32": 150_240, "1/4": 171_680}
    assert snapshot_ticks(rounder_last)[1] == ["3/16", "", "1/4"]  # 1/4 a seventh past 7/32: the quarter is named


def test_the_findings_name_the_first_and_last_snapshot_or_say_there_was_one():
    from caef_bench.report.direct_curve import curve_findings

    def record(labels):
        points = [{"fraction": label_, "cells": {"add_5": {"n": 100, "correct": c, "accuracy": c / 100}}}
                  for label_, c in labels]
        return {"points": {"add": points}}

    assert "Addition 10% at 1/16 of its budget and 90% at 1" in curve_findings(record([("1/16", 10), ("1", 90)]))
    only = curve_findings(record([("1/16", 0)]))  # a run the call's deadline stopped before its second snapshot
    assert "Addition 0% at 1/16 of its budget (its only snapshot)" in only and " and 0%" not in only


@pytest.mark.slow
def test_the_whole_curve_runs_on_the_shipped_tiny_base(tmp_path):
    # One step on the real base (minutes on a CPU), then N=2, then the report. The fraction of add's budget
    # that one batch is comes from the preset, whose budget grows as CAEF's adapters get rounds.
    from fractions import Fraction

    from caef_bench.cli import main
    from caef_bench.train.curve import label
    from caef_bench.train.presets import PRESETS

    preset = PRESETS["tiny"]
    budget, batch = preset.adapter_plans["direct_add"]["samples"], preset.for_adapter("direct", "add", {}).stage2_batch
    one_step = Fraction(batch, budget)
    curve = tmp_path / "curve"
    assert main(["train-curve", "--ops", "add", "--fractions", str(one_step), "--out", str(curve), "--quiet"]) == 0
    manifest = json.loads((curve / label(one_step) / "direct/add/manifest.json").read_text())
    assert manifest["samples"] == batch and manifest["curve"]["budget_samples"] == budget
    assert manifest["position_scheme"] == "standard" and manifest["base"] == "checkpoints/tiny/base"
    assert main(["eval-curve", "--curve", str(curve), "--limit", "2", "--cells", "add_5"]) == 0
    assert main(["report-curve", "--evaluation", str(curve / "evaluation.json"), "--out", str(tmp_path)]) == 0
    assert f"| {batch:,} " in (tmp_path / "lora_direct_curve.md").read_text()


def test_a_run_is_named_by_the_flags_that_changed_its_plan():
    from caef_bench.report.direct_curve import run_label

    point = {"batch": 128, "train_device": "NVIDIA H200",
             "train_command": "caef-bench train-curve --ops add --out w --workers 3 --lora-r 256 --lora-alpha 512 --lr 2e-4"}
    assert run_label(point) == "batch 128, NVIDIA H200, rank 256, alpha 512, lr 2e-4"
    full = {**point, "train_command": "caef-bench train-curve --ops add --adapter full --lr 5e-4 --lr 1e-4"}
    assert run_label(full) == "batch 128, NVIDIA H200, full fine-tuning, lr 1e-4"  # the last flag wins, as in argparse
    assert run_label({**point, "train_command": "caef-bench train-curve --adapter lora --stop-after 60"}) == \
        "batch 128, NVIDIA H200"
    went_on = {**point, "train_command": "t", "train_device": "cpu (AMD EPYC, 1 threads)",  # stopped there, went on here
               "train_devices": ["NVIDIA H200", "cpu (AMD EPYC, 1 threads)"]}
    assert run_label(went_on) == "batch 128, NVIDIA H200"


def test_a_report_carries_its_runs_and_a_later_evaluation_of_a_plan_replaces_its_snapshots(tmp_path):
    from caef_bench.report.direct_curve import write_curve_report

    def with_gt(evaluation):  # the same snapshots answering gt_5 too
        for key, point in list(evaluation["points"].items()):
            evaluation["points"][key.replace("add/", "gt/")] = {**point, "op": "gt", "cells": {"gt_5": _cell(95)}}
        return evaluation

    first, cpu = tmp_path / "h200.json", tmp_path / "cpu.json"
    first.write_text(json.dumps(with_gt(_evaluation(snapshots=(("frac_1_16", 29_184, 0),)))))
    cpu.write_text(json.dumps(_evaluation(snapshots=(("frac_1_64", 7_296, 0),), batch=32, train_device="cpu",
                                          train_command="caef-bench t --batch 32")))
    earlier = write_curve_report([first, cpu], tmp_path / "earlier", "report one")[1]
    carried = json.loads(write_curve_report([earlier], tmp_path / "carried", "report two")[1].read_text())
    assert carried["runs"] == json.loads(earlier.read_text())["runs"]
    assert carried["points"] == json.loads(earlier.read_text())["points"]  # the report alone gives its runs again

    rerun = tmp_path / "rerun.json"  # the H200's plan from nothing again, further, for add alone
    rerun.write_text(json.dumps(_evaluation(snapshots=(("frac_1_16", 29_184, 0), ("frac_1_2", 233_152, 60)))))
    went_on = tmp_path / "went_on.json"  # ... and a later call going on from its checkpoint: its snapshots alone
    went_on.write_text(json.dumps(_evaluation(snapshots=(("frac_1", 466_304, 90),))))
    paths = write_curve_report([earlier, rerun, went_on], tmp_path / "out", "report three")
    record = json.loads(paths[1].read_text())
    assert [(run["label"], run["snapshots"]) for run in record["runs"]] == [
        ("batch 128, NVIDIA H200", ["gt/frac_1_16"]), ("batch 32, CPU", ["add/frac_1_64"]),
        ("batch 128, NVIDIA H200", ["add/frac_1_16", "add/frac_1_2"]), ("batch 128, NVIDIA H200", ["add/frac_1"])]
    assert [(p["run"], p["samples"], p["cells"]["add_5"]["correct"]) for p in record["points"]["add"]] == [
        ("batch 128, NVIDIA H200", 29_184, 0), ("batch 128, NVIDIA H200", 233_152, 60),
        ("batch 128, NVIDIA H200", 466_304, 90), ("batch 32, CPU", 7_296, 0)]
    assert [p["cells"]["gt_5"]["correct"] for p in record["points"]["gt"]] == [95]  # the operator it did not hold stays
    markdown = paths[0].read_text()
    assert "**batch 128, NVIDIA H200 (Greater_than 1/16).**" in markdown
    assert "**batch 128, NVIDIA H200 (Addition 1/16 to 1/2).**" in markdown
    assert "**batch 128, NVIDIA H200 (Addition 1).**" in markdown
    again = json.loads(write_curve_report([paths[1]], tmp_path / "again", "report four")[1].read_text())
    assert again["runs"] == record["runs"] and again["points"] == record["points"]
