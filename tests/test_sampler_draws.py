"""The shipped adapters' training draws stay what they were: every plan of the tiny preset (and the
base's pre-training phases) draws, batch for batch, the samples recorded in
tests/reference/sampler_draws.json, which the sampler code before the registry of named samplers
(train/samplers.py) wrote
(the file's header names the commit and the command); the long route's five plans (digit_mul, long_mul,
long_div and their aligners) were added to it as they were planned, before any was trained.

Each entry is the SHA-256 of a batch's samples (prompt, completion and meta, keys sorted), drawn as
`caef-bench train` draws them (train.recipe's sources, seed 0). Rewriting the file is for a change
that means to draw other samples, and says so in its commit."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from caef_bench.machines import LONG_EXECUTOR_OPS

LONG_ROUTE_OPS = LONG_EXECUTOR_OPS  # the long route's adapters: planned, not yet shipped
FIXTURE = Path(__file__).resolve().parent / "reference" / "sampler_draws.json"
STEPS = (0, 1, 2, 4_000)  # the first batches, and one deep in a run (past the base's curriculum)
SIZE = 256


def _request():
    from caef_bench.train.recipe import TrainRequest

    return TrainRequest(preset="tiny", out=Path("unused"), seed=0, progress=False)


def sources() -> dict:
    """{name: source} for every adapter plan of the tiny preset and each phase of its base; the LoRA-direct
    plans also as the shipped direct adapters drew (`direct_draw` "classes", before their draws followed the
    test protocol)."""
    from dataclasses import replace

    from caef_bench.train.presets import PRESETS
    from caef_bench.train.recipe import _base_source, _source

    request = _request()
    found = {}
    for name in PRESETS["tiny"].adapter_plans:
        kind, _, op = name.partition("_")
        found[name] = _source(request, kind, op, 2)
        if kind == "direct":
            found[f"{name}@classes"] = _source(replace(request, overrides={"direct_draw": "classes"}), kind, op, 2)
    for index, (_steps, _lr, curriculum) in enumerate(PRESETS["tiny"].base_runs(set())):
        found[f"base_phase{index + 1}"] = _base_source(request, index, curriculum, phased=True)
    return found


def digests(source) -> list[str]:
    return [hashlib.sha256(json.dumps(source.batch(step, SIZE), sort_keys=True).encode()).hexdigest()
            for step in STEPS]


def write(path: Path = FIXTURE) -> None:
    import subprocess

    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    record = {"generated_by": "python tests/test_sampler_draws.py --write",
              "code": f"caef_bench/train/ at commit {commit} (the sequential shares, before the sampler registry)",
              "steps": list(STEPS), "batch": SIZE, "seed": 0,
              "draws": {name: {"fingerprint": source.fingerprint, "sha256": digests(source)}
                        for name, source in sources().items()}}
    path.write_text(json.dumps(record, indent=1) + "\n")


RECORDED = json.loads(FIXTURE.read_text()) if FIXTURE.exists() else {"draws": {}}


@pytest.mark.parametrize("name", sorted(RECORDED["draws"]))
def test_a_shipped_plan_draws_the_recorded_samples(name):
    assert (RECORDED["steps"], RECORDED["batch"]) == (list(STEPS), SIZE)
    source = sources()[name]
    assert digests(source) == RECORDED["draws"][name]["sha256"], name


def test_every_plan_is_recorded():
    assert set(sources()) == set(RECORDED["draws"])


def test_each_shipped_adapters_manifest_names_the_draws_its_plan_makes():
    """The data fingerprint in each shipped adapter's manifest is the one the old code gave its plan's
    draws, so the recorded batches are the shipped adapters' streams (the direct ones': `classes`).
    Fingerprints name a mix's shares as fractions since (train.mix.fingerprint); a source without
    shares keeps its fingerprint."""
    checkpoints = Path(__file__).resolve().parents[1] / "checkpoints" / "tiny"
    folders = {"executor": "executors", "aligner": "aligners", "direct": "direct"}
    now = sources()
    for name, recorded in RECORDED["draws"].items():
        if ":draws[" not in now[name].fingerprint:
            assert now[name].fingerprint == recorded["fingerprint"], name
        kind, _, op = name.removesuffix("@classes").partition("_")
        if kind == "base" or (kind == "direct" and not name.endswith("@classes")):
            continue  # the shipped base's manifest is its last round's; the protocol's direct draws ship nowhere yet
        shipped = checkpoints / folders[kind] / op / "manifest.json"
        if op in LONG_ROUTE_OPS and not shipped.exists():
            continue  # the long route's plans are recorded before their adapters are trained and shipped
        manifest = json.loads(shipped.read_text())
        assert manifest["data"][-1] == recorded["fingerprint"], name


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_sampler_draws.py --write   (records the code's draws as the reference)")
    write()
