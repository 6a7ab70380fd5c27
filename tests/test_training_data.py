"""Training data: deterministic, protocol ranges, sampling rules, stage-1 prompts, no test-set leakage."""

import json
from collections import defaultdict

import pytest

from caef_bench.data.direct import direct_prompt
from caef_bench.data.testsets import all_cells, load_cell
from caef_bench.data.training import BuildConfig, build, class_size, classes, kept_steps
from caef_bench.machines import align_input, align_output, run

SMALL = BuildConfig(max_len=6, per_class=3, middle=2, stage1_per_class=1, seed=7)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("train")
    summary = build(out, SMALL, progress=False)
    return out, summary


def _read(out, name):
    return [json.loads(line) for line in (out / name).read_text().splitlines()]


def test_same_seed_same_bytes_and_summary_hashes(built, tmp_path):
    out, summary = built
    again = build(tmp_path, SMALL, progress=False)
    assert again["files"] == summary["files"]
    for name in summary["files"]:
        assert (out / name).read_bytes() == (tmp_path / name).read_bytes()
    other = build(tmp_path / "other", BuildConfig(**{**SMALL.__dict__, "seed": 8}), progress=False)
    assert other["files"]["executor_add.jsonl"]["sha256"] != summary["files"]["executor_add.jsonl"]["sha256"]


def test_first_and_last_transitions_of_every_trace_are_kept(built):
    out, _ = built
    for op in ("add", "sub", "mul", "div", "gt", "lt", "eq", "reflection", "left_mask"):
        steps = defaultdict(set)
        total = {}
        for sample in _read(out, f"executor_{op}.jsonl"):
            meta = sample["meta"]
            key = (tuple(meta["class"]), meta["problem"])
            steps[key].add(meta["step"])
            total[key] = meta["steps"]
            machine_run = run(op, int(meta["a"]), None if meta["b"] is None else int(meta["b"]))
            assert (sample["prompt"], sample["completion"]) == machine_run.transition(meta["step"])
        for key, kept in steps.items():
            assert {0, total[key] - 1} <= kept
            assert len(kept) <= 2 + SMALL.middle


def test_kept_steps_rule():
    import random

    rng = random.Random(0)
    assert kept_steps(1, 3, rng) == [0]
    assert kept_steps(2, 3, rng) == [0, 1]
    picks = kept_steps(100, 3, rng)
    assert picks[0] == 0 and picks[-1] == 99 and len(picks) == 5


def test_every_class_is_present_with_its_lengths(built):
    out, _ = built
    seen = {tuple(s["meta"]["class"]) for s in _read(out, "executor_add.jsonl")}
    assert seen == set(classes("add", SMALL.max_len))
    for sample in _read(out, "executor_add.jsonl"):
        la, lb = sample["meta"]["class"]
        assert (len(sample["meta"]["a"]), len(sample["meta"]["b"])) == (la, lb)


def test_mul_and_div_stay_in_protocol_ranges(built):
    out, _ = built
    for sample in _read(out, "aligner_mul.jsonl"):
        a, b = int(sample["meta"]["a"]), int(sample["meta"]["b"])
        assert 1 <= len(str(a)) <= 10 and 1 <= b <= 15
    for sample in _read(out, "aligner_div.jsonl"):
        a, b = int(sample["meta"]["a"]), int(sample["meta"]["b"])
        assert 1 <= len(str(b)) <= 10 and 1 <= a // b <= 15


def test_sub_is_non_negative_and_eq_gets_extra_equal_pairs(built):
    out, _ = built
    assert all(int(s["meta"]["a"]) >= int(s["meta"]["b"]) for s in _read(out, "aligner_sub.jsonl"))
    by_class = defaultdict(list)
    for sample in _read(out, "direct_eq.jsonl"):
        by_class[tuple(sample["meta"]["class"])].append(sample["completion"])
    for (la, lb), answers in by_class.items():
        if la == lb:
            assert len(answers) == 2 * SMALL.per_class and answers.count("True") >= SMALL.per_class
        else:
            assert len(answers) == SMALL.per_class and "True" not in answers


def test_balance_gives_short_operands_more_expressions():
    balanced = BuildConfig(per_class=20, balance=True)
    assert class_size("add", (1, 2), balanced) == 20 * 5
    assert class_size("add", (1, 1), balanced) == 100  # capped at the number of distinct problems
    assert class_size("add", (40, 3), balanced) == 20
    assert class_size("add", (1, 2), BuildConfig(per_class=20)) == 20


def test_stage_one_prefixes_an_explanation_and_a_worked_example(built):
    out, _ = built
    stage1 = _read(out, "executor_sub.stage1.jsonl")
    bare = {(s["meta"]["a"], s["meta"]["b"], s["meta"]["step"]): s for s in _read(out, "executor_sub.jsonl")}
    for sample in stage1:
        twin = bare[(sample["meta"]["a"], sample["meta"]["b"], sample["meta"]["step"])]
        assert sample["prompt"].startswith("SUB computes a - b")
        assert "### Example\n" in sample["prompt"]
        assert sample["prompt"].endswith("### Step\n" + twin["prompt"])
        assert sample["completion"] == twin["completion"]


def test_aligner_samples_in_both_directions(built):
    out, _ = built
    for op in ("add", "sub", "mul", "div", "gt", "lt", "eq"):
        samples = _read(out, f"aligner_{op}.jsonl")
        for sample in samples:
            if sample["meta"]["kind"] == "aligner_input":
                assert sample["completion"] == align_input(sample["prompt"])
            else:
                assert sample["completion"] == align_output(sample["prompt"])


def test_direct_samples_use_the_protocol_prompt(built):
    out, _ = built
    sample = _read(out, "direct_gt.jsonl")[0]
    assert sample["prompt"] == direct_prompt(sample["meta"]["expr"], "gt")
    assert sample["prompt"].startswith("Please judge the expression is true or false.\nThe expression is: ")


def test_no_test_set_problem_is_drawn_for_training(tmp_path):
    # 1-digit mul and div classes are small enough that test-set problems would be drawn often.
    config = BuildConfig(max_len=1, per_class=40, ops=("mul", "div"), kinds=("direct",), seed=3)
    build(tmp_path, config, progress=False)
    test_exprs = {p["expr"] for cell in all_cells() for p in load_cell(cell)}
    drawn = [s["meta"]["expr"] for op in ("mul", "div") for s in _read(tmp_path, f"direct_{op}.jsonl")]
    assert drawn and not set(drawn) & test_exprs


def test_cli_build_prints_a_summary(tmp_path, capsys):
    from caef_bench.cli import main

    assert main(["data", "build", "--out", str(tmp_path), "--max-len", "2", "--per-class", "1", "--ops", "add",
                 "--kinds", "executor", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "executor_add.jsonl" in out and (tmp_path / "summary.json").exists()
