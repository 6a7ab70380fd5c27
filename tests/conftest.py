"""What every test runs with: the repository's own inputs, and nothing written outside it but temporary
folders. The reference format examples are the vendored copy (tests/reference/) unless
$CAEF_FORMAT_EXAMPLES names others; caef-bench's cache (the SmolLM2 conversion) and the datasets
library's cache are folders of this test session, removed after it, unless $CAEF_BENCH_TEST_CACHE names
a cache folder to keep between sessions (a SmolLM2 conversion made once, say)."""

import os
import shutil
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
KEEP_CACHE = "CAEF_BENCH_TEST_CACHE"


def caef_format_examples() -> Path:
    """The reference examples: the vendored copy, or $CAEF_FORMAT_EXAMPLES where a run asks for others."""
    override = os.environ.get("CAEF_FORMAT_EXAMPLES")
    return Path(override) if override else REPO / "tests" / "reference" / "caef-format" / "examples"


def pytest_configure(config):
    # Before any test module imports caef_bench or datasets (each reads these once), and inherited by
    # every command a test starts.
    scratch = Path(tempfile.mkdtemp(prefix="caef-bench-tests-"))
    config.caef_scratch = scratch
    os.environ["CAEF_BENCH_CACHE"] = os.environ.get(KEEP_CACHE) or str(scratch / "caef-bench-cache")
    os.environ["HF_DATASETS_CACHE"] = str(scratch / "hf-datasets")


def pytest_unconfigure(config):
    scratch = getattr(config, "caef_scratch", None)
    if scratch is not None:
        shutil.rmtree(scratch, ignore_errors=True)


@pytest.fixture(scope="session")
def examples_dir() -> Path:
    return caef_format_examples()
