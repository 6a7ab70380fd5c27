"""Tables and plots: the paper's numbers beside ours.

Every Markdown report in results/ is written from its JSON document by one function, and `render`
writes it again from that document alone (tests/test_results.py holds each committed report to it)."""

from __future__ import annotations

import json
from pathlib import Path


def render(document_path: str | Path) -> str:
    """The Markdown report of a results JSON file (table1, table1_caef, table2, onestep, failure_analysis,
    lora_direct_curve), as the code that wrote it writes it, from the file alone."""
    path = Path(document_path)
    document = json.loads(path.read_text())
    kind = path.stem
    if kind == "table1":
        from .table1 import table1_markdown

        return table1_markdown(document["systems"], document["command"], document["notes"])
    if kind in ("table1_caef", "table2"):
        from caef_bench.evaluate.suites import SuiteResults

        from .tables import suite_markdown

        return suite_markdown(SuiteResults.from_document("caef" if kind == "table1_caef" else "table2", document))
    if kind == "onestep":
        from caef_bench.evaluate.onestep import results_header

        from .tables import onestep_markdown

        return onestep_markdown(document["results"], results_header(document))
    if kind == "failure_analysis":
        from .failures import failure_markdown

        return failure_markdown(document)
    if kind == "lora_direct_curve":
        from .direct_curve import curve_markdown

        return curve_markdown(document)
    raise ValueError(f"no report is written from {path.name}")


__all__ = ["render"]
