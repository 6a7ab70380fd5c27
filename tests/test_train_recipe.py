"""`caef-bench train` end to end on a micro tiny base: layout, manifests, frozen base, resume."""

import json
import os
import signal
from dataclasses import replace

import pytest
import torch

from caef_bench.evaluate.onestep import one_step_check
from caef_bench.models.tiny import TinyShape
from caef_bench.train.loop import RunOptions, RunPlan
from caef_bench.train.recipe import TrainRequest, run_training

MICRO = TinyShape(hidden=32, layers=2, heads=2, ffn=64, max_positions=8192)
QUIET = RunOptions(progress=False)


def _request(out, **choices):
    adapters = {"executors": ("add", "gt"), "aligners": ("add",), "direct": ("eq",), **choices}
    return TrainRequest(preset="tiny", out=out, overrides={"base_steps": 6, "stage1_steps": 2, "stage2_steps": 3,
                                                           "max_len": 6},
                        one_step_check=one_step_check(1, 0), progress=False, tiny_shape=MICRO, **adapters)


def test_tiny_recipe_writes_the_official_layout_with_manifests(tmp_path):
    summary = run_training(_request(tmp_path))
    assert set(summary["adapters"]) == {"executor_add", "executor_gt", "aligner_add", "direct_eq"}
    for folder in ("executors/add", "executors/gt", "aligners/add", "direct/eq"):
        assert (tmp_path / folder / "adapter_model.safetensors").exists()
        manifest = json.loads((tmp_path / folder / "manifest.json").read_text())
        assert {"command", "seed", "data", "stages", "wall_time_s", "device", "one_step_accuracy"} <= set(manifest)
    executor = json.loads((tmp_path / "executors/add/manifest.json").read_text())
    assert set(executor["stages"]) == {"stage1", "stage2"}
    # the one-step check measures the cells within the lengths it trained on (max_len 6: the 5-digit ones)
    assert set(executor["one_step_accuracy"]) == {"add_5", "sub9_5"}
    assert (tmp_path / "executors/add/stage2_loss.png").exists()
    base = json.loads((tmp_path / "base/manifest.json").read_text())
    assert base["steps"] == 6 and "mixture" in base["what"]
    # What the runs trained in is on record: a micro model on a CPU keeps whole fp32 batches.
    for manifest in (base, executor["stages"]["stage2"]):
        assert manifest["micro_batch_tokens"] == 0 and manifest["precision"] == "fp32"
    assert json.loads((tmp_path / "base/caef_tier.json").read_text())["position_scheme"] == "coupled-hints"


def test_the_cpu_splits_batches_for_models_as_wide_as_the_tiny_tier_only():
    from types import SimpleNamespace

    request = _request("unused", device="cpu")
    tiny_tier = SimpleNamespace(config=SimpleNamespace(hidden_size=256))
    micro = SimpleNamespace(config=SimpleNamespace(hidden_size=MICRO.hidden))
    assert request.micro_tokens(tiny_tier) == 4096 and request.micro_tokens(micro) == 0
    assert replace(request, device="cuda").micro_tokens(tiny_tier) == 0
    assert replace(request, micro_batch_tokens=1000).micro_tokens(micro) == 1000


def test_adapters_leave_the_base_untouched_and_finished_ones_are_skipped(tmp_path):
    from transformers import AutoModelForCausalLM

    run_training(_request(tmp_path, executors=("add",), aligners=(), direct=()))
    base_before = AutoModelForCausalLM.from_pretrained(tmp_path / "base").state_dict()
    manifest_before = (tmp_path / "executors/add/manifest.json").read_text()
    summary = run_training(_request(tmp_path, executors=("add", "lt"), aligners=(), direct=()))
    assert (tmp_path / "executors/add/manifest.json").read_text() == manifest_before  # not retrained
    assert (tmp_path / "executors/lt/manifest.json").exists() and "executor_lt" in summary["adapters"]
    base_after = AutoModelForCausalLM.from_pretrained(tmp_path / "base").state_dict()
    assert all(torch.equal(base_before[k], base_after[k]) for k in base_before)


def test_a_run_cut_short_by_its_time_budget_is_continued_by_the_same_command(tmp_path):
    first = run_training(_request(tmp_path, executors=("add",), aligners=(), direct=(), time_budget_s=0.0))
    base = json.loads((tmp_path / "base/manifest.json").read_text())
    assert base["complete"] is False and base["steps"] == 0
    # No adapter trains on a base that is still to change (it would be skipped later as finished).
    assert first["adapters"] == {} and "base" in first["stopped"]
    assert not (tmp_path / "executors").exists()
    run_training(_request(tmp_path, executors=("add",), aligners=(), direct=()))
    base = json.loads((tmp_path / "base/manifest.json").read_text())
    adapter = json.loads((tmp_path / "executors/add/manifest.json").read_text())
    assert base["complete"] is True and base["steps"] == 6
    assert adapter["stages"]["stage2"]["complete"] is True and adapter["stages"]["stage2"]["steps"] == 3
    # The invocation that trained nothing leaves no record; the one that did, its steps and device.
    assert [run["steps"] for run in base["invocations"]] == [[0, 6]]
    assert base["invocations"][0]["device"] == base["device"] and "threads" in base["device"]
    assert [run["steps"] for run in adapter["stages"]["stage2"]["invocations"]] == [[0, 3]]


def test_stop_after_ends_the_command_between_adapters_and_the_same_command_goes_on(tmp_path):
    run_training(_request(tmp_path / "first", executors=(), aligners=(), direct=()))  # a base to train on
    request = _request(tmp_path / "adapters", executors=("add", "gt"), aligners=(), direct=(),
                       base=str(tmp_path / "first" / "base"))
    stopped = run_training(replace(request, stop_after_s=0.0))
    assert stopped["adapters"] == {} and "--stop-after" in stopped["stopped"]
    finished = run_training(request)
    assert finished["stopped"] is None and set(finished["adapters"]) == {"executor_add", "executor_gt"}


def _micro_run():
    from caef_bench.models.tiny import build_tiny_base

    model = build_tiny_base(MICRO, seed=0)
    batch = {"input_ids": torch.ones(2, 4, dtype=torch.long), "attention_mask": torch.ones(2, 4, dtype=torch.long)}
    batch["labels"] = batch["input_ids"]
    return model, batch


def _signal_at(step_to_signal, batch, *signals):
    def make_batch(step):
        if step == step_to_signal:
            for number in signals:
                os.kill(os.getpid(), number)
        return batch
    return make_batch


def _stopped_at_step_2(run_dir, steps):
    """A run of `steps` micro steps that SIGTERM stopped after its second step, and its model and batch."""
    from caef_bench.train.loop import TrainingInterrupted, train

    model, batch = _micro_run()
    with pytest.raises(TrainingInterrupted):
        train(model, _signal_at(1, batch, signal.SIGTERM), run_dir, RunPlan(steps=steps, lr=1e-3), QUIET)
    return model, batch


def test_a_time_budget_counts_this_invocation_so_the_same_budget_goes_on(tmp_path):
    from caef_bench.train.loop import train

    model, batch = _stopped_at_step_2(tmp_path, steps=4)
    state = tmp_path / "checkpoint" / "state.json"
    state.write_text(json.dumps({**json.loads(state.read_text()), "seconds": 10_000.0}))  # a long earlier run
    result = train(model, lambda step: batch, tmp_path, RunPlan(steps=4, lr=1e-3), replace(QUIET, time_budget_s=600))
    assert result.steps == 4 and not result.stopped_early and result.seconds >= 10_000


def test_each_invocation_of_a_resumed_run_keeps_its_steps_seconds_and_device(tmp_path):
    from caef_bench.train.loop import train

    model, batch = _stopped_at_step_2(tmp_path / "a", steps=5)
    result = train(model, lambda step: batch, tmp_path / "a", RunPlan(steps=5, lr=1e-3), QUIET)
    assert [run["steps"] for run in result.invocations] == [[0, 2], [2, 5]]
    assert all(run["device"].startswith("cpu (") and run["seconds"] >= 0 for run in result.invocations)
    # A checkpoint written before invocations were recorded: its steps stay, under an unknown device.
    model, batch = _stopped_at_step_2(tmp_path / "b", steps=5)
    state = tmp_path / "b" / "checkpoint" / "state.json"
    old = {k: v for k, v in json.loads(state.read_text()).items() if k != "invocations"}
    state.write_text(json.dumps(old))
    result = train(model, lambda step: batch, tmp_path / "b", RunPlan(steps=5, lr=1e-3), QUIET)
    assert [(run["steps"], run["device"] is None) for run in result.invocations] == [([0, 2], True), ([2, 5], False)]


def test_a_stop_signal_ends_the_run_after_its_step_with_a_checkpoint_and_the_same_call_goes_on(tmp_path):
    from caef_bench.train.loop import TrainingInterrupted, train

    model, batch = _micro_run()
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(TrainingInterrupted) as stop:  # SIGTERM while step 2's batch is built
        train(model, _signal_at(2, batch, signal.SIGTERM), tmp_path / "run", RunPlan(steps=5, lr=1e-3), QUIET)
    assert (stop.value.signal_name, stop.value.step, stop.value.exit_code) == ("SIGTERM", 3, 143)
    assert signal.getsignal(signal.SIGTERM) is before
    # Step 2 finished and was saved, though checkpoints otherwise come every 200 steps.
    assert json.loads((tmp_path / "run/checkpoint/state.json").read_text())["step"] == 3
    result = train(model, lambda step: batch, tmp_path / "run", RunPlan(steps=5, lr=1e-3), QUIET)
    assert [run["steps"] for run in result.invocations] == [[0, 3], [3, 5]]
    reference, _ = _micro_run()
    train(reference, lambda step: batch, tmp_path / "reference", RunPlan(steps=5, lr=1e-3), QUIET)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), reference.parameters()))


def test_a_second_ctrl_c_interrupts_at_once_and_an_ignored_signal_stays_ignored(tmp_path):
    from caef_bench.train.loop import train

    model, batch = _micro_run()
    # A shell starts background jobs with SIGINT ignored (`cmd &`), which the run must respect:
    # give this part Python's own handler, as an interactive run has.
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            train(model, _signal_at(1, batch, signal.SIGINT, signal.SIGINT), tmp_path / "a",
                  RunPlan(steps=3, lr=1e-3), QUIET)
    finally:
        signal.signal(signal.SIGINT, inherited)
    assert not (tmp_path / "a/checkpoint").exists()
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup
    try:
        result = train(model, _signal_at(1, batch, signal.SIGHUP), tmp_path / "b", RunPlan(steps=3, lr=1e-3), QUIET)
        assert result.steps == 3 and signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)


def test_the_command_line_reports_a_stopped_run_and_exits_as_the_signal_would(monkeypatch, capsys):
    from caef_bench.cli import main
    from caef_bench.train import recipe
    from caef_bench.train.loop import TrainingInterrupted

    def interrupted(request):
        raise TrainingInterrupted("SIGTERM", 1875, 3678, "tiny base: all machines (phase 1 of 2)")

    monkeypatch.setattr(recipe, "run_training", interrupted)
    assert main(["train", "--preset", "tiny", "--out", "unused", "--quiet"]) == 143
    message = capsys.readouterr().err
    assert "SIGTERM stopped tiny base: all machines (phase 1 of 2) at step 1875 of 3678" in message
    assert "the same command goes on" in message


def test_a_killed_run_resumed_from_its_checkpoint_logs_each_step_once(tmp_path):
    from caef_bench.train.loop import train

    model, batch = _micro_run()

    def crash_at_step_3(step):
        if step == 3:
            raise RuntimeError("killed")
        return batch
    every_step = replace(QUIET, log_every=1, checkpoint_every=2)
    with pytest.raises(RuntimeError):  # steps 1-3 logged, the checkpoint holds step 2
        train(model, crash_at_step_3, tmp_path, RunPlan(steps=5, lr=1e-3), every_step)
    train(model, lambda step: batch, tmp_path, RunPlan(steps=5, lr=1e-3), every_step)
    logged = [json.loads(line)["step"] for line in (tmp_path / "loss.jsonl").read_text().splitlines()]
    assert logged == [1, 2, 3, 4, 5]


def test_a_run_killed_between_step_checkpoints_resumes_from_its_timed_one(tmp_path):
    from caef_bench.train.loop import train

    model, batch = _micro_run()

    def crash_at_step_3(step):
        if step == 3:
            raise RuntimeError("killed")  # as SIGKILL: no handler saves
        return batch
    timed = replace(QUIET, log_every=1, checkpoint_every=1000, checkpoint_seconds=0.0)
    with pytest.raises(RuntimeError):
        train(model, crash_at_step_3, tmp_path, RunPlan(steps=5, lr=1e-3), timed)
    assert json.loads((tmp_path / "checkpoint" / "state.json").read_text())["step"] == 3
    train(model, lambda step: batch, tmp_path, RunPlan(steps=5, lr=1e-3), timed)
    logged = [json.loads(line)["step"] for line in (tmp_path / "loss.jsonl").read_text().splitlines()]
    assert logged == [1, 2, 3, 4, 5]


def test_an_adapter_is_the_same_whether_trained_alone_or_after_others(tmp_path):
    from safetensors.torch import load_file

    run_training(_request(tmp_path / "first", executors=(), aligners=(), direct=()))  # a base to train on
    base = str(tmp_path / "first" / "base")
    run_training(_request(tmp_path / "together", executors=("add", "gt"), aligners=(), direct=(), base=base))
    run_training(_request(tmp_path / "alone", executors=("gt",), aligners=(), direct=(), base=base))
    together = load_file(tmp_path / "together/executors/gt/adapter_model.safetensors")
    alone = load_file(tmp_path / "alone/executors/gt/adapter_model.safetensors")
    assert set(together) == set(alone) and all(torch.equal(together[k], alone[k]) for k in together)


def test_a_checkpoint_is_continued_only_by_the_run_that_started_it(tmp_path):
    run_training(_request(tmp_path, executors=("add",), aligners=(), direct=(), time_budget_s=0.0))
    # The base's mixture follows the adapters asked for: another set would be other data.
    with pytest.raises(ValueError, match=r"another run \(data \"machines:\[\(.executor., .add.\)\]"):
        run_training(_request(tmp_path, executors=("gt",), aligners=(), direct=()))
    with pytest.raises(ValueError, match=r"another run \(steps 6 -> 7\)"):
        run_training(replace(_request(tmp_path, executors=("add",), aligners=(), direct=()),
                             overrides={"base_steps": 7, "stage1_steps": 2, "stage2_steps": 3, "max_len": 6}))
    run_training(_request(tmp_path, executors=("add",), aligners=(), direct=()))  # the same command goes on
    assert json.loads((tmp_path / "base/manifest.json").read_text())["complete"] is True


def test_freed_memory_goes_back_to_the_system_at_every_checkpoint_and_logged_step(tmp_path, monkeypatch):
    import platform

    from caef_bench.train import loop

    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        assert loop.return_freed_memory() is True
    calls = []
    monkeypatch.setattr(loop, "return_freed_memory", lambda: calls.append(1) or True)
    model, batch = _micro_run()
    loop.train(model, lambda step: batch, tmp_path, RunPlan(steps=6, lr=1e-3),
               replace(QUIET, checkpoint_every=2, log_every=3))
    assert len(calls) == 3 + 2  # checkpoints after steps 2, 4 and 6; loss lines after steps 3 and 6


def test_the_train_command_measures_each_adapter_with_its_eval_per_cell_and_seed(monkeypatch):
    from caef_bench.cli import main
    from caef_bench.evaluate import onestep
    from caef_bench.train import recipe

    requests, measured = [], []
    monkeypatch.setattr(recipe, "run_training", lambda request: requests.append(request) or
                        {"adapters": {}, "seconds": 0.0, "stopped": None})
    monkeypatch.setattr(onestep, "one_step_accuracy", lambda *call, **options: measured.append((call, options)) or {})
    assert main(["train", "--out", "unused", "--eval-per-cell", "3", "--seed", "2", "--quiet"]) == 0
    requests[0].one_step_check("model", "codec", "executor", "add")
    requests[0].one_step_check("model", "codec", "executor", "add", max_len=10)  # (the preset's operand lengths)
    assert measured == [(("model", "codec", "executor", "add", 3, 2), {"max_len": None}),
                        (("model", "codec", "executor", "add", 3, 2), {"max_len": 10})]


def test_the_train_command_with_eval_per_cell_0_checks_nothing_and_says_so(monkeypatch, capsys):
    from caef_bench.cli import main
    from caef_bench.train import recipe

    requests = []
    adapters = {"executor_sub": {"one_step_accuracy": None}}
    monkeypatch.setattr(recipe, "run_training", lambda request: requests.append(request) or
                        {"adapters": adapters, "seconds": 0.0, "stopped": None})
    assert main(["train", "--out", "unused", "--eval-per-cell", "0", "--quiet"]) == 0
    assert requests[0].one_step_check is None  # not "0 of 0 cases", which printed as 0.0% per cell
    printed = capsys.readouterr().out
    assert "executor_sub" in printed and "one-step not checked" in printed and "0.0%" not in printed


def test_training_imports_nothing_from_the_layers_above_it():
    import ast
    from pathlib import Path

    import caef_bench.train

    above = ("caef_bench.evaluate", "caef_bench.report", "caef_bench.cli", "caef_bench.runtime")
    for path in Path(caef_bench.train.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                module = node.module or ""
                if node.level:  # relative: from . or from .. inside caef_bench.train
                    module = ("caef_bench.train." if node.level == 1 else "caef_bench.") + module
                assert not module.startswith(above), f"{path.name} imports {module}"
            elif isinstance(node, ast.Import):
                assert not any(alias.name.startswith(above) for alias in node.names), path.name


def test_a_checkpoint_records_its_plan_with_the_keys_earlier_checkpoints_have(tmp_path):
    # Checkpoints already on disk hold these keys: another name or a missing key would refuse to resume them.
    from caef_bench.train.loop import train

    model, batch = _micro_run()
    plan = RunPlan(steps=2, lr=1e-3, warmup=1, decay="cosine", data={"data": "machines", "lora": [16, ("q", "v")]})
    train(model, lambda step: batch, tmp_path, plan, QUIET)
    saved = json.loads((tmp_path / "checkpoint" / "state.json").read_text())["run"]
    assert saved == {"steps": 2, "lr": 1e-3, "warmup": 1, "decay": "cosine", "min_lr_ratio": 0.05,
                     "weight_decay": 0.0, "clip": 1.0, "data": "machines", "lora": [16, ["q", "v"]]}
    assert saved == plan.identity()
