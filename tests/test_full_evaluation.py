"""The prepared accelerator call (benchmarks/accelerator/full_evaluation.py): a device runs it unattended,
so its bookkeeping is checked here on small records, and the whole call at a small scale on the CPU
(slow: several processes, each loading the tier)."""

import importlib.util
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from caef_bench.runtime import Problem, load_records, solve_to_file
from caef_bench.runtime.oracle import OracleModel

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "accelerator" / "full_evaluation.py"


def _script():
    spec = importlib.util.spec_from_file_location("full_evaluation", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FULL_EVALUATION = _script()


def _records(path: Path, exprs: list[tuple[str, str]]) -> None:
    solve_to_file([Problem(i, e) for i, e in exprs], OracleModel(), path, mode="traced")


def _archive(tmp_path: Path, folder_name: str, files: dict[str, list[tuple[str, str]]]) -> Path:
    source = tmp_path / "source" / folder_name
    source.mkdir(parents=True)
    for name, exprs in files.items():
        _records(source / name, exprs)
    archive = tmp_path / "records.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(source, arcname=folder_name)
    return archive


def test_taking_in_an_archive_adds_only_this_weights_records_it_lacks(tmp_path):
    folder = tmp_path / "records" / "tiny-w1"
    folder.mkdir(parents=True)
    _records(folder / "caef_add_5.jsonl", [("add_5-0000", "45+67=")])
    archive = _archive(tmp_path, "tiny-w1", {"caef_add_5.jsonl": [("add_5-0000", "45+67="), ("add_5-0001", "1+2=")]})
    assert FULL_EVALUATION.take_in(archive, folder) == 1
    assert [r.id for r in load_records(folder / "caef_add_5.jsonl")] == ["add_5-0000", "add_5-0001"]
    assert FULL_EVALUATION.take_in(archive, folder) == 0  # a second time: nothing new
    other = tmp_path / "records" / "tiny-w2"  # another weights' folder takes nothing from w1's records
    other.mkdir()
    assert FULL_EVALUATION.take_in(archive, other) == 0 and not list(other.iterdir())


def test_shards_merge_once_and_the_tables_take_the_largest_n_every_cell_has_whole(tmp_path, monkeypatch):
    folder, shards = tmp_path / "records", tmp_path / "shards"
    folder.mkdir()
    shards.mkdir()
    rows = {"add_5": [{"id": f"add_5-000{i}", "expr": f"{i}+1="} for i in range(4)],
            "gt_5": [{"id": f"gt_5-000{i}", "expr": f"{i}>1="} for i in range(4)]}
    monkeypatch.setattr("caef_bench.data.testsets.load_cell", lambda cell: rows[cell])
    _records(shards / "add_5.0.jsonl", [(r["id"], r["expr"]) for r in rows["add_5"][0::2]])
    _records(shards / "add_5.1.jsonl", [(r["id"], r["expr"]) for r in rows["add_5"][1::2]])
    _records(shards / "gt_5.0.jsonl", [(r["id"], r["expr"]) for r in rows["gt_5"][:2]])
    assert FULL_EVALUATION.merge_shards(shards, folder, ["add_5", "gt_5"]) == 6
    assert FULL_EVALUATION.merge_shards(shards, folder, ["add_5", "gt_5"]) == 0
    assert FULL_EVALUATION.whole_n(folder, ["add_5"], 4) == 4
    assert FULL_EVALUATION.whole_n(folder, ["add_5", "gt_5"], 4) == 2
    assert FULL_EVALUATION.pending_of(folder, {"add_5": 4, "gt_5": 4}) == {"gt_5": [2, 3]}
    packed = tmp_path / "back" / "records.tgz"
    (folder / "weights.json").write_text("{}\n")
    assert FULL_EVALUATION.pack_records(folder, packed) == 6
    with tarfile.open(packed) as tar:
        lines = tar.extractfile(f"{folder.name}/caef_add_5.jsonl").read().decode().splitlines()
    assert [json.loads(line)["steps"] for line in lines] == [[]] * 4  # no step texts travel back
    assert all(json.loads(line)["answer"] for line in lines)


@pytest.mark.slow
def test_the_call_at_a_small_scale_on_the_cpu(tmp_path):
    """`--smoke`: the committed records taken in, the precision check, three problems solved by the
    batched path in a process of its own, the tables assembled from the records and everything packed
    (minutes: four processes load the tier, and the tables' commands run as a user runs them)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", "out", "--device", "cpu", "--smoke",
                           "--minutes", "60", "--bring-back", "back"], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    check = json.loads((tmp_path / "back" / "precision_check.json").read_text())
    assert check["settings"] and all(setting["identical"] for setting in check["settings"].values())
    assert check["chosen"] != "reference"
    assert check["against_committed_records"] == {"compared": 2, "differing": []}
    with tarfile.open(tmp_path / "back" / "records.tgz") as tar:
        names = tar.getnames()
        folder = names[0].split("/")[0]
        new = {}
        for cell, first_new in (("add_5", 200), ("gt_5", 200), ("rep_add_50_p1", 50)):  # past the committed records
            lines = tar.extractfile(f"{folder}/caef_{cell}.jsonl").read().decode().splitlines()
            new[cell] = [json.loads(line) for line in lines if json.loads(line)["id"].endswith(f"-{first_new:04d}")]
    assert {cell: [(r["answer"] == r["target"], r["steps"]) for r in records] for cell, records in new.items()} == \
           {cell: [(True, [])] for cell in new}
    with tarfile.open(tmp_path / "back" / "tables.tgz") as tar:
        assert {"table1/table1_caef.md", "repeated/failure_analysis.md"} <= set(tar.getnames())
    log = (tmp_path / "back" / "full_evaluation.log").read_text()
    assert '"solved": 3' in log and "tables at N={'table1': 201, 'repeated': 51}" in log
