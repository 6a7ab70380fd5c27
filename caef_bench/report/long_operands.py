"""results/long_operands.md and .png from results/long_operands.json: accuracy against operand length past
the paper's 100 digits, where the tier stops, why, and what would take it further.

    python -m caef_bench.report.long_operands [--json results/long_operands.json] [--out results]

The JSON is written by `python -m caef_bench.evaluate.long_operands` (its measurements, and the
committed Table 1 results it reads for 5-100 digits); this module only lays it out, so
`python -m caef_bench.report.render results/long_operands.json` renders the same Markdown.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from caef_bench.report.tables import counted_interval, percent

FILES = ("long_operands.md", "long_operands.json", "long_operands.png")
HOW_MADE = "### How this was made"
OP_NAMES = {"add": "add", "sub": "sub", "gt": "gt", "lt": "lt", "eq": "eq"}


def _points(document: dict, op: str) -> list[tuple[int, dict, str]]:
    """(digits, stats, source) of every measured point of op, by length: Table 1's cells, then the probes."""
    within = [(int(n), s, "table1") for n, s in document.get("within", {}).get("points", {}).get(op, {}).items()]
    beyond = [(int(n), s, "probe") for n, s in document.get("beyond", {}).get(op, {}).items()]
    return sorted(within + beyond, key=lambda point: point[0])


def _windowed_points(document: dict, op: str) -> list[tuple[int, dict, str]]:
    """Table 1's cells, then the windowed runs past the fields (evaluate.long_operands --windowed)."""
    within = [(int(n), s, "table1") for n, s in document.get("within", {}).get("points", {}).get(op, {}).items()]
    windowed = [(int(n), s, "windowed") for n, s in document.get("windowed", {}).get(op, {}).items()]
    return sorted(within + windowed, key=lambda point: point[0])


# The one standard a tier's limits rest on, whole states and windowed runs alike: at a length within the
# limit every operator it runs there answered at least 99% of at least 100 problems (Table 1's cells hold
# the whole states to it at 5-100 digits, N=200 each).
STANDARD_N, STANDARD_ACCURACY = 100, 0.99


def meets_standard(stats: dict) -> bool:
    return stats["n"] >= STANDARD_N and stats["correct"] >= STANDARD_ACCURACY * stats["n"]


def windowed_standard(document: dict, windowed_ops: tuple[str, ...]) -> str:
    """The longest windowed length the standard supports for every operator the tier windows, beside the
    tier's windowed limit, and the points short of it."""
    windowed = document.get("windowed", {})
    lengths = sorted({int(n) for points in windowed.values() for n in points})
    held = [n for n in lengths if all(str(n) in windowed.get(op, {}) and meets_standard(windowed[op][str(n)])
                                      for op in windowed_ops)]
    short = [f"{op} at {int(n):,} ({s['correct']}/{s['n']})" for op, points in windowed.items()
             for n, s in sorted(points.items(), key=lambda item: int(item[0])) if not meets_standard(s)]
    unmeasured = [f"{op} at {n:,}" for n in lengths for op in windowed_ops if str(n) not in windowed.get(op, {})]
    tier_limit = document.get("windowed_digits")
    sentences = [
        f"One standard for every limit, whole states and windows alike: at a length within it, each operator "
        f"the tier runs there answered at least {STANDARD_ACCURACY:.0%} of at least {STANDARD_N} problems.",
        (f"Windowed runs of {', '.join(windowed_ops)} meet it at {', '.join(f'{n:,}' for n in held)} digits"
         if held else f"No windowed length meets it yet for all of {', '.join(windowed_ops)}")
        + (f" (the tier's windowed limit: {tier_limit:,} digits)" if tier_limit else "") + ".",
        *([f"Short of it: {'; '.join(short)}."] if short else []),
        *([f"Not measured yet: {', '.join(unmeasured)}."] if unmeasured else [])]
    return " ".join(sentences)


def windowed_finding(document: dict) -> str:
    """What windowed execution measured, from the numbers: right/N by operator and length, and where
    the point estimates are below 99%."""
    windowed = document.get("windowed", {})
    if not windowed:
        return ""
    window = document["window"]
    parts = [f"{op} " + ", ".join(f"{s['correct']}/{s['n']} at {int(n):,}" for n, s in
                                  sorted(points.items(), key=lambda item: int(item[0])))
             for op, points in windowed.items()]
    below = [f"{op} at {int(n):,} ({percent(s['correct'], s['n'])})" for op, points in windowed.items()
             for n, s in points.items() if s["correct"] < 0.99 * s["n"]]
    longest = max(int(n) for points in windowed.values() for n in points)
    every = [s for points in windowed.values() for s in points.values()]
    lows = sorted({(s["n"], round(100 * s["ci_low"])) for s in every if s["correct"] == s["n"]}, reverse=True)
    detours = [f"{op} {s['correct'] - s['exact_traces']} of {s['n']} at {int(n):,} ("
               + ", ".join(f"{where} {count}" for where, count in sorted(s["first_failure"].items())) + ")"
               for op, points in windowed.items() for n, s in sorted(points.items(), key=lambda i: int(i[0]))
               if s.get("exact_traces", s["correct"]) < s["correct"]]
    return (f"Run a window at a time past {window['past_digits']} digits (`runtime.windowed`: each executor "
            f"step is shown {window['width']} cells of each tape from {window['back']} behind its heads, the "
            f"aligners convert {window['chunk']}-digit chunks), the {document['tier']} tier's shipped weights, "
            f"trained on 1-{document['limit_digits']} digits, answer " + "; ".join(parts) + " digits. "
            + (f"Below 99%: {', '.join(below)}. " if below else
               (f"Every answer is right up to {longest:,} digits (the lower ends of the Wilson 95% intervals: "
                + ", ".join(f"{low}% at N={n}" for n, low in lows) + "). ") if all(s["correct"] == s["n"] for s in every)
               else f"Every point is at or above 99% up to {longest:,} digits (the intervals are in the table). ")
            + (f"Runs that left the machine's course and still ended right, a later digit deciding: "
               f"{'; '.join(detours)}. " if detours else "")
            + "The model writes every digit; the runtime cuts each state to a window and joins the model's "
            "window back. This is not length generalisation of the model: no window is longer than the "
            "problems it was trained on. " + windowed_standard(document, tuple(document.get("windowed_ops", windowed)))
            + " mul and div are not windowed.")


def first_zero(points) -> int | None:
    return next((digits for digits, stats, _ in points if stats["correct"] == 0), None)


def first_wrong(points) -> int | None:
    return next((digits for digits, stats, _ in points if stats["correct"] < stats["n"]), None)


def finding(document: dict) -> str:
    """The opening sentences, from the numbers."""
    stride, limit = document["field_stride"], document["limit_digits"]
    parts, wrong_from, zero_from = [], {}, {}
    for op in document.get("beyond", {}):
        points = _points(document, op)
        wrong_from[op], zero_from[op] = first_wrong(points), first_zero(points)
        probes = [(n, s) for n, s, source in points if source == "probe"]
        parts.append(f"{op} " + ", ".join(f"{s['correct']}/{s['n']} at {n}" for n, s in probes))
    lows = [s["ci_low"] for op in document.get("beyond", {}) for s in document["beyond"][op].values()
            if s["correct"] == s["n"]]
    falls = "; ".join(f"{op} has wrong answers from {wrong_from[op]} digits" + (
        f" and none right from {zero_from[op]}" if zero_from[op] else "") for op in wrong_from if wrong_from[op])
    machines = document.get("machines", {})
    machine_right = sum(s["correct"] for s in machines.values())
    machine_n = sum(s["n"] for s in machines.values())
    return (f"On whole states past its training lengths (1-{limit} digits) the {document['tier']} tier's accuracy falls "
            f"within a few "
            f"digits: {falls} (" + "; ".join(parts) + " digits). "
            + (f"A probe of 20 right answers in 20 cannot show >= 99% (its Wilson interval reaches down to "
               f"{100 * min(lows):.0f}%), so " if lows else "So ")
            + f"whole states stay limited to {limit} digits. Past {stride - 1} digits its coupled position ids "
            f"run out ({stride} a field): a whole 200-, 500- or 1,000-digit state cannot be addressed at all. The exact machines "
            f"answer {machine_right} of {machine_n} long problems (200 to 1,000 digits) right. Next: a base and "
            f"adapters trained with fields of 1,024 ids and position ids at random offsets, on an accelerator "
            f"(docs/long-operands.md).")


def long_operands_markdown(document: dict) -> str:
    import pandas as pd

    ops = list(document.get("beyond", {})) or list(document.get("within", {}).get("points", {}))
    lengths = sorted({n for op in ops for n, _, _ in _points(document, op)})
    rows = []
    for op in ops:
        by_length = {n: s for n, s, _ in _points(document, op)}
        rows.append({"operator": op, **{f"{n}": (counted_interval(by_length[n], 0) if n in by_length else "–") for n in lengths}})
    failure_rows = [{"operator": op, "digits": n, "right": f"{s['correct']}/{s['n']}",
                     "where runs first left the machine's course": ", ".join(
                         f"{where} {count}" for where, count in sorted(s["first_failure"].items())) or "–",
                     "at executor step": _steps(s["executor_failure_steps"]),
                     "model calls a run (mean)": s["steps_mean"]}
                    for op in document.get("beyond", {}) for n, s in sorted(document["beyond"][op].items(),
                                                                            key=lambda item: int(item[0]))]
    machine_rows = [{"cell": cell, "right": f"{s['correct']}/{s['n']}", "model calls a run": s["model_calls_mean"],
                     "longest input (chars)": f"{s['longest_input_chars']:,}"}
                    for cell, s in document.get("machines", {}).items()]
    anchors = [{"method": a["method"], "task": a["task"], "trained on": _digits(a["trained_digits"]),
                "reported at": _digits(a["reported_digits"]), "as reported": a["reported"]}
               for a in document["anchors"]]
    within = document["within"]
    stride = document["field_stride"]
    lines = [
        "## Long operands: past the paper's 100 digits", "",
        *([windowed_finding(document), ""] if document.get("windowed") else []),
        *_windowed_section(document),
        "### Whole states: where the fields of ids stop", "", finding(document), "",
        f"End-to-end accuracy (Wilson 95% intervals, right/N) against operand length. 5-100 digits: the "
        f"committed Table 1 cells (`{within['source']}`, weights `{within['weights']}`); past 100: probes drawn as "
        f"the cells are, run past the tier's limit with `--beyond-tier-limits` (weights `{document.get('weights')}`). "
        f"Training lengths: 1-{document['limit_digits']} digits for every operator.", "",
        pd.DataFrame(rows).to_markdown(index=False), "",
        "![Accuracy against operand length](long_operands.png)", "",
        "### Where it stops, and why", "",
        pd.DataFrame(failure_rows).to_markdown(index=False) if failure_rows else "(no probes past the limit)", "",
        f"Every token's position id is `{stride} * field + cell` (models/positions.py: a field is the text between "
        f"two separators, a cell one digit of a tape), so the k-th cell of a field has the same id in a state and "
        f"in the next state, and copying a cell is the same zero offset at every length. Two things bound it. "
        f"(1) The ids of a field run out at {stride} cells: past {stride - 1} digits a tape's cells take the ids "
        f"of the next field, and a 200-digit operand is not a tape the model can even address. (2) Within that, "
        f"the adapters only ever saw fields of at most 101 cells (a 100-digit sum): ids `{stride} * field + 102` "
        f"and up, and the relative offsets they make, were never trained on, and how far a stage copes with "
        f"them is measured, not assumed. The table above says which stage breaks first as the operands grow (aligner (I) writing the start state, an executor step, aligner (O) reading the "
        f"answer back), and after how many executor steps (the head walks from the lowest digit, so a failure "
        f"late in the run is one near the top of the tape).", "",
        "### The exact machines on the long cells", "",
        "The stdlib machines run every committed long problem (no model): the answer aligner (O)'s rule "
        "reads off each halt state, the model calls a correct run would make, and the longest text one of "
        "them reads (a 1,000-digit sub calls the add executor inside its composer).", "",
        pd.DataFrame(machine_rows).to_markdown(index=False) if machine_rows else "(not run)", "",
        "### Beside the literature", "",
        "Length generalisation as the anchors report it (their figures, not measured here):", "",
        pd.DataFrame(anchors).to_markdown(index=False), "",
        f"The {document['tier']} tier trains its coupled ids from the same offset (0) at every length, so no id "
        f"past its longest training field is ever seen; both anchors train with position ids at random offsets "
        f"over a range longer than their training operands (Abacus: a random offset to the digit index; position "
        f"coupling: a random starting id), so every id of the longer range has been trained on.", "",
        *_one_step_section(document),
        "### Next step", "",
        f"Windowed execution covers {', '.join(document.get('windowed_ops', []))} (sub's composer steps in "
        "chunks, its callees on windows); mul and div keep the paper's ranges on this route (the long route is "
        "results/long_mul_div.md's). "
        "For the model itself to run whole long states: a tier with fields of 1,024 ids (`train --set position_scheme=coupled-hints/1024`) trained with randomised "
        "positions (`--position-offsets 896`: each training sample's ids but <s>'s and <sep>'s shifted by a "
        "random offset, so no cell is found by its distance from the segment's start), from operands of at most "
        "100 digits, index hints for the aligners as now; the base too, since the weights read the next field's "
        "cell at the fixed offset of their stride (the single steps above). "
        "That is two `caef-bench train` commands on an accelerator (docs/long-operands.md): the base pre-trained "
        "further, then the length operators' adapters from the shipped ones, then these probes at 200, 500 and "
        "1,000 digits. If that "
        "falls short, train on longer operands too (a 1,000-digit add state is over 3,000 tokens). Its cost at "
        "inference is in results/bench_length.md. Until then the tier runs whole states up to "
        f"{document['limit_digits']} digits and windows past them, up to its windowed limit; `caef-bench solve` "
        "refuses longer operands in one line.", "",
        HOW_MADE, "",
        "Generated by " + "; ".join(f"`{c}`" for c in distinct_commands(document.get("commands", [])))
        + f" (seed {document['seed']}, "
        f"{document.get('torch_threads', '?')} torch threads), rendered by `python -m caef_bench.report.long_operands`. "
        + _records_sentence(document), "",
    ]
    return "\n".join(lines)


def distinct_commands(commands: list[str]) -> list[str]:
    """The recorded commands, those that differ only in `--n` as one: the largest, which makes the whole
    point (a run resumes from the problems a smaller one solved, so `--n 100` after `--n 20` ... `--n 80` is
    what a rerun needs)."""
    def without_n(command: str) -> str:
        return re.sub(r" --n \d+", "", command)

    def n(command: str) -> int:
        found = re.search(r" --n (\d+)", command)
        return int(found.group(1)) if found else 0

    largest: dict[str, str] = {}
    for command in commands:
        key = without_n(command)
        if key not in largest or n(command) > n(largest[key]):
            largest[key] = command
    return list(largest.values())


def _records_sentence(document: dict) -> str:
    """Where each section's problems are: packed beside the report, or (points measured before runs packed
    them) only in the measuring machine's work/long_operands/."""
    parts = []
    for section, what in (("beyond", "whole-state probes"), ("windowed", "windowed points")):
        points = [p for by_length in (document.get(section) or {}).values() for p in by_length.values()]
        packed = sum("records" in p for p in points)
        if not points:
            continue
        where = f"results/records/long_operands/{section}/"
        parts.append(f"the {what}' under {where}" if packed == len(points) else
                     f"{packed} of the {len(points)} {what}' under {where} (the others' stayed in work/long_operands/)")
    return ("Records: each point's problems are packed (answers, outcomes, first divergences; no step texts), "
            + "; ".join(parts) + ".") if parts else ""


def _passes_a_call(point: dict) -> float | str:
    """Forward passes per model call of the problems a point's run solved (not those it read back), by the
    calls it counted; a point measured before runs counted them has its mean run's calls only, which are
    those solved only when none was read back ("–" otherwise: eq's equal pairs take 1,042 calls, its others
    ~42, so a mean over other problems says nothing)."""
    if not point.get("forward_passes") or point["n"] <= point["resumed"]:
        return "–"
    if "calls_solving" in point:
        return round(point["forward_passes"] / max(1, point["calls_solving"]), 2)
    return round(point["forward_passes"] / max(1, point["steps_mean"] * point["n"]), 2) if not point["resumed"] else "–"


def _windowed_section(document: dict) -> list[str]:
    """Accuracy and cost of the windowed runs, and where any run left the machine's course."""
    import pandas as pd

    windowed = document.get("windowed", {})
    if not windowed:
        return []
    rows = []
    for op, points in windowed.items():
        for n, s in sorted(points.items(), key=lambda item: int(item[0])):
            rows.append({"operator": op, "digits": f"{int(n):,}", "accuracy": counted_interval(s, 0),
                         "exact traces": f"{s['exact_traces']}/{s['n']}",
                         "first left the machine's course": ", ".join(
                             f"{where} {count}" for where, count in sorted(s["first_failure"].items())) or "–",
                         "model calls a run (mean)": s["steps_mean"],
                         "forward passes a call": _passes_a_call(s)})
    return ["### Windowed execution", "",
            f"Whole runs, traced, of the committed long cells (the first N of each), with the shipped weights "
            f"`{document.get('weights')}`; each call is compared with the machine's own call on the same window, "
            f"so a run's first divergence is found as in a whole-state run (an exact trace: every call the "
            f"machine's; a comparison can leave the course and still end right, a later digit deciding). A "
            f"windowed step reads a window of "
            f"fixed size, so a problem's model calls, and its time, grow with its length, not with its square. "
            f"The calls are the cost that does not depend on the machine; what a problem takes in seconds, "
            f"measured one problem at a time on a quiet CPU, is in results/bench_length.md (these runs shared "
            f"the CPU with other work, so their wall times say little).", "",
            pd.DataFrame(rows).to_markdown(index=False), ""]


def _one_step_section(document: dict) -> list[str]:
    """Single steps, teacher-forced, by weights and the ids they ran under (evaluate.long_operands --one-step)."""
    import pandas as pd

    probes = document.get("one_step", {})
    if not probes:
        return []
    rows = []
    for probe in probes.values():
        lengths = sorted({int(n) for points in probe["points"].values() for n in points})
        for op, points in probe["points"].items():
            for adapter in sorted({name for stats in points.values() for name in stats}):
                schemes = {stats[adapter].get("scheme", probe["scheme"]) for stats in points.values() if adapter in stats}
                ids = ", ".join(sorted(schemes)) + ("" if probe["own_scheme"] else " (not its own)")
                rows.append({"weights": f"`{probe['weights']}` ({probe['checkpoints']})", "ids": ids,
                             "adapter": adapter, **{f"{n}": (f"{points[str(n)][adapter]['correct']}/"
                                                           f"{points[str(n)][adapter]['n']}"
                                                           if str(n) in points and adapter in points[str(n)] else "–")
                                                   for n in lengths}})
    table = pd.DataFrame(rows).fillna("–")
    return ["### Single steps: what the weights read", "",
            "Exact single steps, teacher-forced (right/N by operand digits): one executor transition drawn from "
            "each problem, and the aligner's conversions, (I) and (O) alternating. A row under ids that are not "
            "its own runs the same weights with only the field stride changed: whether what they learned is tied "
            "to it.", "", table.to_markdown(index=False), ""]


def _steps(steps: list[int]) -> str:
    if not steps:
        return "–"
    return f"{min(steps)}-{max(steps)} (median {steps[len(steps) // 2]})"


def _digits(n) -> str:
    return f"{n} digits" if n else "–"


def long_operands_figure(document: dict, path: str | Path) -> None:
    """Left: 5 to 1,000 digits (log scale), the training lengths, the ids' end and the anchors' reported
    reach; right: the probes past 100 digits on a linear scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (wide, near) = plt.subplots(1, 2, figsize=(10.0, 4.2), gridspec_kw={"width_ratios": [3, 2]})
    limit, stride = document["limit_digits"], document["field_stride"]
    ops = list(dict.fromkeys([*document.get("beyond", {}), *document.get("windowed", {})])) or \
        list(document["within"]["points"])
    for ax in (wide, near):
        ax.axvspan(0.5, limit, color="tab:green", alpha=0.08, label=f"training lengths (1-{limit})")
        ax.axvspan(stride - 1, 1100, color="grey", alpha=0.15, label=f"past {stride - 1}: no ids for a whole state's cells")
        for i, op in enumerate(ops):
            shift = 0.02 * (i - (len(ops) - 1) / 2)
            windowed = ax is wide and op in document.get("windowed", {})
            series = [(_points(document, op), "o", ":" if windowed else "-",
                       f"caef-{document['tier']} {op}" + (", whole states" if windowed else ""))]
            if windowed:  # the tier as it runs now: whole states to the limit, windows past it
                series.append((_windowed_points(document, op), "s", "-", f"caef-{document['tier']} {op}, windowed"))
            for points, marker, style, label in series:
                xs = [n * (1 + shift) if ax is wide else n + 10 * shift for n, _, _ in points]
                ax.errorbar(xs, [100 * s["accuracy"] for _, s, _ in points],
                            yerr=[[max(0.0, 100 * (s["accuracy"] - s["ci_low"])) for _, s, _ in points],
                                  [max(0.0, 100 * (s["ci_high"] - s["accuracy"])) for _, s, _ in points]],
                            marker=marker, markersize=4, capsize=2, color=f"C{i}", linestyle=style,
                            alpha=0.6 if style == ":" else 1.0, label=label)
        ax.set_ylim(-3, 122)
        ax.set_yticks(range(0, 101, 20))
        ax.grid(alpha=0.3)
    for j, anchor in enumerate(a for a in document["anchors"] if a["trained_digits"] and a["reported_digits"]):
        y = 108 + 7 * j
        wide.annotate("", xy=(anchor["reported_digits"], y), xytext=(anchor["trained_digits"], y),
                      arrowprops={"arrowstyle": "->", "color": "tab:purple"})
        wide.text(anchor["trained_digits"], y + 1.5, f"{anchor['method'].split(' (')[0]}: "
                  f"{anchor['trained_digits']}->{anchor['reported_digits']} (reported)", fontsize=7, color="tab:purple")
    wide.set_xscale("log")
    wide.set_xlim(4, 1100)
    wide.set_xlabel("digits per operand (log scale)")
    wide.set_ylabel("end-to-end accuracy %")
    wide.legend(fontsize=7, loc="lower left")
    wide.set_title("5 to 1,000 digits", fontsize=10)
    near.set_xlim(limit - 5, stride + 2)
    near.set_xlabel("digits per operand")
    near.set_title(f"just past the limit ({limit} digits)", fontsize=10)
    fig.suptitle("Accuracy against operand length past the paper's 100 digits", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(json_path: str | Path = "results/long_operands.json", out: str | Path = "results") -> list[Path]:
    document = json.loads(Path(json_path).read_text())
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / FILES[0]).write_text(long_operands_markdown(document))
    long_operands_figure(document, out / FILES[2])
    return [out / FILES[0], out / FILES[2]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m caef_bench.report.long_operands", description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", default="results/long_operands.json")
    parser.add_argument("--out", default="results")
    args = parser.parse_args(argv)
    for path in write_report(args.json, args.out):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
