"""Anonymous tape cells (models.anonymous_cells): layer 0's values of tape cells are content-free where the
gate is on, nothing else changes, decoding with a cache agrees with whole passes, and an adapter trained
with it is run with it (and only that adapter)."""

import json

import pytest
import torch

from caef_bench.machines import trace
from caef_bench.models.anonymous_cells import CELL_TOKEN_IDS, DIGIT_TOKEN_IDS, install
from caef_bench.models.codec import CaefCodec
from caef_bench.models.decoding import greedy_ids, verify_drafts
from caef_bench.models.tiny import TinyShape, build_tiny_base
from caef_bench.train.recipe import TrainRequest, run_training

MICRO = TinyShape(hidden=32, layers=2, heads=2, ffn=64, max_positions=8192)
CODEC = CaefCodec("coupled")


def _ids(a: int, b: int) -> torch.Tensor:
    source, target = trace("add", a, b)[1]
    return torch.tensor([CODEC.prompt_ids(source) + CODEC.completion_ids(target)])


def _layer0_values(model, ids: torch.Tensor) -> torch.Tensor:
    seen = []
    hook = model.model.layers[0].self_attn.v_proj.register_forward_hook(lambda m, a, out: seen.append(out))
    try:
        with torch.no_grad():
            logits = model(input_ids=ids).logits
    finally:
        hook.remove()
    return seen[-1][0], logits


def test_with_the_gate_on_every_tape_cell_gives_layer_0_the_same_value_and_other_tokens_keep_theirs():
    model = build_tiny_base(MICRO, seed=1).eval()
    ids = _ids(4567, 1289)
    plain_values, plain_logits = _layer0_values(model, ids)
    gate = install(model)
    assert install(model) is gate  # installed once
    off_values, off_logits = _layer0_values(model, ids)
    assert torch.equal(off_values, plain_values) and torch.equal(off_logits, plain_logits)  # off: the stock model
    gate.on = True
    on_values, on_logits = _layer0_values(model, ids)
    is_cell = torch.isin(ids[0], torch.tensor(CELL_TOKEN_IDS))
    assert is_cell.sum() >= 8
    cell_rows = on_values[is_cell]
    assert torch.allclose(cell_rows, cell_rows[0].expand_as(cell_rows))  # one value for every digit
    assert not torch.allclose(plain_values[is_cell], plain_values[is_cell][0].expand_as(cell_rows))
    assert torch.equal(on_values[~is_cell], plain_values[~is_cell])
    assert not torch.allclose(on_logits, plain_logits)


def test_with_digits_on_plain_digits_share_one_value_and_cells_another():
    model = build_tiny_base(MICRO, seed=2).eval()
    ids = torch.tensor([CODEC.prompt_ids("4567+1289=") + CODEC.completion_ids(trace("add", 4567, 1289)[0][0])])
    gate = install(model)  # (off: its hook is in place before the hook that reads the values)
    plain_values, _ = _layer0_values(model, ids)
    gate.on = True
    cells_only, _ = _layer0_values(model, ids)
    is_digit = torch.isin(ids[0], torch.tensor(DIGIT_TOKEN_IDS))
    is_cell = torch.isin(ids[0], torch.tensor(CELL_TOKEN_IDS))
    assert is_digit.sum() >= 8 and is_cell.sum() >= 8
    assert torch.equal(cells_only[is_digit], plain_values[is_digit])  # plain digits untouched without `digits`
    gate.digits = "all"
    both, _ = _layer0_values(model, ids)
    digit_rows, cell_rows = both[is_digit], both[is_cell]
    assert torch.allclose(digit_rows, digit_rows[0].expand_as(digit_rows))
    assert torch.allclose(cell_rows, cell_rows[0].expand_as(cell_rows))
    assert not torch.allclose(digit_rows[0], cell_rows[0])  # each group its own neutral value
    others = ~(is_digit | is_cell)
    assert torch.equal(both[others], plain_values[others])


def test_with_digits_for_expressions_the_gate_touches_only_sequences_that_begin_with_an_expression():
    model = build_tiny_base(MICRO, seed=4).eval()
    gate = install(model)
    conversion_in = CODEC.prompt_ids("4567+1289=") + CODEC.completion_ids(trace("add", 4567, 1289)[0][0])
    halt_state = trace("add", 4567, 1289)[-1][1]
    conversion_out = CODEC.prompt_ids(halt_state) + CODEC.completion_ids("4567+1289=5856")
    width = max(len(conversion_in), len(conversion_out))
    rows = [[CODEC.pad_id] * (width - len(ids)) + ids for ids in (conversion_in, conversion_out)]  # left padding
    ids = torch.tensor(rows)
    plain, _ = _layer0_values_batch(model, ids)
    gate.on, gate.digits = True, "expressions"
    gated, _ = _layer0_values_batch(model, ids)
    anonymous = torch.isin(ids, torch.tensor(CELL_TOKEN_IDS + DIGIT_TOKEN_IDS))
    assert not torch.equal(gated[0][anonymous[0]], plain[0][anonymous[0]])  # aligner (I): gated
    assert torch.equal(gated[1], plain[1])  # aligner (O): as without the gate
    assert anonymous[1].sum() >= 8


def _layer0_values_batch(model, ids):
    seen = []
    hook = model.model.layers[0].self_attn.v_proj.register_forward_hook(lambda m, a, out: seen.append(out))
    try:
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=(ids != CODEC.pad_id).long()).logits
    finally:
        hook.remove()
    return seen[-1], logits


@pytest.mark.parametrize("digits", ["all", "expressions"])
def test_decoding_with_a_cache_agrees_with_whole_passes_when_the_gate_is_on(digits):
    model = build_tiny_base(MICRO, seed=3).eval()
    gate = install(model)
    gate.on, gate.digits = True, digits
    prompts = [CODEC.prompt_ids(source) for source, _ in trace("add", 45, 67)[:3]]
    prompts += [CODEC.prompt_ids("45+67="), CODEC.prompt_ids("9999+1=")]  # aligner (I) conversions
    limit = 8
    greedy = [greedy_ids(model, [p], CODEC, limit)[0] for p in prompts]  # token by token, with a KV cache
    checked = verify_drafts(model, CODEC, prompts, greedy, [limit] * len(prompts))  # one whole pass each
    assert all(ok and tokens == g for (ok, tokens), g in zip(checked, greedy))


def test_an_adapter_trained_with_anonymous_cells_says_so_and_is_run_with_the_gate_on(tmp_path):
    from caef_bench.runtime.hf import load_step_model

    request = TrainRequest(preset="tiny", out=tmp_path, executors=("add", "sub"), aligners=(), progress=False,
                           tiny_shape=MICRO, overrides={"base_steps": 2, "stage2_steps": 2, "max_len": 4},
                           anonymous_cells=True)
    run_training(request)
    manifests = {op: tmp_path / "executors" / op / "manifest.json" for op in ("add", "sub")}
    assert all(json.loads(path.read_text())["anonymous_cells"] is True for path in manifests.values())
    # an adapter trained without the gate: take the record out of sub's manifest
    sub = json.loads(manifests["sub"].read_text())
    del sub["anonymous_cells"]
    manifests["sub"].write_text(json.dumps(sub))
    step_model = load_step_model("tiny", str(tmp_path))
    assert step_model.anonymous_cells == {"executor_add"}
    step_model.activate("executor_add")
    assert step_model._cell_gate.on
    step_model.activate("executor_sub")
    assert not step_model._cell_gate.on
    assert step_model.paper_loop().anonymous_cells == {"executor_add"}
    assert not step_model._cell_gate.digits and step_model.anonymous_digits == {}


def test_an_aligner_trained_with_anonymous_digits_is_run_with_cells_and_digits_gated(tmp_path):
    from caef_bench.runtime.hf import load_step_model

    request = TrainRequest(preset="tiny", out=tmp_path, executors=("add",), aligners=("add",), progress=False,
                           tiny_shape=MICRO, overrides={"base_steps": 2, "stage2_steps": 2, "max_len": 4},
                           anonymous_digits="all")
    run_training(request)
    manifest = json.loads((tmp_path / "aligners" / "add" / "manifest.json").read_text())
    assert manifest["anonymous_cells"] is True and manifest["anonymous_digits"] is True
    step_model = load_step_model("tiny", str(tmp_path))
    assert step_model.anonymous_digits == {"aligner_add": "all", "executor_add": "all"}
    step_model.activate("aligner_add")
    assert step_model._cell_gate.on and step_model._cell_gate.digits == "all"
    assert step_model.paper_loop().anonymous_digits == {"aligner_add": "all", "executor_add": "all"}
