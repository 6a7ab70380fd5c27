"""LoRA-direct adapters under ordinary position ids: trained under them whatever the base's, run
under the ids each adapter's manifest records in every path, and Table 1's note on each adapter's
training (micro models)."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from caef_bench.train.recipe import TrainRequest, run_training
from micro_model import micro_tiny_base  # noqa: F401  (pytest fixture)


# ---------------------------------------------------------------- direct adapters under standard ids

def test_direct_adapters_train_under_standard_ids_whatever_the_bases(tmp_path, micro_tiny_base):
    request = TrainRequest(preset="tiny", out=tmp_path / "a", base=str(micro_tiny_base), executors=("add",), aligners=(),
                           direct=("add",), overrides={"stage2_steps": 2, "stage2_batch": 2, "max_len": 4},
                           progress=False, command="caef-bench train (test)")
    run_training(request)
    direct = json.loads((tmp_path / "a/direct/add/manifest.json").read_text())
    executor = json.loads((tmp_path / "a/executors/add/manifest.json").read_text())
    assert direct["position_scheme"] == direct["preset"]["position_scheme"] == "standard"
    assert direct["stages"]["stage2"]["steps"] * direct["stages"]["stage2"]["batch"] == 4
    assert direct["command"] == "caef-bench train (test)"
    assert executor["position_scheme"] == "coupled-hints"  # the executors keep the base's ids
    # A coupled direct model is its own system: asked for explicitly, and recorded as such.
    coupled = replace(request, out=tmp_path / "b", executors=(), direct_position_scheme="coupled")
    run_training(coupled)
    assert json.loads((tmp_path / "b/direct/add/manifest.json").read_text())["position_scheme"] == "coupled"


def test_a_pretrained_bases_tokenizer_cannot_take_coupled_direct_ids():
    from caef_bench.models.codec import HFCodec
    from caef_bench.train.recipe import adapter_codec

    class Tokenizer:
        eos_token_id, pad_token_id, bos_token_id = 2, 0, 1

    codec = HFCodec(Tokenizer())
    request = TrainRequest(preset="tiny", out=Path("unused"))
    assert adapter_codec(codec, request, "direct") is codec  # standard already
    with pytest.raises(ValueError, match="needs the CAEF tokenizer"):
        adapter_codec(codec, replace(request, direct_position_scheme="coupled"), "direct")


def _checkpoints_with_direct(folder: Path, base: Path, scheme: str | None) -> Path:
    """A checkpoints folder (base/ and direct/add/) with a trained direct adapter whose manifest
    records `scheme` (None: a manifest from before schemes were recorded)."""
    import shutil

    run_training(TrainRequest(preset="tiny", out=folder, base=str(base), executors=(), aligners=(), direct=("add",),
                              overrides={"stage2_steps": 2, "stage2_batch": 2, "max_len": 4}, progress=False))
    shutil.copytree(base, folder / "base")
    manifest_path = folder / "direct/add/manifest.json"
    manifest = json.loads(manifest_path.read_text())
    if scheme is None:
        del manifest["position_scheme"]
    else:
        manifest["position_scheme"] = scheme
    manifest_path.write_text(json.dumps(manifest))
    return folder


def test_every_way_of_asking_a_direct_adapter_runs_it_under_its_manifests_ids(tmp_path, micro_tiny_base):
    from caef_bench.data.direct import direct_prompt
    from caef_bench.evaluate.direct import load_direct
    from caef_bench.evaluate.lm_eval_models import CaefDirectLM
    from caef_bench.models.codec import CaefCodec
    from caef_bench.models.decoding import greedy_texts
    from caef_bench.models.loading import adapter_schemes, tier_with_checkpoints

    folder = _checkpoints_with_direct(tmp_path / "ck", micro_tiny_base, "standard")
    tier = tier_with_checkpoints("tiny", folder)
    assert tier.position_scheme == "coupled-hints" and adapter_schemes(folder)["direct_add"] == "standard"
    direct = load_direct(tier)
    assert direct.codecs["add"].scheme == "standard"

    prompts = [direct_prompt("12+34=", "add"), direct_prompt("5+6=", "add")]
    expected = greedy_texts(direct.model, CaefCodec("standard"), prompts, 6)
    assert direct.replies("add", prompts, 6, stop=None) == expected

    class Request:  # what lm-eval hands a generate_until model
        def __init__(self, context):
            self.args = (context, {"until": [], "max_gen_toks": 6})

    lm = CaefDirectLM(tier="tiny", checkpoints=str(folder), device="cpu")
    assert lm.direct.codecs["add"].scheme == "standard"
    assert lm.generate_until([Request(p) for p in prompts]) == expected

    # An adapter whose manifest records no scheme runs under the base's, as before.
    old = _checkpoints_with_direct(tmp_path / "old", micro_tiny_base, None)
    assert load_direct(tier_with_checkpoints("tiny", old)).codecs["add"].scheme == "coupled-hints"


def test_a_direct_adapters_scheme_is_part_of_the_weights_fingerprint(tmp_path, micro_tiny_base):
    from caef_bench.models.loading import tier_with_checkpoints, weights_fingerprint

    folder = _checkpoints_with_direct(tmp_path / "ck", micro_tiny_base, "standard")
    standard = weights_fingerprint(tier_with_checkpoints("tiny", folder))
    manifest_path = folder / "direct/add/manifest.json"
    manifest_path.write_text(json.dumps({**json.loads(manifest_path.read_text()), "position_scheme": "coupled"}))
    assert weights_fingerprint(tier_with_checkpoints("tiny", folder)) != standard  # other ids, other outputs


# ---------------------------------------------------------------- Table 1

def test_table1_states_each_direct_adapters_samples_as_a_share_of_its_budget(tmp_path, micro_tiny_base):
    from caef_bench.evaluate.systems import System
    from caef_bench.evaluate.table1 import direct_training_notes

    folder = _checkpoints_with_direct(tmp_path / "ck", micro_tiny_base, "standard")
    manifest_path = folder / "direct/add/manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["stages"]["stage2"].update(steps=1341, batch=128)  # 171,648 samples: a quarter of 686,720
    manifest_path.write_text(json.dumps(manifest))
    system = System(name="direct", model="caef-direct", tasks="caef_table1_direct",
                    model_args={"tier": "tiny", "checkpoints": str(folder)})
    [note] = direct_training_notes({"direct": {"cells": {}}}, {"direct": system})
    assert "add 171,648 (25.0% of 686,720)" in note and "standard ids" in note and "lower bound" in note
    manifest["stages"]["stage2"].update(steps=5365)
    manifest_path.write_text(json.dumps(manifest))
    [note] = direct_training_notes({"direct": {"cells": {}}}, {"direct": system})
    assert "(100.0% of 686,720)" in note and "lower bound" not in note and "position id 0" not in note
    assert "At its whole budget" not in note  # no cells ran: nothing to say of them
    # its whole budget and not one problem right: Table 1 says so (a finding, not a short
    # budget); one right, it does not
    cells = {cell: {"n": 100, "correct": 0} for cell in ("add_5", "add_10")}
    [note] = direct_training_notes({"direct": {"cells": cells}}, {"direct": system})
    assert "At its whole budget add answered no problem of its cells" in note
    cells["add_5"]["correct"] = 1
    [note] = direct_training_notes({"direct": {"cells": cells}}, {"direct": system})
    assert "At its whole budget" not in note


def test_table1_runs_the_tiny_lora_direct_row_at_100_problems_per_cell_or_more():
    from caef_bench.evaluate.systems import load_systems

    assert load_systems()["lora-direct-tiny"].limit >= 100
