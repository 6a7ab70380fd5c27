"""The LoRA-direct learning curve: one training run per operator with snapshots at fractions of its
budget, their in-process evaluation, and the report (micro models)."""

import json
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import pytest
import torch

from caef_bench.models.tiny import TinyShape, build_tiny_base
from caef_bench.train.curve import label, parse_fractions, snapshot_steps, train_curve
from caef_bench.train.loop import RunOptions, RunPlan, train
from caef_bench.train.recipe import TrainRequest
from micro_model import micro_tiny_base  # noqa: F401  (pytest fixture)

MICRO = TinyShape(hidden=32, layers=2, heads=2, ffn=64, max_positions=8192)
QUIET = RunOptions(progress=False)


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
    assert main(["train-curve", "--fractions", "2"]) == 2
    assert "not in (0, 1]" in capsys.readouterr().err
