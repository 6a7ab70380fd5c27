"""Table 1 for every system in `baselines/`: each one run through lm-evaluation-harness, then scored
from lm-eval's own per-sample logs (`--log_samples`) by the tasks' scorer.

Each system runs as one `caef-bench lm-eval` process (lm-eval's CLI with caef-bench's models
registered) over the cells it still lacks, with its own request cache (`--use_cache`, one file per
system: the cache key is the request alone, not the model): an interrupted run loses at most the
requests in flight, and a rerun skips every cell whose samples are complete. Stopping the run
(Ctrl-C, `kill PID`) stops its lm-eval child too (`run_child`), which keeps what it finished.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from caef_bench.data.testsets import load_cell, table1_cells
from caef_bench.evaluate.scoring import accuracy
from caef_bench.evaluate.systems import System
from caef_bench.paths import WORK_DIR

EXAMPLES_KEPT = 3  # wrong replies kept per system and cell, for the report


def expected_n(cell: str, limit: int | None) -> int:
    size = len(load_cell(cell))
    return min(size, limit) if limit else size


def read_samples(folder: Path, system: System, cells: list[str]) -> dict[str, list[dict]]:
    """The newest complete lm-eval sample log of each cell under `folder`: {cell: [sample, ...]}."""
    found = {}
    for cell in cells:
        logs = sorted(folder.rglob(f"samples_{system.task(cell)}_*.jsonl"), key=lambda p: p.stat().st_mtime)
        if logs:
            found[cell] = [json.loads(line) for line in logs[-1].read_text(encoding="utf-8").splitlines() if line]
    return found


def cell_result(samples: list[dict]) -> dict:
    """Accuracy with its Wilson interval, from lm-eval's per-sample exact_match, and the first wrong replies."""
    result = accuracy([{"correct": bool(s["exact_match"])} for s in samples])
    wrong = [s for s in samples if not s["exact_match"]]
    result["examples"] = [{"expr": s["doc"]["expr"], "answer": s["doc"]["answer"], "reply": reply_text(s)}
                          for s in wrong[:EXAMPLES_KEPT]]
    return result


def problem_lines(system: System, samples: dict[str, list[dict]], weights: str | None,
                  doc_fields: tuple[str, ...] = ()) -> list[dict]:
    """One line per problem a system answered: its cell, expression, target, reply and verdict (the
    tasks' exact match), and for a CAEF tier with records the runtime's record of it (outcome, model
    calls, first divergence, windowed or not, every step), so a reader can check any one problem.
    `doc_fields`: fields of the test set's problem kept too, after the cell (a repeated-digit cell's id
    and period, which its failures name)."""
    runtime = _runtime_records(system, weights)
    lines = []
    for cell, cell_samples in samples.items():
        for sample in cell_samples:
            doc = sample["doc"]
            line = {"cell": cell, **{key: doc[key] for key in doc_fields}, "expr": doc["expr"],
                    "target": doc["answer"], "reply": reply_text(sample), "correct": bool(sample["exact_match"])}
            if (record := runtime.get(line["expr"])) is not None:
                line["caef"] = record
            lines.append(line)
    return lines


def _runtime_records(system: System, weights: str | None) -> dict[str, dict]:
    """The CAEF runtime's records of a tier's system (model_args `records`), by expression."""
    args = system.resolved_model_args()
    if not weights or not args.get("records"):
        return {}
    from caef_bench.runtime.records import load_records

    path = Path(args["records"]) / f"{args['tier']}-{weights}" / "lm_eval.jsonl"
    return {record.expr: record.to_dict() for record in load_records(path)}


def write_problem_lines(lines: list[dict], path: Path) -> None:
    """Problem lines as gzipped JSON lines, byte for byte the same for the same lines (no timestamp)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as packed:
        packed.write("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode())


def read_problem_lines(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as packed:
        return [json.loads(line) for line in packed if line.strip()]


def earlier_problem_lines(out: Path, names) -> dict[str, list[dict]]:
    """The problem lines a report's folder holds for these systems, read before a run rewrites them."""
    paths = {name: out / "records" / "table1" / f"{name}.jsonl.gz" for name in names}
    return {name: read_problem_lines(path) for name, path in paths.items() if path.is_file()}


def keep_earlier_lines(results: dict, earlier: dict[str, list[dict]], out: Path) -> None:
    """After `keep_other_systems`: a system run now on some of its cells keeps, in its records file, the
    earlier lines of the cells kept from its earlier run (where that run wrote any), so that a partial
    rerun loses no problem's record."""
    for name, entry in results.items():
        kept = {cell for group in (entry or {}).get("kept_cells", []) for cell in group["cells"]}
        lines = [line for line in earlier.get(name, []) if line["cell"] in kept]
        if lines and entry.get("records"):
            path = out / entry["records"]
            write_problem_lines(lines + read_problem_lines(path), path)


def reply_text(sample: dict) -> str:
    """The model's reply in an lm-eval sample log (its filtered response)."""
    for key in ("filtered_resps", "resps"):
        value = sample.get(key) or [""]
        while isinstance(value, list):
            value = value[0] if value else ""
        if value:
            return value
    return ""


def system_weights(system: System) -> str | None:
    """The weights fingerprint of a system that runs one of this project's tiers here (model_args `tier`,
    optionally `checkpoints`); None for any other model (a hub model, an endpoint: a tier whose steps
    a server answers, `backend: openai`, has weights this machine cannot see)."""
    args = system.model_args  # (read before placeholders are filled: an endpoint's address may not be set)
    if "tier" not in args or args.get("backend", "hf") != "hf":
        return None
    args = system.resolved_model_args()
    from caef_bench.models.loading import tier_with_checkpoints, weights_fingerprint

    return weights_fingerprint(tier_with_checkpoints(args["tier"], args.get("checkpoints")))


def system_folder(system: System, work: Path, weights: str | None) -> Path:
    """Where a system's lm-eval outputs and request cache live (`weights`: its `system_weights`):
    per weights for a tier's system, since lm-eval's cache is keyed by the request alone, so after
    retraining a rerun must not find the replies (nor the sample logs) of the weights before."""
    return work / system.name / weights if weights else work / system.name


STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
GRACE_S = 30.0  # after the first stop, how long the child has to finish its request in flight


class RunStopped(Exception):
    """A stop signal ended the run; its child was stopped too, and what both finished is kept."""

    def __init__(self, signum: int):
        self.signal_name = signal.Signals(signum).name
        super().__init__(f"{self.signal_name} stopped the run and its lm-eval child; what they finished is kept "
                         "(sample logs, request cache, CAEF records): the same command goes on from there")
        self.exit_code = 128 + signum  # what a shell reports for a process the signal ended


def run_child(command: list[str], env: dict | None = None, grace: float = GRACE_S) -> int:
    """Run `command` to its end and return its exit code; a stop signal to this process stops it too.

    The child runs in its own session, so a terminal's Ctrl-C reaches it once, through here. The first
    SIGINT, SIGTERM or SIGHUP is passed on as SIGINT (the child unwinds as on Ctrl-C: lm-eval's cache
    and caef's records keep every finished request and problem); a second one, or `grace` seconds
    without an exit, sends SIGTERM, and the next SIGKILL. Then `RunStopped` is raised."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread gets signals
        return subprocess.run(command, env=env).returncode
    child: subprocess.Popen | None = None
    received: list[int] = []
    escalation = [signal.SIGINT, signal.SIGTERM, signal.SIGKILL]

    deadline = [float("inf")]

    def escalate() -> None:  # SIGINT, then SIGTERM, then SIGKILL, each given `grace` seconds
        deadline[0] = time.monotonic() + grace
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(escalation[min(len(received), len(escalation)) - 1])

    def stop(signum, _frame) -> None:
        received.append(signum)
        if child is not None:
            escalate()

    # The handlers come first: a signal that arrives as the child starts is passed on, not lost.
    previous = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS}
    try:
        child = subprocess.Popen(command, env=env, start_new_session=True)
        if received:
            escalate()
        while True:
            try:
                returncode = child.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() > deadline[0]:  # it did not stop in time: insist
                    received.append(received[-1])
                    escalate()
    except BaseException:
        if child is not None:
            child.kill()
            child.wait()
        raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if received:
        raise RunStopped(received[0])
    return returncode


def run_system(system: System, cells: list[str], limit: int | None, work: Path, progress=print,
               out: Path | None = None) -> dict:
    """Run one system on the cells it has not finished (resumable), and score every cell. `out`: the
    report's folder, whose records/table1/ gets the system's problems, one line each (`problem_lines`)."""
    weights = system_weights(system)
    folder = system_folder(system, work, weights)
    done = {cell: samples for cell, samples in read_samples(folder, system, cells).items()
            if len(samples) == expected_n(cell, limit)}
    todo = [cell for cell in cells if cell not in done]
    if todo:
        command = [sys.executable, "-m", "caef_bench", "lm-eval",
                   *system.lm_eval_argv(todo, limit, folder, folder / "cache" / "requests")]
        progress(f"{system.name}: {len(todo)} cell(s) to run ({len(done)} done): {' '.join(command[2:])}")
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        returncode = run_child(command, env)
        if returncode:
            raise subprocess.CalledProcessError(returncode, command)
        done.update(read_samples(folder, system, todo))
    missing = [cell for cell in cells if len(done.get(cell, ())) != expected_n(cell, limit)]
    if missing:
        raise RuntimeError(f"{system.name}: lm-eval wrote no complete samples for {', '.join(missing)} in {folder}")
    # the command that makes every cell, whichever of them this call found already done
    whole = system.lm_eval_argv(cells, limit, folder, folder / "cache" / "requests")
    result = {"command": "caef-bench lm-eval " + " ".join(whole), "limit": limit,
              "cells": {cell: cell_result(done[cell]) for cell in cells}}
    if weights:
        result["weights"] = weights
    if out is not None:
        result["records"] = f"records/table1/{system.name}.jsonl.gz"  # (from the report's folder)
        write_problem_lines(problem_lines(system, {cell: done[cell] for cell in cells}, weights),
                            out / result["records"])
    return result


def run_table1(systems: list[System], cells: list[str] | None = None, limit: int | None = None,
               work: Path = WORK_DIR / "table1", progress=print, cells_of: dict | None = None,
               limits: dict | None = None, out: Path | None = None) -> dict:
    """Every system that can run here, on every cell (or on its own cells in `cells_of`: a slow system on
    a CPU) at its N (`limits` by name, else `limit`, else the system's own); a one-line reason for each
    one that cannot. `out`: the report's folder, where each system's problem lines go (`run_system`)."""
    cells = cells or table1_cells()
    results = {}
    for system in systems:
        base = {"paper_row": system.paper_row, "description": system.description, "model": system.model,
                "tasks": system.tasks, "file": str(system.path.name if system.path else ""),
                **({"tier": system.model_args["tier"]} if "tier" in system.model_args else {})}
        own_cells = (cells_of or {}).get(system.name) or system.own_cells(cells)
        reason = system.unavailable(own_cells)
        if reason:
            progress(f"{system.name}: skipped, {reason}")
            results[system.name] = {**base, "skipped": reason}
            continue
        chosen = system.lm_eval_limit(limit, limits)
        if system.name not in (cells_of or {}) and len(own_cells) < len(cells) and system.cells_why:
            base["cells_why"] = system.cells_why  # the cells it was not asked, and why
        if not own_cells:
            progress(f"{system.name}: skipped, none of these cells is one it runs ({system.cells})")
            results[system.name] = {**base, "skipped": f"runs on {system.cells} only: {system.cells_why}".rstrip(": ")}
            continue
        results[system.name] = {**base, **run_system(system, own_cells, chosen, work, progress, out),
                                "cells_asked": len(cells)}
    return results


def windowed_notes(results: dict) -> list[str]:
    """For each CAEF tier's system, the cells it ran a window at a time (`runtime.windowed`: operands of ADD
    and the comparisons longer than its whole-state length) and how: the table says so beside the numbers."""
    from caef_bench.evaluate.onestep import cell_digits
    from caef_bench.models.limits import windowing

    notes = []
    for name, result in results.items():
        shape = windowing(result["tier"]) if result.get("model") == "caef" and "tier" in result else None
        if shape is None:
            continue
        # the operators this tier runs windowed (its own list: SmolLM2 does not window sub)
        cells = [cell for cell in result.get("cells", {})
                 if cell.partition("_")[0] in shape.ops and cell_digits(cell) > shape.past]
        if cells:
            notes.append(f"**Windowed** (`{name}`): {', '.join(cells)} ran a window at a time (`runtime.windowed`): "
                         f"past {shape.past} digits each executor step sees {shape.width} cells of each tape, "
                         f"{shape.back} behind its head, and the aligners convert {shape.chunk} digits a call "
                         f"(a sentinel digit on top), the lengths its adapters were trained on; every digit and "
                         f"verdict is the model's, and every record of those problems says `windowed`.")
    return notes


def trained_samples(adapter_folder: Path) -> int | None:
    """Samples an adapter was trained on over all its rounds (its manifest's `initialised_from` chain)."""
    return _over_rounds(adapter_folder, lambda stage: stage["steps"] * stage["batch"])


def trained_tokens(adapter_folder: Path) -> int | None:
    """Tokens an adapter was trained on over all its rounds; None where a round's manifest does not say."""
    return _over_rounds(adapter_folder, lambda stage: stage.get("tokens"))


def _over_rounds(adapter_folder: Path, amount) -> int | None:
    path = adapter_folder / "manifest.json"
    if not path.is_file():
        return None
    manifest, total = json.loads(path.read_text()), 0
    while isinstance(manifest, dict):
        for stage in manifest.get("stages", {}).values():
            if (value := amount(stage)) is None:
                return None
            total += value
        manifest = manifest.get("initialised_from")
    return total


def direct_draw(adapter_folder: Path) -> str | None:
    """How a direct adapter's problems were drawn, from its manifest's data fingerprint: the DirectDraw
    name ("protocol", "protocol:5") or "classes" (uniform over the executors' length classes: the draw of
    checkpoints/tiny/direct/)."""
    path = adapter_folder / "manifest.json"
    if not path.is_file():
        return None
    data = json.loads(path.read_text()).get("data") or [""]
    if data[0].startswith("direct:"):  # direct:<op>:<draw>:held_out_test_sets[:max_len=N]
        return data[0].split(":", 2)[2].partition(":held_out")[0]
    return "classes" if data[0].startswith("machines:") else None


def direct_training_notes(results: dict, systems: dict[str, System]) -> list[str]:
    """For each LoRA-direct system that ran on one of our tiers: each direct adapter's samples (its
    manifests'), as a fraction of its budget on the tiny tier (its plan: the samples of that
    operator's CAEF executor and aligner plans together), the samples its CAEF counterparts were
    trained on, and the position ids it ran under; a row below its budget says it is a lower bound."""
    from caef_bench.models.loading import adapter_schemes, get_tier, tier_with_checkpoints
    from caef_bench.train.presets import TINY_ADAPTER_PLANS

    notes = []
    for name, result in results.items():
        system = systems[name]
        if system.model != "caef-direct" or "cells" not in result:
            continue
        args = system.resolved_model_args()
        tier = args.get("tier", "tiny")
        loaded = tier_with_checkpoints(tier, args.get("checkpoints"))
        root = Path(loaded.adapters)
        # a folder of direct adapters alone (checkpoints/tiny-direct-protocol): the CAEF pair is the tier's own
        caef_root = root if (root / "executors").is_dir() else Path(get_tier(tier).adapters)
        schemes = adapter_schemes(root)  # what each ran under, as loading runs it: its manifest's, else the tier's
        parts, short, coupled, classes, none_at_budget = [], False, [], [], []
        for op in ("add", "sub", "mul", "div", "gt", "lt", "eq"):
            direct = trained_samples(root / "direct" / op)
            if direct is None:
                continue
            caef = [trained_samples(caef_root / kind / op) for kind in ("executors", "aligners")]
            part = f"{op} {direct:,}"
            plan = TINY_ADAPTER_PLANS.get(f"direct_{op}", {}).get("samples") if tier == "tiny" else None
            pair = sum(caef) if None not in caef else None
            if plan:
                part += f" ({100 * direct / plan:.1f}% of {plan:,})"
            if pair is not None:
                part += f", CAEF {pair:,}"
            elif tier != "tiny":  # a direct adapter ahead of its tier's CAEF pair: nothing to set it beside
                part += ", no CAEF adapters on this tier yet"
            # its budget: the tiny preset's plan; off the tiny tier, what its CAEF pair had (the paper gives
            # both the same data)
            budget = plan if tier == "tiny" else pair
            short = short or (budget is not None and direct < budget)
            cells = [stats for cell, stats in result["cells"].items() if cell.partition("_")[0] == op]
            if budget is not None and direct >= budget and cells and not any(s["correct"] for s in cells):
                none_at_budget.append(op)  # its whole budget, and not one problem right
            scheme = schemes.get(f"direct_{op}", loaded.position_scheme)
            part += f", {scheme} ids"
            draw = direct_draw(root / "direct" / op)
            if draw:
                part += f", {draw} draws"
                classes += [op] if draw == "classes" else []
            if scheme != "standard":
                coupled.append(op)
            # a direct sample is shorter than a CAEF transition: the tokens say what the samples do not
            tokens = [trained_tokens(folder) for folder in (root / "direct" / op, caef_root / "executors" / op,
                                                            caef_root / "aligners" / op)]
            if tokens[0] is not None:
                part += f", {tokens[0]:,} tokens" + (f" (CAEF {tokens[1] + tokens[2]:,})" if None not in tokens else "")
            parts.append(part)
        if not parts:
            continue
        note = (f"**Training of `{name}`** (its adapters' manifests): samples of each direct adapter"
                + (", as a share of its budget (the tiny preset's plans for that operator's CAEF executor and "
                   "aligner together)" if tier == "tiny" else "")
                + f", the samples its shipped CAEF executor and aligner had, its position ids and how its problems "
                  f"were drawn: {'; '.join(parts)}.")
        if short:
            note += (" Below its budget (on the tiny tier its plan's, on another its CAEF pair's samples) a direct "
                     "adapter is a lower bound on what LoRA-direct reaches at this size: the paper trains both on "
                     "the same data budget.")
        if none_at_budget:
            whose = "its" if len(none_at_budget) == 1 else "their"
            note += (f" At its whole budget {' and '.join(none_at_budget)} answered no problem of {whose} "
                     f"cells: a direct adapter of this size and plan does not reach them at this budget (its "
                     f"learning curve, results/lora_direct_curve.md; what it has learnt, place by place: "
                     f"docs/lora-direct.md).")
        if classes:
            note += (f" Drawn by `classes` ({', '.join(classes)}): uniform over pairs of operand lengths, "
                     f"so two operands of one length, every test cell's kind, were about 1% of the draws; "
                     f"on problems of one length the same LoRA learns 5-digit addition (results/direct_capacity.md), "
                     f"and `lora-direct-tiny-protocol` is the same LoRA on the protocol's draws "
                     f"(docs/lora-direct.md).")
        if coupled:
            note += (f" Under coupled ids ({', '.join(coupled)}) every digit of a direct prompt has position id 0: "
                     f"not the paper's LoRA-direct, which has LLaMA's ordinary positions.")
        notes.append(note)
    return notes


def keep_other_systems(previous: dict, results: dict, systems: dict[str, System]) -> dict:
    """`results` (the systems run now) with the other systems of an earlier table1.json document
    (`previous`) kept beside them, in the order of baselines/; each kept one says which command made
    it (`made_by`). A tier's system is kept only on the weights it ran on: ValueError otherwise,
    before anything runs, naming it (run it again instead). Systems no longer in baselines/ are dropped."""
    kept = {name: entry for name, entry in previous["systems"].items() if name not in results and name in systems}
    for name, entry in kept.items():
        try:
            now = system_weights(systems[name]) if entry.get("weights") else None
        except (FileNotFoundError, ValueError) as error:  # its weights are not on this machine (the 8B tier's)
            raise ValueError(f"--keep-others: {name} in the earlier table ran on weights {entry['weights']}, which "
                             f"this machine cannot check ({error}): add it to --systems to run it again, or "
                             f"run where its weights are") from error
        if now is not None and now != entry["weights"]:
            raise ValueError(f"--keep-others: {name} in the earlier table ran on weights {entry['weights']}, its "
                             f"checkpoints are now {now}: add it to --systems to run it again")
    made_by = {name: entry.get("made_by", previous["command"]) for name, entry in kept.items()}
    merged = {**{name: {**entry, "made_by": made_by[name]} for name, entry in kept.items()},
              **{name: _with_earlier_cells(previous, name, result) for name, result in results.items()}}
    for name, entry in merged.items():  # cells of two runs: why it has these cells, not the table's all
        if entry and entry.get("kept_cells") and systems[name].cells_why \
                and len(entry["cells"]) < entry.get("cells_asked", 0):
            entry["cells_why"] = systems[name].cells_why
    return {name: merged[name] for name in systems if name in merged}


def _with_earlier_cells(previous: dict, name: str, result: dict | None) -> dict | None:
    """A system run now on some of its cells, with the cells of its earlier entry that this run did not
    ask kept beside them, where both ran on the same weights: the other cells' hours are not spent again.
    `kept_cells` lists the kept cells by the run that made them (its lm-eval command and the table's
    command); the other cells are this run's, with this run's records."""
    earlier = previous["systems"].get(name)
    if result is None or "cells" not in result or not earlier or "cells" not in earlier \
            or earlier.get("weights") != result.get("weights"):
        return result
    groups = [*earlier.get("kept_cells", []), {"cells": [c for c in earlier["cells"] if not any(
        c in group["cells"] for group in earlier.get("kept_cells", []))], "command": earlier["command"],
        "made_by": earlier.get("made_by", previous["command"])}]
    kept = [{**group, "cells": [c for c in group["cells"] if c not in result["cells"]]} for group in groups]
    kept = [group for group in kept if group["cells"]]
    if not kept:
        return result
    cells = {c: earlier["cells"][c] for group in kept for c in group["cells"]}
    return {**result, "cells": {**cells, **result["cells"]}, "kept_cells": kept}
