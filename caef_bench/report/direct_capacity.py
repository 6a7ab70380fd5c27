"""The LoRA-direct capacity check as results/direct_capacity.md, .json and .png: can a direct answerer
of the tiny tier's size learn equal-length 5-digit addition, and does its rank-16 LoRA limit it?

Each arm is one `caef-bench train-curve --direct-draw protocol:5` run on the tiny base (a LoRA of some
rank, or every weight: `--adapter full`), its snapshots scored by `caef-bench eval-curve` on the held-out
add_5 test cell. Everything here comes from those evaluation JSON files and the snapshots' manifests
they name; nothing is typed in. Each problem's reply and verdict go beside the report, packed
(records/direct_capacity.jsonl.gz, a line a problem), where its numbers recount.

    python -m caef_bench.report.direct_capacity --arm work/capacity/lora16/evaluation.json \\
        --arm work/capacity/lora256/evaluation.json --arm work/capacity/full/evaluation.json --out results
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from caef_bench.evaluate.table1 import write_problem_lines
from caef_bench.report.tables import percent, write_report

FILES = ("direct_capacity.md", "direct_capacity.json", "direct_capacity.png")
RECORDS = Path("records") / "direct_capacity.jsonl.gz"  # from the report's folder
HOW_MADE = "### How this was made"


def _setting(preset: dict) -> str:
    """What an arm trains, as its snapshots' manifests record it."""
    what = "full fine-tuning" if preset.get("adapter") == "full" else f"LoRA r={preset['lora_r']}, alpha={preset['lora_alpha']}"
    return f"{what}, lr {preset['lr']:g}, batch {preset['stage2_batch']}"


def arm_record(evaluation_path: str | Path, cell: str) -> dict:
    """One arm: its setting, training command and points (samples, accuracy on `cell`, loss, seconds)."""
    evaluation = json.loads(Path(evaluation_path).read_text())
    points = sorted((p for p in evaluation["points"].values() if cell in p["cells"]), key=lambda p: p["samples"])
    if not points:
        raise ValueError(f"{evaluation_path} holds no point measured on {cell}")
    manifest = json.loads((Path(evaluation["curve"]) / points[0]["label"] / "direct" / points[0]["op"] /
                           "manifest.json").read_text())
    return {"setting": _setting(manifest["preset"]), "preset": {k: manifest["preset"].get(k) for k in
                                                                ("adapter", "lora_r", "lora_alpha", "lr", "stage2_batch",
                                                                 "direct_draw", "position_scheme")},
            "data": manifest["data"], "train_commands": sorted({p["train_command"] for p in points}),
            "evaluation": str(evaluation_path), "eval_command": evaluation["command"],
            "base_weights": evaluation["base_weights"], "device": points[-1]["train_device"],
            "points": [{"samples": p["samples"], "adapter": p["adapter"], "final_loss": p["final_loss"],
                        "train_seconds": p["train_seconds"],
                        **{k: p["cells"][cell][k] for k in ("n", "correct", "accuracy", "ci_low", "ci_high")},
                        "examples": p["cells"][cell].get("examples", []),
                        "problems": p["cells"][cell].get("problems")} for p in points]}


def capacity_findings(record: dict) -> str:
    """The opening sentences, from the numbers: each arm's first snapshot above 0 and its best."""
    parts = []
    for arm in record["arms"]:
        points = arm["points"]
        zero = [p["samples"] for p in points if p["correct"] == 0]
        best = max(points, key=lambda p: (p["accuracy"], -p["samples"]))
        part = f"{arm['setting']}: "
        if best["correct"] == 0:
            part += f"0% at every snapshot up to {points[-1]['samples']:,} samples"
        else:
            part += (f"{percent(best['correct'], best['n'])} of {record['cell']} at {best['samples']:,} samples"
                     + (f" (0% up to {max(zero):,})" if zero and max(zero) < best["samples"] else ""))
        parts.append(part)
    return (f"Direct answering of {record['cell']} on the tiny base (3.4M parameters), trained on equal-length "
            f"{record['digits']}-digit additions only with the protocol's LoRA-direct prompt, "
            f"N={record['per_cell']} held-out problems per point: " + "; ".join(parts) + ".")


def capacity_markdown(record: dict) -> str:
    import pandas as pd

    samples = sorted({p["samples"] for arm in record["arms"] for p in arm["points"]})
    rows = []
    for arm in record["arms"]:
        by_samples = {p["samples"]: p for p in arm["points"]}
        rows.append({"arm": arm["setting"], **{f"{n:,}": (
            f"{100 * by_samples[n]['accuracy']:.1f} [{100 * by_samples[n]['ci_low']:.1f}, "
            f"{100 * by_samples[n]['ci_high']:.1f}]" if n in by_samples else "–") for n in samples}})
    losses = [{"arm": arm["setting"], **{f"{n:,}": next((f"{p['final_loss']:.3f}" for p in arm["points"]
                                                         if p["samples"] == n), "–") for n in samples}}
              for arm in record["arms"]]
    lines = ["## LoRA-direct capacity check: 5-digit addition on the tiny base", "", capacity_findings(record), "",
             f"Accuracy % on {record['cell']} (Wilson 95% intervals) against training samples:", "",
             pd.DataFrame(rows).to_markdown(index=False), "",
             "Training loss (mean over the answer's tokens, last logged steps) at each snapshot:", "",
             pd.DataFrame(losses).to_markdown(index=False), "",
             "![Accuracy against training samples](direct_capacity.png)", "", HOW_MADE, "",
             f"Generated by `{record['command']}`. Each arm is one training run with a constant learning rate "
             f"after warm-up and a snapshot at each fraction of its planned steps (each snapshot the first steps "
             f"of the next), on the tiny base `{record['arms'][0]['base_weights']}` under standard position ids; "
             f"its draws: every sample an equal-length {record['digits']}-digit addition in the protocol's "
             f"LoRA-direct prompt, no test-set problem (`{record['arms'][0]['data'][0]}`). Snapshots scored by "
             f"`caef-bench eval-curve` (greedy, exact match) on the first {record['per_cell']} problems of "
             f"{record['cell']}."
             + (f" Each problem's reply and verdict: `{record['records']}`." if record.get("records") else ""), ""]
    for arm in record["arms"]:
        lines.append(f"- {arm['setting']} ({arm['device']}): " + "; ".join(f"`{c}`" for c in arm["train_commands"])
                     + f"; scored by `{arm['eval_command']}`")
    return "\n".join(lines) + "\n"


def capacity_figure(record: dict, path: str | Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for i, arm in enumerate(record["arms"]):
        points = arm["points"]
        shift = 1 + 0.03 * (i - (len(record["arms"]) - 1) / 2)  # equal accuracies would hide each other
        ax.errorbar([p["samples"] * shift for p in points], [100 * p["accuracy"] for p in points],
                    yerr=[[max(0.0, 100 * (p["accuracy"] - p["ci_low"])) for p in points],
                          [max(0.0, 100 * (p["ci_high"] - p["accuracy"])) for p in points]],
                    marker="o", markersize=4, capsize=2, label=arm["setting"])
    ax.set_xscale("log")
    ax.set_xlabel("training samples (log scale)")
    ax.set_ylabel(f"accuracy on {record['cell']} %")
    ax.set_ylim(-3, 103)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title(f"Direct {record['digits']}-digit addition on the tiny base", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_capacity_report(evaluations: list[str | Path], out: str | Path, command: str, cell: str = "add_5") -> list[Path]:
    arms = [arm_record(path, cell) for path in evaluations]
    draws = {arm["preset"]["direct_draw"] for arm in arms}
    if len(draws) != 1 or not next(iter(draws)).startswith("protocol:"):
        raise ValueError(f"the arms must share one fixed-length draw (protocol:<digits>), not {sorted(draws)}")
    per_cell = sorted({p["n"] for arm in arms for p in arm["points"]})
    record = {"command": command, "cell": cell, "digits": int(next(iter(draws)).partition(":")[2]),
              "per_cell": "/".join(map(str, per_cell)), "arms": arms}
    # the problems leave the points for their own file (the JSON keeps the counts)
    lines = [{"arm": arm["setting"], "samples": point["samples"], "cell": cell, **problem}
             for arm in arms for point in arm["points"] for problem in point.pop("problems") or []]
    if lines:  # evaluations made before they kept their problems have none: the report names no records then
        write_problem_lines(lines, Path(out) / RECORDS)
        record["records"] = str(RECORDS)
    return write_report(record, out, FILES, capacity_markdown, capacity_figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m caef_bench.report.direct_capacity", description=__doc__.split("\n\n")[0])
    parser.add_argument("--arm", action="append", required=True, help="an arm's eval-curve JSON (repeat per arm)")
    parser.add_argument("--cell", default="add_5")
    parser.add_argument("--out", default="results/local")
    args = parser.parse_args(argv)
    command = "python -m caef_bench.report.direct_capacity " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    for path in write_capacity_report(args.arm, args.out, command, args.cell):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
