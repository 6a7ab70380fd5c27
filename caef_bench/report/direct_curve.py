"""The LoRA-direct learning curve as results/lora_direct_curve.md, .json and .png: accuracy against
training samples, a line per operand length, beside CAEF at its full budget and the paper's
LoRA-direct (LLaMA 3.1 (L)).

Everything comes from the curves' evaluation JSONs (`evaluate.direct_curve`) and the CAEF results
file they are put beside (`caef-bench run --suite caef`'s, e.g. results/table1_caef.json); nothing is
typed in. Several evaluations are several training runs of the same budgets (another batch, another
machine), each a run of its own in the tables and the figure, named by its batch, device and the flags
that changed its plan. An earlier report's JSON serves as the evaluations it was made from, so a report
can carry runs whose training folders are gone. Each problem's reply and verdict go beside the report, packed
(records/lora_direct_curve.jsonl.gz, a line a problem), where its numbers recount.
"""

from __future__ import annotations

import copy
import json
import shlex
from pathlib import Path

from caef_bench.evaluate.table1 import read_problem_lines, write_problem_lines
from caef_bench.report.tables import HOW_MADE, OP_NAMES, paper_tables, percent, write_report

PAPER_ROW = "LLaMA 3.1 (L)"
RUN_STYLES = (("o", "-"), ("s", "-."), ("^", (0, (5, 1, 1, 1))))  # (marker, line) of each run, in the record's order
LENGTH_COLORS = {"5": "tab:blue", "10": "tab:orange", "50": "tab:green", "100": "tab:red", "1-10": "tab:purple"}
FILES = ("lora_direct_curve.md", "lora_direct_curve.json", "lora_direct_curve.png")
RECORDS = Path("records") / "lora_direct_curve.jsonl.gz"  # from the report's folder


def _length(cell: str) -> str:
    """add_5 -> '5'; mul_1_10 -> '1-10' (the paper's column)."""
    rest = cell.partition("_")[2]
    return "1-10" if rest == "1_10" else rest


def _interval(stats: dict | None) -> str:
    if not stats or not stats.get("n"):
        return "–"
    return f"{100 * stats['accuracy']:.1f} [{100 * stats['ci_low']:.1f}, {100 * stats['ci_high']:.1f}]"


# train-curve's flags that change what a run learns, as a run's name says them (the rest say where and how
# long it ran); in the order a name gives them
PLAN_FLAGS = {"--adapter": "", "--lora-r": "rank", "--lora-alpha": "alpha", "--lr": "lr", "--direct-draw": "draw",
              "--max-len": "operands to", "--seed": "seed", "--position-scheme": "position ids"}


def run_label(point: dict) -> str:
    """How a run is named in the report: its batch, the device it began on and the flags its command
    set against the preset's plan ('batch 32, CPU'; 'batch 128, NVIDIA H200, rank 256, alpha 512, lr 2e-4').
    A run that went on on another machine keeps its name: its snapshots are one run's."""
    device = (point.get("train_devices") or [point.get("train_device") or "?"])[0]
    device = "CPU" if device.startswith("cpu") else device.split(" (")[0]
    parts = [f"batch {point['batch']}, {device}" if point.get("batch") else device]
    words = shlex.split(point.get("train_command") or "")
    flags = {flag: value for flag, value in zip(words, words[1:]) if flag in PLAN_FLAGS}  # the last wins, as in argparse
    for flag, name in PLAN_FLAGS.items():
        if flag == "--adapter":
            parts += ["full fine-tuning"] if flags.get(flag) == "full" else []
        elif flag in flags:
            parts.append(f"{name} {flags[flag]}")
    return ", ".join(parts)


def snapshot_key(point: dict) -> str:
    """A point's snapshot within its run: 'add/frac_1_16'."""
    return f"{point['op']}/{point['label']}"


def _its_points(record: dict, run: dict) -> list[dict]:
    """The points a run entry of a report holds (a report made before entries named them: all of its label's)."""
    keys = set(run.get("snapshots") or [])
    return [p for ps in record["points"].values() for p in ps
            if p.get("run", "") == run["label"] and (not keys or snapshot_key(p) in keys)]


def evaluations_of_report(record: dict, problem_lines: list[dict] = ()) -> list[dict]:
    """An earlier report's JSON as the evaluations it was made from, one a run: a report carries its runs'
    points whole (cells, commands, fingerprints), so a later report can show runs whose folders are gone;
    `problem_lines` (its packed records) give the cells their problems back."""
    problems: dict[tuple, list] = {}
    for line in problem_lines:
        problems.setdefault((line["run"], line["snapshot"], line["cell"]), []).append(
            {key: line[key] for key in ("id", "reply", "correct")})
    evaluations = []
    for run in record["runs"]:
        points = {}
        for point in _its_points(record, run):
            point = {k: copy.deepcopy(v) for k, v in point.items() if k != "run"}
            for cell, stats in point["cells"].items():
                if (run["label"], snapshot_key(point), cell) in problems:
                    stats["problems"] = problems[run["label"], snapshot_key(point), cell]
            points[snapshot_key(point)] = point
        evaluations.append({**run["evaluation"], "points": points})
    return evaluations


def problem_lines(record: dict) -> list[dict]:
    """Every problem of the report's cells, a line each ({run, snapshot, cell, id, reply, correct}), taken out
    of its points (the report's JSON keeps the counts; the lines go beside it, packed)."""
    lines = []
    for points in record["points"].values():
        for point in points:
            for cell, stats in point["cells"].items():
                lines += [{"run": point["run"], "snapshot": snapshot_key(point), "cell": cell, **problem}
                          for problem in stats.pop("problems", None) or []]
    return lines


def curve_record(evaluations: list[dict], caef: dict | None, command: str, sources: dict) -> dict:
    """What the report shows, as its JSON holds it: each evaluation's run (its label, and the command
    and device that scored it), their points by operator (by run, then ascending samples, each naming
    its run), CAEF's cells of the same operators, the paper's LoRA-direct values, and where each came from."""
    bases = {evaluation.get("base_weights") for evaluation in evaluations if evaluation["points"]}
    if len(bases) > 1:
        raise ValueError(f"the runs were trained on different bases ({', '.join(sorted(map(str, bases)))}): "
                         f"one report is one base")
    points: dict[str, list] = {}
    runs = []
    for evaluation in evaluations:
        found = list(evaluation["points"].values())
        if not found:
            continue
        labels = {run_label(point) for point in found}
        if len(labels) > 1:
            raise ValueError(f"one evaluation holds several runs ({', '.join(sorted(labels))}): evaluate each curve "
                             f"on its own")
        run = labels.pop()
        keys = [snapshot_key(point) for point in found]
        # A run is named by its plan (batch, device, the flags that change what it learns): a later evaluation
        # of a run named the same is that plan trained again or further, and its snapshots take the place of
        # the earlier one's at the same fractions (the others stay).
        for earlier in (r for r in runs if r["label"] == run):
            earlier["snapshots"] = [key for key in earlier["snapshots"] if key not in keys]
        for op in points:
            points[op] = [p for p in points[op] if p["run"] != run or snapshot_key(p) not in keys]
        runs = [r for r in runs if r["snapshots"]]
        runs.append({"label": run, "snapshots": keys, "evaluation": {key: evaluation.get(key) for key in (
            "command", "curve", "per_cell", "base", "base_weights", "device")}})
        for point in found:
            points.setdefault(point["op"], []).append({**point, "run": run})
    # in Table 1's order of operators, whichever evaluation came first
    points = {op: points[op] for op in sorted(points, key=list(OP_NAMES).index) if points[op]}
    if not points:
        raise ValueError("the curve's evaluation holds no points: run `caef-bench eval-curve` first")
    order = list(dict.fromkeys(r["label"] for r in runs))
    for op in points:
        points[op].sort(key=lambda p: (order.index(p["run"]), p["samples"]))
    paper = paper_tables()["table1_overall_accuracy"]
    caef_cells = (caef or {}).get("results", {})
    return {
        "command": command, "sources": sources, "runs": runs,
        "caef": None if caef is None else {
            "command": caef.get("command"), "weights": caef.get("weights"),
            "cells": {cell: {**{k: r["end_to_end"][k] for k in ("n", "correct", "accuracy", "ci_low", "ci_high")},
                             "command": (r.get("made_by") or {}).get("command", caef.get("command"))}
                      for cell, r in caef_cells.items() if cell.partition("_")[0] in points and "end_to_end" in r}},
        "paper": {op: {length: value for length, value in paper.get(OP_NAMES[op], {}).get(PAPER_ROW, {}).items()
                       if value is not None} for op in points},
        "points": points,
    }


def runs_of(points: list[dict]) -> dict[str, list[dict]]:
    """One operator's points by run, in the record's order."""
    by_run: dict[str, list] = {}
    for point in points:
        by_run.setdefault(point.get("run", ""), []).append(point)
    return by_run


def _range(cells: list[dict]) -> str:
    """'0%' or '45-57%': the accuracies of one snapshot's test cells, lowest to highest."""
    low, high = (percent(s["correct"], s["n"]) for s in (min(cells, key=_accuracy), max(cells, key=_accuracy)))
    return low if low == high else f"{low.rstrip('%')}-{high}"


def _accuracy(stats: dict) -> float:
    return stats["accuracy"]


def curve_findings(record: dict) -> str:
    """The opening sentences, from the numbers: per operator and run, the accuracy across lengths at the
    first and the last snapshot, and CAEF's on the same test cells."""
    ns = sorted({s["n"] for points in record["points"].values() for p in points for s in p["cells"].values()})
    parts, most_runs = [], 1
    for op, points in record["points"].items():
        chance = " (a guess is right half the time)" if op in ("gt", "lt", "eq") else ""
        by_run = runs_of(points)
        most_runs = max(most_runs, len(by_run))
        said = []
        for run, shown in by_run.items():
            first, last = shown[0], shown[-1]
            part = f"{_range(list(first['cells'].values()))} at {first['fraction']} of its budget"
            if len(shown) > 1:
                part += f" and {_range(list(last['cells'].values()))} at {last['fraction']}"
            notes = [run] if len(by_run) > 1 else []
            if len(shown) == 1:  # a run stopped before its second snapshot
                notes.append("its only snapshot")
            said.append(part + (f" ({'; '.join(notes)})" if notes else ""))
        parts.append(f"{OP_NAMES[op]}{chance} " + ", ".join(said))
    runs = "one training run per operator" if most_runs == 1 else "each training run, named by its batch, device and plan"
    text = (f"LoRA-direct on the tiny base, evaluated at snapshots of {runs} ("
            f"N={'/'.join(str(n) for n in ns)} per test cell, across the operand lengths): " + "; ".join(parts) + ".")
    caef = (record.get("caef") or {}).get("cells") or {}
    if caef:
        text += " CAEF at its full budget, on the same test cells: " + "; ".join(
            f"{OP_NAMES[op]} {_range([s for c, s in caef.items() if c.partition('_')[0] == op])}"
            for op in record["points"] if any(c.partition("_")[0] == op for c in caef)) + "."
    return text


def curve_markdown(record: dict) -> str:
    import pandas as pd

    runs, caef = record["runs"], record["caef"]
    several = len({run["label"] for run in runs}) > 1
    lines = ["## LoRA-direct learning curve: accuracy against training samples", "", curve_findings(record), "",
             "Accuracy % with Wilson 95% intervals, per snapshot (its training samples, and their share of the "
             "operator's budget: the samples of its CAEF executor and aligner plans together); beside them CAEF at "
             f"its full budget and the paper's {PAPER_ROW}, LLaMA 3.1-8B fine-tuned with LoRA to answer directly "
             "(Lai et al., arXiv 2410.07896, Table 1), at its own budget.", ""]
    for op, points in record["points"].items():
        lengths = list(dict.fromkeys(_length(cell) for p in points for cell in p["cells"]))

        def row(system: str, samples: str, of_budget: str, cells: dict[str, str], n: str) -> dict:
            # with several runs the first column names the run (or the system), the second its samples
            first = {"run": system, "samples": samples} if several else {"samples": samples or system}
            return {**first, "of budget": of_budget,
                    **{f"{length} digits": cells.get(length, "–") for length in lengths}, "N": n}

        rows = [row(p.get("run", ""), f"{p['samples']:,}", f"{100 * p['fraction_of_budget']:.1f}%",
                    {_length(c): _interval(s) for c, s in p["cells"].items()},
                    "/".join(str(n) for n in sorted({s["n"] for s in p["cells"].values()}))) for p in points]
        if caef is not None:
            cells = {_length(c): s for c, s in caef["cells"].items() if c.partition("_")[0] == op}
            rows.append(row("CAEF (ours)", "", "full", {n: _interval(s) for n, s in cells.items()},
                            "/".join(str(n) for n in sorted({s["n"] for s in cells.values()}))))
        paper = record["paper"].get(op, {})
        rows.append(row(f"{PAPER_ROW} (paper)", "", "–", {n: f"{v:.1f}" for n, v in paper.items()}, "–"))
        budget = points[0]["budget_samples"]
        lines += [f"### {OP_NAMES[op]} (budget {budget:,} samples)", "", pd.DataFrame(rows).to_markdown(index=False), ""]
    lines += ["![Accuracy against training samples](lora_direct_curve.png)", "", HOW_MADE, "",
              f"Generated by `{record['command']}` from "
              + ", ".join(f"`{path}`" for path in record["sources"]["evaluations"]) + "."
              + (f" Each problem's reply and verdict: `{record['records']}`." if record.get("records") else "")]
    for run in runs:
        evaluation = run["evaluation"]
        its_points = _its_points(record, run)
        name = run["label"]
        if sum(r["label"] == name for r in runs) > 1:  # one plan, its snapshots trained or scored in different calls
            held = {}  # op -> its snapshots' fractions here, in order
            for p in sorted(its_points, key=lambda p: p["samples"]):
                held.setdefault(p["op"], []).append(p["fraction"])
            name += " (" + "; ".join(f"{OP_NAMES[op]} {held[op][0]}" + (f" to {held[op][-1]}" if len(held[op]) > 1 else "")
                                     for op in OP_NAMES if op in held) + ")"
        trainings = sorted({(p["train_command"], p["seed"], p["position_scheme"]) for p in its_points})
        scorers = list(dict.fromkeys(command for p in its_points for command in p.get("scored_by") or [evaluation["command"]]))
        lines += ["", (f"**{name}.** " if several else "")
                  + " and ".join(f"`{command}`" for command in scorers)
                  + f" scored its snapshots on {evaluation['device']}: the first {evaluation['per_cell']} "
                  f"problems of each test cell (N per cell above where a cell holds fewer), the protocol's LoRA-direct "
                  f"prompt, one greedy reply scored by the project's scorer (exact match). Base weights "
                  f"`{evaluation['base_weights']}` (`{evaluation['base']}`); the adapters were trained by:", ""]
        lines += [f"- `{command}` (seed {seed}, {scheme} position ids)" for command, seed, scheme in trainings]
    lines += ["", "Each run trains one adapter per operator with a constant learning rate after warm-up and takes a "
                  "snapshot at each fraction of its budget, so each snapshot is the first steps of its run's next one. "
                  "Each snapshot's weights fingerprint is in the JSON."]
    if caef is not None:
        commands = sorted({cell["command"] for cell in caef["cells"].values()})
        lines += ["", f"CAEF at its full budget: `{record['sources']['caef']}`, weights `{caef['weights']}`, made by "
                      + ", ".join(f"`{command}`" for command in commands) + "."]
    return "\n".join(lines) + "\n"


# Snapshots closer than these ratios of samples (on the figure's log scale) would run their labels into
# each other: under CROWDED the labels slant, under LABEL_APART a tick goes unnamed (its neighbour is).
CROWDED = 1.4
LABEL_APART = 1.15


def snapshot_ticks(tick_at: dict[str, int]) -> tuple[list[int], list[str], bool]:
    """Positions and labels of the ticks at the snapshots (fraction -> samples, in order), and whether
    they are crowded. On a scale of a hundredfold, 1/16, 5/64 and 3/32 lie a fifth apart (named,
    slanted); 9/64 lies an eighth past 1/8 (unnamed). Of two too close, the rounder fraction keeps its
    name: 1/4 a seventh past 7/32 is named and 7/32 is not, since the budget's quarters are what a
    reader looks for."""
    from fractions import Fraction

    fractions, positions = list(tick_at), list(tick_at.values())
    labels, last_named = [], None  # the index of the last tick named
    for i, fraction in enumerate(fractions):
        named = last_named is None or positions[i] / positions[last_named] >= LABEL_APART
        if not named and Fraction(fraction).denominator < Fraction(fractions[last_named]).denominator:
            labels[last_named] = ""
            named = True
        labels.append(fraction if named else "")
        last_named = i if named else last_named
    crowded = any(b / a < CROWDED for a, b in zip(positions, positions[1:]))
    return positions, labels, crowded


def curve_figure(record: dict, path: str | Path) -> None:
    """A panel per operator: accuracy against samples (log), a line per length with its Wilson
    interval, CAEF's accuracy as a dashed line, the paper's LoRA-direct as an x at the budget
    (dotted). The lengths of one snapshot are drawn a little apart, else equal accuracies hide
    each other."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import NullFormatter

    ops = list(record["points"])
    columns = min(3, len(ops))
    rows = -(-len(ops) // columns)
    legend_columns = 2 if columns == 1 else 4
    entries = len(LENGTH_COLORS) + 3 + len({run["label"] for run in record["runs"]})
    legend_height = 0.3 + 0.22 * -(-entries // legend_columns)  # inches, for the legend's rows
    fig, axes = plt.subplots(rows, columns, figsize=(5.6 * columns, 4.0 * rows + legend_height), sharey=True,
                             squeeze=False)
    shown_lengths = {}
    run_names = list(dict.fromkeys(run["label"] for run in record["runs"]))
    styles = {name: RUN_STYLES[i % len(RUN_STYLES)] for i, name in enumerate(run_names)}
    for ax, op in zip(axes.flat, ops):
        points = record["points"][op]
        budget = points[0]["budget_samples"]
        lengths = list(dict.fromkeys(_length(cell) for p in points for cell in p["cells"]))
        caef_cells = ((record["caef"] or {}).get("cells") or {})
        for i, n in enumerate(lengths):
            color = shown_lengths.setdefault(n, LENGTH_COLORS.get(n, "tab:gray"))
            shift = 1 + 0.04 * (i - (len(lengths) - 1) / 2)
            for run, run_points in runs_of(points).items():
                marker, linestyle = styles[run]
                shown = [(p["samples"], s) for p in run_points for c, s in p["cells"].items() if _length(c) == n]
                # (clamped: at 0% or 100% a bound can round to a hair inside the accuracy)
                errors = [[max(0.0, 100 * (s["accuracy"] - s["ci_low"])) for _, s in shown],
                          [max(0.0, 100 * (s["ci_high"] - s["accuracy"])) for _, s in shown]]
                ax.errorbar([samples * shift for samples, _ in shown], [100 * s["accuracy"] for _, s in shown],
                            yerr=errors, marker=marker, linestyle=linestyle, markersize=4, color=color, capsize=2)
            caef = next((s for c, s in caef_cells.items() if c.partition("_")[0] == op and _length(c) == n), None)
            if caef is not None:
                ax.axhline(100 * caef["accuracy"], color=color, linestyle="--", alpha=0.6, linewidth=1)
            paper = record["paper"].get(op, {}).get(n)
            if paper is not None:
                ax.plot([budget * shift], [paper], marker="x", markersize=9, markeredgewidth=2, color=color)
        ax.axvline(budget, color="gray", linestyle=":", linewidth=1)
        ax.set_xscale("log")
        # a tick at each snapshot, named by its fraction of the budget (the table has the samples)
        tick_at = {}  # fraction -> the fewest samples any run took it at (runs differ by a few samples)
        for p in sorted(points, key=lambda p: p["samples"]):
            tick_at.setdefault(p["fraction"], p["samples"])
        positions, labels, crowded = snapshot_ticks(tick_at)
        ax.set_xticks(positions, labels, fontsize=8, rotation=45 if crowded else 0,
                      ha="right" if crowded else "center")
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_title(f"{OP_NAMES[op]} (budget {budget:,} samples)")
        ax.set_xlabel("training samples (log scale), as a fraction of the budget")
        ax.set_ylim(-3, 103)
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(ops):]:
        ax.axis("off")
    for ax in axes[:, 0]:
        ax.set_ylabel("accuracy %")
    handles = [Line2D([], [], color=color, marker="o", label=f"{n} digits") for n, color in shown_lengths.items()]
    ours = [("LoRA-direct, tiny base" + (f", {run}" if len(styles) > 1 else "") + " (ours)", style)
            for run, style in styles.items()]
    handles += [Line2D([], [], color="black", marker=marker, linestyle=line, label=name)
                for name, (marker, line) in ours]
    handles += [Line2D([], [], color="black", linestyle="--", label="CAEF at its full budget (ours)"),
                Line2D([], [], color="black", marker="x", markeredgewidth=2, linestyle="none",
                       label="LoRA-direct, LLaMA 3.1-8B (paper)"),
                Line2D([], [], color="gray", linestyle=":", label="budget: CAEF's executor + aligner")]
    fig.legend(handles=handles, loc="lower center", ncol=legend_columns, fontsize=8, frameon=False)
    fig.suptitle("LoRA-direct on the tiny base: accuracy against training samples")
    fig.tight_layout(rect=(0, legend_height / (4.0 * rows + legend_height), 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_curve_report(evaluation_paths: list[str | Path], out: str | Path, command: str,
                       caef_path: str | Path | None = None) -> list[Path]:
    """lora_direct_curve.md, .json and .png in `out`, from the evaluation JSONs (a run each, or an
    earlier report's JSON: its runs) and (if given and present) the CAEF results JSON."""
    evaluations = []
    for path in map(Path, evaluation_paths):
        if not path.is_file():
            raise FileNotFoundError(f"no curve evaluation at {path}: `caef-bench eval-curve` writes it")
        found = json.loads(path.read_text())
        if "runs" in found:  # an earlier report: its runs, their problems from its records
            packed = path.parent / found["records"] if found.get("records") else None
            evaluations += evaluations_of_report(found, read_problem_lines(packed) if packed and packed.is_file() else [])
        else:
            evaluations.append(found)
    caef = None
    if caef_path is not None:
        if not Path(caef_path).is_file():
            raise FileNotFoundError(f"no CAEF results at {caef_path} (`caef-bench run --suite caef` writes them)")
        caef = json.loads(Path(caef_path).read_text())
    record = curve_record(evaluations, caef, command, {"evaluations": [str(path) for path in evaluation_paths],
                                                       "caef": str(caef_path) if caef is not None else None})
    lines = problem_lines(record)  # (takes the problems out of the evaluations' cells: they are this call's own)
    if lines:  # evaluations made before they kept their problems have none: the report names no records then
        write_problem_lines(lines, Path(out) / RECORDS)
        record["records"] = str(RECORDS)
    return write_report(record, out, FILES, curve_markdown, curve_figure)
