"""Training draws for the long route's adapters (docs/long-mul-div.md): executor_digit_mul, executor_long_mul,
executor_long_div, aligner_long_mul, aligner_long_div. A smoke test, no training: a handful of samples from
the data build's generators and from the training stream, each one the machines' own transition (or
conversion) that parses and renders back byte for byte, at the test cells' lengths and with the
structured operand classes among them; and `caef-bench train` takes the long adapters by name. Their plans
train under coupled-words (checked on the plans, and by two training steps of one on a micro model).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from caef_bench.data import testsets
from caef_bench.data.training import (BuildConfig, aligner_samples, classes, draw_operands, executor_samples,
                                      expression, problems_for)
from caef_bench.machines import next_text, parse, render, result, run
from caef_bench.models.codec import CaefCodec
from caef_bench.models.positions import position_ids
from caef_bench.train import mix as mixes
from caef_bench.train.presets import preset
from caef_bench.train.sources import MachineSource
from micro_model import micro_tiny_base  # noqa: F401  (pytest fixture)

LONG_ADAPTERS = [("executor", "digit_mul"), ("executor", "long_mul"), ("executor", "long_div"),
                 ("aligner", "long_mul"), ("aligner", "long_div")]


def _is_the_machines_own(kind: str, op: str, sample: dict) -> None:
    prompt, completion = sample["prompt"], sample["completion"]
    assert next_text(kind, op, prompt) == completion
    for text in (prompt, completion):
        if "\n" in text:  # a state and its command (aligner (I)'s expression and (O)'s answer are one line)
            assert render(parse(text)) == text


def test_the_classes_reach_the_test_cells_lengths():
    assert max(classes("long_mul", 100)) == (50, 50) and (20, 20) in classes("long_mul", 100)
    assert {(40, 20), (100, 10), (3, 20)} <= set(classes("long_div", 100))
    assert max(classes("long_div", 100)) == (100, 20)
    assert set(classes("digit_mul", 100)) == {(la, d) for la in range(1, 51) for d in range(1, 10)}
    assert max(classes("long_mul", 10)) == (10, 10) and max(classes("long_div", 10)) == (10, 10)  # a short tier's
    rng = testsets.named_rng(0, "test/long/draws")
    for _ in range(200):
        a, b = draw_operands("long_div", (1, 1), rng)
        assert b >= 1
    assert expression("long_mul", 946, 15) == "946*15=" and expression("long_div", 22, 5) == "22//5="
    assert expression("digit_mul", 946, 7) is None
    row = testsets.load_cell("mul_20x20")[0]  # the long test cells' problems are held out of training
    assert expression("long_mul", int(row["a"]), int(row["b"])) in testsets.test_expressions()


@pytest.mark.parametrize("op, cls", [("digit_mul", (50, 9)), ("digit_mul", (3, 1)), ("long_mul", (50, 50)),
                                     ("long_mul", (20, 3)), ("long_div", (100, 10)), ("long_div", (40, 20)),
                                     ("long_div", (5, 20))])
def test_the_data_builds_samples_are_the_machines_own(op, cls):
    config = BuildConfig(per_class=2, middle=2, ops=(op,))
    problems = problems_for(op, cls, config, "executor", set(testsets.test_expressions()))
    assert [(len(str(a)), len(str(b)) if op != "digit_mul" else b) for a, b in problems] == [cls] * 2
    samples = [sample for stage, sample in executor_samples(op, cls, problems, config)]
    assert len(samples) >= 4 and all(stage == 2 for stage, _ in executor_samples(op, cls, problems, config))
    for sample in samples:
        _is_the_machines_own("executor", op, sample)
    if op != "digit_mul":
        aligned = [sample for _, sample in aligner_samples(op, cls, problems)]
        assert aligned[0]["prompt"] == expression(op, *problems[0])
        assert aligned[1] == {"prompt": run(op, *problems[0]).text(-1),
                              "completion": expression(op, *problems[0]) + str(result(op, *problems[0])),
                              "meta": aligned[1]["meta"]}
        for sample in aligned:
            _is_the_machines_own("aligner", op, sample)


def test_the_training_stream_draws_the_long_adapters_samples():
    """The tiny preset's own mix (not the adapters' plans) with structured operands."""
    mix = {**preset("tiny").mix, "structured": 0.4}
    source = MachineSource(LONG_ADAPTERS, 100, seed=5, mix=mix, excluded=frozenset(testsets.test_expressions()))
    samples = source.batch(0, 60)
    codec = CaefCodec("coupled-hints")
    seen, structured = set(), set()
    for sample in samples:
        meta = sample["meta"]
        kind, op = meta["kind"], meta["op"]
        seen.add((kind, op))
        _is_the_machines_own(kind, op, sample)
        a, b = int(meta["a"]), int(meta["b"])
        if op == "long_mul":
            assert len(str(a)) <= 50 and len(str(b)) <= 50
        elif op == "long_div":
            assert len(str(a)) <= 100 and 1 <= b and len(str(b)) <= 20
        else:
            assert len(str(a)) <= 50 and 1 <= b <= 9
        structured.add(meta.get("structured"))
        ids = codec.prompt_ids(sample["prompt"]) + codec.completion_ids(sample["completion"])
        assert len(position_ids(ids, codec.scheme)) == len(ids)
    assert seen == set(LONG_ADAPTERS)
    assert len(structured - {None}) >= 3  # runs, round numbers, equal operands, ... among the draws
    assert source.batch(0, 60) == samples  # batch k is a function of (seed, k)


def test_the_long_calls_share_draws_add_and_reflection_from_the_long_composers():
    source = MachineSource([("executor", "add"), ("executor", "reflection")], 100, seed=2, mix={"long_calls": 1.0})
    samples = source.batch(0, 12)
    assert {s["meta"]["caller"] for s in samples} <= {"long_mul", "long_div"}
    assert all(s["meta"]["long_call"] for s in samples)
    for sample in samples:
        _is_the_machines_own("executor", sample["meta"]["op"], sample)
    assert mixes.SHARES["long_calls"].applies("executor", "add")
    assert not mixes.SHARES["long_calls"].applies("executor", "long_mul")
    assert mixes.SHARES["returns"].applies("executor", "long_div")  # the composers' steps after a call
    assert not mixes.SHARES["equal"].applies("executor", "digit_mul")  # its classes are (digits, the digit)


def test_the_train_command_takes_the_long_adapters(tmp_path, monkeypatch):
    """docs/long-mul-div.md's `caef-bench train ... --executors digit_mul,long_mul,long_div --aligners
    long_mul,long_div` gets as far as training (stubbed here): the names are known, each adapter's draws
    can be made with its mix, stage 1 is skipped."""
    from caef_bench.cli import main
    from caef_bench.train import recipe

    asked = {}

    def training(request):
        asked["request"] = request
        return {"seconds": 0.0, "adapters": {}, "stopped": None}

    monkeypatch.setattr(recipe, "run_training", training)
    out = tmp_path / "long"
    assert main(["train", "--preset", "tiny", "--base", "checkpoints/tiny/base",
                 "--set", "position_scheme=coupled-hints",
                 "--executors", "digit_mul,long_mul,long_div", "--aligners", "long_mul,long_div",
                 "--share", "structured=0.4", "--out", str(out)]) == 0
    request = asked["request"]
    assert request.overrides["position_scheme"] == "coupled-hints"
    assert request.recipe_for("executor", "long_mul").mix["structured"] == 0.4
    assert (request.executors, request.aligners) == (("digit_mul", "long_mul", "long_div"), ("long_mul", "long_div"))
    for kind, op in LONG_ADAPTERS:
        assert recipe._source(request, kind, op, 1) is None  # no explanation of these machines
        stream = recipe._source(request, kind, op, 2)
        _is_the_machines_own(kind, op, stream.batch(0, 1)[0])


# The tiny preset's plans for the long route's adapters (docs/long-mul-div.md, "Training plan"): steps of 128,
# each sized to ~35 minutes on one CPU thread at the ~4,000 tokens/s a tiny LoRA trains at there.
PLANNED_STEPS = {("executor", "digit_mul"): 390, ("executor", "long_mul"): 206, ("executor", "long_div"): 194,
                 ("aligner", "long_mul"): 413, ("aligner", "long_div"): 404}
TOKENS_PER_SECOND = 4_000


def test_the_tiny_preset_plans_each_long_adapter_within_40_minutes_on_one_thread():
    tiny = preset("tiny")
    codec = CaefCodec("coupled-hints")
    excluded = frozenset(testsets.test_expressions())
    for (kind, op), steps in PLANNED_STEPS.items():
        plan = tiny.for_adapter(kind, op)
        assert (plan.stage2_steps, plan.stage2_batch, plan.lr) == (steps, 128, 1e-3), (kind, op)
        assert plan.mix["structured"] >= 0.4 and (kind == "aligner" or op == "digit_mul" or plan.mix["returns"] == 0.3)
        # the budget in minutes, from the mean tokens of 128 of its own draws (the plan measured 512: within 10%)
        samples = MachineSource([(kind, op)], plan.max_len, seed=0, mix=plan.mix, excluded=excluded).batch(0, 128)
        mean = sum(len(codec.prompt_ids(s["prompt"])) + len(codec.completion_ids(s["completion"]))
                   for s in samples) / len(samples)
        minutes = steps * 128 * mean / TOKENS_PER_SECOND / 60
        assert 30 <= minutes <= 40, (kind, op, mean, minutes)
    # --batch 16 (a small machine) runs the same samples in eight times the steps
    assert tiny.for_adapter("executor", "long_mul", {"stage2_batch": 16}).stage2_steps == 1_648


def test_the_long_adapters_plan_coupled_words_and_the_others_keep_the_bases_ids():
    """tiny.yaml gives the five long-route plans position_scheme coupled-words (their names are spelt a
    character a token), at the base's or --set's field stride; every other plan keeps the base's ids."""
    from dataclasses import replace

    from caef_bench.train.recipe import TrainRequest, adapter_codec, planned_scheme

    tiny = preset("tiny")
    request = TrainRequest(preset="tiny", out=Path("unused"), progress=False)
    base = CaefCodec("coupled-expr")  # the shipped base's recorded ids
    for kind, op in LONG_ADAPTERS:
        assert tiny.for_adapter(kind, op).position_scheme == "coupled-words", (kind, op)
        assert planned_scheme(request, kind, op, base.scheme) == "coupled-words"
        assert adapter_codec(base, request, kind, op).scheme == "coupled-words"
    for kind, op in [("executor", "add"), ("executor", "mul"), ("aligner", "mul"), ("aligner", "add")]:
        assert tiny.for_adapter(kind, op).position_scheme == "coupled-hints"
        assert planned_scheme(request, kind, op, base.scheme) is None and adapter_codec(base, request, kind, op) is base
    # --set position_scheme gives the base's ids (round 1's command named coupled-hints): the plan keeps its
    # name, at that stride
    for given, trained in [("coupled-hints", "coupled-words"), ("coupled-hints/1024", "coupled-words/1024")]:
        overridden = replace(request, overrides={"position_scheme": given})
        assert adapter_codec(CaefCodec(given), overridden, "executor", "long_mul").scheme == trained
        assert adapter_codec(CaefCodec(given), overridden, "executor", "add").scheme == given


def test_a_long_adapter_trains_and_is_recorded_under_coupled_words(tmp_path, micro_tiny_base):
    """Two steps on the micro base: the long adapter's manifest (what loading runs it with) says coupled-words,
    the paper's executor trained beside it the base's ids."""
    import json

    from caef_bench.models.loading import adapter_schemes
    from caef_bench.train.recipe import TrainRequest, run_training

    request = TrainRequest(preset="tiny", out=tmp_path, base=str(micro_tiny_base), executors=("digit_mul", "add"),
                           aligners=(), overrides={"stage2_steps": 2, "stage2_batch": 2, "max_len": 4},
                           progress=False, command="caef-bench train (test)")
    run_training(request)
    long = json.loads((tmp_path / "executors/digit_mul/manifest.json").read_text())
    assert long["position_scheme"] == long["preset"]["position_scheme"] == "coupled-words"
    assert json.loads((tmp_path / "executors/add/manifest.json").read_text())["position_scheme"] == "coupled-hints"
    assert adapter_schemes(tmp_path)["executor_digit_mul"] == "coupled-words"
