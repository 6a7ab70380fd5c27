"""The runtime on a real transformers + peft model trained by the tiny preset's own recipe.

Two micro tiny tiers, each trained on the machine's run of 12+34= alone:
- `trained` (the default run): a few steps. Its outputs are garbage, but the same garbage every time,
  which is all that checkpoints, fingerprints, adapter switching, resuming and step reuse need.
- `memorised` (slow, under a minute: `pytest -m slow`): enough steps that the model's greedy outputs are the
  machine's, so the tests can check that a run answers 12+34=46 and that speculative decoding takes one
  forward pass per step when its draft is right.
The `run` and `onestep` commands' results are checked on the shipped tiny tier (checkpoints/tiny/), which
is right on these problems (and fast: one-step accuracy decodes with the machine's text as its draft, one
pass per step for a model that is right, one per token for garbage).
"""

import json
from pathlib import Path

import pytest

from caef_bench.machines import run
from caef_bench.models.tiny import TinyShape
from caef_bench.paths import TINY_CHECKPOINTS
from caef_bench.runtime import Problem, solve_batch
from caef_bench.runtime.hf import load_step_model
from caef_bench.train.recipe import TrainRequest, run_training

EXPR = "12+34="


def _train_on_12_plus_34(root: Path, base_steps: int) -> Path:
    """The tiny preset's recipe on one problem's executor and aligner samples; the checkpoints folder."""
    data = root / "data"
    data.mkdir()
    machine_run = run("add", 12, 34)
    executor = [{"prompt": s, "completion": t, "meta": {}} for s, t in machine_run.transitions()]
    aligner = [{"prompt": EXPR, "completion": machine_run.start_text(), "meta": {}},
               {"prompt": machine_run.text(-1), "completion": "12+34=46", "meta": {}}]
    for name, samples in (("executor_add.jsonl", executor), ("aligner_add.jsonl", aligner)):
        (data / name).write_text("".join(json.dumps(s) + "\n" for s in samples))
    run_training(TrainRequest(
        preset="tiny", out=root / "ck", data=data, executors=("add",), aligners=("add",),
        # batch 16, not the preset's 128: seven samples are memorised as well, six times as fast
        overrides={"base_steps": base_steps, "base_lr": 3e-3, "stage2_steps": 5, "max_len": 2,
                   "base_batch": 16, "stage2_batch": 16}, progress=False,
        tiny_shape=TinyShape(hidden=64, layers=2, heads=2, ffn=128)))
    return root / "ck"


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    return _train_on_12_plus_34(tmp_path_factory.mktemp("trained"), base_steps=4)


@pytest.fixture(scope="module")
def memorised(tmp_path_factory) -> Path:
    return _train_on_12_plus_34(tmp_path_factory.mktemp("memorised"), base_steps=400)


PROBLEMS = [Problem("a", EXPR, "46"), Problem("b", "21+43=", "64")]  # the second never seen: garbage, the same garbage


def _speculative_and_plain_alike(checkpoints: Path):
    """Both problems solved with speculative decoding and with plain greedy (the same weights and ids, one
    pass per token): the same text at every step. (the speculative model, the plain one, the records)"""
    fast = load_step_model("tiny", str(checkpoints), speculative=True)
    plain = fast.paper_loop()
    fast_records = solve_batch(PROBLEMS, fast, mode="traced")
    plain_records = solve_batch(PROBLEMS, plain, mode="traced")
    assert [[s.output for s in f.steps] for f in fast_records] == [[s.output for s in p.steps] for p in plain_records]
    assert all(record.steps for record in fast_records)
    return fast, plain, fast_records


def test_speculative_decoding_gives_plain_greedys_text(trained):
    _speculative_and_plain_alike(trained)


@pytest.mark.slow
def test_speculative_decoding_takes_one_pass_per_step_where_its_draft_is_right(memorised):
    fast, plain, fast_records = _speculative_and_plain_alike(memorised)
    assert fast_records[0].final == "12+34=46"
    # forward passes per executor step where the draft is right: the memorised problem alone (the
    # other's garbage costs what it costs)
    alone = load_step_model("tiny", str(memorised), speculative=True)
    solve_batch(PROBLEMS[:1], alone, mode="traced")
    executor = alone.stats.by_adapter["executor_add"]
    assert executor[1] / executor[0] <= 1.5
    assert plain.stats.forward_passes > 5 * fast.stats.forward_passes


def test_adapters_are_switched_by_name_and_attached_on_first_use(trained):
    model = load_step_model("tiny", str(trained))
    assert not hasattr(model.model, "peft_config")  # the base alone until a call needs an adapter
    assert model.adapter_names == ("aligner_add", "executor_add")
    model.generate(["12+34="], "aligner_add")
    assert set(model.model.peft_config) == {"aligner_add"}
    assert model.paper_loop().model is model.model  # one set of weights, wrapped once
    with pytest.raises(ValueError, match="not loaded"):
        model.generate(["1+2="], "executor_mul")


@pytest.mark.slow
def test_solve_answers_what_the_model_memorised(memorised, capsys):
    from caef_bench.cli import main

    assert main(["solve", EXPR, "--checkpoints", str(memorised), "--trace"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "12+34=46" and "executor_add" in out


def test_run_command_writes_the_table_the_json_and_the_records(tmp_path):
    from caef_bench.cli import main

    assert main(["run", "--suite", "caef", "--cells", "add_5", "--limit", "2", "--checkpoints", str(TINY_CHECKPOINTS),
                 "--out", str(tmp_path / "results"), "--records", str(tmp_path / "records")]) == 0
    table = (tmp_path / "results" / "table1_caef.md").read_text()
    assert "| Addition | end_to_end, ours | 100.0 [34.2, 100.0] (N=2) |" in table  # results/table1_caef.md: 200/200
    assert "| | end_to_end, paper | 100.0 | 99.6 | 99.9 | 98.6 | – |" in table
    result = json.loads((tmp_path / "results" / "table1_caef.json").read_text())
    assert result["results"]["add_5"]["end_to_end"]["n"] == 2
    assert len((tmp_path / "records" / "caef_add_5.jsonl").read_text().splitlines()) == 2


def test_a_run_whose_journal_cannot_be_written_ends_in_one_line_and_fails_no_problem(tmp_path, monkeypatch, capsys):
    from caef_bench.cli import main
    from caef_bench.runtime.journal import Journal

    def disk_full(self, *call):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Journal, "write", disk_full)
    assert main(["run", "--suite", "caef", "--cells", "add_5", "--limit", "2", "--checkpoints", str(TINY_CHECKPOINTS),
                 "--out", str(tmp_path / "results"), "--records", str(tmp_path / "records")]) == 1
    error = capsys.readouterr().err.strip().splitlines()
    assert error[-1].startswith("caef-bench: ") and "No space left on device" in error[-1]
    assert not (tmp_path / "records" / "caef_add_5.jsonl").exists() or \
        (tmp_path / "records" / "caef_add_5.jsonl").read_text() == ""  # nothing recorded as failed


@pytest.mark.parametrize("suite, cell", [("caef", "add_5"), ("repeated", "repeated_add_10_p1")])
def test_run_command_caps_the_problems_in_flight(suite, cell, tmp_path, monkeypatch):
    from caef_bench.cli import main
    from caef_bench.evaluate import suites

    caps, solve_cells = [], suites.solve_cells

    def spy(*args, max_in_flight=None, **kwargs):
        caps.append(max_in_flight)
        return solve_cells(*args, max_in_flight=max_in_flight, **kwargs)

    monkeypatch.setattr(suites, "solve_cells", spy)
    own = ["--systems", "caef-tiny", "--onestep-per-cell", "0"] if suite == "repeated" else []
    assert main(["run", "--suite", suite, "--cells", cell, "--limit", "3", "--checkpoints", str(TINY_CHECKPOINTS),
                 "--max-in-flight", "1", "--out", str(tmp_path / "results"),
                 "--records", str(tmp_path / "records"), *own]) == 0
    assert caps == [1]
    assert len((tmp_path / "records" / f"caef_{cell}.jsonl").read_text().splitlines()) == 3


def test_missing_tiny_checkpoint_is_a_clear_error(tmp_path, capsys):
    from caef_bench.cli import main

    assert main(["solve", EXPR, "--checkpoints", str(tmp_path / "nowhere")]) == 2
    assert "caef-bench train --preset tiny" in capsys.readouterr().err


def test_onestep_command_reports_every_cell(tmp_path):
    from caef_bench.cli import main

    out = tmp_path / "onestep.json"
    assert main(["onestep", "--checkpoints", str(TINY_CHECKPOINTS), "--executors", "add", "--aligners", "add",
                 "--per-cell", "1", "--json", str(out)]) == 0
    results = json.loads(out.read_text())["results"]
    assert set(results) == {"executor_add", "aligner_add"}
    # add is also checked on SUB's first ADD calls after REFLECTION dropped zeros (sub9 cells), and on
    # SUB's sum of one digit more than its operands (subwide cells)
    assert set(results["executor_add"]) == ({f"{family}_{n}" for family in ("add", "sub9") for n in (5, 10, 50, 100)}
                                            | {"subwide_50", "subwide_100"})
    assert set(results["aligner_add"]) == {"add_5", "add_10", "add_50", "add_100"}
    assert all(cell["n"] == 1 for cell in results["aligner_add"].values())
    # the shipped adapters get every one-step case right (results/onestep.md: 100% at 300 per cell)
    assert [cell["correct"] for adapter in results.values() for cell in adapter.values()] == [1] * 14


def test_onestep_base_only_measures_the_base_with_no_adapter(trained, tmp_path, capsys, monkeypatch):
    import caef_bench.evaluate.onestep as onestep
    from caef_bench.cli import main

    measured = []  # what would be measured (the measurement itself is the other onestep tests')
    stats = {"n": 1, "correct": 0, "accuracy": 0.0, "ci_low": 0.0, "ci_high": 0.8, "failures": []}
    monkeypatch.setattr(onestep, "one_step_accuracy", lambda model, codec, kind, op, *a: measured.append(
        (model, codec.scheme, kind, op, *a)) or {"add_5": stats})
    # (a step model that decodes in batches is measured through them: the same cases, the same outputs)
    monkeypatch.setattr(onestep, "batched_one_step_accuracy", lambda step_model, kind, op, *a: measured.append(
        (step_model.model, step_model.codec_for(f"{kind}_{op}").scheme, kind, op, *a)) or {"add_5": stats})
    out = tmp_path / "onestep.json"
    assert main(["onestep", "--checkpoints", str(trained), "--base-only", "--executors", "add", "--aligners", "",
                 "--per-cell", "1", "--json", str(out)]) == 0
    ((model, scheme, *call),) = measured
    assert not hasattr(model, "peft_config") and scheme == "coupled-hints" and call == ["executor", "add", 1, 0, False, None]
    record = json.loads(out.read_text())
    assert record["weights"] == "base only" and "adapters" not in record and set(record["results"]) == {"executor_add"}
    assert capsys.readouterr().out == "executor_add        add_5 0.0% [0.0%, 80.0%]\n"
    assert main(["onestep", "--checkpoints", str(tmp_path / "nowhere"), "--base-only"]) == 2
    assert "caef-bench train --preset tiny" in capsys.readouterr().err


def test_onestep_out_writes_a_table_and_a_rerun_measures_only_what_is_missing(tmp_path, monkeypatch):
    import caef_bench.evaluate.onestep as onestep
    from caef_bench.cli import main

    out = tmp_path / "results"
    common = ["onestep", "--checkpoints", str(TINY_CHECKPOINTS), "--per-cell", "1", "--out", str(out)]
    assert main(common + ["--executors", "add", "--aligners", ""]) == 0
    first = json.loads((out / "onestep.json").read_text())
    assert first["weights"] == load_step_model("tiny", str(TINY_CHECKPOINTS)).fingerprint and set(first["results"]) == {"executor_add"}
    measured = []
    real, real_batched = onestep.one_step_accuracy, onestep.batched_one_step_accuracy
    monkeypatch.setattr(onestep, "one_step_accuracy", lambda model, codec, kind, op, *a: measured.append(op) or real(model, codec, kind, op, *a))
    monkeypatch.setattr(onestep, "batched_one_step_accuracy",
                        lambda step_model, kind, op, *a: measured.append(op) or real_batched(step_model, kind, op, *a))
    assert main(common + ["--executors", "add", "--aligners", "add"]) == 0
    assert measured == ["add"] and set(json.loads((out / "onestep.json").read_text())["results"]) == {"executor_add", "aligner_add"}
    table = (out / "onestep.md").read_text()
    assert "| executor_add | " in table and "| aligner_add | " in table and "(N=1)" in table
    measured.clear()
    assert main(common[:-4] + ["--per-cell", "2", "--out", str(out), "--executors", "add", "--aligners", ""]) == 0
    assert measured == ["add"]  # another N: nothing of the earlier run is reused


def test_a_rerun_scores_every_problem_not_only_the_new_ones(trained, tmp_path):
    from caef_bench.cli import main

    common = ["run", "--suite", "caef", "--cells", "add_5", "--checkpoints", str(trained),
              "--out", str(tmp_path / "results"), "--records", str(tmp_path / "records")]
    assert main(common + ["--limit", "1"]) == 0
    assert main(common + ["--limit", "3"]) == 0  # resumes: solves problems 2 and 3 only
    result = json.loads((tmp_path / "results" / "table1_caef.json").read_text())
    assert result["results"]["add_5"]["end_to_end"]["n"] == 3
    assert len((tmp_path / "records" / "caef_add_5.jsonl").read_text().splitlines()) == 3
    assert result["results"]["add_5"]["resumed"] == 1
    # the table says which runs it read rather than solved (they may come from another device)
    assert "1 of the 3 problem runs were read from records" in (tmp_path / "results" / "table1_caef.md").read_text()


def test_a_tier_run_in_another_dtype_has_weights_and_records_of_its_own():
    # bfloat16 halves SmolLM2's time on a CPU with bf16 instructions; its outputs may differ from float32's,
    # so it must never share records (nor reuse steps) with the tier in its own dtype
    import torch

    own, bf16 = load_step_model("tiny"), load_step_model("tiny", dtype="bfloat16")
    assert next(bf16.model.parameters()).dtype == torch.bfloat16
    assert bf16.fingerprint != own.fingerprint
    assert not set(bf16.adapter_fingerprints.values()) & set(own.adapter_fingerprints.values())
    assert solve_batch([Problem("a", "9999+1=", "10000")], bf16)[0].final == "9999+1=10000"


def test_weights_fingerprint_names_the_adapters_and_base(trained, tmp_path):
    import shutil

    from caef_bench.models.loading import get_tier, weights_fingerprint

    tier = get_tier("tiny", base=trained / "base", adapters=trained)
    assert weights_fingerprint(tier) == weights_fingerprint(get_tier("tiny", base=trained / "base", adapters=trained))
    copy = tmp_path / "copy"
    shutil.copytree(trained, copy)
    assert weights_fingerprint(get_tier("tiny", base=copy / "base", adapters=copy)) == weights_fingerprint(tier)
    weights = copy / "executors/add/adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-1] + b"\0")  # one byte of one adapter differs
    assert weights_fingerprint(get_tier("tiny", base=copy / "base", adapters=copy)) != weights_fingerprint(tier)
    assert load_step_model("tiny", str(trained)).fingerprint == weights_fingerprint(tier)
    # the same weights run in bf16 give other greedy outputs: other weights; float32 names nothing new
    from caef_bench.models.loading import adapter_fingerprints

    in_bf16 = get_tier("tiny", base=trained / "base", adapters=trained, dtype="bfloat16")
    assert weights_fingerprint(in_bf16) != weights_fingerprint(tier)
    assert adapter_fingerprints(in_bf16)["executor_add"] != adapter_fingerprints(tier)["executor_add"]
    assert weights_fingerprint(get_tier("tiny", base=trained / "base", adapters=trained, dtype="float32")) == \
        weights_fingerprint(tier)


def test_each_adapter_runs_with_the_position_scheme_it_was_trained_with(trained, tmp_path):
    import shutil

    from caef_bench.models.loading import get_tier, weights_fingerprint
    from caef_bench.models.positions import position_ids

    model = load_step_model("tiny", str(trained))
    manifest = json.loads((trained / "aligners/add/manifest.json").read_text())
    assert manifest["position_scheme"] == model.codec.scheme  # recorded by training
    assert model.codecs == {}  # all on the base's scheme: one codec
    copy = tmp_path / "copy"
    shutil.copytree(trained, copy)
    path = copy / "aligners/add/manifest.json"
    other = "coupled-expr" if model.codec.scheme == "coupled-hints" else "coupled-hints"
    path.write_text(json.dumps({**manifest, "position_scheme": other}))
    moved = load_step_model("tiny", str(copy))
    assert moved.codec_for("aligner_add").scheme == other
    assert moved.codec_for("executor_add").scheme == model.codec.scheme
    ids = moved.codec.prompt_ids(EXPR)
    assert position_ids(ids, other) != position_ids(ids, model.codec.scheme)  # the ids differ on its prompts
    # other ids, other outputs: the fingerprint tells the two apart
    assert moved.fingerprint != model.fingerprint
    assert weights_fingerprint(get_tier("tiny", base=copy / "base", adapters=copy)) == moved.fingerprint


def test_a_tier_of_linked_adapter_folders_hashes_as_the_same_files_copied(trained, tmp_path):
    # a pilot's candidate is often the shipped tier with links to other folders' adapters: two such
    # tiers that differ in one linked adapter must not share a fingerprint (and so a records folder)
    import shutil

    from caef_bench.models.loading import get_tier, weights_fingerprint

    other = tmp_path / "other_add"
    shutil.copytree(trained / "executors/add", other)
    weights = other / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-1] + b"\0")

    def linked(name, add_folder):
        tier = tmp_path / name
        for kind in ("executors", "aligners"):
            (tier / kind).mkdir(parents=True)
            for folder in sorted((trained / kind).iterdir()):
                (tier / kind / folder.name).symlink_to(add_folder if folder.name == "add" and kind == "executors"
                                                       else folder.resolve(), target_is_directory=True)
        return weights_fingerprint(get_tier("tiny", base=trained / "base", adapters=tier))

    original = weights_fingerprint(get_tier("tiny", base=trained / "base", adapters=trained))
    assert linked("same", (trained / "executors/add").resolve()) == original
    assert linked("changed", other.resolve()) != original


def test_adapter_fingerprints_change_only_for_the_adapter_that_changed(trained, tmp_path):
    import shutil

    from caef_bench.models.loading import adapter_fingerprints, get_tier

    prints = adapter_fingerprints(get_tier("tiny", base=trained / "base", adapters=trained))
    assert set(prints) == {"executor_add", "aligner_add"}
    copy = tmp_path / "copy"
    shutil.copytree(trained, copy)
    weights = copy / "aligners/add/adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-1] + b"\1")
    changed = adapter_fingerprints(get_tier("tiny", base=copy / "base", adapters=copy))
    assert changed["executor_add"] == prints["executor_add"] and changed["aligner_add"] != prints["aligner_add"]


def _with_executor_retrained(trained, tmp_path):
    """A copy of the trained tier whose executor was "retrained": one low bit of its last weight differs."""
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(trained, copy)
    weights = copy / "executors/add/adapter_model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    return copy


def _reused_records(tmp_path, name):
    """The records of a run before and after the executor changed: the same outputs, the aligner's read."""
    from caef_bench.runtime import load_records

    before, after = (load_records(tmp_path / folder / name) for folder in ("before", "after"))
    # (the micro model trained on 12+34= alone: on these problems its outputs are garbage, the same garbage)
    assert [[s.output for s in r.steps] for r in after] == [[s.output for s in r.steps] for r in before]
    for record in after:  # the aligner's calls were read, the changed executor's generated
        assert all(s.reused for s in record.steps if s.adapter == "aligner_add")
        assert not any(s.reused for s in record.steps if s.adapter == "executor_add")
    return before, after


def test_run_reuses_the_steps_of_unchanged_adapters_from_an_earlier_run(trained, tmp_path):
    from caef_bench.cli import main

    common = ["run", "--suite", "caef", "--cells", "add_5", "--limit", "2", "--out", str(tmp_path / "results")]
    assert main(common + ["--checkpoints", str(trained), "--records", str(tmp_path / "before")]) == 0
    copy = _with_executor_retrained(trained, tmp_path)
    assert main(common + ["--checkpoints", str(copy), "--records", str(tmp_path / "after"),
                          "--reuse-steps", str(tmp_path / "before")]) == 0
    before, after = _reused_records(tmp_path, "caef_add_5.jsonl")
    result = json.loads((tmp_path / "results" / "table1_caef.json").read_text())["results"]["add_5"]
    aligner_calls = sum(s.adapter == "aligner_add" for r in after for s in r.steps)
    calls = sum(len(r.steps) for r in after)
    assert aligner_calls >= 2 and result["reused_calls"] == aligner_calls and result["model_calls"] == calls
    table = (tmp_path / "results" / "table1_caef.md").read_text()
    assert f"{aligner_calls} of the {calls} model calls" in table and str(tmp_path / "before") in table


def test_the_repeated_suite_reuses_the_steps_of_unchanged_adapters_too(trained, tmp_path):
    from caef_bench.cli import main

    common = ["run", "--suite", "repeated", "--systems", "caef-tiny", "--cells", "repeated_add_10_p1", "--limit", "2",
              "--onestep-per-cell", "0", "--out", str(tmp_path / "results")]
    assert main(common + ["--checkpoints", str(trained), "--records", str(tmp_path / "before")]) == 0
    copy = _with_executor_retrained(trained, tmp_path)
    assert main(common + ["--checkpoints", str(copy), "--records", str(tmp_path / "after"),
                          "--reuse-steps", str(tmp_path / "before")]) == 0
    _, after = _reused_records(tmp_path, "caef_repeated_add_10_p1.jsonl")
    document = json.loads((tmp_path / "results" / "repeated.json").read_text())
    result = document["systems"]["caef-tiny"]["cells"]["repeated_add_10_p1"]
    aligner_calls = sum(s.adapter == "aligner_add" for r in after for s in r.steps)
    assert aligner_calls >= 2 and result["reused_calls"] == aligner_calls
    assert document["reuse_sources"][0]["folder"] == str(tmp_path / "before")
    report = (tmp_path / "results" / "repeated.md").read_text()
    assert f"{aligner_calls} of the {sum(len(r.steps) for r in after)} model calls" in report


def test_one_pass_fingerprints_are_each_adapters_own_hash(trained):
    import hashlib

    from caef_bench.models.loading import _base_digest, fingerprints, get_tier, weights_fingerprint

    tier = get_tier("tiny", base=trained / "base", adapters=trained)
    weights, prints = fingerprints(tier)
    base = _base_digest(tier).hexdigest()
    for name, folder in (("executor_add", "executors/add"), ("aligner_add", "aligners/add")):
        scheme = json.loads((trained / folder / "manifest.json").read_text())["position_scheme"]
        own = hashlib.sha256(f"{base}|{name}|{scheme}".encode())
        own.update((trained / folder / "adapter_model.safetensors").read_bytes())
        assert prints[name] == own.hexdigest()[:12]
    assert weights == weights_fingerprint(tier)
    step_model = load_step_model("tiny", str(trained))
    assert (step_model.fingerprint, step_model.adapter_fingerprints) == (weights, prints)
