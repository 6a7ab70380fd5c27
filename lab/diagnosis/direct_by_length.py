"""How far a LoRA-direct adapter is from answering, below exact match: per operand length, the share of
problems right, of answer digits right, and of replies of the answer's length.

    python lab/diagnosis/direct_by_length.py --adapters checkpoints/tiny-direct-protocol --op add \
        [--lengths 1,2,3,5,10] [--n 50] [--seed 12345] [--base FOLDER] [--label TEXT] [--json FILE]
    python lab/diagnosis/direct_by_length.py --table FILE.json [FILE.json ...] [--places LENGTH [--figure FILE.png]]

--adapters is a folder with direct/<op>/ in it: a system's checkpoints or one snapshot of a learning curve
(work/direct_curve/frac_1_16). For each length, n problems drawn as a Table 1 cell draws its own
(data.testsets.protocol_pair, from --seed; the 100 one-digit sums are all training problems, drawn many
times over, so that length reads what the adapter has memorised as much as what it computes), asked with the
protocol's LoRA-direct prompt and scored by the benchmark's rule (evaluate.scoring.score).

Why: an exact-match curve at 0% cannot tell a model on its way from one that is stuck. A digit is
right when it equals the answer's digit at the same place counted from the units, so a reply of the
right length with one wrong digit scores all but one; a guess of the right length gets about a tenth
of the digits (the leading one more). The learning curve (eval-curve) stays exact match, the paper's
measure; this only reads an adapter, it writes nothing but --json. --table prints saved readings as one
table (a row each, in the order given: the table in docs/lora-direct.md).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path


def digits_right(reply: str, answer: str) -> int:
    """Digits of `answer` the reply has at the same place counted from the units."""
    return sum(1 for r, a in zip(reversed(reply), reversed(answer)) if r == a)


def right_by_place(replies: list[str], answers: list[str]) -> list[float]:
    """Per place counted from the units (units first): the share of the answers with that place whose
    reply has the same digit there."""
    places = max(len(answer) for answer in answers)
    return [sum(len(got) > place and got[-1 - place] == answer[-1 - place]
                for got, answer in zip(replies, answers) if len(answer) > place)
            / sum(len(answer) > place for answer in answers)
            for place in range(places)]


def measure(direct, op: str, length: int, n: int, rng: random.Random) -> dict:
    from caef_bench.data.testsets import protocol_pair, render_expr, solve
    from caef_bench.evaluate.scoring import extract_answer, score

    problems = []
    for _ in range(n):
        a, b = protocol_pair(op, length, rng)
        problems.append((render_expr(op, a, b), solve(op, a, b)))
    replies = direct.ask(op, [expr for expr, _ in problems], [answer for _, answer in problems])
    answers = [extract_answer(reply, op, "direct") or "" for reply in replies]
    digits = sum(len(answer) for _, answer in problems)
    return {"op": op, "length": length, "n": n,
            "exact": sum(score(reply, answer, op, "direct") for reply, (_, answer) in zip(replies, problems)) / n,
            "digits_right": sum(digits_right(got, answer) for got, (_, answer) in zip(answers, problems)) / digits,
            "length_right": sum(len(got) == len(answer) for got, (_, answer) in zip(answers, problems)) / n,
            "right_by_place": right_by_place(answers, [answer for _, answer in problems]),
            "example": {"expr": problems[0][0], "answer": problems[0][1], "reply": replies[0]}}


TABLE_LENGTHS = (1, 2, 3, 5)  # exact match shown at these lengths; digits and length right at 5
LONG = 5


def trained(adapters: str | Path, op: str) -> dict:
    """Steps and samples the adapter was trained for, from its manifest (empty where it has none)."""
    manifest = Path(adapters, "direct", op, "manifest.json")
    if not manifest.exists():
        return {}
    record = json.loads(manifest.read_text())
    return {"steps": record["stages"]["stage2"]["steps"], "samples": record["samples"]}


def _which_run(reading: dict) -> tuple[dict, dict]:
    """A saved reading's first columns (its run, operator and steps trained), and how far it was trained."""
    so_far = reading.get("trained") or trained(reading["adapters"], reading["op"])
    columns = {"run": reading.get("label") or reading["adapters"], "op": reading["op"], "steps": so_far.get("steps", "?")}
    return columns, so_far


def table(readings: list[Path]) -> str:
    """Saved readings (--json), a row each: the run, how far it was trained, and what it answers."""
    from tabulate import tabulate

    rows = []
    for path in readings:
        reading = json.loads(path.read_text())
        by_length = {row["length"]: row for row in reading["rows"]}
        columns, so_far = _which_run(reading)
        rows.append({**columns, "samples": f"{so_far['samples']:,}" if so_far else "?",
                     **{f"exact, {n} digit{'s' * (n > 1)}": f"{by_length[n]['exact']:.0%}" if n in by_length else "–"
                        for n in TABLE_LENGTHS},
                     **({f"digits right at {LONG}": f"{by_length[LONG]['digits_right']:.0%}",
                         f"length right at {LONG}": f"{by_length[LONG]['length_right']:.0%}"} if LONG in by_length else {})})
    return tabulate(rows, headers="keys", tablefmt="github")


PLACE_NAMES = ("units", "tens", "hundreds", "thousands")


def place_name(place: int) -> str:
    """0 -> 'units', 4 -> '10^4'."""
    return PLACE_NAMES[place] if place < len(PLACE_NAMES) else f"10^{place}"


def places_at(path: Path, reading: dict, length: int) -> list[float]:
    """A saved reading's digits right at each place (units first) of the answers to `length`-digit operands."""
    row = next((row for row in reading["rows"] if row["length"] == length), None)
    if row is None or "right_by_place" not in row:
        raise SystemExit(f"{path}: no place-by-place reading at {length} digits (measure it again)")
    return row["right_by_place"]


def places_table(readings: list[Path], length: int) -> str:
    """Saved readings, a row each: the digits right at each place of the answers to `length`-digit operands."""
    from tabulate import tabulate

    rows = []
    for path in readings:
        reading = json.loads(path.read_text())
        rows.append({**_which_run(reading)[0],
                     **{place_name(place): f"{share:.0%}" for place, share in enumerate(places_at(path, reading, length))}})
    return tabulate(rows, headers="keys", tablefmt="github")


RUN_MARKERS = (("o", "-"), ("s", "--"), ("^", ":"))  # (marker, line) of each run in a panel, in the order given


def places_figure(readings: list[Path], length: int, path: Path) -> None:
    """Saved readings as a figure, a panel per operator: the digits right at each place (a colour each) of
    the answers to `length`-digit operands against training samples, a line per run (the snapshots of one
    curve: its readings' label without the fraction), with a guess's tenth drawn in."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    by_op: dict[str, dict[str, list[dict]]] = {}
    for path_ in readings:
        reading = json.loads(path_.read_text())
        places = places_at(path_, reading, length)
        so_far = _which_run(reading)[1]
        if not so_far:
            raise SystemExit(f"{path_}: no record of how far its adapter was trained (its manifest is gone)")
        run = reading.get("label") or reading["adapters"]
        run = run.rpartition(", ")[0] if "/" in run.rpartition(", ")[2] else run  # 'rank 16, 5/8' -> 'rank 16'
        by_op.setdefault(reading["op"], {}).setdefault(run, []).append({"samples": so_far["samples"], "places": places})
    runs = list(dict.fromkeys(run for shown in by_op.values() for run in shown))
    styles = {run: RUN_MARKERS[i % len(RUN_MARKERS)] for i, run in enumerate(runs)}
    places = max(len(r["places"]) for shown in by_op.values() for rs in shown.values() for r in rs)
    colours = plt.get_cmap("tab10").colors
    fig, axes = plt.subplots(1, len(by_op), figsize=(6.0 * len(by_op), 4.6), sharey=True, squeeze=False)
    for ax, (op, shown) in zip(axes[0], by_op.items()):
        for run, run_readings in shown.items():
            marker, line = styles[run]
            run_readings.sort(key=lambda reading: reading["samples"])
            for place in range(places):
                at = [(r["samples"], 100 * r["places"][place]) for r in run_readings if place < len(r["places"])]
                if at:
                    ax.plot(*zip(*at), marker=marker, linestyle=line, markersize=5, color=colours[place])
        ax.axhline(10, color="gray", linestyle=":", linewidth=1)
        ax.set_xscale("log")
        ax.set_title(f"{op}, {length}-digit operands", fontsize=10)
        ax.set_xlabel("training samples (log scale)")
        ax.set_ylim(-3, 103)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("answer digits right at the place %")
    handles = [Line2D([], [], color=colours[place], marker="o", label=place_name(place)) for place in range(places)]
    handles += [Line2D([], [], color="black", marker=marker, linestyle=line, label=run)
                for run, (marker, line) in styles.items()]
    handles.append(Line2D([], [], color="gray", linestyle=":", label="a guess (10%)"))
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 6), fontsize=8, frameon=False)
    fig.suptitle("LoRA-direct on the tiny base: the answer's digits right, place by place")
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    from tabulate import tabulate

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--table", nargs="+", type=Path, metavar="FILE.json",
                        help="print saved readings (--json) as one table instead of measuring")
    parser.add_argument("--places", type=int, metavar="LENGTH",
                        help="with --table: the digits right place by place at this operand length")
    parser.add_argument("--figure", type=Path, metavar="FILE.png",
                        help="with --table and --places: draw the places against training samples, a panel per run")
    parser.add_argument("--adapters", help="a folder with direct/<op>/ in it")
    parser.add_argument("--op", default="add", choices=("add", "sub", "gt", "lt", "eq"))
    parser.add_argument("--lengths", default="1,2,3,5,10")
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--tier", default="tiny")
    parser.add_argument("--base", help="the base the adapters were trained on (default: the tier's)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--label", help="the run's name in --table (default: the --adapters folder)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if args.places and not args.table:
        parser.error("--places goes with --table")
    if args.figure and not args.places:
        parser.error("--figure goes with --table and --places")
    if args.table:
        print(places_table(args.table, args.places) if args.places else table(args.table))
        if args.figure:
            places_figure(args.table, args.places, args.figure)
            print(f"wrote {args.figure}")
        return
    if not args.adapters:
        parser.error("--adapters is required (or --table to print saved readings)")

    from caef_bench.evaluate.direct import attach_direct
    from caef_bench.models.loading import get_tier, load_base

    tier = get_tier(args.tier, adapters=args.adapters, **({"base": args.base} if args.base else {}))
    model, tokenizer = load_base(tier, args.device)
    direct = attach_direct(model, tokenizer, args.adapters, tier.position_scheme, [args.op])
    rng = random.Random(args.seed)
    rows = [measure(direct, args.op, int(length), args.n, rng) for length in args.lengths.split(",")]
    print(tabulate([{"digits": r["length"], "exact": f"{r['exact']:.0%}", "digits right": f"{r['digits_right']:.0%}",
                     "length right": f"{r['length_right']:.0%}",
                     "right by place, units first": " ".join(f"{share:.0%}" for share in r["right_by_place"]),
                     "e.g.": f"{r['example']['expr']} -> {r['example']['reply']!r} ({r['example']['answer']})"}
                    for r in rows], headers="keys", tablefmt="github"))
    if args.json:
        args.json.write_text(json.dumps({"adapters": args.adapters, "label": args.label, "op": args.op,
                                         "trained": trained(args.adapters, args.op), "seed": args.seed,
                                         "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
