"""Table 1 with every system: ours beside the paper's, per operator and operand length.

Rows follow the paper (CAEF, LLaMA 3.1 (L), LLaMA 3.1 (I), GPT-4o); each system that ran stands
in the row of the paper's system it stands for, with N and Wilson 95% intervals, and its
difference from our CAEF as the paper prints each baseline's difference from its CAEF.
"""

from __future__ import annotations

import json
from pathlib import Path

from caef_bench.report.tables import COLUMNS, HOW_MADE, OP_NAMES, paper_tables, percent

PAPER_ROWS = ("CAEF", "LLaMA 3.1 (L)", "LLaMA 3.1 (I)", "GPT-4o")
CELL_COLUMN = {f"{op}_{n}": n for op in ("add", "sub", "gt", "lt", "eq") for n in ("5", "10", "50", "100")}
CELL_COLUMN.update({"mul_1_10": "1-10", "div_1_10": "1-10"})


TIER_MARKERS = {"tiny": "o", "smollm2-135m": "s", "llama-3.1-8b": "D"}  # any other system: a triangle


def _op(cell: str) -> str:
    return cell.partition("_")[0]


def _reference_caef(results: dict, name: str | None = None) -> str | None:
    """The CAEF system whose numbers a baseline's differences are taken from: the one on the same tier
    (lora-direct-smollm2-135m: caef-smollm2-135m), else the CAEF system that ran the most cells (the
    first such in file order); with no `name`, that last one."""
    ran = {other: r for other, r in results.items() if r.get("paper_row") == "CAEF" and "cells" in r}
    tier = results.get(name, {}).get("tier") if name else None
    same_tier = [other for other, r in ran.items() if tier and r.get("tier") == tier]
    if same_tier:
        return same_tier[0]
    return max(ran, key=lambda other: len(ran[other]["cells"]), default=None)


def table1_frame(results: dict):
    """One row per (operator, paper row, ours or paper), a column per operand length."""
    import pandas as pd

    paper = paper_tables()["table1_overall_accuracy"]
    ops = list(OP_NAMES)
    rows = []
    for op in ops:
        for paper_row in PAPER_ROWS:
            for name, result in results.items():
                if result.get("paper_row") != paper_row:
                    continue
                row = {"operator": OP_NAMES[op], "system": f"{name} (ours)"}
                reference = _reference_caef(results, name)
                for column in COLUMNS:
                    cell = next((c for c in result.get("cells", {}) if _op(c) == op and CELL_COLUMN[c] == column), None)
                    row[column] = _ours(result, cell, results.get(reference), name == reference)
                rows.append(row)
            if not any(r.get("paper_row") == paper_row for r in results.values()):
                rows.append({"operator": OP_NAMES[op], "system": f"{paper_row} (ours)",
                             **{c: "–" for c in COLUMNS}})
            paper_values = paper.get(OP_NAMES[op], {}).get(paper_row, {})
            paper_caef = paper.get(OP_NAMES[op], {}).get("CAEF", {})
            row = {"operator": OP_NAMES[op], "system": f"{paper_row} (paper)"}
            for column in COLUMNS:
                value = paper_values.get(column)
                if value is None:
                    row[column] = "–"
                elif paper_row == "CAEF" or paper_caef.get(column) is None:
                    row[column] = f"{value:.1f}"
                else:
                    row[column] = f"{value:.1f} ({value - paper_caef[column]:+.1f})"
            rows.append(row)
    return pd.DataFrame(rows, columns=["operator", "system", *COLUMNS])


def _ours(result: dict, cell: str | None, reference: dict | None, is_reference: bool) -> str:
    if "skipped" in result:
        return "not run"
    if cell is None:
        return "–"
    stats = result["cells"][cell]
    text = f"{100 * stats['accuracy']:.1f} [{100 * stats['ci_low']:.1f}, {100 * stats['ci_high']:.1f}] (N={stats['n']})"
    if reference is not None and not is_reference and cell in reference.get("cells", {}):
        text += f" ({100 * (stats['accuracy'] - reference['cells'][cell]['accuracy']):+.1f})"
    return text


COMPARISONS = ("gt", "lt", "eq")  # answered True or False: a guess is right half the time


def table1_findings(results: dict) -> str:
    """The opening sentences, from the numbers: each system that ran, pooled over its arithmetic and its
    comparison test cells apart (the second at chance is 50%), beside the mean of the paper's row for it
    on the same cells, and how many systems could not run here."""
    paper = paper_tables()["table1_overall_accuracy"]
    parts = []
    for name, result in results.items():
        if not result.get("cells"):
            continue
        row, groups = result.get("paper_row"), []
        for comparison in (False, True):
            cells = {cell: stats for cell, stats in result["cells"].items() if (_op(cell) in COMPARISONS) == comparison}
            if not cells:
                continue
            correct, n = sum(s["correct"] for s in cells.values()), sum(s["n"] for s in cells.values())
            values = [paper.get(OP_NAMES[_op(cell)], {}).get(row, {}).get(CELL_COLUMN[cell]) for cell in cells]
            values = [value for value in values if value is not None]
            groups.append(f"{'comparisons' if comparison else 'arithmetic'} {percent(correct, n)} ({correct:,} of {n:,})"
                          + (f" against the paper's {sum(values) / len(values):.1f}%" if len(values) == len(cells) else ""))
        parts.append(f"`{name}`{f' ({row})' if row else ''} " + ", ".join(groups))
    text = ("Right answers of each system that ran, on the arithmetic test cells (add, sub, mul, div) and on the "
            "comparisons (gt, lt, eq, where a guess is right half the time), beside the mean of the paper's row on "
            "the same cells: " + "; ".join(parts) + "." if parts else "No system ran.")
    skipped = [name for name, result in results.items() if "skipped" in result]
    if skipped:
        text += (f" {len(skipped)} of the {len(results)} systems did not run here "
                 f"({', '.join(f'`{s}`' for s in skipped)}; each says why below).")
    return text


def table1_markdown(results: dict, command: str, notes: list[str] | None = None) -> str:
    reference = _reference_caef(results)
    lines = ["## Table 1: end-to-end accuracy, every system", "", table1_findings(results), "",
             f"Accuracy % with Wilson 95% intervals and N per cell; in brackets after a baseline, its difference "
             f"from our CAEF ({reference or 'none ran'}{_same_tier_references(results, reference)}) in points, as the paper prints each baseline's difference "
             f"from its CAEF. Paper: Lai et al., arXiv 2410.07896, LLaMA 3.1-8B and GPT-4o.", "",
             table1_frame(results).to_markdown(index=False), "", "### Which system stands in each paper row", ""]
    for name, result in results.items():
        status = (f"not run here: {result['skipped']}" if "skipped" in result
                  else f"N={_n_summary(result)} per cell" + _coverage(result))
        if result.get("weights"):
            status = f"weights `{result['weights']}`; {status}"
        lines.append(f"- `{name}` for **{result.get('paper_row') or 'no paper row'}**: {result.get('description', '')}; {status}")
    partial_caef = [name for name, r in results.items()
                    if r.get("paper_row") == "CAEF" and "cells" in r and _coverage(r) and not r.get("cells_why")]
    if partial_caef:  # the cells left out are the long ones; the caef suite has them all at a larger N
        lines += ["", f"Cells marked – for {', '.join(f'`{n}`' for n in partial_caef)} were not run through lm-eval "
                      f"for this table (on 2 CPU cores a 100-digit subtraction is ~420 model calls); "
                      f"`caef-bench run --suite caef` has every cell, at the N and on the weights its header "
                      f"states: `results/table1_caef.md`."]
    for name, result in results.items():
        if result.get("cells_why") and "cells" in result:
            lines += ["", f"`{name}` ran on {', '.join(result['cells'])} only (– elsewhere): {result['cells_why']}"]
    for note in notes or []:
        lines += ["", note]
    examples = _example_replies(results)
    if examples:
        lines += ["", "### What the baselines answered (first wrong replies per cell)", "", *examples]
    lines += ["", HOW_MADE, "",
              f"Generated by {_made_by(results, command)}. Every system ran through lm-evaluation-harness (its command is in "
              f"`table1.json`) and was scored by the tasks' own scorer (`tasks/utils.py`, exact match, one greedy "
              f"attempt); the figure is `table1.png`.", ""]
    return "\n".join(lines)


def _made_by(results: dict, command: str) -> str:
    """The command that made the table, and the earlier commands of systems kept from a table before
    (`run --suite table1 --keep-others`), each with the systems it made."""
    commands: dict[str, list[str]] = {}
    for name, result in results.items():
        commands.setdefault(result.get("made_by", command), []).append(name)
        for group in result.get("kept_cells", []):  # cells of a system kept from an earlier run of it
            commands.setdefault(group["made_by"], []).append(f"{name}: {', '.join(group['cells'])}")
    if list(commands) == [command]:
        return f"`{command}`"
    return "; ".join(f"`{made_by}` ({', '.join(f'`{n}`' for n in names)})"  # (a kept cells' entry: `name: cells`)
                     for made_by, names in sorted(commands.items(), key=lambda item: item[0] != command))


def _same_tier_references(results: dict, reference: str | None) -> str:
    """'; lora-direct-smollm2-135m's from caef-smollm2-135m', for each baseline compared with the CAEF
    system on its own tier rather than with `reference`."""
    pairs = [(name, _reference_caef(results, name)) for name, r in results.items() if r.get("paper_row") != "CAEF"]
    return "".join(f"; {name}'s from {own}" for name, own in pairs if own not in (None, reference))


def _coverage(result: dict) -> str:
    """' on 14 of the 22 cells (– elsewhere)' for a system run on part of the table."""
    asked, ran = result.get("cells_asked"), len(result.get("cells", {}))
    return f" on {ran} of the {asked} cells (– elsewhere)" if asked and ran < asked else ""


def _n_summary(result: dict) -> str:
    ns = sorted({stats["n"] for stats in result["cells"].values()})
    return str(ns[0]) if len(ns) == 1 else f"{ns[0]}-{ns[-1]}"


def _example_replies(results: dict, per_system: int = 4) -> list[str]:
    lines = []
    for name, result in results.items():
        if result.get("paper_row") == "CAEF" or "cells" not in result:
            continue
        shown = 0
        for cell, stats in result["cells"].items():
            for example in stats.get("examples", [])[:1]:
                if shown == per_system:
                    break
                reply = " ".join(example["reply"].split())
                reply = reply if len(reply) <= 160 else reply[:157] + "…"
                lines.append(f"- `{name}`, {cell}: `{example['expr']}` (answer {example['answer']}) replied "
                             f"`{reply or '(nothing)'}`")
                shown += 1
    return lines


def line_styles(results: dict) -> dict[str, tuple[str, str | None]]:
    """{system that ran: (line style, marker face)}. Two systems of one paper row on one tier
    (lora-direct-tiny and lora-direct-tiny-protocol) would draw alike in colour and marker: the second
    and later get another line style and hollow markers."""
    styles, seen = {}, {}
    for name, result in ((n, r) for n, r in results.items() if "cells" in r):
        key = (result.get("paper_row"), result.get("tier"))
        styles[name] = [("-", None), (":", "white"), ("-.", "white")][min(seen.get(key, 0), 2)]
        seen[key] = seen.get(key, 0) + 1
    return styles


def table1_figure(results: dict, path: str | Path) -> None:
    """Accuracy against operand length: a panel per operator, a line per system, the paper's dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paper = paper_tables()["table1_overall_accuracy"]
    lengths = ["5", "10", "50", "100"]
    ops = ["add", "sub", "gt", "lt", "eq", "mul", "div"]
    fig, axes = plt.subplots(2, 4, figsize=(16, 7.5), sharey=True)
    colors = {row: color for row, color in zip(PAPER_ROWS, ("tab:blue", "tab:orange", "tab:green", "tab:red"))}
    styles = line_styles(results)
    for ax, op in zip(axes.flat, ops):
        columns = lengths if op not in ("mul", "div") else ["1-10"]
        x = range(len(columns))
        for name, result in results.items():
            if "cells" not in result:
                continue
            values = [next((100 * s["accuracy"] for c, s in result["cells"].items()
                            if _op(c) == op and CELL_COLUMN[c] == column), None) for column in columns]
            # the colour is the paper row a system stands for, the marker its tier (two CAEF rows apart)
            linestyle, face = styles[name]
            ax.plot(x, values, marker=TIER_MARKERS.get(result.get("tier"), "^"), linestyle=linestyle,
                    markerfacecolor=face, color=colors.get(result.get("paper_row"), "tab:gray"), label=f"{name} (ours)")
        for row in PAPER_ROWS:
            values = [paper.get(OP_NAMES[op], {}).get(row, {}).get(column) for column in columns]
            ax.plot(x, values, linestyle="--", marker="x", color=colors[row], alpha=0.7, label=f"{row} (paper)")
        ax.set_title(OP_NAMES[op])
        ax.set_xticks(list(x), [f"{c} digits" if c != "1-10" else "1-10 digits" for c in columns])
        ax.set_ylim(-3, 103)
        ax.grid(alpha=0.3)
    axes.flat[-1].axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    axes.flat[-1].legend(handles, labels, loc="center", fontsize=9)
    for ax in axes[:, 0]:
        ax.set_ylabel("accuracy %")
    fig.suptitle("Table 1: accuracy against operand length (ours solid: circles the tiny tier, squares the SmolLM2 "
                 "tier, triangles other models,\na second system of one paper row and tier dotted and hollow; the "
                 "paper dashed)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_table1(results: dict, out: str | Path, command: str, notes: list[str] | None = None) -> list[Path]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "table1.md", out / "table1.json", out / "table1.png"]
    paths[0].write_text(table1_markdown(results, command, notes))
    paths[1].write_text(json.dumps({"command": command, "notes": notes or [], "systems": results}, indent=1) + "\n")
    table1_figure(results, paths[2])
    return paths


ALPHA = 0.05  # the family-wise error rate of the comparison with the committed table


def _correct(stats: dict) -> int:
    return stats["correct"] if "correct" in stats else round(stats["accuracy"] * stats["n"])


def holm_rejections(p_values: list[float], alpha: float = ALPHA) -> list[bool]:
    """Which hypotheses Holm's step-down procedure rejects at family-wise error `alpha`: the i-th
    smallest p-value (from 0) is held to alpha / (m - i), until one is not below its bar."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    rejected = [False] * len(p_values)
    for rank, index in enumerate(order):
        if p_values[index] >= alpha / (len(p_values) - rank):
            break
        rejected[index] = True
    return rejected


def comparison_lines(results: dict, committed: dict) -> list[str]:
    """How a run's cells compare with the committed reference table, each by Fisher's exact test of
    its right answers against the committed cell's (k of N both sides: a local 20 of 20 and a committed
    199 of 200 are what one 99.5% model gives), Holm-corrected over the cells compared so that 56
    cells at 5% do not raise two or three alarms by chance. Says "consistent", or names each cell that
    differs with its two rates and p-value."""
    from caef_bench.evaluate.scoring import fisher_exact

    compared = []  # (system, cell, local stats, committed stats, p)
    for name, result in results.items():
        reference = committed.get("systems", {}).get(name, {})
        for cell, stats in result.get("cells", {}).items():
            ref = reference.get("cells", {}).get(cell)
            if ref is None or not stats.get("n") or not ref.get("n"):
                continue
            p = fisher_exact(_correct(stats), stats["n"], _correct(ref), ref["n"])
            compared.append((name, cell, stats, ref, p))
    if not compared:
        return ["no cell in common with the committed table"]
    rule = (f"Fisher's exact test per cell, Holm-corrected over the {len(compared)} cells compared, "
            f"{100 * ALPHA:.0f}% family-wise")
    differing = [c for c, rejected in zip(compared, holm_rejections([c[-1] for c in compared])) if rejected]
    if not differing:
        name, cell, stats, ref, p = min(compared, key=lambda c: c[-1])
        return [f"compared with the committed table: consistent, no cell differs ({rule}; the closest, {name} "
                f"{cell}: {_rate(stats)} against {_rate(ref)}, p = {p:.2g})"]
    lines = [f"compared with the committed table: {len(differing)} of {len(compared)} cells differ ({rule}):"]
    for name, cell, stats, ref, p in differing:
        direction = "below" if stats["accuracy"] < ref["accuracy"] else "above"
        lines.append(f"  {name} {cell}: {_rate(stats)}, {direction} the committed {_rate(ref)} (p = {p:.2g})")
    return lines


def _rate(stats: dict) -> str:
    return f"{_correct(stats)} of {stats['n']} ({100 * stats['accuracy']:.1f}%)"


def compare_with_committed(results: dict, out: str | Path, committed: str | Path = Path("results") / "table1.json"
                           ) -> list[str]:
    """comparison_lines against the committed reference table, when there is one and `out` is not
    where it lives (a run that rewrites the reference compares with nothing)."""
    committed = Path(committed)
    if not committed.is_file() or Path(out).resolve() == committed.parent.resolve():
        return []
    return comparison_lines(results, json.loads(committed.read_text()))
