"""A committed report rendered again from its JSON alone, without running any model:

    python -m caef_bench.report.render results/table1_caef.json [more.json ...] [--out DIR] [--check]

Every results file is a JSON document (what a run measured, and how) and the Markdown its writer renders
from it; this module holds the one mapping from a document to its renderer, so a report's layout can change
and every committed file follow (`--out results`), and a check can ask that each committed `.md` is what its
`.json` renders to (`--check`, which writes nothing and exits 1 on a difference). Figures are not rendered:
matplotlib's bytes vary between versions, and a figure's numbers are the document's.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _kind(document: dict) -> str:
    """Which writer made a document, from the keys only it writes."""
    if document.get("suite") == "long_mul_div":
        return "long_mul_div"
    if "anchors" in document and "field_stride" in document:
        return "long_operands"
    if "systems" in document and "notes" in document:
        return "table1"
    if "systems" in document and "onestep_per_cell" in document:
        return "repeated"
    if "points" in document and "runs" in document:
        return "lora_direct_curve"
    if "arms" in document and "cell" in document:
        return "direct_capacity"
    if "per_cell" in document and "results" in document:
        return "onestep"
    if "results" in document and "limit" in document and "tier" in document:
        return "suite"
    raise ValueError("not a results document caef-bench writes (table1, table1_caef, table2, onestep, "
                     "repeated, lora_direct_curve, direct_capacity, long_operands or long_mul_div JSON)")


def render_markdown(document: dict) -> tuple[str, str]:
    """(the Markdown file's name, its text) for a results document."""
    kind = _kind(document)
    if kind == "table1":
        from caef_bench.report.table1 import table1_markdown

        return "table1.md", table1_markdown(document["systems"], document["command"], document["notes"])
    if kind == "long_mul_div":
        from caef_bench.report.long_mul_div import FILES, long_mul_div_markdown

        return FILES[0], long_mul_div_markdown(document)
    if kind == "long_operands":
        from caef_bench.report.long_operands import FILES, long_operands_markdown

        return FILES[0], long_operands_markdown(document)
    if kind == "repeated":
        from caef_bench.report.repeated import repeated_markdown

        return "repeated.md", repeated_markdown(document)
    if kind == "lora_direct_curve":
        from caef_bench.report.direct_curve import FILES, curve_markdown

        return FILES[0], curve_markdown(document)
    if kind == "direct_capacity":
        from caef_bench.report.direct_capacity import FILES, capacity_markdown

        return FILES[0], capacity_markdown(document)
    if kind == "onestep":
        from caef_bench.evaluate.onestep import RESULTS_MARKDOWN, results_header
        from caef_bench.report.tables import onestep_markdown

        return RESULTS_MARKDOWN, onestep_markdown(document["results"], results_header(document))
    from caef_bench.evaluate.suites import RESULT_NAMES
    from caef_bench.report.tables import suite_markdown, suite_of

    return f"{RESULT_NAMES[suite_of(document)]}.md", suite_markdown(document)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m caef_bench.report.render", description=__doc__.split("\n\n")[0])
    parser.add_argument("documents", nargs="+", help="results JSON files (results/table1.json, ...)")
    parser.add_argument("--out", help="write each Markdown file here (default: beside its JSON)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if a Markdown file beside its JSON differs from the rendering")
    args = parser.parse_args(argv)
    differ = []
    for path in map(Path, args.documents):
        name, text = render_markdown(json.loads(path.read_text()))
        target = (Path(args.out) if args.out else path.parent) / name
        if args.check:
            if not target.is_file() or target.read_text() != text:
                differ.append(str(target))
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        print(f"wrote {target}")
    if differ:
        print("not what their JSON renders to: " + ", ".join(differ), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
