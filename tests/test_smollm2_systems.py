"""The SmolLM2 systems of Table 1 (baselines/caef-smollm2-135m.yaml, lora-direct-smollm2-135m.yaml): a system
runs on the cells it was trained for and the table says why not the others, a tier's system without its
adapters is skipped with the command that trains them, and a LoRA-direct row is compared with the CAEF
row on its own base."""

from __future__ import annotations

import re

from caef_bench.evaluate import table1 as table1_runs
from caef_bench.evaluate.systems import load_systems
from caef_bench import paths
from caef_bench.models import loading, smollm2
from caef_bench.report.table1 import table1_frame, table1_markdown

TRAINED = ["add_5", "add_10", "gt_5", "gt_10"]
# past the trained 10 digits add and gt run a window at a time (models.limits: SmolLM2's windowing)
WINDOWED = ["add_50", "gt_50", "add_100", "gt_100"]
# the LoRA-direct row also has sub and lt (checkpoints/smollm2-135m-direct/), which the tier's CAEF has not, and
# runs past its training's 1-10 digits too, where the paper's LoRA-direct falls
DIRECT_CELLS = [f"{op}_{n}" for op in ("add", "sub", "gt", "lt") for n in (5, 10, 50, 100)]


def test_both_systems_load_on_smollm2_and_run_on_their_trained_cells_by_default():
    from caef_bench.data.testsets import table1_cells

    systems = load_systems()
    caef, direct = systems["caef-smollm2-135m"], systems["lora-direct-smollm2-135m"]
    assert (caef.model, caef.paper_row, caef.model_args["tier"]) == ("caef", "CAEF", "smollm2-135m")
    assert (direct.model, direct.paper_row, direct.tasks) == ("caef-direct", "LLaMA 3.1 (L)", "caef_table1_direct")
    assert sorted(caef.own_cells(table1_cells())) == sorted(TRAINED + WINDOWED) and direct.own_cells(table1_cells()) == DIRECT_CELLS
    assert "1-10 digits" in caef.cells_why and caef.limit >= 100
    assert systems["caef-tiny"].own_cells(["add_5", "mul_1_10"]) == ["add_5", "mul_1_10"]  # no `cells`: all


def _tier_without_adapters(tmp_path, monkeypatch):
    monkeypatch.setattr(smollm2, "find_gguf", lambda: tmp_path / "model.gguf")  # "installed"
    monkeypatch.setattr(smollm2, "converted_dir", lambda convert=True: tmp_path / "base")
    monkeypatch.setattr(loading, "SMOLLM2_CHECKPOINTS", tmp_path / "checkpoints")
    # the LoRA-direct row's own folder, {data}/checkpoints/smollm2-135m-direct, empty as well
    monkeypatch.setattr(paths, "data_root", lambda: tmp_path)


def test_without_its_adapters_a_system_is_skipped_with_the_command_that_trains_them(tmp_path, monkeypatch):
    _tier_without_adapters(tmp_path, monkeypatch)
    systems = load_systems()
    reason = systems["caef-smollm2-135m"].unavailable()
    assert "has no aligner_add, executor_add, aligner_gt, executor_gt" in reason
    assert "caef-bench train --preset smollm2 --base smollm2-135m" in reason and "--executors add,gt" in reason
    reason = systems["lora-direct-smollm2-135m"].unavailable()
    assert reason.startswith("the smollm2-135m tier has no direct_add, direct_gt, direct_lt, direct_sub: train them "
                             "with `caef-bench train --preset smollm2 --base smollm2-135m")
    assert reason.endswith("--direct add,gt,lt,sub`")
    results = table1_runs.run_table1([systems["caef-smollm2-135m"]], ["add_5"], work=tmp_path / "work",
                                     progress=lambda line: None)
    assert results["caef-smollm2-135m"]["skipped"] == systems["caef-smollm2-135m"].unavailable(["add_5"])
    assert "has no aligner_add, executor_add" in results["caef-smollm2-135m"]["skipped"]


def test_a_run_asked_only_the_cells_of_the_adapters_a_tier_has_is_not_skipped_for_the_others(tmp_path, monkeypatch):
    """A tier trained on add alone (the accelerator script's small calls) runs add_5; gt is what it lacks."""
    _tier_without_adapters(tmp_path, monkeypatch)
    for folder in ("executors", "aligners", "direct", "smollm2-135m-direct/direct"):
        (tmp_path / "checkpoints" / folder / "add").mkdir(parents=True)
        (tmp_path / "checkpoints" / folder / "add" / loading.ADAPTER_CONFIG).write_text("{}")
    systems = load_systems()
    for name in ("caef-smollm2-135m", "lora-direct-smollm2-135m"):
        assert systems[name].unavailable(["add_5", "add_10"]) is None
    assert "has no aligner_gt, executor_gt in" in systems["caef-smollm2-135m"].unavailable()  # by default: add and gt
    assert "has no direct_gt, direct_lt, direct_sub:" in systems["lora-direct-smollm2-135m"].unavailable()


def test_a_run_given_another_adapter_folder_checks_that_folder_for_the_cells_adapters(tmp_path, monkeypatch):
    """`run repeated --checkpoints FOLDER`: CAEF runs on FOLDER, so lt's cells need lt's adapters there, not in
    the tier's own folder (which has none)."""
    _tier_without_adapters(tmp_path, monkeypatch)
    other = tmp_path / "pending"
    for folder in ("executors", "aligners"):
        (other / folder / "lt").mkdir(parents=True)
        (other / folder / "lt" / loading.ADAPTER_CONFIG).write_text("{}")
    system = load_systems()["caef-smollm2-135m"]
    assert "has no aligner_lt, executor_lt in" in system.unavailable(["lt_10"])
    assert system.unavailable(["lt_10"], checkpoints=str(other)) is None
    assert "has no aligner_gt, executor_gt in" in system.unavailable(["gt_10"], checkpoints=str(other))


def test_a_run_asks_each_system_its_own_cells_and_records_why_not_the_rest(tmp_path, monkeypatch):
    systems = load_systems()
    asked = {}
    monkeypatch.setattr(table1_runs, "run_system", lambda system, cells, limit, work, progress, out=None: asked.update(
        {system.name: cells}) or {"cells": {}, "limit": limit})
    monkeypatch.setattr(type(systems["caef-tiny"]), "unavailable", lambda self, cells=None: None)
    chosen = [systems[name] for name in ("caef-tiny", "caef-smollm2-135m", "lora-direct-smollm2-135m")]
    every = ["add_5", "add_10", "add_100", "gt_5", "gt_10", "mul_1_10"]
    results = table1_runs.run_table1(chosen, every, work=tmp_path, progress=lambda line: None)
    assert asked == {"caef-tiny": every, "caef-smollm2-135m": ["add_5", "add_10", "add_100", "gt_5", "gt_10"],
                     "lora-direct-smollm2-135m": ["add_5", "add_10", "add_100", "gt_5", "gt_10"]}
    assert "cells_why" not in results["caef-tiny"] and results["caef-smollm2-135m"]["tier"] == "smollm2-135m"
    assert results["lora-direct-smollm2-135m"]["cells_why"] == systems["lora-direct-smollm2-135m"].cells_why
    # --cells-of picks the cells itself (a cell past the trained lengths): no note then
    asked.clear()
    results = table1_runs.run_table1(chosen[1:2], ["add_50"], work=tmp_path, progress=lambda line: None,
                                     cells_of={"caef-smollm2-135m": ["add_50"]})
    assert asked == {"caef-smollm2-135m": ["add_50"]} and "cells_why" not in results["caef-smollm2-135m"]
    # none of a run's cells is one it runs: skipped, saying which it runs
    results = table1_runs.run_table1(chosen[1:2], ["mul_1_10"], work=tmp_path, progress=lambda line: None)
    assert results["caef-smollm2-135m"]["skipped"].startswith("runs on " + ",".join(TRAINED + WINDOWED) + " only")


def _cell(accuracy: float, n: int = 100) -> dict:
    return {"n": n, "correct": int(n * accuracy), "accuracy": accuracy, "ci_low": 0.0, "ci_high": 1.0, "examples": []}


def test_a_lora_direct_row_is_compared_with_the_caef_row_on_its_own_base():
    results = {
        "caef-smollm2-135m": {"paper_row": "CAEF", "tier": "smollm2-135m", "cells": {"add_5": _cell(0.9)},
                              "cells_asked": 22, "cells_why": "trained on add only"},
        "caef-tiny": {"paper_row": "CAEF", "tier": "tiny", "cells": {"add_5": _cell(1.0), "add_10": _cell(1.0)}},
        "lora-direct-smollm2-135m": {"paper_row": "LLaMA 3.1 (L)", "tier": "smollm2-135m", "cells": {"add_5": _cell(0.3)}},
        "lora-direct-tiny": {"paper_row": "LLaMA 3.1 (L)", "tier": "tiny", "cells": {"add_5": _cell(0.5)}},
        "smollm2-135m-instruct": {"paper_row": "LLaMA 3.1 (I)", "cells": {"add_5": _cell(0.2)}},
    }
    addition = table1_frame(results)
    addition = addition[addition["operator"] == "Addition"].set_index("system")
    assert addition.loc["lora-direct-smollm2-135m (ours)", "5"].endswith("(-60.0)")  # from caef-smollm2-135m's 90
    assert addition.loc["lora-direct-tiny (ours)", "5"].endswith("(-50.0)")  # from caef-tiny's 100
    assert addition.loc["smollm2-135m-instruct (ours)", "5"].endswith("(-80.0)")  # no tier: the widest CAEF row
    assert not re.search(r"\(N=100\) \(", addition.loc["caef-smollm2-135m (ours)", "5"])  # a CAEF row: no difference
    text = table1_markdown(results, "cmd")
    assert "difference from our CAEF (caef-tiny; lora-direct-smollm2-135m's from caef-smollm2-135m)" in text
    assert "`caef-smollm2-135m` ran on add_5 only (– elsewhere): trained on add only" in text
    assert "Cells marked – for" not in text  # the long-cells note is for a CAEF row cut for time, not this one


def test_a_smollm2_direct_row_trained_on_fewer_samples_than_its_caef_pair_says_it_is_a_lower_bound(
        tmp_path, monkeypatch):
    """Off the tiny tier there is no preset plan to measure a direct adapter against: its CAEF executor and
    aligner's samples, over all their rounds, are its budget (the paper gives both the same data)."""
    import json

    from caef_bench.evaluate.table1 import direct_training_notes

    _tier_without_adapters(tmp_path, monkeypatch)
    folder = tmp_path / "ck"

    def adapter(kind, steps, batch=8, earlier=None):
        (folder / kind / "add").mkdir(parents=True)
        manifest = {"stages": {"stage2": {"steps": steps, "batch": batch}}, "position_scheme": "standard",
                    **({"initialised_from": earlier} if earlier else {})}
        (folder / kind / "add" / "manifest.json").write_text(json.dumps(manifest))

    adapter("executors", 500, earlier={"stages": {"stage1": {"steps": 10, "batch": 4}, "stage2": {"steps": 250,
                                                                                               "batch": 8}}})
    adapter("aligners", 250)
    adapter("direct", 1005)  # 8,040 samples against the pair's 4,000 + 2,040 + 2,000
    system = load_systems()["lora-direct-smollm2-135m"]
    system.model_args["checkpoints"] = str(folder)
    [note] = direct_training_notes({system.name: {"cells": {}}}, {system.name: system})
    assert "add 8,040, CAEF 8,040, standard ids" in note and "lower bound" not in note
    manifest = json.loads((folder / "direct/add/manifest.json").read_text())
    manifest["stages"]["stage2"]["steps"] = 1000
    (folder / "direct/add/manifest.json").write_text(json.dumps(manifest))
    [note] = direct_training_notes({system.name: {"cells": {}}}, {system.name: system})
    assert "add 8,000, CAEF 8,040" in note and "lower bound" in note and "its CAEF pair's samples" in note
    # an operator the tier has no CAEF adapters for yet (its LoRA-direct row ran ahead): said, not left blank
    (folder / "direct" / "sub").mkdir(parents=True)
    (folder / "direct" / "sub" / "manifest.json").write_text(json.dumps(
        {"stages": {"stage2": {"steps": 505, "batch": 8}}, "position_scheme": "standard"}))
    [note] = direct_training_notes({system.name: {"cells": {}}}, {system.name: system})
    assert "sub 4,040, no CAEF adapters on this tier yet, standard ids" in note
    # tokens too, where every round's manifest says them: a direct sample is shorter than a CAEF transition
    for kind, tokens in (("executors", 1000), ("aligners", 500), ("direct", 700)):
        manifest = json.loads((folder / kind / "add" / "manifest.json").read_text())
        manifest["stages"]["stage2"]["tokens"] = tokens
        if "initialised_from" in manifest:
            for stage in manifest["initialised_from"]["stages"].values():
                stage["tokens"] = 100
        (folder / kind / "add" / "manifest.json").write_text(json.dumps(manifest))
    [note] = direct_training_notes({system.name: {"cells": {}}}, {system.name: system})
    assert "add 8,000, CAEF 8,040, standard ids, 700 tokens (CAEF 1,700)" in note
