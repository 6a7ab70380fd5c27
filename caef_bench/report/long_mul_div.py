"""results/long_mul_div.md, .json and .png: the long multiplication and division cells, every system.

Everything here is laid out from the results document `caef-bench run --suite long_mul_div` builds
(evaluate.long_mul_div): accuracy with Wilson intervals, CAEF's model calls and seconds a problem beside
the machines' count, every miss classified, the cells a system did not run and why, the standard a tier's
long route is held to, and the literature's reported reach beside. `python -m caef_bench.report.render
results/long_mul_div.json` renders the same Markdown from the JSON alone.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from caef_bench.report.repeated import class_table
from caef_bench.report.tables import HOW_MADE, counted_interval, failures_markdown, write_report

FILES = ("long_mul_div.md", "long_mul_div.json", "long_mul_div.png")
EXAMPLES_PER_CELL = 2  # a baseline's wrong replies shown per cell (every one is in its records)
TRAIN_LONG_ROUTE = ("caef-bench train --preset tiny --base checkpoints/tiny/base "
                    "--executors digit_mul,long_mul,long_div --aligners long_mul,long_div --out work/long-muldiv-words")


def cell_title(cell: str, lengths: dict) -> str:
    """'20 x 20 digits', '40 / 20 digits'."""
    return f"{lengths['a_digits']} {'x' if lengths['op'] == 'mul' else '/'} {lengths['b_digits']} digits"


def _number(value, digits: int = 0) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def _misses(failures: list[dict]) -> str:
    """'executor DIGIT_MUL: wrong_digit 2; aligner (O): truncated 1': where each miss first left the course."""
    counts = Counter((f"executor {f['machine']}" if f["where"] == "executor" and f.get("machine") else f["where"],
                      f["what"]) for f in failures)
    return "; ".join(f"{where}: {what} {n}" for (where, what), n in counts.most_common()) or "none"


def results_table(document: dict) -> str:
    """A row per system and cell: accuracy, cost, misses; a cell it did not run says so."""
    import pandas as pd

    rows = []
    for name, system in document["systems"].items():
        for cell, lengths in document["cells"].items():
            row = {"system": f"`{name}`", "cell": f"{cell} ({cell_title(cell, lengths)})"}
            stats = system["cells"].get(cell)
            if stats is None:
                row["accuracy % [95% CI] (right/N)"] = "not run" if cell in system["not_run"] else "–"
                rows.append(row)
                continue
            caef = "model_calls_mean" in stats
            row.update({"accuracy % [95% CI] (right/N)": counted_interval(stats),
                        "model calls a problem (a correct run's)": (
                            f"{_number(stats['model_calls_mean'], 1)} ({_number(stats['expected_calls_mean'], 1)})"
                            if caef else "1 reply"),
                        "model seconds a problem": _number(stats.get("model_seconds_mean"), 3),
                        "misses: where they first left the course": _misses(stats["failures"])})
            rows.append(row)
    return pd.DataFrame(rows).fillna("–").to_markdown(index=False) if rows else "(no system)"


def not_run_lines(document: dict) -> list[str]:
    """Each system's cells not run, grouped by reason."""
    lines = []
    for name, system in document["systems"].items():
        by_reason: dict[str, list[str]] = {}
        for cell, reason in system["not_run"].items():
            by_reason.setdefault(reason, []).append(cell)
        for reason, cells in by_reason.items():
            lines.append(f"- `{name}`, {', '.join(cells)}: {reason}")
    return lines


def _caef_systems(document: dict) -> dict:
    return {name: system for name, system in document["systems"].items() if system["kind"] == "caef"}


def _meets(cell: str, stats: dict, standard: dict) -> bool:
    return stats["n"] >= standard["n"][cell] and stats["correct"] >= standard["accuracy"] * stats["n"]


def standard_rows(document: dict) -> list[dict]:
    """Per CAEF system and cell: what the standard asks, what was measured, and whether it holds."""
    standard = document["standard"]
    rows = []
    for name, system in _caef_systems(document).items():
        for cell in document["cells"]:
            needs = f">= {standard['accuracy']:.0%} of N >= {standard['n'][cell]}"
            stats = system["cells"].get(cell)
            if stats is None:
                held = "not run" if cell in system["not_run"] else "–"
            elif _meets(cell, stats, standard):
                held = "met"
            elif stats["n"] < standard["n"][cell]:
                held = f"not shown: N={stats['n']} < {standard['n'][cell]}"
            else:
                held = f"short: {stats['correct']} of {stats['n']}"
            rows.append({"system": f"`{name}`", "cell": cell, "the standard": needs,
                         "measured": counted_interval(stats) if stats else "–", "holds": held})
    return rows


def where_it_stops(name: str, system: dict, document: dict) -> str:
    """For one CAEF system: whether the standard holds on every cell, else where it stops, why and what
    comes next, from its results."""
    standard, cells = document["standard"], document["cells"]
    ran = system["cells"]
    if ran and len(ran) == len(cells) and all(_meets(cell, stats, standard) for cell, stats in ran.items()):
        return f"`{name}` meets the standard on every long cell."
    parts = []
    if system["not_run"]:
        reasons = list(system["not_run"].values())
        lacks = any("lacks" in reason or " has no " in reason for reason in reasons)
        parts.append(
            f"`{name}` stops before its first model call on {', '.join(system['not_run'])}: "
            + (f"the long route's adapters are missing. Next: train them (`{TRAIN_LONG_ROUTE}`, "
               f"docs/long-mul-div.md), then run this suite again." if lacks else
               "its tier's limits take no long route for them (no `long_mul_digits`, `long_div_digits`, "
               "`long_divisor_digits` in its file). Next: train the long route's adapters "
               f"(`{TRAIN_LONG_ROUTE}`, docs/long-mul-div.md), measure them here with `--measure-long-route`, "
               "then give the tier the lengths measured, naming this report as `long_measured`."))
    short = {cell: stats for cell, stats in ran.items() if not _meets(cell, stats, standard)}
    small = [cell for cell, stats in short.items() if stats["n"] < standard["n"][cell]]
    wrong = {cell: stats for cell, stats in short.items() if cell not in small}
    if small:
        parts.append(f"`{name}` ran fewer problems than the standard asks on {', '.join(small)}: run the whole cells "
                     f"(no --limit).")
    if wrong:
        failures = [f for stats in wrong.values() for f in stats["failures"]]
        where = Counter(f.get("component") or f["where"] for f in failures).most_common(1)
        below = ", ".join(f"{cell} ({stats['correct']}/{stats['n']})" for cell, stats in wrong.items())
        parts.append(f"`{name}` is below {standard['accuracy']:.0%} on {below}"
                     + (f"; most misses first leave the machine's course at `{where[0][0]}` ({where[0][1]} of "
                        f"{len(failures)}). Next: a further round of that adapter on the steps it misses "
                        f"(`caef-bench train ... --adapter-init`, docs/long-mul-div.md), then this suite again."
                        if where else "."))
    return " ".join(parts)


def finding(document: dict) -> str:
    """The opening sentences, from the numbers."""
    parts = []
    for name, system in document["systems"].items():
        if system["cells"]:
            parts.append(f"`{name}` " + ", ".join(f"{cell} {stats['correct']}/{stats['n']}"
                                                  for cell, stats in system["cells"].items()))
    text = ("Right answers on the long cells: " + "; ".join(parts) + "." if parts
            else "No system ran any long cell.")
    not_run = {name: system for name, system in document["systems"].items() if system["not_run"]}
    if not_run:
        text += (" Not run: " + ", ".join(f"`{name}` on {len(system['not_run'])} of "
                                          f"{len(system['not_run']) + len(system['cells'])} cells"
                                          for name, system in not_run.items()) + " (each says why below).")
    return " ".join([text, *(where_it_stops(name, system, document)
                             for name, system in _caef_systems(document).items())])


def anchors_table(document: dict) -> str:
    import pandas as pd

    rows = [{"method": anchor["method"], "paper": f"{anchor['paper']} ({anchor['year']}, arXiv {anchor['arxiv']})",
             "setting": anchor["setting"], "as reported": f"{anchor['reported']} ({anchor['read_in']})",
             "reach": f"{anchor['a_digits']} x {anchor['b_digits']} digits ({anchor['reach_read_in']})",
             "as cited second-hand": anchor.get("as_cited") or "–"}
            for anchor in document["anchors"]]
    return pd.DataFrame(rows).to_markdown(index=False)


def _examples(document: dict) -> list[str]:
    """A baseline's first wrong replies per cell (all of them are in its records)."""
    lines = []
    for name, system in document["systems"].items():
        if system["kind"] == "caef":
            continue
        for cell, stats in system["cells"].items():
            for failure in stats["failures"][:EXAMPLES_PER_CELL]:
                lines.append(f"- `{name}`, {cell}, `{failure['id']}`: {failure['where']}, {failure['what']}: "
                             f"expected `{failure['expected']}`, got `{failure['got']}`")
    return lines


def how_made(document: dict) -> list[str]:
    """The command, and for each system its weights, N and where its problems and runs are."""
    lines = [f"Generated by `{document['command']}` in {document['seconds']:,.0f} s, rendered by "
             f"`caef_bench.report.long_mul_div`. Per system:", ""]
    for name, system in document["systems"].items():
        ns = sorted({stats["n"] for stats in system["cells"].values()})
        facts = [f"weights `{system['weights']}`" if system.get("weights") else "weights not known here",
                 (f"N={ns[0]}" if len(ns) == 1 else f"N={ns[0]}-{ns[-1]}") if ns else "not run",
                 f"problems in `{system['records']}`" if system.get("records") else None,
                 f"traced records in `{system['records_folder']}/`" if system.get("records_folder") else None,
                 f"lm-eval: `{system['command']}`" if system.get("command") else None,
                 f"the long route measured past the tier's limits ({system['measured_past_tier_limits']})"
                 if system.get("measured_past_tier_limits") else None]
        lines.append(f"- `{name}` ({system.get('paper_row') or 'no paper row'}; {system['description']}): "
                     + "; ".join(fact for fact in facts if fact))
    return lines


def long_mul_div_markdown(document: dict) -> str:
    import pandas as pd

    lines = ["## Long multiplication and division: schoolbook lengths, every system", "", finding(document), "",
             "Accuracy % with Wilson 95% intervals (right/N) on the first N problems of each committed cell "
             "(`tasks/data/<cell>.jsonl`: operands of exactly those lengths; the answer Python's `a*b` or `a//b`, "
             "scored by exact match as every cell). CAEF: model calls a problem (mean), beside in brackets the "
             "calls a correct run of the same problems makes (the machines' count, `runtime.reference_step_count`); "
             "model seconds a problem (its share of the batched model calls, from its records); where each miss "
             "first left the machine's course (`caef_bench/evaluate/failures.py`, listed in full below). "
             "A baseline answers in one reply, each wrong one classified from its answer alone. A cell a system "
             "did not run is not a 0: why is below.", "",
             results_table(document), "", "![Accuracy against operand length](long_mul_div.png)", ""]
    not_run = not_run_lines(document)
    if not_run:
        lines += ["### Not run, and why", "", *not_run, ""]
    rows = standard_rows(document)
    if rows:
        lines += ["### The standard a tier's long route is held to", "",
                  f"CAEF at {document['standard']['accuracy']:.0%} or better on at least the N each cell names, "
                  f"before a tier's limits give the long route these lengths:", "",
                  pd.DataFrame(rows).to_markdown(index=False), ""]
    groups = {f"`{name}` {cell}": stats["failures"] for name, system in document["systems"].items()
              for cell, stats in system["cells"].items() if stats["failures"]}
    if groups:
        lines += ["### Where the misses are", "", "Each miss counted by where it first left the machine's course "
                  "and what the error looks like (`evaluate.failures` classes):", "",
                  class_table(groups, "system, cell"), ""]
        for name, system in _caef_systems(document).items():
            if any(stats["failures"] for stats in system["cells"].values()):
                lines.append(failures_markdown(system["cells"], f"Every miss of `{name}`"))
        examples = _examples(document)
        if examples:
            lines += ["### What the baselines answered (first wrong replies per cell)", "", *examples, ""]
    lines += ["### Beside the literature", "",
              "How far multiplication reaches as the papers report it (their figures, not measured here; "
              "`caef_bench/protocol/long_mul_div_anchors.json` says where each was read):", "",
              anchors_table(document), "", HOW_MADE, "", *how_made(document), ""]
    return "\n".join(lines)


def long_mul_div_figure(document: dict, path: str | Path) -> None:
    """Accuracy against operand length, a panel per operator, a line per system with its Wilson interval;
    on multiplication the anchors' reported reach marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4), sharey=True)
    for ax, op in zip(axes, ("mul", "div")):
        cells = {cell: lengths for cell, lengths in document["cells"].items() if lengths["op"] == op}
        for i, (name, system) in enumerate(document["systems"].items()):
            points = [(lengths["a_digits"], system["cells"][cell]) for cell, lengths in cells.items()
                      if cell in system["cells"]]
            if not points:
                ax.plot([], [], color=f"C{i}", marker="o", label=f"{name}: not run")
                continue
            xs = [x for x, _ in points]
            ys = [100 * s["accuracy"] for _, s in points]
            ax.errorbar(xs, ys, yerr=[[y - 100 * s["ci_low"] for y, (_, s) in zip(ys, points)],
                                      [100 * s["ci_high"] - y for y, (_, s) in zip(ys, points)]],
                        marker="o" if system["kind"] == "caef" else "^", capsize=3, color=f"C{i}", label=name)
        if op == "mul":
            for anchor in document["anchors"]:
                source = " (second-hand)" if anchor["reach_read_in"] != anchor["read_in"] else ""
                ax.axvline(anchor["a_digits"], color="tab:purple", linestyle=":", alpha=0.7)
                ax.text(anchor["a_digits"] - 0.4, 2, f"{anchor['label']}: {anchor['a_digits']}x{anchor['b_digits']}{source}",
                        rotation=90, fontsize=7, color="tab:purple", ha="right", va="bottom")
        ax.set_xticks([lengths["a_digits"] for lengths in cells.values()],
                      [cell_title(cell, lengths) for cell, lengths in cells.items()])
        ax.set_xlim(0, max([lengths["a_digits"] for lengths in cells.values()] or [10]) * 1.15)
        ax.set_title("multiplication (a x b)" if op == "mul" else "division (a // b)", fontsize=10)
        ax.set_xlabel("digits of a")
        ax.set_ylim(-3, 103)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    axes[0].set_ylabel("accuracy % (Wilson 95%)")
    fig.suptitle("Long multiplication and division: accuracy against operand length (dotted: the literature's reach)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_long_mul_div(document: dict, out: str | Path) -> list[Path]:
    """long_mul_div.md, .json and .png in `out` (the problems' records are already there)."""
    return write_report(document, out, FILES, long_mul_div_markdown, long_mul_div_figure)
