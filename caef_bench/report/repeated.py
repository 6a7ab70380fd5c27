"""results/repeated.md, .json and .png: repeated-digit cells against their random controls.

Everything here is computed from the results dict that `caef-bench run --suite repeated` builds
(evaluate.repeated): error rates with Wilson intervals, Fisher's exact test of each pattern cell
against the control of the same operator and length, the failure classes per component, the first
examples of each class, and the paragraph of findings, whose wording follows the numbers.
"""

from __future__ import annotations

import fnmatch
from collections import Counter
from pathlib import Path

from caef_bench.evaluate.failures import WHAT
from caef_bench.evaluate.repeated import CONTROL, cell_parts, control_of, error_rate
from caef_bench.evaluate.scoring import fisher_exact
from caef_bench.report.tables import HOW_MADE, carried_text, percent, resumed_own, reused_text, write_report

PATTERN_ORDER = ("p1", "p2", "p3", "mixed", "round", CONTROL)
PATTERN_NAMES = {"p1": "period 1 (999…)", "p2": "period 2 (4848…)", "p3": "period 3 (456456…)",
                 "mixed": "mixed (a run, then random)", "round": "round numbers (10^k, 10^k ± small, d·10^j)",
                 CONTROL: "random control"}
EXAMPLES_PER_CLASS = 3
SIGNIFICANT = 0.05
PREVIOUS_KIND = "caef, previous weights"


def _rate_text(rate: dict) -> str:
    if not rate["n"]:
        return "–"
    # as many decimals as the interval needs to be seen: 19 of 8,450 is 0.22% [0.14, 0.35], not "0% [0, 0]"
    top = 100 * max(rate["rate"], rate["ci_high"])
    digits = 0 if top >= 10 else 1 if top >= 1 else 2
    return (f"{100 * rate['rate']:.{digits}f}% [{100 * rate['ci_low']:.{digits}f}, {100 * rate['ci_high']:.{digits}f}] "
            f"({rate['errors']}/{rate['n']})")


def _p_text(p: float | None) -> str:
    if p is None:
        return "–"
    return f"{p:.2g}" if p >= 1e-4 else f"{p:.1e}"


def _pooled(cells: dict, key: str, keep) -> dict:
    """Errors and N summed over the cells whose name passes `keep`."""
    chosen = [result for cell, result in cells.items() if keep(cell)]
    return error_rate(sum(r[key] for r in chosen), sum(r["n"] for r in chosen))


def comparison(cells: dict, key: str = "answer_errors") -> list[dict]:
    """Per length and pattern, pooled over the operators: the error rate, its control's, Fisher's p."""
    rows = []
    lengths = sorted({cell_parts(c)[1] for c in cells})
    for n in lengths:
        control = _pooled(cells, key, lambda c: cell_parts(c)[1] == n and cell_parts(c)[2] == CONTROL)
        for pattern in PATTERN_ORDER[:-1]:
            rate = _pooled(cells, key, lambda c: cell_parts(c)[1] == n and cell_parts(c)[2] == pattern)
            if not rate["n"]:
                continue
            p = fisher_exact(rate["errors"], rate["n"], control["errors"], control["n"]) if control["n"] else None
            rows.append({"length": n, "pattern": pattern, "rate": rate, "control": control, "p": p})
    return rows


def per_cell_comparison(cells: dict, key: str = "answer_errors") -> list[dict]:
    """Per operator, length and pattern: the cell's error rate against its own control."""
    rows = []
    for cell, result in cells.items():
        op, n, pattern = cell_parts(cell)
        if pattern == CONTROL:
            continue
        rate = error_rate(result[key], result["n"])
        control = cells.get(control_of(cell))
        control_rate = error_rate(control[key], control["n"]) if control else error_rate(0, 0)
        p = fisher_exact(rate["errors"], rate["n"], control_rate["errors"], control_rate["n"]) if control else None
        rows.append({"op": op, "length": n, "pattern": pattern, "rate": rate, "control": control_rate, "p": p})
    return rows


def _systems_that_ran(results: dict) -> dict:
    return {name: system for name, system in results["systems"].items() if "cells" in system}


def _is_caef(system: dict) -> bool:
    """CAEF traced through the runtime: these weights' run, or a previous report's carried beside it."""
    return system.get("kind") in ("caef", PREVIOUS_KIND)


def with_previous(results: dict, previous: dict, source: str) -> dict:
    """`results` with a previous report's CAEF systems beside its own, each named `<name> @<weights>`, so
    that every table and finding shows the weights before and after a change side by side. Only systems
    the previous report ran itself are carried (not what it carried in turn). A previous report of these
    same weights (a rerun that adds a system or problems) carries nothing of its own, but what it had
    carried from earlier weights stays beside them as it was, naming the report it came from."""
    if previous.get("weights") is None:
        return results
    if previous["weights"] == results.get("weights"):
        carried = {name: system for name, system in previous.get("systems", {}).items()
                   if system.get("kind") == PREVIOUS_KIND}
        if not carried:
            return results
    else:
        carried = {}
        for name, system in previous.get("systems", {}).items():
            if system.get("kind") != "caef" or "cells" not in system:
                continue
            carried[f"{name} @{previous['weights']}"] = {
                **system, "kind": PREVIOUS_KIND, "weights": previous["weights"],
                "position_scheme": previous.get("position_scheme"), "from_report": source,
                "from_command": previous.get("command")}
    systems = {}
    for name, system in results["systems"].items():  # each carried system right after the one it stands for
        systems[name] = system
        systems.update({key: value for key, value in carried.items() if key.split(" @")[0] == name})
    systems.update(carried)
    return {**results, "systems": systems}


def _frame(rows: list[dict], columns: dict):
    import pandas as pd

    return pd.DataFrame([{title: get(row) for title, get in columns.items()} for row in rows])


def end_to_end_table(results: dict) -> str:
    """Pooled over operators, one row per length and pattern, each system's error rate, control and p."""
    import pandas as pd

    frames = []
    for name, system in _systems_that_ran(results).items():
        rows = comparison(system["cells"])
        frame = _frame(rows, {"length": lambda r: r["length"], "pattern": lambda r: r["pattern"],
                              f"{name}: error": lambda r: _rate_text(r["rate"]),
                              f"{name}: control": lambda r: _rate_text(r["control"]),
                              f"{name}: p": lambda r: _p_text(r["p"])})
        frames.append(frame.set_index(["length", "pattern"]))
    if not frames:
        return "(no system ran)"
    return pd.concat(frames, axis=1).reset_index().fillna("–").to_markdown(index=False)


def per_cell_table(results: dict) -> str:
    import pandas as pd

    frames = []
    for name, system in _systems_that_ran(results).items():
        rows = per_cell_comparison(system["cells"])
        frame = _frame(rows, {"op": lambda r: r["op"], "length": lambda r: r["length"], "pattern": lambda r: r["pattern"],
                              f"{name}": lambda r: _rate_text(r["rate"]),
                              f"{name} control": lambda r: _rate_text(r["control"]),
                              f"{name} p": lambda r: _p_text(r["p"])})
        frames.append(frame.set_index(["op", "length", "pattern"]))
    if not frames:
        return "(no system ran)"
    return pd.concat(frames, axis=1).reset_index().fillna("–").to_markdown(index=False)


def onestep_table(onestep: dict) -> str:
    """One row per component and length: each pattern's step error rate, the control's, and Fisher's p
    of all pattern cells together against the control."""
    import pandas as pd

    rows = []
    for component, cells in onestep.items():
        cells = {cell: result for cell, result in cells.items()}
        for n in sorted({cell_parts(c)[1] for c in cells}):
            at_n = {c: r for c, r in cells.items() if cell_parts(c)[1] == n}
            row = {"component": component, "length": n}
            for pattern in PATTERN_ORDER:
                row[pattern] = _rate_text(_pooled(at_n, "errors", lambda c, p=pattern: cell_parts(c)[2] == p))
            patterns = _pooled(at_n, "errors", lambda c: cell_parts(c)[2] != CONTROL)
            control = _pooled(at_n, "errors", lambda c: cell_parts(c)[2] == CONTROL)
            row["p (patterns vs control)"] = _p_text(
                fisher_exact(patterns["errors"], patterns["n"], control["errors"], control["n"])
                if patterns["n"] and control["n"] else None)
            rows.append(row)
    return pd.DataFrame(rows).to_markdown(index=False) if rows else "(not run)"


def _failures(cells: dict, controls: bool | None = None) -> list[dict]:
    return [f for cell, result in cells.items() for f in result["failures"]
            if controls is None or (cell_parts(cell)[2] == CONTROL) == controls]


def _component(failure: dict) -> str:
    """Where, with the executor's machine: 'executor ADD', 'aligner (I)', 'answer'."""
    return f"executor {failure['machine']}" if failure["where"] == "executor" and failure.get("machine") else failure["where"]


def class_table(groups: dict[str, list[dict]], label: str) -> str:
    """Counts of each what (columns) per group and component (rows)."""
    import pandas as pd

    rows = []
    for group, failures in groups.items():
        counts: dict[str, Counter] = {}
        for failure in failures:
            counts.setdefault(_component(failure), Counter())[failure["what"]] += 1
        for component, counter in counts.items():
            rows.append({label: group, "where": component, **{what: counter.get(what, 0) for what in WHAT},
                         "total": sum(counter.values())})
    if not rows:
        return "(no failures)"
    frame = pd.DataFrame(rows)
    used = [what for what in WHAT if frame[what].sum() > 0]
    return frame[[label, "where", *used, "total"]].to_markdown(index=False)


def examples(results: dict) -> list[str]:
    """For each class, its first three examples over the systems and the one-step stress."""
    sources = [(f"`{name}`", f) for name, system in _systems_that_ran(results).items()
               for f in _failures(system["cells"])]
    sources += [(f"one-step `{component}`", f) for component, cells in results.get("onestep", {}).items()
                for f in _failures(cells)]
    lines = []
    for what in WHAT:
        chosen = [(source, f) for source, f in sources if f["what"] == what][:EXAMPLES_PER_CLASS]
        if not chosen:
            continue
        lines += [f"**{what}**", ""]
        for source, f in chosen:
            place = ", ".join(str(x) for x in (
                _component(f), f.get("tape") and f"tape {f['tape']}", f.get("step") is not None and f"step {f['step']}",
                f.get("depth") and f"depth {f['depth']}", f.get("position") is not None and f"at {f['position']}",
                f.get("units") and f"{f['units']} unit(s)") if x)
            lines.append(f"- {source}, `{f['id'] or f['expr']}` ({place}): expected `{f['expected']}`, "
                         f"got `{f['got']}`")
        lines.append("")
    return lines


def _share(counter: Counter, total: int) -> str:
    return ", ".join(f"{what} {count}" for what, count in counter.most_common(3)) if total else "none"


def _against_control(cells: dict, key: str = "answer_errors") -> tuple[dict, dict, float | None]:
    """The pattern cells pooled, the random controls pooled, and Fisher's p of the two (None: one is empty)."""
    patterns = _pooled(cells, key, lambda c: cell_parts(c)[2] != CONTROL)
    control = _pooled(cells, key, lambda c: cell_parts(c)[2] == CONTROL)
    if not patterns["n"] or not control["n"]:
        return patterns, control, None
    return patterns, control, fisher_exact(patterns["errors"], patterns["n"], control["errors"], control["n"])


def _worse_cells(cells: dict) -> tuple[list[dict], int]:
    """The single test cells (operator, length, pattern) worse than their own control at p < SIGNIFICANT,
    and how many had a control to compare with."""
    compared = [r for r in per_cell_comparison(cells) if r["p"] is not None]
    return [r for r in compared if r["p"] < SIGNIFICANT and r["rate"]["rate"] > r["control"]["rate"]], len(compared)


def _wrong_of(rate: dict) -> str:
    return f"{rate['errors']:,} of {rate['n']:,} ({percent(rate['errors'], rate['n'])})"


def opening(results: dict) -> str:
    """The report's first sentences, from its numbers: CAEF's repeated-digit problems against the random
    controls, the weights before, the baselines and the one-step stress, each in a sentence."""
    sentences, baselines = [], []
    for name, system in _systems_that_ran(results).items():
        patterns, control, p = _against_control(system["cells"])
        if p is None:
            continue
        if system.get("kind") == "caef":
            worse, compared = _worse_cells(system["cells"])
            sentences.append(
                f"CAEF on the {results['tier']} tier (weights `{results['weights']}`) misses {_wrong_of(patterns)} "
                f"repeated-digit problems (a wrong answer or none) against {_wrong_of(control)} random controls of the "
                f"same operators and lengths (Fisher p = {_p_text(p)}); {len(worse)} of {compared} single test cells "
                f"are worse than their own control at p < {SIGNIFICANT}.")
        elif system.get("kind") == PREVIOUS_KIND:
            sentences.append(f"The weights before (`{system['weights']}`, at their own N) answered "
                             f"{_wrong_of(patterns)} wrong against {_wrong_of(control)} controls.")
        else:
            baselines.append((f"`{name}` {_wrong_of(patterns)} against {_wrong_of(control)}",
                              min(patterns["rate"], control["rate"]) > 0.5))
    if baselines:
        most_wrong = all(wrong for _, wrong in baselines)  # (a baseline that learnt the task is not called so)
        sentences.append(("The baselines answer most problems wrong either way (repeated digits against controls, "
                          "each at its own N): " if most_wrong else
                          "The baselines, repeated digits against controls, each at its own N: ")
                         + "; ".join(text for text, _ in baselines) + ".")
    onestep = results.get("onestep") or {}
    if onestep:
        compared = [_against_control(cells, "errors") for cells in onestep.values()]
        worse = [1 for patterns, control, p in compared if p is not None and p < SIGNIFICANT
                 and patterns["rate"] > control["rate"]]
        sentences.append(f"One step at a time, {len(worse)} of {sum(p is not None for _, _, p in compared)} "
                         f"components make more step errors on repeated digits than on the controls at "
                         f"p < {SIGNIFICANT}.")
    return " ".join(sentences) or "No system ran."


def _missed_text(cells: dict) -> str:
    """How CAEF's runs on repeated digits that were not answered right ended: a wrong answer, or none (the
    runtime refused a state it could not parse, an answer for another expression, a run past its step
    budget). '' when every run was answered right or the records hold no outcomes."""
    ended = Counter()
    for cell, result in cells.items():
        if cell_parts(cell)[2] != CONTROL:
            ended.update({outcome: count for outcome, count in (result.get("outcomes") or {}).items() if outcome != "ok"})
    if not ended:
        return ""
    wrong = ended.pop("wrong_answer", 0)
    refused = ", ".join(f"{outcome} {count}" for outcome, count in sorted(ended.items()))
    return (f" Of the {wrong + sum(ended.values())} not answered right, {wrong} got a wrong answer and "
            f"{sum(ended.values())} none" + (f" ({refused})" if refused else "") + ".")


def findings(results: dict) -> list[str]:
    """The paragraph of findings: what the numbers support, worded from the numbers themselves."""
    lines = []
    for name, system in _systems_that_ran(results).items():
        cells = system["cells"]
        patterns, control, p = _against_control(cells)
        if p is None:
            continue
        if p < SIGNIFICANT and patterns["rate"] > control["rate"]:
            verdict = "repeated digits cause more errors"
        elif p < SIGNIFICANT:
            verdict = "the effect is reversed: repeated digits cause fewer errors"
        else:
            verdict = "no difference this N can show"
        on = ""
        if system.get("kind") == "caef" and results.get("position_scheme"):
            # Adapters may carry their own scheme (the aligners' index hints): name them, not just the tier's.
            own = {}
            for adapter, scheme in (results.get("adapter_position_schemes") or {}).items():
                own.setdefault(scheme, []).append(adapter)
            also = "".join(f"; `{scheme}` for {', '.join(names)}" for scheme, names in sorted(own.items()))
            on = f" (the {results['tier']} tier, position scheme `{results['position_scheme']}`{also})"
        elif system.get("kind") == PREVIOUS_KIND and system.get("position_scheme"):
            on = f" (position scheme `{system['position_scheme']}`)"
        sentence = (f"**`{name}`**{on}: {verdict}: {_rate_text(patterns)} of the repeated-digit problems answered "
                    f"wrong against {_rate_text(control)} of the random controls (Fisher p = {_p_text(p)}).")
        by_length = []
        for n in sorted({cell_parts(c)[1] for c in cells}):
            at_n = _pooled(cells, "answer_errors", lambda c: cell_parts(c)[1] == n and cell_parts(c)[2] != CONTROL)
            control_n = _pooled(cells, "answer_errors", lambda c: cell_parts(c)[1] == n and cell_parts(c)[2] == CONTROL)
            by_length.append(f"{n} digits {at_n['errors']}/{at_n['n']} against {control_n['errors']}/{control_n['n']}")
        sentence += " By operand length: " + "; ".join(by_length) + "."
        if system.get("kind") == "caef":
            sentence += _missed_text(cells)
        failures = _failures(cells, controls=False)
        if failures:
            where = Counter(_component(f) for f in failures)
            what = Counter(f["what"] for f in failures)
            first, count = where.most_common(1)[0]
            # A traced run can leave the machine's course and still reach the right answer (a harmless
            # slip inside a call whose result is the same): say so, or the count reads as wrong answers.
            right = sum(1 for f in failures if f.get("answer_correct"))
            kept = (f"{len(failures) - right} not answered right, {right} with a step unlike the machine's "
                    f"that still reached the right one; " if right else "")
            sentence += (f" Of the {len(failures)} failures on repeated digits ({kept}first divergence where "
                         f"traced), {count} are at {first}; the commonest classes: {_share(what, len(failures))}.")
            repetitions = what["extra_repetition"] + what["missing_repetition"]
            sentence += (f" Extra or missing repetitions of the pattern (the paper's description): {repetitions} "
                         f"of {len(failures)}.")
        per_length = comparison(cells)
        worst = [r for r in per_length if r["p"] is not None and r["p"] < SIGNIFICANT and r["rate"]["rate"] > r["control"]["rate"]]
        sentence += (f" Pattern and length cells worse than their control at p < {SIGNIFICANT}: {len(worst)} of "
                     f"{len(per_length)}.")
        worse_cells, compared = _worse_cells(cells)
        sentence += (f" Single test cells (operator, length, pattern) worse than their own control at p < "
                     f"{SIGNIFICANT}: {len(worse_cells)} of {compared}"
                     + (" (" + ", ".join(f"{r['op']} {r['length']} {r['pattern']}" for r in worse_cells[:8])
                        + (", …" if len(worse_cells) > 8 else "") + ")" if worse_cells else "") + ".")
        if system.get("kind") == PREVIOUS_KIND:
            sentence += (f" (Weights `{system['weights']}`, taken from `{system['from_report']}`, which "
                         f"`{system['from_command']}` wrote.)")
        cut = [cell.get("runs_with_cut_steps") for cell in cells.values()]
        if any(count is not None for count in cut):  # (records made before the runtime cut steps lack it)
            sentence += (f" Runs with a step that went on past its command's last word, cut there by the runtime "
                         f"as a stop string would: {sum(count or 0 for count in cut)} of "
                         f"{sum(cell['n'] for cell in cells.values())}.")
        lines.append(sentence)
    lines += before_and_after(results)
    onestep = results.get("onestep") or {}
    if onestep:
        worse, better, total = [], [], 0
        for component, cells in onestep.items():
            patterns, control, p = _against_control(cells, "errors")
            if p is None:
                continue
            total += 1
            text = f"`{component}` {_rate_text(patterns)} against {_rate_text(control)} (p = {_p_text(p)})"
            if p < SIGNIFICANT:
                (worse if patterns["rate"] > control["rate"] else better).append(text)
        failures = [f for cells in onestep.values() for f in _failures(cells, controls=False)]
        what = Counter(f["what"] for f in failures)
        lines.append(f"**One step at a time** (the right input every time): of {total} components, "
                     f"{len(worse)} make more step errors on repeated digits than on the controls at p < {SIGNIFICANT}"
                     + (": " + "; ".join(worse) if worse else "")
                     + (f"; {len(better)} fewer: " + "; ".join(better) if better else "")
                     + f". Their {len(failures)} step failures on repeated digits: {_share(what, len(failures))}.")
    return lines


def before_and_after(results: dict) -> list[str]:
    """Each previous report's CAEF system against this run's: the repeated-digit problems of the cells both
    ran (each at its own N), pooled; Fisher's p of the change."""
    ran = _systems_that_ran(results)
    lines = []
    for name, old in ran.items():
        new = ran.get(name.split(" @")[0])
        if old.get("kind") != PREVIOUS_KIND or new is None:
            continue
        shared = [cell for cell in old["cells"] if cell in new["cells"] and cell_parts(cell)[2] != CONTROL]
        before = _pooled({c: old["cells"][c] for c in shared}, "answer_errors", lambda c: True)
        after = _pooled({c: new["cells"][c] for c in shared}, "answer_errors", lambda c: True)
        if not before["n"] or not after["n"]:
            continue
        p = fisher_exact(after["errors"], after["n"], before["errors"], before["n"])
        lines.append(f"**Before and after**: on the {len(shared)} repeated-digit cells both ran, `{name}` answered "
                     f"{_rate_text(before)} wrong, these weights (`{results['weights']}`) {_rate_text(after)} "
                     f"(Fisher p = {_p_text(p)}).")
    return lines


def _matching(cells, pattern: str) -> int:
    return sum(fnmatch.fnmatchcase(cell, pattern) for cell in cells)


def _cells_text(count: int) -> str:
    return f"{count} cell" + ("" if count == 1 else "s")


def repeated_markdown(results: dict) -> str:
    systems = results["systems"]
    ran = _systems_that_ran(results)
    n_text = "; ".join(f"`{name}` {system['limit'] if system.get('limit') else 'all'} per cell"
                       + (f" on {len(system['cells'])} of the cells" if len(system["cells"]) < len(results["cells"]) else "")
                       + "".join(f" ({n} on {pattern}, {_cells_text(_matching(system['cells'], pattern))})"
                                 for pattern, n in (system.get("cell_limits") or {}).items())
                       for name, system in ran.items())
    skipped = [f"`{name}` ({system['skipped']})" for name, system in systems.items() if "skipped" in system]
    own_runs = {name: system for name, system in ran.items() if system.get("kind") != PREVIOUS_KIND}
    resumed = sum(resumed_own(r) for system in own_runs.values() for r in system["cells"].values())
    carried = "".join(f" {text}" for system in own_runs.values() if system.get("kind") == "caef"
                      for text in (carried_text(system["cells"]),
                                   reused_text(system["cells"], results.get("reuse_sources", ()))) if text)
    onestep = results.get("onestep") or {}
    # each baseline's problem lines, beside this report (evaluate.repeated.run_baseline_repeated)
    problem_lines = [f"`{system['records']}`" for system in own_runs.values()
                     if str(system.get("records", "")).endswith(".jsonl.gz")]
    provenance = (
        f"Generated by `{results['command']}` in {results['seconds']:.0f} s. CAEF: the `{results['tier']}` tier, "
        f"weights `{results['weights']}`"
        + (f" (from `{results['checkpoints']}`)" if results.get("checkpoints") else "")
        + f", traced end to end through the runtime (per-problem records: `{results['records']}/`"
        + (f"; {resumed} problem runs were read from records earlier runs of these weights wrote" if resumed else "")
        + ")." + carried + " Baselines through lm-evaluation-harness, each in its own prompt style (their commands are in "
          "`repeated.json`"
        + (f"; each one's problems, one line each with its reply and verdict: {', '.join(problem_lines)}"
           if problem_lines else "") + "). "
        f"N (the first N problems of each of the {len(results['cells'])} test cells, 200 in each test set): {n_text or 'none'}. "
        f"One-step stress: up to {results['onestep_per_cell']} cases per adapter and cell (an aligner's split "
        f"between (I) and (O)), seed {results['seed']}"
        + (f", on {results['onestep_cells']} of the test cells" if results.get("onestep_cells", len(results["cells"]))
           < len(results["cells"]) else "") + ". "
        "Error rates with Wilson 95% intervals; p: two-sided Fisher's exact test of the pattern cells against "
        "the random control of the same operator and length (pooled over operators where a table says so)."
        + (f" Not run here: {', '.join(skipped)}." if skipped else "")
        + "".join(f" Beside them, `{name}`: earlier weights' numbers, not run here but taken from "
                  f"`{system['from_report']}` (written by `{system['from_command']}`)."
                  for name, system in ran.items() if system.get("kind") == PREVIOUS_KIND))
    lines = [
        "## Repeated digits: failures against random controls", "", opening(results), "",
        "![Error rates on repeated digits against random controls](repeated.png)",
        "", "### What the numbers support", "", *[f"{line}\n" for line in findings(results)],
        "### End to end: misses (a wrong answer or none), pooled over the operators", "",
        "Pattern cells against the control cells of the same length; each system's own N. "
        + ", ".join(f"{k}: {v}" for k, v in PATTERN_NAMES.items()) + ".", "",
        end_to_end_table(results), "",
    ]
    caef = [name for name, system in ran.items() if _is_caef(system)]
    if caef:
        trace = {name: {"cells": ran[name]["cells"]} for name in caef}
        rows = []
        for name in caef:
            rows += [{**row, "system": name} for row in comparison(trace[name]["cells"], "trace_errors")]
        import pandas as pd

        lines += ["### CAEF: runs with any step unlike the machine's (exact trace), pooled over the operators", "",
                  pd.DataFrame([{"system": r["system"], "length": r["length"], "pattern": r["pattern"],
                                 "error": _rate_text(r["rate"]), "control": _rate_text(r["control"]),
                                 "p": _p_text(r["p"])} for r in rows]).to_markdown(index=False), ""]
    lines += ["### End to end per operator, length and pattern", "", per_cell_table(results), ""]
    if onestep:
        lines += ["### One step at a time: step error rates on transitions of the repeated-digit problems", "",
                  "Each executor on single transitions (the machine's input, one step), each aligner on (I) and (O) "
                  "conversions, drawn from the problems of each cell; columns: the patterns and the random control "
                  "(errors/N).", "", onestep_table(onestep), ""]
    lines += ["### Failure classes per component", "",
              "Where each failure first went wrong and what it looks like (`caef_bench/evaluate/failures.py`): "
              "CAEF's from the first step unlike the machine's, the baselines' from their answers alone.", ""]
    groups = {}
    for name, system in ran.items():
        groups[f"{name}, repeated"] = _failures(system["cells"], controls=False)
        groups[f"{name}, control"] = _failures(system["cells"], controls=True)
    lines += [class_table(groups, "system, cells"), ""]
    if onestep:
        one = {f"{component}, {kind}": _failures(cells, controls=kind == "control")
               for component, cells in onestep.items() for kind in ("repeated", "control")}
        lines += ["One-step failures:", "", class_table({k: v for k, v in one.items() if v}, "component, cells"), ""]
    lines += ["### The first examples of each class", "",
              "Expected against produced, the differing part in ⟦ ⟧ (positions: tape order on tapes, reading "
              "order in answers and expressions; ⏎ a newline).", "", *examples(results),
              HOW_MADE, "", provenance]
    return "\n".join(lines) + "\n"


def _error_bars(rates: list[dict]) -> list[list[float]]:
    """Matplotlib's (below, above) bar lengths of Wilson intervals, in percent (never below 0 by rounding)."""
    return [[max(0.0, 100 * (r["rate"] - r["ci_low"])) for r in rates],
            [max(0.0, 100 * (r["ci_high"] - r["rate"])) for r in rates]]


def failure_figure(results: dict, path: str | Path) -> None:
    """Three panels: end-to-end error per pattern and length (each system), one-step error per component
    (patterns pooled against control), and CAEF's failure classes on repeated digits against the controls."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ran = _systems_that_ran(results)
    fig, axes = plt.subplots(1, 3, figsize=(19, 6))
    ax = axes[0]
    labels = [f"{n}d {p}" for n in sorted({cell_parts(c)[1] for c in results["cells"]}) for p in PATTERN_ORDER]
    width = 0.8 / max(1, len(ran))
    for i, (name, system) in enumerate(ran.items()):
        rates = []
        for label in labels:
            n, pattern = label.split("d ")
            rates.append(_pooled(system["cells"], "answer_errors",
                                 lambda c: cell_parts(c)[1] == int(n) and cell_parts(c)[2] == pattern))
        x = [j + (i - (len(ran) - 1) / 2) * width for j in range(len(labels))]
        values = [100 * r["rate"] for r in rates]
        ax.bar(x, values, width, yerr=_error_bars(rates), capsize=2, label=name)
    for j, label in enumerate(labels):
        if label.endswith(CONTROL):
            ax.axvspan(j - 0.45, j + 0.45, color="0.9", zorder=0)
    ax.set_xticks(range(len(labels)), labels, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("misses %: a wrong answer or none (Wilson 95%)")
    ax.set_ylim(0, 128)  # the room above 100% holds the legend, clear of the bars
    ax.set_yticks(range(0, 101, 20))
    ax.set_title("End to end, pooled over operators (grey: random control)")
    ax.legend(fontsize=8, loc="upper center", ncol=2)

    ax = axes[1]
    onestep = results.get("onestep") or {}
    components = list(onestep)
    for k, (kind, keep, color) in enumerate((("repeated digits", lambda c: cell_parts(c)[2] != CONTROL, "tab:red"),
                                             ("random control", lambda c: cell_parts(c)[2] == CONTROL, "tab:gray"))):
        rates = [_pooled(onestep[c], "errors", keep) for c in components]
        y = [j + (k - 0.5) * 0.4 for j in range(len(components))]
        ax.barh(y, [100 * r["rate"] for r in rates], 0.4, color=color, label=kind, xerr=_error_bars(rates), capsize=2)
    ax.set_yticks(range(len(components)), components, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("step errors % (Wilson 95%)")
    ax.set_xlim(0, 105)
    ax.set_title("One step at a time, all lengths")
    ax.legend(fontsize=8)

    ax = axes[2]
    caef = next((system for system in ran.values() if system.get("kind") == "caef"), None)
    bars = []
    if caef:
        bars.append(("CAEF end to end\nrepeated", _failures(caef["cells"], controls=False)))
        bars.append(("CAEF end to end\ncontrol", _failures(caef["cells"], controls=True)))
    bars.append(("one step\nrepeated", [f for cells in onestep.values() for f in _failures(cells, controls=False)]))
    bars.append(("one step\ncontrol", [f for cells in onestep.values() for f in _failures(cells, controls=True)]))
    counts = [Counter(f["what"] for f in failures) for _, failures in bars]
    bottom = [0] * len(bars)
    colors = plt.get_cmap("tab20").colors
    for i, what in enumerate(WHAT):
        values = [c.get(what, 0) for c in counts]
        if not any(values):
            continue
        ax.bar(range(len(bars)), values, bottom=bottom, color=colors[i % len(colors)], label=what)
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.set_xticks(range(len(bars)), [label for label, _ in bars], fontsize=8)
    ax.set_ylabel("failures (count)")
    ax.set_title("What the failures are")
    ax.legend(fontsize=8)
    fig.suptitle(f"Repeated-digit operands against random controls (weights {results['weights']})")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_repeated(results: dict, out: str | Path) -> list[Path]:
    return write_report(results, out, ("repeated.md", "repeated.json", "repeated.png"), repeated_markdown,
                        failure_figure)
