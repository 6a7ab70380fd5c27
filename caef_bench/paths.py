"""Where caef-bench's data lives: the one place every other module asks.

The data root holds `tasks/` (the lm-eval task YAMLs, their hooks `utils.py`
and the test sets `data/*.jsonl`), `checkpoints/tiny/` (the shipped tiny tier)
and `baselines/` (the systems of Table 1). It is, first found wins:

1. $CAEF_BENCH_DATA, a folder holding those (a copy to edit, say);
2. the source checkout, when the package runs from one (`pip install -e .`, or
   `python -m caef_bench` from the checkout), so edits to tasks/ and newly
   trained checkpoints are seen at once;
3. the copy shipped inside the wheel (caef_bench/bundled/, written at build
   time by setup.py), so a plain `pip install .` works from any folder.

Outputs never go to the data root (a wheel's copy is read-only in spirit):
the work folder and results are relative to the folder a command runs in.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_DATA = "CAEF_BENCH_DATA"
ENV_BASELINES = "CAEF_BENCH_BASELINES"  # a folder of system files, instead of the data root's baselines/
PACKAGE_DIR = Path(__file__).resolve().parent
BUNDLED_DIR = PACKAGE_DIR / "bundled"  # the folder name setup.py copies the data to


def _checkout() -> Path | None:
    """The source checkout this package runs from, if any: the package's parent, holding the project."""
    root = PACKAGE_DIR.parent
    # site-packages has neither; a checkout has both (a stray tasks/ beside an install is not one)
    return root if (root / "pyproject.toml").is_file() and (root / "tasks" / "utils.py").is_file() else None


def data_root() -> Path:
    """The folder holding tasks/, checkpoints/ and baselines/ (see the module's docstring for the order)."""
    override = os.environ.get(ENV_DATA)
    if override:
        return Path(override).expanduser().resolve()
    return _checkout() or BUNDLED_DIR


DATA_ROOT = data_root()
TASKS_DIR = DATA_ROOT / "tasks"  # lm-eval's --include_path
TEST_SETS_DIR = TASKS_DIR / "data"  # the committed test-set cells, <cell>.jsonl and MANIFEST.json
TINY_CHECKPOINTS = DATA_ROOT / "checkpoints" / "tiny"
SMOLLM2_CHECKPOINTS = DATA_ROOT / "checkpoints" / "smollm2-135m"  # the smollm2-135m tier's adapters (its base: a PyPI package)
BASELINES_DIR = Path(os.environ.get(ENV_BASELINES) or DATA_ROOT / "baselines")
WORK_DIR = Path("work")  # lm-eval outputs, request caches, per-problem records: beside where a command runs

__all__ = [
    "BASELINES_DIR", "BUNDLED_DIR", "DATA_ROOT", "ENV_BASELINES", "ENV_DATA", "SMOLLM2_CHECKPOINTS", "TASKS_DIR",
    "TEST_SETS_DIR", "TINY_CHECKPOINTS", "WORK_DIR", "data_root", "replace_text",
]


def replace_text(path: Path, text: str) -> None:
    """Write `path` whole through a scratch file beside it: a reader, or a run killed mid-write, sees the
    previous file or the new one, never half of one."""
    scratch = path.with_name(path.name + ".partial")
    scratch.write_text(text)
    os.replace(scratch, path)
