"""The LoRA-direct learning curve's evaluation: every snapshot of `caef-bench train-curve` on its
operator's Table 1 cells, in process.

It runs where the snapshots were trained (an accelerator machine may have torch, transformers and
peft but not lm-eval or pandas, so neither is imported here): the first N problems of each
committed cell, the protocol's LoRA-direct prompt, batched greedy decoding with each adapter under
the position scheme its manifest records (`evaluate.direct`), scored by the project's one scorer
(`scoring.score`, style "direct", each reply cut at the tasks' stop as lm-eval cuts it). The
results, each problem's reply and verdict with them, go to one JSON file after every cell; a rerun
keeps each cell measured on the same adapter (fingerprint: its bytes, base and scheme) with the same N
and its problems' replies, and measures the rest.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from caef_bench.data.testsets import load_cell, table1_cells
from caef_bench.evaluate.scoring import accuracy, score
from caef_bench.paths import replace_text

EXAMPLES_KEPT = 3  # wrong replies kept per cell


def curve_snapshots(curve: Path, ops: list[str] | None = None) -> list[dict]:
    """Every finished snapshot under a train-curve folder: {op, label, folder, manifest}, by op
    and samples."""
    found = []
    for manifest_path in sorted(Path(curve).glob("frac_*/direct/*/manifest.json")):
        folder = manifest_path.parent
        op, snapshot = folder.name, folder.parent.parent.name
        if ops is not None and op not in ops:
            continue
        manifest = json.loads(manifest_path.read_text())
        if "curve" not in manifest:
            raise ValueError(f"{manifest_path} is not a learning-curve snapshot (no 'curve' in its manifest)")
        found.append({"op": op, "label": snapshot, "folder": folder, "manifest": manifest})
    if not found:
        raise FileNotFoundError(f"no learning-curve snapshots under {curve} (expected frac_*/direct/<op>/ folders "
                                f"with manifests: `caef-bench train-curve --out {curve}` makes them)")
    return sorted(found, key=lambda s: (s["op"], s["manifest"]["samples"]))


def cells_of(op: str, cells: list[str] | None = None) -> list[str]:
    """op's Table 1 cells (add_5 … add_100; mul_1_10), or those of them in `cells`."""
    own = [cell for cell in table1_cells() if cell.partition("_")[0] == op]
    return own if cells is None else [cell for cell in own if cell in cells]


def point_key(snapshot: dict) -> str:
    return f"{snapshot['op']}/{snapshot['label']}"


def evaluate_cell(direct, op: str, cell: str, per_cell: int, batch_size: int) -> dict:
    """Accuracy (Wilson interval) of op's loaded direct adapter on the first `per_cell` problems of `cell`."""
    problems = load_cell(cell)[:per_cell]
    started = time.perf_counter()
    replies = direct.ask(op, [p["expr"] for p in problems], [p["answer"] for p in problems], batch_size)
    verdicts = [score(reply, p["answer"], op, "direct") for reply, p in zip(replies, problems)]
    result = accuracy({"correct": v} for v in verdicts)
    result["examples"] = [{"expr": p["expr"], "answer": p["answer"], "reply": reply}
                          for p, reply, v in zip(problems, replies, verdicts) if not v][:EXAMPLES_KEPT]
    # every problem's reply and verdict: the report packs them beside itself (records/), where its numbers recount
    result["problems"] = [{"id": p["id"], "reply": reply, "correct": v} for p, reply, v in zip(problems, replies, verdicts)]
    result["seconds"] = round(time.perf_counter() - started, 2)
    return result


def _point(snapshot: dict, fingerprint: str) -> dict:
    manifest = snapshot["manifest"]
    curve = manifest["curve"]
    return {"op": snapshot["op"], "label": snapshot["label"], "fraction": curve["fraction"],
            "samples": manifest["samples"], "budget_samples": curve["budget_samples"],
            "fraction_of_budget": curve["fraction_of_budget"], "adapter": fingerprint,
            "position_scheme": manifest.get("position_scheme"), "train_command": manifest["command"],
            "seed": manifest["seed"], "batch": manifest["stages"]["stage2"]["batch"],
            "final_loss": manifest["stages"]["stage2"]["final_loss"],
            "train_seconds": manifest["wall_time_s"], "train_device": manifest["device"],
            # a run stopped on one machine goes on on another: each device it trained on, in order
            "train_devices": list(dict.fromkeys(invocation["device"] for invocation in
                                                manifest["stages"]["stage2"].get("invocations") or [])),
            "cells": {}}


def _write(path: Path, record: dict) -> None:
    """The results file, replaced whole (a kill mid-write leaves the previous one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_text(path, json.dumps(record, indent=1) + "\n")


def evaluate_curve(curve: Path, out: Path, per_cell: int = 100, ops: list[str] | None = None,
                   cells: list[str] | None = None, device: str = "cpu", batch_size: int = 100,
                   base: str | Path | None = None, command: str = "", tier: str = "tiny",
                   progress: Callable[[str], None] = print) -> dict:
    """Every snapshot under `curve` on its operator's cells (`cells_of`), `per_cell` problems each;
    the record ({command, per_cell, base_weights, device, points}, each point naming the commands that
    scored it) is written to `out` after every cell. `base`: the folder of the base the snapshots were
    trained on (default: what their manifests record, which must match their recorded fingerprint)."""
    from caef_bench.evaluate.direct import attach_direct, direct_fingerprints
    from caef_bench.models.loading import get_tier, load_base
    from caef_bench.train.curve import shown_path

    if per_cell < 1:
        raise ValueError(f"--limit must be >= 1, not {per_cell}")
    snapshots = curve_snapshots(curve, ops)
    base_folder, base_weights = _the_base(snapshots, base)
    earlier = json.loads(out.read_text()) if out.is_file() else {}
    kept = earlier.get("points", {}) if earlier.get("base_weights") == base_weights else {}
    record = {"command": command, "curve": str(curve), "per_cell": per_cell, "base": shown_path(base_folder),
              "base_weights": base_weights, "device": device, "points": dict(kept)}
    model = tokenizer = None
    measured = False
    for label in dict.fromkeys(s["label"] for s in snapshots):  # one snapshot folder at a time
        here = [s for s in snapshots if s["label"] == label]
        tier_here = get_tier(tier, base=base_folder, adapters=curve / label)
        per_adapter = direct_fingerprints(tier_here)
        todo = {}
        for snapshot in here:
            fingerprint = per_adapter[f"direct_{snapshot['op']}"]
            # what the manifest says is read afresh; cells measured on these very weights are kept
            point, earlier_point = _point(snapshot, fingerprint), kept.get(point_key(snapshot))
            if earlier_point is not None and earlier_point["adapter"] == fingerprint:
                point["cells"] = {cell: result for cell, result in earlier_point["cells"].items()
                                  if result["n"] == min(per_cell, len(load_cell(cell))) and "problems" in result}
                point["scored_by"] = earlier_point.get("scored_by") or [earlier.get("command", "")]
            record["points"][point_key(snapshot)] = point
            missing = [cell for cell in cells_of(snapshot["op"], cells) if cell not in point["cells"]]
            if missing:
                todo[snapshot["op"]] = missing
        if not todo:
            continue
        if model is None:
            model, tokenizer = load_base(tier_here, device)
        direct = attach_direct(model, tokenizer, curve / label, tier_here.position_scheme, list(todo))
        try:
            for op, missing in todo.items():
                point = record["points"][f"{op}/{label}"]
                for cell in missing:
                    point["cells"][cell] = evaluate_cell(direct, op, cell, per_cell, batch_size)
                    measured = True
                    # the commands that measured its cells: the record's own is only the last (--ops may have cut it)
                    if command not in point.setdefault("scored_by", []):
                        point["scored_by"].append(command)
                    _write(out, record)
                    stats = point["cells"][cell]
                    progress(f"direct_{op} {label} ({point['samples']:,} samples): {cell} "
                             f"{stats['accuracy']:.1%} (N={stats['n']}, {stats['seconds']} s)")
        finally:
            model = direct.detach()
    if not measured and kept:  # nothing new was measured: the cells are still the earlier command's, on its device
        record.update({key: earlier[key] for key in ("command", "device") if key in earlier})
    _write(out, record)
    return record


def _the_base(snapshots: list[dict], base: str | Path | None) -> tuple[Path, str]:
    """(the base's folder, its fingerprint): every snapshot must have been trained on the same one,
    and the folder used here must hold it."""
    from caef_bench.train.curve import base_weights, resolve_shown

    recorded = {s["manifest"]["base_weights"] for s in snapshots}
    if len(recorded) > 1:
        raise ValueError(f"the snapshots were trained on {len(recorded)} different bases ({', '.join(sorted(recorded))}): "
                         f"evaluate each curve on its own")
    folder = Path(base) if base is not None else resolve_shown(snapshots[0]["manifest"]["base"])
    weights = base_weights(folder)
    if weights not in recorded:
        raise ValueError(f"the base at {folder} (weights {weights}) is not the one the snapshots were trained on "
                         f"({recorded.pop()}); pass that one with --base")
    return folder, weights
