"""A tier is a file (caef_bench/models/tiers/): its values are what the tiers were when they were Python, a field
the loader does not know is refused naming the file, and the wheel carries the files."""

import re
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import pytest

from caef_bench.models import loading, tiers
from caef_bench.models.limits import TIER_LIMITS, TRAIN_ARGUMENTS, WINDOWED_OPS, OperandLimits, Windowing
from caef_bench.paths import DATA_ROOT, SMOLLM2_CHECKPOINTS, TINY_CHECKPOINTS

REPO = Path(__file__).resolve().parents[1]


def test_the_tiers_are_their_files_smallest_first():
    assert list(tiers.TIER_FILES) == ["tiny", "smollm2-135m", "llama-3.1-8b"] == list(loading.TIERS)
    assert {path.stem for path in tiers.FOLDER.glob("*.yaml")} == set(tiers.TIER_FILES)


def test_each_file_holds_what_its_tier_was_in_python():
    tiny, smollm2, llama = (tiers.TIER_FILES[name] for name in ("tiny", "smollm2-135m", "llama-3.1-8b"))
    assert (tiny.dtype, smollm2.dtype, llama.dtype) == ("float32", "float32", "bfloat16")
    assert (tiny.position_scheme, smollm2.position_scheme, llama.position_scheme) == ("recorded", "standard", "standard")
    assert (loading.LLAMA_HUB_ID, loading.ENV_LLAMA_PATH) == ("meta-llama/Llama-3.1-8B", "CAEF_LLAMA_PATH")
    assert loading._data_folder(tiny.base["folder"]) == TINY_CHECKPOINTS / "base" == DATA_ROOT / tiny.base["folder"]
    assert loading._data_folder(tiny.adapters["folder"]) == TINY_CHECKPOINTS == DATA_ROOT / tiny.adapters["folder"]
    assert loading._data_folder(smollm2.adapters["folder"]) == SMOLLM2_CHECKPOINTS
    assert (smollm2.base, llama.adapters) == ({"kind": "smollm2-gguf"}, {"kind": "official"})
    assert TRAIN_ARGUMENTS == {"tiny": "--preset tiny", "smollm2-135m": "--preset smollm2 --base smollm2-135m",
                               "llama-3.1-8b": "--preset llama --base $CAEF_LLAMA_PATH"}
    assert TIER_LIMITS == {
        "tiny": OperandLimits(why="its adapters were trained on the protocol's ranges only, and its coupled "
                                  "position ids give each tape field 128 cells",
                              windowed_digits=1000, windowing=Windowing(past=100, width=16, back=4, chunk=50,
                                                                           ops=WINDOWED_OPS),
                              windowed_measured="results/long_operands.md",
                              needs="a base and adapters trained with longer fields of position ids "
                                    "(`--set position_scheme=coupled-hints/1024`; docs/long-operands.md; measured past 100 "
                                    "digits in results/long_operands.md)"),
        "smollm2-135m": OperandLimits(max_digits=10, windowed_digits=100,
                                      windowing=Windowing(past=10, width=10, back=4, chunk=9),
                                      windowed_measured="results/table1.md",
                                      why="its CAEF adapters were trained on operands of 1-10 digits",
                                      needs="adapters trained on longer operands (docs/smollm2.md)"),
        "llama-3.1-8b": OperandLimits(why="the released adapters were trained on the protocol's ranges"),
    }
    assert all(isinstance(limits.windowing.ops, tuple) for limits in TIER_LIMITS.values() if limits.windowing)


def _written(tmp_path, text: str) -> Path:
    path = tmp_path / "mine.yaml"
    path.write_text((tiers.FOLDER / "llama-3.1-8b.yaml").read_text() + text)
    return path


def test_a_field_the_loader_does_not_know_is_refused_naming_the_file(tmp_path):
    assert tiers.read_tier(_written(tmp_path, "")).name == "mine"
    with pytest.raises(ValueError, match=re.escape(f"{tmp_path / 'mine.yaml'}: unknown tier field(s) windows;")):
        tiers.read_tier(_written(tmp_path, "windows: 3\n"))
    with pytest.raises(ValueError, match=r"mine.yaml: a base of kind environment takes fallback, variable \(got "
                                         r"fallback, folder, variable\)"):
        tiers.read_tier(_written(tmp_path, "base: {kind: environment, variable: V, fallback: x/y, folder: f}\n"))
    with pytest.raises(ValueError, match="mine.yaml: adapters needs a kind, one of shipped, official"):
        tiers.read_tier(_written(tmp_path, "adapters: {kind: hub}\n"))
    path = tmp_path / "short.yaml"
    path.write_text("dtype: float32\n")
    with pytest.raises(ValueError, match="short.yaml: missing parameters, base, adapters, position_scheme"):
        tiers.read_tier(path)


def test_a_limit_the_loader_does_not_know_is_refused_naming_the_file(tmp_path):
    from caef_bench.models.limits import _limits

    tier = tiers.read_tier(_written(tmp_path, ""))
    limited = tiers.TierFile(**{**tier.__dict__, "limits": {**tier.limits, "max_digit": 5}})
    with pytest.raises(ValueError, match=r"mine.yaml: unknown limits field\(s\) max_digit; expected some of max_digits"):
        _limits(limited)
    windowed = tiers.TierFile(**{**tier.__dict__, "limits": {"windowing": {"past": 1, "width": 2, "back": 1,
                                                                           "chunk": 1, "ops": ["mul"]}}})
    with pytest.raises(ValueError, match="mine.yaml: windowing runs add, sub, gt, lt, eq only"):
        _limits(windowed)


def test_the_wheel_carries_the_tier_files():
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["caef_bench"]
    for path in tiers.FOLDER.glob("*.yaml"):
        relative = path.relative_to(REPO / "caef_bench").as_posix()
        assert any(fnmatch(relative, pattern) for pattern in patterns), relative
