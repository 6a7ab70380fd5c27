"""Markdown tables of our results beside the paper's (caef_bench/protocol/paper_tables.json)."""

from __future__ import annotations

import json
from importlib import resources

OP_NAMES = {"add": "Addition", "sub": "Subtraction", "gt": "Greater_than", "lt": "Less_than", "eq": "Equal",
            "mul": "Multiplication", "div": "Division"}
COLUMNS = ("5", "10", "50", "100", "1-10")


def paper_tables() -> dict:
    return json.loads(resources.files("caef_bench").joinpath("protocol/paper_tables.json").read_text())


def _cell_column(cell: str) -> tuple[str, str]:
    op, _, rest = cell.partition("_")
    return op, "1-10" if rest == "1_10" else rest


def _ours(stats: dict | None) -> str:
    if not stats or not stats["n"]:
        return "–"
    return f"{100 * stats['accuracy']:.1f} [{100 * stats['ci_low']:.1f}, {100 * stats['ci_high']:.1f}] (N={stats['n']})"


def _paper(value) -> str:
    return "–" if value is None else f"{value:.1f}"


def markdown_table(results: dict, metrics: list[tuple[str, str | None, str | None]], title: str, header: str) -> str:
    """metrics: (our metric key, paper table name, paper row key) per row group; None: no paper row."""
    paper = paper_tables()
    lines = [f"## {title}", "", header, "",
             "| operator | component | " + " | ".join(COLUMNS) + " |",
             "|---|---|" + "---|" * len(COLUMNS)]
    by_op: dict[str, dict[str, dict]] = {}
    for cell, result in results.items():
        op, column = _cell_column(cell)
        by_op.setdefault(op, {})[column] = result
    for op, columns in by_op.items():
        for key, table, row in metrics:
            ours = [_ours(columns.get(c, {}).get(key)) if c in columns else "–" for c in COLUMNS]
            lines.append(f"| {OP_NAMES[op]} | {key}, ours | " + " | ".join(ours) + " |")
            if table is not None:  # a metric of ours alone has no paper row
                paper_row = paper[table].get(OP_NAMES[op], {}).get(row, {})
                lines.append(f"| | {key}, paper | " + " | ".join(_paper(paper_row.get(c)) for c in COLUMNS) + " |")
    return "\n".join(lines) + "\n"


TABLE2_METRICS = [("executor", "table2_component_accuracy", "executor"),
                  ("aligner (I)", "table2_component_accuracy", "aligner (I)"),
                  ("aligner (O)", "table2_component_accuracy", "aligner (O)"),
                  ("executor, exact trace", None, None)]
# The paper scores the answer; "exact trace" also asks every step to be the machine's (a gt run
# can misstep after the deciding digit and still answer right): ours alone, from the records.
CAEF_METRICS = [("end_to_end", "table1_overall_accuracy", "CAEF"), ("exact trace", None, None)]


def onestep_markdown(results: dict, header: str) -> str:
    """One row per adapter, one column per operand length: the one-step exact-match table.

    Cells of the test sets fill the first table; the sub9 cells (subtractions whose REFLECTION
    drops leading zeros, caef_bench.evaluate.onestep) a second one, for the adapters that have them.
    """
    lines = ["## One-step accuracy of the executors and aligners", "", header, ""]
    families = [("", lambda cell: not cell.startswith("sub9_")),
                ("Subtractions with 9s on top of b (`sub9_<n>` cells: REFLECTION drops its result's leading "
                 "zeros; the steps that carry them)", lambda cell: cell.startswith("sub9_"))]
    for title, belongs in families:
        rows = {name: {cell: stats for cell, stats in cells.items() if belongs(cell)} for name, cells in results.items()}
        rows = {name: cells for name, cells in rows.items() if cells}
        if not rows:
            continue
        if title:
            lines += ["", f"### {title}", ""]
        lines += ["| adapter | " + " | ".join(COLUMNS) + " | lowest |", "|---|" + "---|" * (len(COLUMNS) + 1)]
        for name, cells in rows.items():
            by_column = {_cell_column(cell)[1]: stats for cell, stats in cells.items()}
            lowest = min(stats["accuracy"] for stats in cells.values())
            lines.append(f"| {name} | " + " | ".join(_ours(by_column.get(c)) for c in COLUMNS) + f" | {100 * lowest:.1f} |")
    wrong = [(name, cell, failure) for name, cells in results.items() for cell, stats in cells.items()
             for failure in stats.get("failures", [])]
    if wrong:  # the misses themselves, where the results kept them (the first few per cell)
        lines += ["", "### Wrong outputs", "", "Where each first differs from the machine's text (… marks cut context).", ""]
        for name, cell, failure in wrong:
            expected, got = first_difference(failure["expected"], failure["got"])
            lines.append(f"- {name}, {cell}: expected `{expected}`, got `{got}`")
    return "\n".join(lines) + "\n"


def first_difference(expected: str, got: str, context: int = 24) -> tuple[str, str]:
    """Both texts around the first character where they differ, newlines shown as ⏎."""
    at = next((i for i, (x, y) in enumerate(zip(expected, got)) if x != y), min(len(expected), len(got)))
    start = max(0, at - context)

    def window(text: str) -> str:
        cut = text[start:at + context]
        return ("…" if start else "") + cut.replace("\n", "⏎") + ("…" if at + context < len(text) else "")

    return window(expected), window(got)
