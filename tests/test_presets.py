"""The tiny preset as one from-scratch run of what the shipped checkpoints were trained on."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from caef_bench.models.tiny import TinyShape
from caef_bench.train.mix import SEQUENTIAL, from_sequential
from caef_bench.train.presets import ALIGNER_MIN_SAMPLES, PRESETS, SHIPPED_ROUNDS
from caef_bench.train.recipe import TrainRequest, run_training

SHIPPED = Path(__file__).resolve().parents[1] / "checkpoints" / "tiny"
TINY = PRESETS["tiny"]


def _rounds(manifest: dict) -> list[dict]:
    """The manifest and those it was initialised from, oldest first."""
    chain = []
    while isinstance(manifest, dict):
        chain.append(manifest)
        manifest = manifest.get("initialised_from")
    return chain[::-1]


def _shipped(kind_folder: str):
    for folder in sorted((SHIPPED / kind_folder).iterdir()):
        kind = {"executors": "executor", "aligners": "aligner", "direct": "direct"}[kind_folder]
        yield kind, folder.name, _rounds(json.loads((folder / "manifest.json").read_text()))


@pytest.mark.parametrize("kind_folder", ["executors", "aligners"])
def test_each_adapters_plan_is_its_shipped_rounds_summed(kind_folder):
    """Aligners' budgets are raised to ALIGNER_MIN_SAMPLES where their rounds had fewer, and every
    adapter trains under the preset's ids."""
    for kind, op, rounds in _shipped(kind_folder):
        plan = TINY.for_adapter(kind, op)
        runs = [(stage["steps"] * stage["batch"], r["preset"]["lr"]) for r in rounds for stage in r["stages"].values()]
        samples = sum(n for n, _ in runs)
        assert SHIPPED_ROUNDS[f"{kind}_{op}"]["samples"] == samples, (kind, op)
        budget = max(samples, ALIGNER_MIN_SAMPLES) if kind == "aligner" else samples
        assert TINY.adapter_plans[f"{kind}_{op}"]["samples"] == budget, (kind, op)
        assert plan.stage2_steps * plan.stage2_batch >= budget > (plan.stage2_steps - 1) * plan.stage2_batch
        assert plan.lr == max(lr for _, lr in runs), (kind, op)
        last = rounds[-1]  # its shares, as the chances of their day: the same draws as the plan's mix
        assert plan.mix == from_sequential(kind, op, {s: last["preset"][s] for s in SEQUENTIAL if last["preset"].get(s)})
        if kind == "aligner":  # executors' ids are the same under every coupled scheme
            shipped_scheme = last.get("position_scheme") or last["preset"]["position_scheme"]
            assert (SHIPPED_ROUNDS[f"{kind}_{op}"].get("position_scheme") or TINY.position_scheme) == shipped_scheme
        assert plan.position_scheme == TINY.position_scheme  # the ids the preset's base pre-trains under


def test_the_base_phases_are_the_shipped_bases_rounds():
    rounds = _rounds(json.loads((SHIPPED / "base" / "manifest.json").read_text()))
    runs = TINY.base_runs(set())
    assert [(steps, lr, curriculum) for steps, lr, curriculum in runs] == [
        (r["steps"], r["preset"]["base_lr"], r["preset"]["curriculum_steps"]) for r in rounds]
    assert all(r["preset"]["base_batch"] == TINY.base_batch for r in rounds)


def test_budgets_are_samples_so_a_smaller_batch_runs_more_steps():
    at_16 = TINY.for_adapter("executor", "mul", {"stage2_batch": 16})
    assert at_16.stage2_steps == 83_840 // 16 and at_16.lr == 2e-4 and "equal" not in at_16.mix
    assert TINY.for_adapter("executor", "mul", {"stage2_steps": 7}).stage2_steps == 7  # explicit steps win
    assert TINY.for_adapter("aligner", "add", {"lr": 1e-3}).lr == 1e-3
    assert [steps for steps, _, _ in TINY.base_runs(set())] == [3_678, 2_800]
    assert [steps for steps, _, _ in replace(TINY, base_batch=16).base_runs(set())] == [3_678 * 8, 2_800 * 8]
    assert TINY.base_runs({"base_steps"}) == [(TINY.base_steps, TINY.base_lr, TINY.curriculum_steps)]


# Each LoRA-direct adapter's budget: its operator's executor and aligner samples together (since issue
# 36 every aligner's rounds exceed ALIGNER_MIN_SAMPLES, 55,040). The shipped direct adapters were trained
# on the budgets before the structured-operand rebuild; Table 1 states each one's share of these.
DIRECT_BUDGETS = {
    "add": 513_600 + 173_120, "sub": 396_800 + 270_240, "mul": 83_840 + 167_360, "div": 83_840 + 103_360,
    "gt": 309_440 + 257_920, "lt": 394_560 + 257_920, "eq": 141_440 + 181_120,
}


def test_the_direct_baseline_gets_its_caef_counterparts_budget():
    assert ALIGNER_MIN_SAMPLES == 55_040
    for op, samples in DIRECT_BUDGETS.items():
        plan = TINY.for_adapter("direct", op)
        assert TINY.adapter_plans[f"direct_{op}"]["samples"] == samples, op
        assert (plan.stage2_batch, plan.lr, plan.mix) == (128, 1e-3, {}), op  # lr: the capacity check's
        assert plan.stage2_steps == -(-samples // 128), op  # add: 686,720 samples are 5,365 steps of 128
    assert TINY.for_adapter("direct", "add").stage2_steps == 5_365
    assert TINY.for_adapter("direct", "div", {"stage2_batch": 64}).stage2_steps == 2_925  # 187,200 / 64


def test_a_phased_base_trains_each_phase_and_resumes_between_them(tmp_path):
    from caef_bench.train.presets import BasePhase

    micro = TinyShape(hidden=32, layers=2, heads=2, ffn=64, max_positions=8192)
    phases = (BasePhase(samples=8, lr=1e-3, curriculum_samples=4), BasePhase(samples=12, lr=5e-4))
    PRESETS["micro-phases"] = replace(TINY, name="micro-phases", base_phases=phases, base_batch=4, max_len=6,
                                      adapter_plans={"executor_add": {"samples": 8, "lr": 1e-3}}, stage2_batch=4)
    try:
        def request(**extra):
            return TrainRequest(preset="micro-phases", out=tmp_path, executors=("add",), aligners=(),
                                progress=False, tiny_shape=micro, **extra)

        first = run_training(request(time_budget_s=0.0))  # nothing trained: the command is run again
        assert first["adapters"] == {} and "base" in first["stopped"]
        run_training(request())
        base = json.loads((tmp_path / "base" / "manifest.json").read_text())
        assert base["complete"] and base["steps"] == 2 + 3
        assert [p["steps"] for p in base["phases"]] == [2, 3]
        assert len(base["data"]) == 2 and (tmp_path / "base" / "phase2_loss.jsonl").exists()
        adapter = json.loads((tmp_path / "executors" / "add" / "manifest.json").read_text())
        assert adapter["stages"]["stage2"]["steps"] == 2 and adapter["preset"]["lr"] == 1e-3
    finally:
        del PRESETS["micro-phases"]


def test_the_command_line_overrides_preset_fields_and_batch_sets_the_base_and_stage2_batches():
    from dataclasses import fields

    from caef_bench.cli import build_parser
    from caef_bench.train.presets import OPTIONS, OVERRIDABLE, Preset, preset_overrides, run_settings

    args = vars(build_parser().parse_args(["train", "--batch", "16", "--share", "nines=0.1", "--lr", "3e-4",
                                           "--set", "base_steps=7,max_len=20", "--set", "anonymous_cells=true"]))
    assert preset_overrides(args) == {"base_batch": 16, "stage2_batch": 16, "mix": {"nines": 0.1}, "lr": 3e-4,
                                      "base_steps": 7, "max_len": 20}
    assert run_settings(args)["anonymous_cells"] is True
    assert preset_overrides(vars(build_parser().parse_args(["train"]))) == {}
    for wrong in ("lr=0.1", "nines_share=0.1", "max_len"):  # an option of its own, no such field, no value
        with pytest.raises(ValueError, match="expected NAME=VALUE"):
            preset_overrides(vars(build_parser().parse_args(["train", "--set", wrong])))
    assert set(OPTIONS) <= set(args)  # each has its option
    assert set(OVERRIDABLE) - {"batch"} <= {f.name for f in fields(Preset)}


def test_a_preset_is_a_file_and_a_file_of_ones_own_is_a_preset(tmp_path):
    from caef_bench.train.presets import FOLDER, preset, read_preset

    assert sorted(PRESETS) == sorted(path.stem for path in FOLDER.glob("*.yaml")) == ["llama", "smollm2", "tiny"]
    own = tmp_path / "mine.yaml"
    own.write_text((FOLDER / "smollm2.yaml").read_text().replace("name: smollm2", "name: mine").replace("lr: 0.003", "lr: 0.002"))
    assert preset(str(own)) == read_preset(own) and read_preset(own).lr == 0.002
    assert read_preset(own).adapter_plans == PRESETS["smollm2"].adapter_plans
    (tmp_path / "bad.yaml").write_text("name: bad\nlora_rank: 8\n")
    with pytest.raises(ValueError, match="unknown preset field"):
        read_preset(tmp_path / "bad.yaml")
    with pytest.raises(ValueError, match="unknown preset"):
        preset("no-such-preset")
