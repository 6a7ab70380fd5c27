import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def caef_format_examples() -> Path:
    """The reference examples: $CAEF_FORMAT_EXAMPLES, else ../shared beside the checkout, else the vendored copy."""
    override = os.environ.get("CAEF_FORMAT_EXAMPLES")
    if override:
        return Path(override)
    shared = REPO.parent / "shared" / "caef-format" / "examples"
    return shared if shared.is_dir() else REPO / "tests" / "reference" / "caef-format" / "examples"


@pytest.fixture(scope="session")
def examples_dir() -> Path:
    return caef_format_examples()
