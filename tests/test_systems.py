"""Systems under test as data (baselines/*.yaml) and the Table 1 report built from lm-eval's logs."""

import json
import re
from pathlib import Path

import pytest

from caef_bench.evaluate.systems import PAPER_ROWS, load_system, load_systems
from caef_bench.evaluate.table1 import cell_result, reply_text
from caef_bench.report.table1 import table1_frame, table1_markdown, write_table1

SHIPPED = {"caef-tiny", "lora-direct-tiny", "smollm2-135m-instruct", "llama-3.1-8b-instruct", "caef-llama-3.1-8b",
           "lora-direct-llama-3.1-8b", "gpt-4o", "openai-compatible"}


def test_every_shipped_system_file_loads_and_names_a_paper_row_or_none():
    systems = load_systems()
    assert SHIPPED <= set(systems)
    for system in systems.values():
        assert system.paper_row in (None, *PAPER_ROWS)
    rows = {s.paper_row for s in systems.values()}
    assert set(PAPER_ROWS) <= rows  # the paper's four rows each have a system


def test_a_system_that_cannot_run_here_says_why_in_one_line(monkeypatch):
    systems = load_systems()
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert systems["gpt-4o"].unavailable() == "needs OPENAI_API_KEY set"
    monkeypatch.setenv("CAEF_LLAMA_INSTRUCT_PATH", "/weights")
    import torch

    if not torch.cuda.is_available():
        assert systems["llama-3.1-8b-instruct"].unavailable() == "needs a GPU (none here)"
    assert systems["caef-tiny"].unavailable() is None


def test_lm_eval_arguments_fill_placeholders_and_pick_the_groups_tasks(monkeypatch):
    monkeypatch.setenv("CAEF_BENCH_BASE_URL", "http://127.0.0.1:9/v1/chat/completions")
    monkeypatch.setenv("CAEF_BENCH_MODEL", "m")
    system = load_systems()["openai-compatible"]
    argv = system.lm_eval_argv(["add_5", "mul_1_10"], 3, Path("out"), Path("cache"))
    assert argv[argv.index("--tasks") + 1] == "caef_add_5_chat,caef_mul_1_10_chat"
    model_args = argv[argv.index("--model_args") + 1]
    assert "base_url=http://127.0.0.1:9/v1/chat/completions" in model_args and "model=m," in model_args
    assert "--apply_chat_template" in argv and argv[argv.index("--limit") + 1] == "3"
    assert argv[argv.index("--use_cache") + 1] == "cache"
    assert load_systems()["lora-direct-tiny"].task("eq_100") == "caef_eq_100_direct"


def test_a_system_files_data_placeholder_is_the_data_root_wherever_the_command_runs(monkeypatch, tmp_path):
    from caef_bench.evaluate.table1 import system_weights
    from caef_bench.models.loading import get_tier, weights_fingerprint
    from caef_bench.paths import data_root

    monkeypatch.chdir(tmp_path)  # a relative checkpoints path would name a folder here
    system = load_systems()["lora-direct-tiny-protocol"]
    folder = Path(system.resolved_model_args()["checkpoints"])
    assert folder == data_root() / "checkpoints" / "tiny-direct-protocol" and (folder / "direct" / "add").is_dir()
    # its own weights, beside the tier's: the tier's fingerprint, which every reference result names, is not moved
    assert system_weights(system) != system_weights(load_systems()["lora-direct-tiny"]) == weights_fingerprint(
        get_tier("tiny"))


def test_every_system_has_a_task_for_every_repeated_cell_in_its_own_prompt_style():
    from caef_bench.data.testsets import repeated_cells
    from caef_bench.paths import TASKS_DIR

    folders = {"caef_table1": "repeated", "caef_table1_direct": "repeated_direct", "caef_table1_chat": "repeated_chat"}
    for system in load_systems().values():
        for cell in repeated_cells():
            task = system.task(cell)
            path = TASKS_DIR / folders[system.tasks] / f"{task}.yaml"
            assert path.is_file(), (system.name, cell, path)
            assert f"task: {task}\n" in path.read_text() and f"cell: {cell}\n" in path.read_text()
    assert load_systems()["smollm2-135m-instruct"].task("repeated_sub_50_p3") == "caef_repeated_sub_50_p3_chat"


def test_a_malformed_system_file_is_refused_with_its_path(tmp_path):
    (tmp_path / "bad.yaml").write_text("name: x\nmodel: hf\ntasks: caef_table1\nsize: 3\n")
    with pytest.raises(ValueError, match=r"bad.yaml: unknown field\(s\) size"):
        load_system(tmp_path / "bad.yaml")
    (tmp_path / "bad.yaml").write_text("name: x\nmodel: hf\ntasks: caef_other\n")
    with pytest.raises(ValueError, match="tasks must be one of"):
        load_system(tmp_path / "bad.yaml")


def _sample(expr, answer, reply, correct):
    return {"doc": {"expr": expr, "answer": answer}, "resps": [[reply]], "filtered_resps": [reply],
            "exact_match": float(correct)}


def test_cells_are_scored_from_lm_evals_samples_with_wilson_intervals_and_wrong_replies_kept():
    samples = [_sample("1+1=", "2", "2", True)] * 8 + [_sample("2+2=", "4", "Answer: 5", False)] * 2
    result = cell_result(samples)
    assert (result["n"], result["correct"]) == (10, 8) and result["ci_low"] < 0.8 < result["ci_high"]
    assert result["examples"][0] == {"expr": "2+2=", "answer": "4", "reply": "Answer: 5"}
    assert reply_text({"resps": [["x"]]}) == "x"


def _results():
    def cells(accuracy):
        return {"add_5": {"n": 10, "correct": int(10 * accuracy), "accuracy": accuracy, "ci_low": 0.0, "ci_high": 1.0,
                          "examples": [{"expr": "1+2=", "answer": "3", "reply": "1+2 = 4."}] if accuracy < 1 else []}}
    return {"caef-tiny": {"paper_row": "CAEF", "description": "d", "cells": cells(1.0), "command": "c"},
            "smollm2-135m-instruct": {"paper_row": "LLaMA 3.1 (I)", "description": "d", "cells": cells(0.2),
                                      "command": "c"},
            "gpt-4o": {"paper_row": "GPT-4o", "description": "d", "skipped": "needs OPENAI_API_KEY set"}}


def test_the_table_puts_ours_beside_the_papers_with_differences_from_caef():
    frame = table1_frame(_results())
    addition = frame[frame["operator"] == "Addition"].set_index("system")
    assert addition.loc["caef-tiny (ours)", "5"].startswith("100.0 [0.0, 100.0] (N=10)")
    assert addition.loc["smollm2-135m-instruct (ours)", "5"].endswith("(-80.0)")
    assert addition.loc["LLaMA 3.1 (I) (paper)", "5"] == "93.5 (-6.5)"  # the paper's 93.5 against its CAEF's 100.0
    assert addition.loc["gpt-4o (ours)", "5"] == "not run"
    assert addition.loc["LLaMA 3.1 (L) (ours)", "5"] == "–"  # no system of that row here
    text = table1_markdown(_results(), "caef-bench run --suite table1")
    assert "not run here: needs OPENAI_API_KEY set" in text
    assert "replied `1+2 = 4.`" in text  # a baseline's replies are shown, CAEF's are not


def test_a_caef_system_run_on_part_of_the_table_says_on_how_many_cells_and_where_the_rest_are():
    results = _results()
    results["caef-tiny"]["cells_asked"] = 22  # --cells-of caef-tiny=add_5: one of the table's cells
    text = table1_markdown(results, "caef-bench run --suite table1 --cells-of caef-tiny=add_5")
    assert "N=10 per cell on 1 of the 22 cells (– elsewhere)" in text
    assert "Cells marked – for `caef-tiny`" in text and "results/table1_caef.md" in text
    results["caef-tiny"]["cells_asked"] = 1  # every cell it was asked for: no such note
    assert "Cells marked –" not in table1_markdown(results, "caef-bench run --suite table1")


def test_the_report_writes_markdown_json_and_a_figure_from_the_samples(tmp_path):
    """A baseline's cell scored from its lm-eval samples (8 of 10 right) and CAEF's (10 of 10), through the
    report files: the table, the JSON and the figure show what the samples hold."""
    right, wrong = _sample("1+1=", "2", "Answer: 2", True), _sample("2+2=", "4", "Answer: 5", False)
    results = _results()
    results["caef-tiny"]["cells"] = {"add_5": cell_result([right] * 10)}
    results["smollm2-135m-instruct"]["cells"] = {"add_5": cell_result([right] * 8 + [wrong] * 2)}
    paths = write_table1(results, tmp_path, "cmd", notes=["a note"])
    assert [p.name for p in paths] == ["table1.md", "table1.json", "table1.png"]
    markdown = re.sub(r" +", " ", paths[0].read_text())  # the table's cells without their padding
    assert "| Addition | caef-tiny (ours) | 100.0 [72.2, 100.0] (N=10) |" in markdown
    assert "| Addition | smollm2-135m-instruct (ours) | 80.0 [49.0, 94.3] (N=10) (-20.0) |" in markdown
    assert "\n\na note\n" in markdown and "`2+2=` (answer 4) replied `Answer: 5`" in markdown
    written = json.loads(paths[1].read_text())
    cell = written["systems"]["smollm2-135m-instruct"]["cells"]["add_5"]
    assert (cell["n"], cell["correct"], written["notes"]) == (10, 8, ["a note"])
    assert paths[2].read_bytes()[:4] == b"\x89PNG" and paths[2].stat().st_size > 10_000


def _cells(**rates):
    """{cell: stats} from cell=(correct, n)."""
    from caef_bench.evaluate.scoring import accuracy

    return {cell: accuracy([{"correct": i < k} for i in range(n)]) for cell, (k, n) in rates.items()}


def test_a_local_run_of_20_right_of_20_is_consistent_with_a_committed_199_of_200():
    """The main job's verdict (each cell against the committed one, Fisher's exact test): 20 of 20 is what
    a 99.5% model does most of the time, not a difference."""
    from caef_bench.report.table1 import comparison_lines

    committed = {"systems": {"caef-tiny": {"cells": _cells(mul_1_10=(199, 200), add_5=(200, 200))}}}
    local = {"caef-tiny": {"cells": _cells(mul_1_10=(20, 20), add_5=(20, 20))}}
    lines = comparison_lines(local, committed)
    assert len(lines) == 1 and lines[0].startswith("compared with the committed table: consistent, no cell differs")
    assert "Fisher's exact test" in lines[0] and "over the 2 cells" in lines[0]
    assert "mul_1_10: 20 of 20 (100.0%) against 199 of 200 (99.5%), p = 1" in lines[0]


def test_a_cell_that_really_differs_is_named_with_both_rates():
    from caef_bench.report.table1 import comparison_lines

    committed = {"systems": {"caef-tiny": {"cells": _cells(mul_1_10=(199, 200), gt_5=(200, 200))},
                             "lora-direct-tiny": {"cells": _cells(eq_5=(100, 100))}}}
    local = {"caef-tiny": {"cells": _cells(mul_1_10=(10, 20), gt_5=(20, 20))},
             "lora-direct-tiny": {"cells": _cells(eq_5=(10, 10))},
             "gpt-4o": {"skipped": "needs OPENAI_API_KEY"}}
    lines = comparison_lines(local, committed)
    assert lines[0].startswith("compared with the committed table: 1 of 3 cells differ")
    assert lines[1:] == ["  caef-tiny mul_1_10: 10 of 20 (50.0%), below the committed 199 of 200 (99.5%) (p = 3.3e-11)"]


def test_one_cell_off_at_5_percent_among_56_is_not_called_a_difference():
    """18 of 20 against 199 of 200 is p = 0.022 alone; among 56 cells compared, Holm's bar for the lowest is
    0.05/56, so the verdict stays "consistent"; alone, the same cell differs."""
    from caef_bench.report.table1 import comparison_lines, holm_rejections

    cells = {f"c{i}": (20, 20) for i in range(55)}
    committed = {"systems": {"s": {"cells": _cells(**{c: (200, 200) for c in cells}, odd=(199, 200))}}}
    local = {"s": {"cells": _cells(**cells, odd=(18, 20))}}
    assert "consistent" in comparison_lines(local, committed)[0]
    alone = comparison_lines({"s": {"cells": _cells(odd=(18, 20))}}, committed)
    assert alone[0].startswith("compared with the committed table: 1 of 1 cells differ") and "p = 0.022" in alone[1]
    assert holm_rejections([0.01, 0.04, 0.03, 0.5]) == [True, False, False, False]  # 0.01 < 0.05/4; 0.03 >= 0.05/3
    assert holm_rejections([0.001, 0.02, 0.012]) == [True, True, True]  # 0.001 < 0.05/3, 0.012 < 0.05/2, 0.02 < 0.05
    assert comparison_lines({"s": {"cells": _cells(x=(1, 1))}}, committed) == ["no cell in common with the committed table"]


def _fake_lm_eval(calls):
    """Stands in for the `caef-bench lm-eval` subprocess: writes a complete, right sample log for
    every task it is asked, where lm-eval would (under --output_path)."""
    from caef_bench.data.testsets import load_cell

    def run(command, env):
        output = Path(command[command.index("--output_path") + 1])
        limit = int(command[command.index("--limit") + 1])
        calls.append(command)
        for task in command[command.index("--tasks") + 1].split(","):
            cell = task.removeprefix("caef_").removesuffix("_direct").removesuffix("_chat")  # one cell, any prompt
            rows = load_cell(cell)[:limit]
            lines = [json.dumps({"doc": {"expr": r["expr"], "answer": r["answer"]}, "exact_match": 1.0,
                                 "filtered_resps": [r["answer"]]}) for r in rows]
            (output / "m").mkdir(parents=True, exist_ok=True)
            (output / "m" / f"samples_{task}_2026.jsonl").write_text("\n".join(lines) + "\n")
        return 0  # its exit code
    return run


def test_a_tier_system_keeps_its_lm_eval_outputs_per_weights_and_records_a_command_that_makes_every_cell(
        tmp_path, monkeypatch):
    # lm-eval's request cache is keyed by the request alone: after retraining, a rerun in the same
    # folder would be answered by the weights before, so a tier's system works in a folder per weights
    import caef_bench.evaluate.table1 as table1

    system = load_systems()["caef-tiny"]
    calls = []
    monkeypatch.setattr(table1, "run_child", _fake_lm_eval(calls))
    monkeypatch.setattr(table1, "system_weights", lambda s: "aaaaaaaaaaaa")
    first = table1.run_system(system, ["add_5", "gt_5"], 3, tmp_path, progress=lambda *_: None)
    assert first["weights"] == "aaaaaaaaaaaa" and (tmp_path / "caef-tiny" / "aaaaaaaaaaaa" / "m").is_dir()
    assert first["cells"]["add_5"]["n"] == 3 and len(calls) == 1

    again = table1.run_system(system, ["add_5", "gt_5"], 3, tmp_path, progress=lambda *_: None)
    assert len(calls) == 1  # every cell done for these weights: nothing run
    assert "--tasks caef_add_5,caef_gt_5 " in again["command"]  # the recorded command still makes both

    monkeypatch.setattr(table1, "system_weights", lambda s: "bbbbbbbbbbbb")
    retrained = table1.run_system(system, ["add_5", "gt_5"], 3, tmp_path, progress=lambda *_: None)
    assert len(calls) == 2 and retrained["weights"] == "bbbbbbbbbbbb"  # other weights: run again, elsewhere
    assert "bbbbbbbbbbbb" in calls[1][calls[1].index("--output_path") + 1]


def test_table1_limits_set_one_systems_n_and_leave_the_others_at_their_own(tmp_path, monkeypatch):
    # caef-tiny=200 read from the caef suite's records beside the baselines at their own N (100, 10)
    import caef_bench.evaluate.table1 as table1

    systems = load_systems()
    calls = []
    monkeypatch.setattr(table1, "run_child", _fake_lm_eval(calls))
    monkeypatch.setattr(table1, "system_weights", lambda s: "aaaaaaaaaaaa")
    results = table1.run_table1([systems["caef-tiny"], systems["lora-direct-tiny"]], ["add_5"], None, tmp_path,
                                progress=lambda *_: None, limits={"caef-tiny": 7})
    assert results["caef-tiny"]["cells"]["add_5"]["n"] == 7 and results["caef-tiny"]["limit"] == 7
    assert results["lora-direct-tiny"]["cells"]["add_5"]["n"] == systems["lora-direct-tiny"].limit
    assert [call[call.index("--limit") + 1] for call in calls] == ["7", str(systems["lora-direct-tiny"].limit)]


def test_only_systems_of_a_tier_have_weights_and_the_report_names_them():
    from caef_bench.evaluate.table1 import system_weights
    from caef_bench.models.loading import get_tier, weights_fingerprint

    systems = load_systems()
    assert system_weights(systems["gpt-4o"]) is None and system_weights(systems["smollm2-135m-instruct"]) is None
    shipped = weights_fingerprint(get_tier("tiny"))  # the direct adapters live in the same folder
    assert system_weights(systems["caef-tiny"]) == system_weights(systems["lora-direct-tiny"]) == shipped
    results = _results()
    results["caef-tiny"]["weights"] = "c0ffee000000"
    assert "weights `c0ffee000000`; N=10 per cell" in table1_markdown(results, "cmd")


def test_two_systems_of_one_paper_row_and_tier_draw_apart_in_the_figure():
    from caef_bench.report.table1 import line_styles

    ran = {"cells": {}}
    results = {"a": {**ran, "paper_row": "LLaMA 3.1 (L)", "tier": "tiny"}, "gone": {"paper_row": "LLaMA 3.1 (L)"},
               "b": {**ran, "paper_row": "LLaMA 3.1 (L)", "tier": "tiny"}, "c": {**ran, "paper_row": "LLaMA 3.1 (L)"}}
    styles = line_styles(results)
    assert set(styles) == {"a", "b", "c"}  # a system that did not run draws nothing
    assert styles["a"] == styles["c"] == ("-", None) and styles["b"][0] != "-" and styles["b"][1] == "white"


def test_a_folder_of_direct_adapters_alone_runs_on_the_base_its_manifests_name(tmp_path):
    import json
    import shutil

    from caef_bench.models.loading import TINY_CHECKPOINTS, tier_with_checkpoints

    shipped = tier_with_checkpoints("tiny", TINY_CHECKPOINTS.parent / "tiny-direct-protocol")
    assert shipped.base == TINY_CHECKPOINTS / "base"  # no base/ of its own: every manifest names the shipped one
    other = tmp_path / "direct-alone"
    shutil.copytree(TINY_CHECKPOINTS.parent / "tiny-direct-protocol" / "direct", other / "direct")
    manifest = other / "direct" / "add" / "manifest.json"
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "base_weights": "another-base"}))
    with pytest.raises(FileNotFoundError, match="no trained base model at .*direct-alone/base.*shipped base"):
        tier_with_checkpoints("tiny", other)  # trained on a base that is not here: refused, not run on the wrong one
