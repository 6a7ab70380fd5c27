"""Tables and plots: the paper's numbers beside ours.

Every Markdown report in results/ is written from its JSON document, and `render` writes it again from
that document alone (`report.render` holds the one mapping; tests/test_results.py holds each committed
report to it)."""

from __future__ import annotations

import json
from pathlib import Path


def render(document_path: str | Path) -> str:
    """The Markdown report of a results JSON file, as the code that wrote it writes it, from the file alone."""
    from .render import render_markdown

    return render_markdown(json.loads(Path(document_path).read_text()))[1]


__all__ = ["render"]
