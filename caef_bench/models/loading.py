"""Model tiers: a base model plus its CAEF adapters, loaded through transformers + peft.

Every tier goes through the same code: `AutoModelForCausalLM` for the base,
one peft LoRA adapter per executor and aligner, switched by name. The adapter
folder layout is the official release's:

    <adapters>/executors/<op>/   adapter_config.json, adapter_model.safetensors
    <adapters>/aligners/<op>/
    <adapters>/direct/<op>/      caef-bench's LoRA-direct baseline (not in the release)

with <op> caef-bench's name (add, gt, ...) or the release's (addition,
greater_than, ...; see caef_bench.models.official). Inside the peft model the
adapters are named `executor_<op>`, `aligner_<op>`, `direct_<op>`: peft keys adapters by
name in module dicts and save folders, where '.' and '/' would break.

What each tier is (its base, adapters, dtype, position ids) is a file of caef_bench/models/tiers/;
this module finds the base and adapters it names (`get_tier`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from functools import partial
from pathlib import Path
from typing import Any

from caef_bench.machines import EXECUTOR_OPS
from caef_bench.models.names import KIND_OF_FOLDER, OPS_OF_KIND, adapter_name
from caef_bench.models.official import adapter_layout_root, official_adapters, official_folder_names
from caef_bench.models.tiers import TIER_FILES, TierFile
from caef_bench.models.tiny import tier_info
from caef_bench.paths import DATA_ROOT, SMOLLM2_CHECKPOINTS, TINY_CHECKPOINTS

LLAMA_HUB_ID = TIER_FILES["llama-3.1-8b"].base["fallback"]  # the paper's base, where $CAEF_LLAMA_PATH names none
ENV_LLAMA_PATH = TIER_FILES["llama-3.1-8b"].base["variable"]
ADAPTER_CONFIG = "adapter_config.json"
KINDS = ("executors", "aligners")  # folders CAEF runs on; "direct" (the LoRA-direct baseline) is loaded on request


@dataclass(frozen=True)
class Tier:
    name: str
    base: str | Path  # a local folder or a hub id
    adapters: str | Path | None  # the folder holding executors/ and aligners/, or None for the bare base
    dtype: str  # a torch dtype name: "float32", "bfloat16"
    position_scheme: str = "standard"  # one of caef_bench.models.positions.SCHEMES


@dataclass
class LoadedTier:
    model: Any  # a PeftModel when adapters were loaded, else the transformers model
    tokenizer: Any
    tier: Tier
    adapter_names: tuple[str, ...]
    # adapter name -> the position scheme it was trained with, where its manifest records one
    # that differs from the tier's (e.g. an aligner moved to index hints before the others)
    schemes: dict = field(default_factory=dict)


# ---------------------------------------------------------------- adapter folders (names: models.names)

def adapter_dir(adapter_root: str | Path, kind: str, op: str) -> Path | None:
    """The folder of `op`'s adapter of `kind` under `adapter_root`, or None when there is none."""
    for folder_name in official_folder_names(op):
        folder = Path(adapter_root) / kind / folder_name
        if (folder / ADAPTER_CONFIG).is_file():
            return folder
    return None


def _kind_of_folder(folder: str) -> str:
    if folder not in KIND_OF_FOLDER:
        raise ValueError(f"unknown adapter folder kind {folder!r}; expected one of {tuple(KIND_OF_FOLDER)}")
    return KIND_OF_FOLDER[folder]


# ---------------------------------------------------------------- tiers

def _data_folder(relative: str) -> Path:
    """A folder of the data root, as a tier file names it; the shipped tiers' through this module's
    TINY_CHECKPOINTS and SMOLLM2_CHECKPOINTS (caef_bench.paths'), which a test may point elsewhere."""
    shipped = {"checkpoints/tiny": TINY_CHECKPOINTS, "checkpoints/smollm2-135m": SMOLLM2_CHECKPOINTS}
    parts = relative.split("/")
    top = "/".join(parts[:2])
    return shipped[top].joinpath(*parts[2:]) if top in shipped else DATA_ROOT / relative


def _built_here(name: str) -> bool:
    """Whether the tier's base is built here, in base/ of its checkpoints (a file's base of kind shipped: tiny's)."""
    return name in TIER_FILES and TIER_FILES[name].base["kind"] == "shipped"


def train_hint(name: str) -> str:
    """What to run before a tier built here has its base or adapters (its file's `train`)."""
    return f"run `caef-bench train {TIER_FILES[name].train}` first"


def _base(tier: TierFile, given: str | Path | None) -> str | Path:
    """The tier's base: `given` (an override), else what its file's `base` names."""
    if tier.base["kind"] == "shipped":
        base = Path(given or _data_folder(tier.base["folder"]))
        if not (base / "config.json").is_file():
            raise FileNotFoundError(f"the {tier.name} tier has no trained base model at {base}: {train_hint(tier.name)}")
        return base
    if given:
        return given
    if tier.base["kind"] == "smollm2-gguf":
        from caef_bench.models.smollm2 import converted_dir

        return converted_dir()  # converts the GGUF once, then reuses it
    return os.environ.get(tier.base["variable"]) or tier.base["fallback"]  # kind environment


def _tier(name: str, **overrides) -> Tier:
    """The tier of its file (caef_bench/models/tiers/NAME.yaml), its base and adapters found; overrides win."""
    tier = TIER_FILES[name]
    base = _base(tier, overrides.pop("base", None))
    # adapters=None asks for the bare base; leaving it out asks for the tier's own (shipped, or the release)
    if "adapters" in overrides:
        adapters = overrides.pop("adapters")
    else:
        adapters = official_adapters() if tier.adapters["kind"] == "official" else _data_folder(tier.adapters["folder"])
    scheme = tier.position_scheme
    if scheme == "recorded" and "position_scheme" not in overrides:
        scheme = position_scheme_of(base)
    return Tier(name, base, adapters, **{"dtype": tier.dtype, "position_scheme": scheme, **overrides})


TIERS: dict[str, Callable[..., Tier]] = {name: partial(_tier, name) for name in TIER_FILES}


def get_tier(name: str, **overrides) -> Tier:
    """The tier `name` with its paths resolved; keyword overrides replace any Tier field."""
    if name not in TIERS:
        raise ValueError(f"unknown tier {name!r}; known tiers: {', '.join(TIERS)}")
    allowed = {f.name for f in fields(Tier)} - {"name"}
    unknown = sorted(set(overrides) - allowed)
    if unknown:
        raise TypeError(f"unknown tier setting(s) {unknown}; settable: {sorted(allowed)}")
    return TIERS[name](**overrides)


def tier_with_checkpoints(name: str, checkpoints: str | Path | None = None, dtype: str | None = None,
                          **overrides) -> Tier:
    """The tier `name`, its adapters replaced by `checkpoints` (an adapter folder, official layout)
    when given; for the tiny tier that folder also holds the base, in base/, unless every adapter in it
    was trained on the tier's own base (its manifest's `base_weights`: checkpoints/tiny-direct-protocol),
    which it then runs on. `dtype`: a torch dtype name to run in instead of the tier's own (None: its own).
    Keyword overrides (as `get_tier`'s) win over both."""
    if dtype:
        overrides.setdefault("dtype", dtype)
    if checkpoints:
        overrides.setdefault("adapters", Path(checkpoints))
        if _built_here(name) and "base" not in overrides and not (Path(checkpoints) / "base").exists():
            shipped = _data_folder(TIER_FILES[name].base["folder"])
            if not _all_trained_on(Path(checkpoints), shipped):  # a tier of its own, its base missing
                raise FileNotFoundError(f"the {name} tier has no trained base model at {Path(checkpoints) / 'base'}, "
                                        f"and not every adapter there names the shipped base: {train_hint(name)}")
            overrides["base"] = shipped
        elif _built_here(name):
            overrides.setdefault("base", Path(checkpoints) / "base")
    return get_tier(name, **overrides)


def base_fingerprint(base: str | Path) -> str:
    """The weights fingerprint of a base model alone, which adapters' manifests record (`base_weights`)."""
    return weights_fingerprint(Tier("base", base, None, "float32", position_scheme_of(base)))


def _all_trained_on(folder: Path, base: Path) -> bool:
    """Whether `folder` holds adapters and every one's manifest names `base` by its fingerprint."""
    manifests = sorted(folder.glob("*/*/manifest.json"))
    if not manifests or not (base / "config.json").is_file():
        return False
    fingerprint = base_fingerprint(base)
    return all(json.loads(path.read_text()).get("base_weights") == fingerprint for path in manifests)


def position_scheme_of(base: str | Path) -> str:
    """The position scheme recorded beside a base model's weights; "standard" when none is."""
    return tier_info(base).get("position_scheme", "standard")


# ---------------------------------------------------------------- loading

def load_base(tier: Tier, device: str = "cpu", dtype=None):
    """(model, tokenizer) of the tier's base model, in eval mode."""
    from transformers import AutoTokenizer

    source, local = _model_source(tier.base)
    offline = {"local_files_only": True} if local else {}
    model = _model_class(source, local).from_pretrained(
        source, dtype=torch_dtype(dtype or tier.dtype), **offline, **_placement(device)
    )
    tokenizer = AutoTokenizer.from_pretrained(source, **offline)
    if tokenizer.pad_token is None:  # LLaMA 3.1 has none; batching needs one (the official code pads with eos)
        tokenizer.pad_token = tokenizer.eos_token
    return model.eval(), tokenizer


def _model_class(source: str, local: bool):
    """The class a local base's config names (LlamaForCausalLM), imported alone; else the Auto class.
    Importing the Auto mapping is half a second of `solve`'s cold start."""
    import transformers

    architectures = []
    if local:
        try:
            architectures = json.loads((Path(source) / "config.json").read_text()).get("architectures") or []
        except (OSError, ValueError):
            pass
    named = getattr(transformers, architectures[0], None) if len(architectures) == 1 else None
    return named if named is not None and hasattr(named, "from_pretrained") else transformers.AutoModelForCausalLM


def torch_dtype(dtype):
    """A torch dtype from its name ("bfloat16") or itself."""
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    resolved = getattr(torch, str(dtype).removeprefix("torch."), None)
    if not isinstance(resolved, torch.dtype):
        raise ValueError(f"unknown dtype {dtype!r}; use a torch dtype name such as 'float32' or 'bfloat16'")
    return resolved


def _model_source(base: str | Path) -> tuple[str, bool]:
    """(what from_pretrained gets, whether it is a local folder); a missing local path is an error."""
    path = Path(base).expanduser()
    if path.exists():
        return str(path), True
    if isinstance(base, Path) or str(base).startswith(("/", ".", "~")) or str(base).count("/") > 1:
        raise FileNotFoundError(f"base model folder {path} does not exist")
    return str(base), False  # a hub id such as meta-llama/Llama-3.1-8B


def default_device(requested: str | None = None) -> str:
    """The device asked for, else cuda when torch sees one, else cpu."""
    if requested:
        return requested
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _placement(device) -> dict:
    """from_pretrained arguments that put the weights on `device` as they load (no CPU copy of an 8B model)."""
    if device is None or str(device) == "cpu":
        return {}
    return {"device_map": "auto" if str(device) == "auto" else {"": str(device)}}


def load_adapters(model, adapter_root: str | Path, ops: Iterable[str] | None = None,
                  kinds: Iterable[str] = KINDS, trainable: bool = False):
    """Load adapters under `adapter_root` into `model` by name; returns the PeftModel.

    ops=None loads every adapter present. Explicit ops must all be present, for every
    kind that has them (an aligner op list has no reflection or left_mask).
    Adapters already loaded under the same name are kept as they are.
    """
    root = adapter_layout_root(adapter_root) or Path(adapter_root)
    found = _adapter_folders(root, tuple(kinds), None if ops is None else tuple(ops))
    if not found:
        raise FileNotFoundError(_no_adapters(root))
    for name, folder in found:
        model = attach_adapter(model, name, folder, trainable)
    return model


def _no_adapters(root: Path) -> str:
    return (f"no CAEF adapters under {root}: expected executors/<op>/ or aligners/<op>/ folders "
            f"holding {ADAPTER_CONFIG}")


def adapter_folders(tier: Tier) -> dict[str, Path]:
    """{adapter name: folder} of every executor and aligner of the tier, found without loading any
    (`runtime.hf` attaches each on first use); {} for a bare base, FileNotFoundError when there are none."""
    if tier.adapters is None:
        return {}
    root = adapter_layout_root(tier.adapters) or Path(tier.adapters)
    found = dict(_adapter_folders(root, KINDS, None))
    if not found:
        from caef_bench.models.limits import train_command

        raise FileNotFoundError(f"{_no_adapters(root)}: train them with `{train_command(tier.name, tier.adapters, ())} "
                                f"--executors OPS --aligners OPS`")
    return found


def available_adapters(tier: Tier) -> frozenset[str] | None:
    """The names of the tier's executors and aligners on disk (none loaded; an empty set when its
    folder is missing), or None for a bare base, which answers every call itself."""
    if tier.adapters is None:
        return None
    root = adapter_layout_root(tier.adapters) or Path(tier.adapters)
    return frozenset(name for name, _ in _adapter_folders(root, KINDS, None))


def _adapter_folders(root: Path, kinds: tuple[str, ...], ops: tuple[str, ...] | None) -> list[tuple[str, Path]]:
    """(adapter name, folder) for each adapter to load; FileNotFoundError for a requested one that is missing."""
    unknown = [op for op in ops or () if op not in EXECUTOR_OPS]
    if unknown:
        raise ValueError(f"unknown op(s) {unknown}; ops are: {', '.join(EXECUTOR_OPS)}")
    found = []
    for kind in kinds:
        kind_ops = OPS_OF_KIND[_kind_of_folder(kind)]
        for op in kind_ops if ops is None else [op for op in ops if op in kind_ops]:
            folder = adapter_dir(root, kind, op)
            if folder is not None:
                found.append((adapter_name(KIND_OF_FOLDER[kind], op), folder))
            elif ops is not None:
                tried = ", ".join(str(root / kind / n) for n in official_folder_names(op))
                raise FileNotFoundError(f"requested adapter {adapter_name(KIND_OF_FOLDER[kind], op)} not found; "
                                        f"looked in: {tried}")
    return found


def attach_adapter(model, name: str, folder: Path, trainable: bool = False):
    """`model` with the adapter in `folder` attached as `name` (the first wraps the base in a PeftModel)."""
    from peft import PeftModel

    if not isinstance(model, PeftModel):  # the first adapter wraps the base model
        return PeftModel.from_pretrained(model, str(folder), adapter_name=name, is_trainable=trainable)
    if name not in model.peft_config:
        model.load_adapter(str(folder), adapter_name=name, is_trainable=trainable)
    return model


def loaded_adapters(model) -> tuple[str, ...]:
    return tuple(getattr(model, "peft_config", {}) or {})


def use_adapter(model, name: str, trainable: bool = False) -> None:
    """Make `name` the active adapter (frozen unless `trainable`)."""
    _require_loaded(model, name)
    model.set_adapter(name, inference_mode=not trainable)


def _require_loaded(model, name: str) -> None:
    names = loaded_adapters(model)
    if name not in names:
        raise ValueError(f"no adapter named {name!r} is loaded; loaded: {', '.join(names) or 'none'}")


def save_adapter(model, name: str, folder: str | Path) -> Path:
    """Save one loaded adapter as a standalone peft folder (the layout's executors/<op>/ etc.)."""
    _require_loaded(model, name)
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent) as scratch:
        # peft writes a non-"default" adapter into <dir>/<name>/; take its files from there
        model.save_pretrained(scratch, selected_adapters=[name])
        written = Path(scratch) / name if name != "default" else Path(scratch)
        folder.mkdir(exist_ok=True)
        for file in written.iterdir():
            if file.is_file():
                shutil.move(str(file), folder / file.name)
    return folder


def load(tier: str | Tier, ops: Iterable[str] | None = None, device: str = "cpu", **overrides) -> LoadedTier:
    """A tier's base model, tokenizer and adapters, ready to switch adapters by name."""
    tier = tier if isinstance(tier, Tier) else get_tier(tier, **overrides)
    model, tokenizer = load_base(tier, device)
    if tier.adapters is None:
        return LoadedTier(model, tokenizer, tier, ())
    try:
        model = load_adapters(model, tier.adapters, ops)
    except FileNotFoundError as error:
        if _built_here(tier.name):
            raise FileNotFoundError(f"{error}; {train_hint(tier.name)}") from error
        raise
    names = loaded_adapters(model)
    schemes = {name: scheme for name, scheme in adapter_schemes(tier.adapters).items()
               if name in names and scheme != tier.position_scheme}
    return LoadedTier(model, tokenizer, tier, names, schemes)


def load_bare_base(tier: str = "tiny", checkpoints: str | Path | None = None, device: str = "cpu") -> LoadedTier:
    """A tier's base model alone, no adapter loaded; for the tiny tier, `checkpoints` (an adapter
    folder, official layout) holds the base in base/, as it does for runtime.hf.load_step_model."""
    return load(tier_with_checkpoints(tier, checkpoints, adapters=None), device=device)


def adapter_schemes(adapter_root: str | Path) -> dict[str, str]:
    """adapter name -> the position scheme its manifest records (adapters trained before
    manifests recorded one are left out: they run with the base's). The LoRA-direct adapters
    are read too: they train under ordinary ids on a base whose own are coupled."""
    return {name: manifest["position_scheme"] for name, manifest in _adapter_manifests(adapter_root, (*KINDS, "direct"))
            if manifest.get("position_scheme")}


def anonymous_adapters(adapter_root: str | Path) -> tuple[frozenset[str], dict[str, str]]:
    """From one read of the manifests: the adapters trained with anonymous tape cells
    (models.anonymous_cells), which the runtime runs with the gate on, and no other; and, of those,
    adapter name -> where plain digits were anonymous as well (`train --anonymous-digits`): "all" its
    sequences, or only "expressions" (those that begin with one: aligner (I))."""
    cells, digits = set(), {}
    for name, manifest in _adapter_manifests(adapter_root, KINDS):
        if manifest.get("anonymous_cells"):
            cells.add(name)
        if manifest.get("anonymous_digits"):
            digits[name] = "all" if manifest["anonymous_digits"] is True else manifest["anonymous_digits"]
    return frozenset(cells), digits


def _adapter_manifests(adapter_root: str | Path, kinds: tuple[str, ...]):
    """(adapter name, its manifest) for each adapter of these kinds that has one."""
    root = adapter_layout_root(adapter_root) or Path(adapter_root)
    for name, folder in _adapter_folders(root, kinds, None):
        manifest = folder / "manifest.json"
        if manifest.is_file():
            yield name, json.loads(manifest.read_text())


def _base_digest(tier: Tier):
    """sha256 over the tier's name and scheme, the base's file names and sizes (an 8B base is too
    large to hash on every run), its config and its small weight files, and the dtype it runs in where
    that is not float32 (bf16 rounds every product: other greedy outputs, other weights; float32 adds
    nothing, so the fingerprints of tiers run in float32 stay what their results name)."""
    digest = hashlib.sha256(f"{tier.name}|{tier.position_scheme}".encode())
    if str(tier.dtype).removeprefix("torch.") != "float32":
        digest.update(f"|dtype {str(tier.dtype).removeprefix('torch.')}".encode())
    base = Path(tier.base)
    if base.is_dir():
        for path in sorted(base.rglob("*")):
            if path.is_file():
                size = path.stat().st_size
                digest.update(f"{path.relative_to(base)}:{size}".encode())
                if path.name == "config.json" or (path.suffix == ".safetensors" and size < 1 << 27):
                    digest.update(path.read_bytes())
    else:
        digest.update(str(tier.base).encode())
    return digest


def fingerprints(tier: Tier, kinds: tuple[str, ...] = KINDS) -> tuple[str, dict[str, str]]:
    """(weights fingerprint, {adapter name: fingerprint}) in one pass: the base hashed once and each
    adapter file read once (the official adapters of the 8B tier are tens of MB each).

    The weights fingerprint names the weights a run used, so results and resumable records made
    with other weights are never mixed: the base (`_base_digest`), every adapter file's bytes, and
    the scheme of each adapter trained under another one than the tier's. An adapter's fingerprint
    covers what decides its outputs: the base, its bytes and the position scheme it runs under;
    two runs whose fingerprints agree for an adapter get the same greedy output from it on the
    same prompt (runtime.reuse relies on that). `kinds`: the adapter folders fingerprinted one by
    one (CAEF's by default; ("direct",) for the LoRA-direct adapters); the weights fingerprint
    covers every adapter file either way."""
    base = _base_digest(tier)
    weights = base.copy()
    if tier.adapters is None:
        return weights.hexdigest()[:12], {}
    root = Path(tier.adapters)
    layout = adapter_layout_root(tier.adapters) or root
    schemes = adapter_schemes(root)
    per_file = {}  # each loaded adapter's weights file -> (name, its digest so far)
    for name, folder in _adapter_folders(layout, kinds, None):
        prefix = f"{base.hexdigest()}|{name}|{schemes.get(name, tier.position_scheme)}"
        per_file[(folder / "adapter_model.safetensors").resolve()] = (name, hashlib.sha256(prefix.encode()))
    unread = set(per_file)
    # os.walk with followlinks, not Path.rglob: a tier assembled from links to other tiers' adapter
    # folders (a pilot's candidate) must not hash as its base alone and share another tier's records
    weight_files = [Path(folder) / "adapter_model.safetensors"
                    for folder, _, files in os.walk(root, followlinks=True) if "adapter_model.safetensors" in files]
    for path in sorted(weight_files):
        if ".runs" not in path.parts:
            data = path.read_bytes()
            weights.update(str(path.relative_to(root)).encode() + data)
            if path.resolve() in per_file:
                per_file[path.resolve()][1].update(data)
                unread.discard(path.resolve())
    for path in unread:  # loaded from where the scan does not look
        per_file[path][1].update(path.read_bytes())
    for name, scheme in sorted(schemes.items()):
        if scheme != tier.position_scheme:  # the same weights under other ids are other outputs
            weights.update(f"{name}:{scheme}".encode())
    return weights.hexdigest()[:12], {name: digest.hexdigest()[:12] for name, digest in per_file.values()}


def weights_fingerprint(tier: Tier) -> str:
    """A short hash that names the weights a run used (`fingerprints`)."""
    return fingerprints(tier)[0]


def adapter_fingerprints(tier: Tier) -> dict[str, str]:
    """{adapter name: short hash} of what decides one adapter's outputs (`fingerprints`)."""
    return fingerprints(tier)[1]


__all__ = [
    "KINDS", "LLAMA_HUB_ID", "TIERS", "LoadedTier", "Tier",
    "adapter_dir", "adapter_folders", "attach_adapter", "available_adapters", "get_tier", "load",
    "adapter_schemes", "anonymous_adapters", "load_adapters", "load_bare_base", "load_base", "loaded_adapters", "position_scheme_of", "save_adapter",
    "tier_with_checkpoints",
    "torch_dtype", "use_adapter", "weights_fingerprint", "adapter_fingerprints", "fingerprints",
]
