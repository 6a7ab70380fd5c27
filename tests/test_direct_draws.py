"""The LoRA-direct baseline's training draws follow the test protocol, and a full
fine-tune of the base trains, snapshots and loads like a LoRA adapter (the capacity check)."""

import json
from collections import Counter
from fractions import Fraction

import pytest
import torch

from caef_bench.data.direct import LENGTH_RULE, DirectDraw, direct_prompt
from caef_bench.data.testsets import TABLE1_LENGTHS, render_expr, solve
from caef_bench.train.sources import DirectSource
from micro_model import micro_tiny_base  # noqa: F401  (pytest fixture)


def _operands(samples):
    return [(sample["meta"]["a"], sample["meta"]["b"]) for sample in samples]


def test_length_driven_operators_draw_two_operands_of_one_length_weighted_as_the_rule_says():
    draws = DirectSource("add", "protocol", seed=0).batch(0, 20_000)
    assert all(len(a) == len(b) for a, b in _operands(draws))
    lengths = Counter(len(a) for a, _ in _operands(draws))
    rule = DirectDraw("protocol")
    assert sum(rule.share_of_length(n) for n in range(1, 101)) == pytest.approx(1.0)
    for n in (1, 2, 5, 10, 37, 50, 100):
        expected = rule.share_of_length(n)
        assert lengths[n] / len(draws) == pytest.approx(expected, abs=4 * (expected / len(draws)) ** 0.5), n
    # half the draws at a Table 1 length, the other half spread over 1-100 with weight 1/n
    at_test_lengths = sum(rule.share_of_length(n) for n in TABLE1_LENGTHS)
    assert 0.5 < at_test_lengths < 0.55 and "1/n" in LENGTH_RULE
    assert max(lengths) == 100 and min(lengths) == 1


def test_every_operator_draws_its_test_cells_kind_of_problem():
    for op in ("sub", "gt", "lt", "eq", "mul", "div"):
        samples = DirectSource(op, "protocol", seed=1).batch(3, 2000)
        for sample in samples:
            a, b = int(sample["meta"]["a"]), int(sample["meta"]["b"])
            assert sample["prompt"] == direct_prompt(render_expr(op, a, b), op)
            assert sample["completion"] == solve(op, a, b)
            if op == "sub":
                assert a >= b
            if op == "mul":
                assert len(str(a)) <= 10 and 1 <= b <= 15
            if op == "div":
                assert len(str(b)) <= 10 and 1 <= a // b <= 15
        answers = Counter(sample["completion"] for sample in samples)
        if op in ("gt", "lt", "eq"):  # the test cells' balance: about half True (gt, lt: random pairs)
            assert 0.4 < answers["True"] / len(samples) < 0.6, (op, answers)


def test_draws_are_a_function_of_seed_and_step_and_one_length_can_be_asked():
    assert DirectSource("add", "protocol", 0).batch(7, 16) == DirectSource("add", "protocol", 0).batch(7, 16)
    assert DirectSource("add", "protocol", 0).batch(7, 16) != DirectSource("add", "protocol", 1).batch(7, 16)
    five = DirectSource("add", "protocol:5", 0).batch(0, 200)
    assert {(len(a), len(b)) for a, b in _operands(five)} == {(5, 5)}
    short = DirectSource("add", "protocol", 0, max_len=10)
    assert max(len(a) for a, _ in _operands(short.batch(0, 400))) == 10 and short.fingerprint.endswith(":max_len=10")
    for bad in ("protocol:0", "protocol:101", "uniform", "protocol:x"):
        with pytest.raises(ValueError, match="unknown direct draw"):
            DirectDraw(bad)


def test_no_test_set_problem_is_ever_drawn():
    source = DirectSource("add", "protocol:5", 0)
    held_out = set(source.excluded)
    assert len(held_out) > 40_000 and "12976+60293=" in held_out  # add_5's first problem
    assert not {render_expr("add", int(a), int(b)) for a, b in _operands(source.batch(0, 5000))} & held_out
    # With all but one 1-digit sum held out, that one is all a draw can give.
    every = {render_expr("add", a, b) for a in range(1, 10) for b in range(1, 10)}
    one_digit = DirectSource("add", "protocol:1", 0)
    one_digit.excluded = frozenset(every - {"4+7="})
    assert {s["completion"] for s in one_digit.batch(0, 50)} == {"11"}


def test_the_recipe_draws_direct_adapters_by_the_protocol_unless_asked_for_the_old_classes(tmp_path):
    from caef_bench.train.recipe import TrainRequest, _source
    from caef_bench.train.sources import MachineSource

    request = TrainRequest(preset="tiny", out=tmp_path, direct=("add",))
    assert isinstance(_source(request, "direct", "add", 2), DirectSource)
    assert _source(request, "direct", "add", 2).fingerprint == "direct:add:protocol:held_out_test_sets"
    old = TrainRequest(preset="tiny", out=tmp_path, direct=("add",), overrides={"direct_draw": "classes"})
    assert isinstance(_source(old, "direct", "add", 2), MachineSource)
    assert isinstance(_source(request, "executor", "add", 2), MachineSource)


def _full_request(out, base, **choices):
    from caef_bench.train.recipe import TrainRequest

    overrides = {"stage2_steps": 4, "stage2_batch": 4, "adapter": "full", "direct_draw": "protocol:2", "lr": 1e-3}
    return TrainRequest(preset="tiny", out=out, base=str(base), executors=(), aligners=(), direct=("add",),
                        progress=False, command="caef-bench train-curve (test)", overrides=overrides, **choices)


def test_a_full_fine_tune_trains_every_weight_snapshots_them_whole_and_leaves_the_base_as_it_was(
        tmp_path, micro_tiny_base):
    from safetensors.torch import load_file

    from caef_bench.train.curve import parse_fractions, train_curve
    from caef_bench.train.recipe import _load_fp32

    summary = train_curve(_full_request(tmp_path / "curve", micro_tiny_base), parse_fractions("1/2,1"))
    assert set(summary["snapshots"]["add"]) == {"frac_1_2", "frac_1"}
    half, whole = (tmp_path / "curve" / name / "direct/add" for name in ("frac_1_2", "frac_1"))
    assert not (whole / "adapter_config.json").exists()
    manifest = json.loads((whole / "manifest.json").read_text())
    assert manifest["preset"]["adapter"] == "full" and manifest["data"] == ["direct:add:protocol:2:held_out_test_sets"]
    base = _load_fp32(micro_tiny_base, "cpu").state_dict()
    trained = load_file(str(whole / "model.safetensors"))
    assert set(trained) | {"lm_head.weight"} == set(base)
    changed = [name for name, tensor in trained.items() if not torch.equal(tensor, base[name].to(tensor.dtype))]
    assert len(changed) > len(trained) // 2  # not a few layers: the whole model moved
    assert not torch.equal(load_file(str(half / "model.safetensors"))["model.norm.weight"], trained["model.norm.weight"])


def test_a_full_fine_tune_is_evaluated_like_a_lora_adapter(tmp_path, micro_tiny_base):
    from caef_bench.evaluate.direct import attach_direct, direct_fingerprints, full_finetunes
    from caef_bench.evaluate.direct_curve import evaluate_curve
    from caef_bench.models.loading import get_tier, load_base
    from caef_bench.train.curve import parse_fractions, train_curve

    curve = tmp_path / "curve"
    train_curve(_full_request(curve, micro_tiny_base), parse_fractions("1"))
    tier = get_tier("tiny", base=micro_tiny_base, adapters=curve / "frac_1")
    assert set(full_finetunes(tier.adapters)) == {"add"}
    fingerprints = direct_fingerprints(tier)
    assert set(fingerprints) == {"direct_add"}
    model, tokenizer = load_base(tier, "cpu")
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    direct = attach_direct(model, tokenizer, tier.adapters, tier.position_scheme, ["add"])
    assert direct.codecs["add"].scheme == "standard" and set(direct.full) == {"add"}
    replies = direct.replies("add", [direct_prompt("12+34=", "add")], 4)
    assert isinstance(replies[0], str)
    assert all(torch.equal(tensor, before[name]) for name, tensor in direct.detach().state_dict().items())
    record = evaluate_curve(curve, tmp_path / "eval.json", per_cell=2, cells=["add_5"], progress=lambda line: None)
    point = record["points"]["add/frac_1"]
    assert point["adapter"] == fingerprints["direct_add"] and point["cells"]["add_5"]["n"] == 2
    assert Fraction(point["fraction"]) == 1


def test_the_capacity_report_sets_its_arms_side_by_side_from_their_evaluations(tmp_path, micro_tiny_base):
    from caef_bench.evaluate.direct_curve import evaluate_curve
    from caef_bench.report.direct_capacity import write_capacity_report
    from caef_bench.train.curve import parse_fractions, train_curve

    evaluations = []
    for name, adapter in (("lora", {"adapter": "lora"}), ("full", {})):
        request = _full_request(tmp_path / name, micro_tiny_base)
        request.overrides.update(adapter)
        train_curve(request, parse_fractions("1/2,1"))
        evaluate_curve(tmp_path / name, tmp_path / f"{name}.json", per_cell=3, cells=["add_5"],
                       progress=lambda line: None)
        evaluations.append(tmp_path / f"{name}.json")
    paths = write_capacity_report(evaluations, tmp_path / "out", "python -m caef_bench.report.direct_capacity (test)")
    assert [p.name for p in paths] == ["direct_capacity.md", "direct_capacity.json", "direct_capacity.png"]
    record = json.loads(paths[1].read_text())
    assert [arm["setting"] for arm in record["arms"]] == ["LoRA r=16, alpha=32, lr 0.001, batch 4",
                                                          "full fine-tuning, lr 0.001, batch 4"]
    assert [p["samples"] for p in record["arms"][1]["points"]] == [8, 16] and record["digits"] == 2
    markdown = paths[0].read_text()
    first = markdown.split("\n\n")[1]  # the finding leads, before any table
    assert first.startswith("Direct answering of add_5") and "LoRA r=16" in first and "full fine-tuning" in first
    assert "| 8 " not in first and "### How this was made" in markdown and "(test)" in markdown
    # every problem's reply beside the report, where its numbers recount; a changed verdict is found
    from caef_bench.evaluate.table1 import read_problem_lines
    from test_direct_records import capacity_disagreements

    assert record["records"] == "records/direct_capacity.jsonl.gz" and "problems" not in record["arms"][0]["points"][0]
    lines = read_problem_lines(tmp_path / "out" / record["records"])
    assert len(lines) == 2 * 2 * 3 and capacity_disagreements(record, lines) == []
    lines[0]["correct"] = not lines[0]["correct"]
    assert len(capacity_disagreements(record, lines)) == 2  # its count and its verdict
    wide = tmp_path / "wide"
    request = _full_request(wide, micro_tiny_base)
    request.overrides["direct_draw"] = "protocol"
    train_curve(request, parse_fractions("1"))
    evaluate_curve(wide, tmp_path / "wide.json", per_cell=2, cells=["add_5"], progress=lambda line: None)
    with pytest.raises(ValueError, match="fixed-length draw"):
        write_capacity_report([*evaluations, tmp_path / "wide.json"], tmp_path / "out", "cmd")


def test_table1_names_each_direct_adapters_draw_from_its_manifest(tmp_path):
    import json

    from caef_bench.evaluate.table1 import direct_draw

    for name, data in (("new", ["direct:add:protocol:held_out_test_sets"]), ("five", ["direct:add:protocol:5:held_out_test_sets"]),
                       ("old", ["machines:[('direct', 'add')]:100:2:0.25:0"]), ("none", [])):
        (tmp_path / name).mkdir()
        (tmp_path / name / "manifest.json").write_text(json.dumps({"data": data}))
    assert [direct_draw(tmp_path / n) for n in ("new", "five", "old", "none", "missing")] == [
        "protocol", "protocol:5", "classes", None, None]
