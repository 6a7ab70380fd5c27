"""The lm-eval tasks in tasks/: they load, offline, from any working directory,
send the protocol's exact prompts, score through caef_bench.evaluate.scoring,
and run end to end with the lm_eval CLI on a micro model that answers "True" to everything."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from caef_bench.data.testsets import (CELLS, load_cell, load_protocol, long_cells, long_muldiv_cells, repeated_cells,
                                      table1_cells)
from lm_eval.tasks import TaskManager
from micro_model import answering_model_dir  # noqa: F401  (pytest fixture)

TASKS_DIR = Path(__file__).resolve().parents[1] / "tasks"
GROUPS = {
    "caef_table1": [f"caef_{cell}" for cell in table1_cells()],
    "caef_table1_direct": [f"caef_{cell}_direct" for cell in table1_cells()],
    "caef_table1_chat": [f"caef_{cell}_chat" for cell in table1_cells()],
    "caef_repeated": [f"caef_{cell}" for cell in repeated_cells()],
    "caef_repeated_direct": [f"caef_{cell}_direct" for cell in repeated_cells()],
    "caef_repeated_chat": [f"caef_{cell}_chat" for cell in repeated_cells()],
    "caef_long": [f"caef_{cell}" for cell in long_cells()],
    "caef_long_direct": [f"caef_{cell}_direct" for cell in long_cells()],
    "caef_long_chat": [f"caef_{cell}_chat" for cell in long_cells()],
    "caef_long_muldiv": [f"caef_{cell}" for cell in long_muldiv_cells()],
    "caef_long_muldiv_direct": [f"caef_{cell}_direct" for cell in long_muldiv_cells()],
    "caef_long_muldiv_chat": [f"caef_{cell}_chat" for cell in long_muldiv_cells()],
}
CELLS_OF = {"caef_table1": table1_cells, "caef_repeated": repeated_cells, "caef_long": long_cells,
            "caef_long_muldiv": long_muldiv_cells}
OFFLINE_ENV = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """Every CAEF task, loaded with another directory as the working directory."""
    cwd = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("elsewhere"))
    try:
        manager = TaskManager(include_path=str(TASKS_DIR), include_defaults=False)
        return manager, manager.load(list(GROUPS))
    finally:
        os.chdir(cwd)


def test_task_files_are_up_to_date():
    result = subprocess.run(
        [sys.executable, str(TASKS_DIR / "make_tasks.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_index_knows_every_task_and_group(loaded):
    manager, _ = loaded
    assert set(GROUPS) <= set(manager.all_groups)
    assert {task for tasks in GROUPS.values() for task in tasks} <= set(manager.all_subtasks)


def test_groups_hold_their_tasks(loaded):
    _, result = loaded
    assert {group: sorted(children) for group, children in result["group_map"].items()} == {
        group: sorted(tasks) for group, tasks in GROUPS.items()
    }


def test_docs_are_the_committed_cells(loaded):
    _, result = loaded
    for group, tasks in GROUPS.items():
        cells = CELLS_OF[group.removesuffix("_direct").removesuffix("_chat")]()
        for task_name, cell in zip(tasks, cells, strict=True):
            docs = result["tasks"][task_name].test_docs()
            committed = load_cell(cell)
            assert len(docs) == len(committed) == CELLS[cell].size
            assert {key: docs[0][key] for key in committed[0]} == committed[0]


@pytest.mark.parametrize("cell", [*table1_cells(), "repeated_add_100_p2", "repeated_eq_10_control", "sub_1000", "eq_500",
                                  *long_muldiv_cells()])
def test_prompts_are_the_protocols(loaded, cell):
    _, result = loaded
    protocol = load_protocol()
    kind = "comparison" if cell.removeprefix("repeated_").split("_")[0] in ("gt", "lt", "eq") else "arithmetic"
    expected = {
        f"caef_{cell}": "{expr}",
        f"caef_{cell}_direct": protocol["lora_direct"][kind],
        f"caef_{cell}_chat": protocol["instruct_and_gpt4o"][kind],
    }
    for task_name, template in expected.items():
        task = result["tasks"][task_name]
        doc = task.test_docs()[0]
        assert task.fewshot_context(doc, 0) == template.replace("{expr}", doc["expr"])
        assert task.doc_to_target(doc) == doc["answer"]


def test_generation_settings(loaded):
    _, result = loaded
    bare = result["tasks"]["caef_add_100"].config.generation_kwargs
    chat = result["tasks"]["caef_add_100_chat"].config.generation_kwargs
    assert bare["until"] == ["\n"] and bare["do_sample"] is False and bare["max_gen_toks"] >= 110
    assert chat["until"] == [] and chat["do_sample"] is False
    for suffix in ("", "_direct"):  # a 1,000-digit sum has 1,001 digits
        long = result["tasks"][f"caef_add_1000{suffix}"].config.generation_kwargs
        assert long["max_gen_toks"] >= 1001 + 16 and long["until"] == ["\n"] and long["do_sample"] is False
    assert result["tasks"]["caef_add_1000_chat"].config.generation_kwargs["max_gen_toks"] > 2048
    for cell in long_muldiv_cells():  # answers of at most 100 digits (a 50x50 product), Table 1's templates
        longest = max(len(problem["answer"]) for problem in load_cell(cell))
        for suffix in ("", "_direct", "_chat"):
            assert result["tasks"][f"caef_{cell}{suffix}"].config.generation_kwargs["max_gen_toks"] >= longest + 16


def _replies(answer):
    """(right, wrong) completions for each task-name suffix (prompt style)."""
    if answer in ("True", "False"):
        other = "False" if answer == "True" else "True"
        return {
            "": (answer.lower(), other),
            "_direct": (f"{answer}\nbecause...", other),
            "_chat": (f"So it is {answer.lower()}.", f"Answer: {other.lower()}"),
        }
    return {
        "": (answer, f"{answer}0"),
        "_direct": (f"{answer}\nbecause...", f"0{answer}"),
        "_chat": (f"Step by step...\nAnswer: {answer}", f"Answer: {answer}\nAnswer: {int(answer) + 1}"),
    }


@pytest.mark.parametrize("cell", ["add_50", "eq_5", "div_1_10", *long_muldiv_cells()])
def test_tasks_score_through_the_shared_scoring(loaded, cell):
    _, result = loaded
    doc = result["tasks"][f"caef_{cell}"].test_docs()[1]
    for suffix, (right, wrong) in _replies(doc["answer"]).items():
        task = result["tasks"][f"caef_{cell}{suffix}"]
        assert task.process_results(doc, [right]) == {"exact_match": 1.0}, (suffix, right)
        assert task.process_results(doc, [wrong]) == {"exact_match": 0.0}, (suffix, wrong)


def test_lm_eval_cli_end_to_end(answering_model_dir, tmp_path):  # noqa: F811
    """The CLI sends each committed expression, reads the model's reply and scores it: a model that answers
    "True" to everything gets every 100-digit sum wrong and lt_5's first five right where the answer is True."""
    output_dir = tmp_path / "results"
    lm_eval = Path(sys.executable).with_name("lm_eval")
    command = [
        str(lm_eval), "--include_path", str(TASKS_DIR), "--tasks", "caef_add_100,caef_lt_5",
        "--model", "hf", "--model_args", f"pretrained={answering_model_dir}",
        "--device", "cpu", "--limit", "5", "--output_path", str(output_dir), "--log_samples",
    ]  # fmt: skip
    run = subprocess.run(command, cwd="/tmp", env=OFFLINE_ENV, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    [results_file] = output_dir.rglob("results_*.json")
    results = json.loads(results_file.read_text())
    assert [p["answer"] for p in load_cell("lt_5")[:5]] == ["False", "True", "False", "True", "True"]
    assert results["results"]["caef_lt_5"]["exact_match,none"] == pytest.approx(3 / 5)
    assert results["results"]["caef_add_100"]["exact_match,none"] == 0.0
    for cell in ("add_100", "lt_5"):
        assert results["n-samples"][f"caef_{cell}"]["effective"] == 5
        [samples_file] = output_dir.rglob(f"samples_caef_{cell}_*.jsonl")
        samples = sorted((json.loads(line) for line in samples_file.read_text().splitlines()), key=lambda s: s["doc_id"])
        committed = load_cell(cell)[:5]
        assert [s["arguments"]["gen_args_0"]["arg_0"] for s in samples] == [r["expr"] for r in committed]
        assert [s["filtered_resps"][0] for s in samples] == ["True"] * 5  # the reply, read up to its newline
        assert [s["exact_match"] for s in samples] == [float(r["answer"] == "True") for r in committed]
