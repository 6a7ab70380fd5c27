"""Markdown tables of our results beside the paper's (caef_bench/protocol/paper_tables.json)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from caef_bench.data.testsets import table1_cells

if TYPE_CHECKING:  # (annotations only: the suites import the runtime)
    from caef_bench.evaluate.suites import SuiteResults

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


HOW_MADE = "### How this was made"  # every report closes with its command, weights and copied records


def percent(correct: int, n: int) -> str:
    """99.5%, and 99.95% (not a rounded 100.0%) for 4,398 of 4,400, 0.21% (not 0.2%) for 20 of 9,500: a
    second decimal where a rate within a point of 0 or 100 needs it."""
    if not n:
        return "–"
    rate = 100 * correct / n
    if rate == round(rate):
        return f"{rate:.0f}%"
    near_an_end = min(rate, 100 - rate) < 1 and round(rate, 1) != rate
    return f"{rate:.{2 if near_an_end else 1}f}%"


def counted_interval(stats: dict, digits: int = 1) -> str:
    """'99.5% [97.2, 99.9] (199/200)': a rate as `percent` writes it, its Wilson interval to `digits`
    decimals, and the counts it is read from."""
    return (f"{percent(stats['correct'], stats['n'])} [{100 * stats['ci_low']:.{digits}f}, "
            f"{100 * stats['ci_high']:.{digits}f}] ({stats['correct']}/{stats['n']})")


def cells_named(pairs: list[tuple[str, str]], limit: int = 6) -> str:
    """'sub_100 (99.5%) and mul_1_10 (99.5%)': a few cells with what they hold, the rest counted."""
    named = [f"{cell} ({value})" for cell, value in pairs[:limit]]
    if len(pairs) > limit:
        named.append(f"{len(pairs) - limit} more")
    return named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]


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


SUITE_TABLES = {"table2": ("Table 2: component accuracy", TABLE2_METRICS),
                "caef": ("Table 1: CAEF end-to-end accuracy", CAEF_METRICS)}


def resumed_own(result: dict) -> int:
    """Problems of a cell read from records these same weights wrote: those resumed, less those carried."""
    return result.get("resumed", 0) - sum((result.get("carried") or {}).values())


def reused_text(results: dict, sources) -> str:
    """The sentence for model calls answered from an earlier run's records (`--reuse-steps`), '' if none:
    those outputs come from other weights' records, for adapters whose bytes are the same."""
    calls, reused = (sum(result.get(key, 0) for result in results.values()) for key in ("model_calls", "reused_calls"))
    if not reused:
        return ""
    named = ", ".join(f"`{source['folder']}/` of weights `{source['weights']}`" for source in sources)
    return (f"{reused} of the {calls} model calls in these records were answered from the records of "
            f"an earlier run ({named or 'not named'}), for adapters whose bytes, base and position "
            f"scheme are the same in both (`--reuse-steps`; each such step says `reused`).")


def carried_text(results: dict) -> str:
    """The sentence for records copied from other weights (`caef-bench copy-records`), '' if none:
    how many, from which weights, and for which cells."""
    sources: dict[str, list] = {}
    for cell, result in results.items():
        for weights, count in (result.get("carried") or {}).items():
            sources.setdefault(weights, []).append((cell, count))
    if not sources:
        return ""
    return ("Copied, not solved: " + "; ".join(
        f"{sum(n for _, n in cells)} problem records of {', '.join(cell for cell, _ in cells)} from the records "
        f"of weights `{weights}`" for weights, cells in sources.items())
        + ", whose adapters for those test cells (base, bytes and position scheme) are byte-identical to these "
          "(`caef-bench copy-records`; each record says `carried_from`).")


def suite_document(made: SuiteResults) -> dict:
    """The results document a suite's JSON holds, with what its report says of where the numbers come
    from (the suite, its records folder, the folders steps were reused from), so that the report is a
    function of the JSON alone (`suite_markdown`)."""
    return {**made.document, "suite": made.suite, "records": str(made.records),
            "reuse_sources": list(made.reuse_sources)}


def suite_of(document: dict) -> str:
    """The suite of a results document (files written before documents named it: from its command)."""
    if "suite" in document:
        return document["suite"]
    words = document["command"].split()
    return words[words.index("--suite") + 1]


def suite_header(made: SuiteResults) -> str:
    """What a suite's table says of itself (see `suite_provenance`)."""
    return suite_provenance(suite_document(made))


def suite_provenance(document: dict) -> str:
    """The command, weights and N, and which numbers this command did not compute (problems resumed from
    records, steps reused from other weights, cells kept from earlier runs, with their `made_by`)."""
    results = document["results"]
    records = document.get("records") or f"work/records/{document['tier']}-{document['weights']}"
    kept = {cell: result for cell, result in results.items() if "made_by" in result}
    header = (f"Generated by `{document['command']}` on the {document['tier']} tier"
              f"{' (' + document['checkpoints'] + ')' if document['checkpoints'] else ''}, weights "
              f"`{document['weights']}`; N problems per test cell from the committed test sets"
              f"{' (first ' + str(document['limit']) + ')' if document['limit'] else ''}; accuracy % with Wilson 95% "
              f"intervals; paper: Lai et al., arXiv 2410.07896. Per-problem records: `{records}/`.")
    solved = {cell: result for cell, result in results.items() if cell not in kept}
    total = sum(_cell_n(result) for result in solved.values())
    carried = carried_text(solved)
    own = sum(resumed_own(result) for result in solved.values())
    if own:  # those problems were solved by an earlier run (maybe on another device), not this one
        header += (f" {own} of the {total} problem runs were read from records that earlier runs wrote for "
                   f"these same weights, not solved again by this command.")
    if carried:
        header += f" {carried}"
    reused = reused_text(solved, document.get("reuse_sources", ()))
    if reused:
        header += f" {reused}"
    if kept:
        origins: dict[tuple, list[str]] = {}
        for cell, result in kept.items():
            origins.setdefault((result["made_by"]["command"], result["made_by"]["weights"]), []).append(cell)
        header += (" Test cells not solved by this command, kept from earlier runs whose adapters for them are "
                   "byte-identical to these (`--keep-unchanged`): " + "; ".join(
                       f"{', '.join(cells)} by `{command}` on weights `{weights}`"
                       for (command, weights), cells in origins.items()) + ".")
    if "dropped" in document:  # assembled with --keep-unchanged: name the cells it lacks, not only a bare "–"
        dropped = document["dropped"]
        missing = [cell for cell in table1_cells() if cell not in results]
        by_weights: dict[str, list[str]] = {}
        for cell in missing:
            if cell in dropped:
                by_weights.setdefault(dropped[cell], []).append(cell)
        unsolved = [cell for cell in missing if cell not in dropped]
        if missing:
            header += " Not in this table: " + "; ".join(
                [f"{', '.join(cells)} (their numbers, on weights `{weights}`, were dropped: an adapter they call "
                 f"has changed since)" for weights, cells in by_weights.items()]
                + ([f"{', '.join(unsolved)} (not solved on these weights)"] if unsolved else [])) + "."
    return header


def suite_findings(document: dict, metrics: list[tuple[str, str | None, str | None]]) -> str:
    """The report's opening sentences, from its numbers: each scored metric pooled over the cells, the
    paper's range on the same cells, the cells below 100%, and the exact traces."""
    results, paper = document["results"], paper_tables()
    scored = [(key, table, row) for key, table, row in metrics if table is not None]
    ns = sorted({result[key]["n"] for result in results.values() for key, _, _ in scored if key in result})
    if not ns:
        return "No test cell was solved."
    per_cell = f"{ns[0]} problems each" if len(ns) == 1 else f"{ns[0]}-{ns[-1]} problems each"

    def pooled(key: str) -> tuple[int, int]:
        chosen = [result[key] for result in results.values() if key in result]
        return sum(stats["correct"] for stats in chosen), sum(stats["n"] for stats in chosen)

    counts = [(key, *pooled(key)) for key, _, _ in scored]
    paper_values = [paper[table].get(OP_NAMES[op], {}).get(row, {}).get(column)
                    for cell in results for (op, column) in [_cell_column(cell)] for _, table, row in scored]
    paper_values = [value for value in paper_values if value is not None]
    tier = f"the {document['tier']} tier (weights `{document['weights']}`)"
    if suite_of(document) == "caef":
        (_, correct, n), = counts
        opening = (f"CAEF on {tier} answers {correct:,} of Table 1's {n:,} problems right end to end "
                   f"({percent(correct, n)}), over {len(results)} test cells of {per_cell}")
    else:
        opening = (f"Each component of CAEF on {tier}, over {len(results)} test cells of Table 1, {per_cell}: "
                   + ", ".join(f"{key} right in {correct:,} of {n:,} runs ({percent(correct, n)})"
                               for key, correct, n in counts))
    if paper_values:
        opening += f"; the paper's (LLaMA 3.1-8B): {min(paper_values):.1f}-{max(paper_values):.1f}% on the same cells"
    below = [(f"{key} at {cell}" if len(scored) > 1 else cell, f"{100 * result[key]['accuracy']:.1f}%")
             for key, _, _ in scored for cell, result in results.items()
             if key in result and result[key]["n"] and result[key]["correct"] < result[key]["n"]]
    below.sort(key=lambda pair: float(pair[1].rstrip("%")))
    sentences = [opening + ".", f"Below 100%: {cells_named(below)}; every other cell is at 100%." if below
                 else "Every cell is at 100%."]
    for key, table, _ in metrics:
        if table is None and any(key in result for result in results.values()):
            correct, n = pooled(key)
            sentences.append(f"With every step also the machine's ({key}): {correct:,} of {n:,} "
                             f"({percent(correct, n)}).")
    return " ".join(sentences)


def suite_markdown(document: dict) -> str:
    """A suite's report from its results document: what it shows, the table beside the paper's, every
    failure, then how it was made."""
    title, metrics = SUITE_TABLES[suite_of(document)]
    results = document["results"]
    return (markdown_table(results, metrics, title, suite_findings(document, metrics)) + failures_markdown(results)
            + f"\n{HOW_MADE}\n\n{suite_provenance(document)}\n")


def _cell_n(result: dict) -> int:
    """Problems in one cell's result (its first metric's N)."""
    return next(v["n"] for v in result.values() if isinstance(v, dict) and "n" in v)


def failures_markdown(results: dict, title: str = "Failures") -> str:
    """Every failed run of a suite's cells (wrong answer, or a step unlike the machine's), at its first
    divergence as `evaluate.failures.record_failures` keeps it, under the heading `title`; cells whose
    results hold no list (kept from a run made before lists were kept) are named instead."""
    lines = ["", f"### {title}", "",
             "Every run that answered wrong or took a step unlike the machine's (the exact-trace rows), at its "
             "first such step (0 is aligner (I)); where and what are `caef_bench/evaluate/failures.py`'s classes, "
             "⟦ ⟧ marks the differing part of the field, ⏎ a newline, … cut context.", ""]
    listed = 0
    for cell, result in results.items():
        for failure in result.get("failures", ()):
            listed += 1
            verdict = ("right answer" if failure.get("answer_correct")
                       else f"answered `{failure.get('answer')}` for `{failure.get('target')}`")
            where = ", ".join(str(part) for part in (failure.get("component"), failure.get("machine"),
                                                      f"depth {failure['depth']}" if "depth" in failure else None,
                                                      failure.get("tape")) if part)
            step = (f"step {failure['step']} of {failure['n_steps']}" if "step" in failure and "n_steps" in failure
                    else f"step {failure['step']}" if "step" in failure else "the run")
            lines.append(f"- {cell}, `{failure['id']}` (`{failure['expr']}`): {verdict}; first off at {step}, "
                         f"{failure['where']} ({where}): {failure['what']}"
                         + (f" [{failure['error_class']}]" if failure.get("error_class") else "")
                         + f"; expected `{failure['expected']}`, got `{failure['got']}`")
    if not listed:
        lines.append("None: every run answered right with every step the machine's.")
    unlisted = [cell for cell, result in results.items() if "failures" not in result]
    if unlisted:
        lines += ["", f"Not listed here (kept from runs that did not keep their failures): {', '.join(unlisted)}."]
    return "\n".join(lines) + "\n"


def write_report(document: dict, out: str | Path, names: tuple[str, str, str], markdown, figure) -> list[Path]:
    """A report's three files in `out`, named by `names`: the Markdown `markdown(document)` renders, the
    document as JSON (what the Markdown renders from again), and the figure `figure(document, path)` draws."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / name for name in names]
    paths[0].write_text(markdown(document))
    paths[1].write_text(json.dumps(document, indent=1) + "\n")
    figure(document, paths[2])
    return paths


def write_suite(made: SuiteResults, out: str | Path) -> list[Path]:
    """<name>.md (the table beside the paper's, then every failure) and <name>.json (the results document)
    in `out`."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    table, data = out / f"{made.name}.md", out / f"{made.name}.json"
    document = suite_document(made)
    table.write_text(suite_markdown(document))
    data.write_text(json.dumps(document, indent=1) + "\n")
    return [table, data]


def onestep_findings(results: dict) -> str:
    """The one-step report's opening: how many cells are exact, the others, and the cells below the bar."""
    from caef_bench.evaluate.onestep import ONE_STEP_BAR

    cells = [(name, cell, stats) for name, by_cell in results.items() for cell, stats in by_cell.items() if stats["n"]]
    if not cells:
        return "No adapter was measured."
    short = sorted(((name, cell, stats) for name, cell, stats in cells if stats["correct"] < stats["n"]),
                   key=lambda item: item[2]["accuracy"])
    ns = sorted({stats["n"] for _, _, stats in cells})
    text = (f"{len(results)} adapters, one step at a time on held-out cases ({ns[0]}"
            + (f"-{ns[-1]}" if len(ns) > 1 else "") + f" per test cell): {len(cells) - len(short)} of their "
            f"{len(cells)} test cells exact")
    others = [(f"{name} at {cell}", f"{stats['correct']} of {stats['n']}") for name, cell, stats in short]
    text += f"; the others: {cells_named(others)}." if short else "."

    bar = ONE_STEP_BAR
    under = [(f"{name} at {cell}", percent(stats["correct"], stats["n"])) for name, cell, stats in short
             if stats["accuracy"] < bar.get(name.partition("_")[0], 1.0)]
    bar_text = f"executors {100 * bar['executor']:.1f}%, aligners {100 * bar['aligner']:.1f}% in every test cell"
    return text + (f" Below the bar the tiny tier is held to ({bar_text}): {cells_named(under)}." if under
                   else f" Every test cell meets the bar the tiny tier is held to ({bar_text}).")


def onestep_markdown(results: dict, header: str) -> str:
    """One row per adapter, one column per operand length: the one-step exact-match table, under its
    findings; `header` (how it was measured, `evaluate.onestep.results_header`) closes it.

    Cells of the test sets fill the first table; the sub9 cells (subtractions whose REFLECTION
    drops leading zeros, caef_bench.evaluate.onestep) a second one, for the adapters that have them.
    """
    lines = ["## One-step accuracy of the executors and aligners", "", onestep_findings(results), ""]
    families = [("", lambda cell: not cell.startswith(("sub9_", "subtail_", "struct_", "subwide_"))),
                ("Structured operands (`struct_<n>` cells: runs of one digit, periodic patterns, round numbers, a "
                 "run then random digits, equal operands, one digit apart, b = 0 or 1; caef_bench/data/structured.py)",
                 lambda cell: cell.startswith("struct_")),
                ("Subtractions with 9s on top of b (`sub9_<n>` cells: REFLECTION drops its result's leading "
                 "zeros; the steps that carry them)", lambda cell: cell.startswith("sub9_")),
                ("REFLECTION's last steps on the sub_<n> test problems (`subtail_<n>` cells: its step into q2, "
                 "its q2 steps and its halt, which decide whether the top digit is dropped)",
                 lambda cell: cell.startswith("subtail_")),
                ("ADD's and LEFT_MASK's steps on SUB's sum of n + 1 digits (`subwide_<n>` cells: the last steps "
                 "of SUB's two ADD calls, LEFT_MASK's first and its last three; the only fields of 101 cells)",
                 lambda cell: cell.startswith("subwide_"))]
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
    lines += ["", HOW_MADE, "", header]
    return "\n".join(lines) + "\n"


def first_difference(expected: str, got: str, context: int = 24) -> tuple[str, str]:
    """Both texts around the first character where they differ, newlines shown as ⏎."""
    at = next((i for i, (x, y) in enumerate(zip(expected, got)) if x != y), min(len(expected), len(got)))
    start = max(0, at - context)

    def window(text: str) -> str:
        cut = text[start:at + context]
        return ("…" if start else "") + cut.replace("\n", "⏎") + ("…" if at + context < len(text) else "")

    return window(expected), window(got)

