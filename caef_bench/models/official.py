"""The released CAEF adapters for LLaMA 3.1-8B (`NJUDeepEngine/CAEF_llama3.1_8b` on the model hub).

The release keeps one peft LoRA folder per operator under `ckpt/executors/`
and `ckpt/aligners/` (plus evaluation data under `datasets/`, not needed here).
`official_adapters()` returns that `ckpt` folder, which has the same layout as
caef-bench's own adapter folders, so `caef_bench.models.loading` reads both.

Folder names: the official README names `ckpt/executors/addition` and
`ckpt/aligners/addition`; the other names below follow the official code's
task and machine names (subtraction, greater_than, ...) and are not confirmed
from the release itself, so each op also accepts caef-bench's short name.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ID = "NJUDeepEngine/CAEF_llama3.1_8b"
ENV_ADAPTERS = "CAEF_LLAMA_ADAPTERS"  # a local copy: the snapshot folder or its ckpt/ folder
ALLOW_PATTERNS = ["ckpt/executors/*", "ckpt/aligners/*", "README.md"]  # skip datasets/

# caef-bench op -> folder names the release may use for it, most likely first.
OFFICIAL_OP_DIRS: dict[str, tuple[str, ...]] = {
    "add": ("addition",),  # confirmed by the official README
    "sub": ("subtraction",),
    "mul": ("multiplication",),
    "div": ("division",),
    "gt": ("greater_than",),
    "lt": ("less_than",),
    "eq": ("equal",),
    "reflection": ("reflection",),
    "left_mask": ("left_mask",),
}


def official_folder_names(op: str) -> tuple[str, ...]:
    """Every folder name an op's adapter may have: caef-bench's own name, then the release's."""
    return (op, *(name for name in OFFICIAL_OP_DIRS.get(op, ()) if name != op))


def adapter_layout_root(folder: str | Path) -> Path | None:
    """`folder` itself or its `ckpt/` when it holds `executors/` or `aligners/`; else None."""
    folder = Path(folder).expanduser()
    for candidate in (folder, folder / "ckpt"):
        if (candidate / "executors").is_dir() or (candidate / "aligners").is_dir():
            return candidate
    return None


def hub_offline() -> bool:
    """HF_HUB_OFFLINE read now (huggingface_hub reads it once, at import)."""
    from huggingface_hub import constants

    flag = os.environ.get("HF_HUB_OFFLINE", "").strip().upper()
    return flag in {"1", "ON", "YES", "TRUE"} or bool(constants.HF_HUB_OFFLINE)


def official_adapters(local_dir: str | Path | None = None, revision: str | None = None) -> Path:
    """The folder holding the release's `executors/` and `aligners/` (the snapshot's `ckpt/`).

    With `local_dir` (or $CAEF_LLAMA_ADAPTERS) holding the layout, that copy is used
    as it is; a `local_dir` without it is where the snapshot is downloaded to.
    Without either, the snapshot goes to (or is read from) the hub cache. Offline
    (HF_HUB_OFFLINE=1) only what is already on disk is used.
    """
    local = local_dir or os.environ.get(ENV_ADAPTERS) or None
    if local is not None and (root := adapter_layout_root(local)) is not None:
        return root
    snapshot = _snapshot(revision, local)
    root = adapter_layout_root(snapshot)
    if root is None:
        raise FileNotFoundError(f"{REPO_ID} snapshot at {snapshot} has no ckpt/executors or ckpt/aligners")
    return root


def _snapshot(revision: str | None, local_dir: str | Path | None) -> Path:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        path = snapshot_download(
            REPO_ID, revision=revision, allow_patterns=ALLOW_PATTERNS,
            local_dir=str(Path(local_dir).expanduser()) if local_dir else None,
            local_files_only=hub_offline(),
        )
    except LocalEntryNotFoundError as error:
        where = f" in {local_dir}" if local_dir else ""
        raise FileNotFoundError(
            f"the official CAEF adapters ({REPO_ID}) are not on this machine{where} and cannot be "
            f"downloaded now ({error.__class__.__name__}). Download them where the hub is reachable "
            f"and point ${ENV_ADAPTERS} at the folder that holds ckpt/ (or at ckpt/ itself)."
        ) from error
    return Path(path)


__all__ = [
    "ALLOW_PATTERNS", "ENV_ADAPTERS", "OFFICIAL_OP_DIRS", "REPO_ID",
    "adapter_layout_root", "hub_offline", "official_adapters", "official_folder_names",
]
