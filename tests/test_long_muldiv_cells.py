"""The long multiplication and division test cells (docs/long-mul-div.md): mul_20x20, mul_50x50, div_40by20 and
div_100by10 are drawn from their own seeds as every committed cell is, regenerate byte for byte, hold operands of
exactly the stated lengths, are answered by Python's `*` and `//`, and are refused by every tier today."""

import hashlib
import json
import random

import pytest
from lm_eval.api.instance import Instance

from caef_bench.data.testsets import (
    CELLS,
    DEFAULT_DATA_DIR,
    DEFAULT_SEED,
    generate_cell,
    load_cell,
    load_protocol,
    long_muldiv_cells,
)
from caef_bench.evaluate.lm_eval_models import CaefLM
from caef_bench.models.limits import TIER_LIMITS, BeyondTierError, check_supported

# cell: (op, digits of a, digits of b, problems), written out here rather than read from the generator
SPECS = {
    "mul_20x20": ("mul", 20, 20, 100),
    "mul_50x50": ("mul", 50, 50, 50),
    "div_40by20": ("div", 40, 20, 100),
    "div_100by10": ("div", 100, 10, 50),
}
ANSWER = {"mul": lambda a, b: a * b, "div": lambda a, b: a // b}


def test_the_cells_and_their_suite():
    assert long_muldiv_cells() == list(SPECS)
    assert all(CELLS[cell].suite == "long_muldiv" and CELLS[cell].size == SPECS[cell][3] for cell in SPECS)


@pytest.mark.parametrize("cell", list(SPECS))
def test_the_committed_cell_regenerates_byte_for_byte(cell):
    data = (DEFAULT_DATA_DIR / f"{cell}.jsonl").read_bytes()
    fresh = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in generate_cell(cell)).encode()
    assert data == fresh
    manifest = json.loads((DEFAULT_DATA_DIR / "MANIFEST.json").read_text())["files"][f"{cell}.jsonl"]
    assert manifest == {"count": SPECS[cell][3], "sha256": hashlib.sha256(data).hexdigest()}


@pytest.mark.parametrize("cell", list(SPECS))
def test_the_seed_is_derived_as_every_cells_is(cell):
    """SHA-256 of "caef-bench/<seed>/<cell>", then a and b uniform among numbers of exactly their lengths."""
    op, n, m, size = SPECS[cell]
    digest = hashlib.sha256(f"caef-bench/{DEFAULT_SEED}/{cell}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    pairs = [(rng.randrange(10 ** (n - 1), 10**n), rng.randrange(10 ** (m - 1), 10**m)) for _ in range(size)]
    assert [(int(r["a"]), int(r["b"])) for r in load_cell(cell)] == pairs
    assert generate_cell(cell, seed=DEFAULT_SEED + 1) != generate_cell(cell)


@pytest.mark.parametrize("cell", list(SPECS))
def test_operands_have_the_stated_lengths_and_answers_are_pythons(cell):
    op, n, m, size = SPECS[cell]
    template = load_protocol()["expression_templates"][op]
    records = load_cell(cell)
    assert [r["id"] for r in records] == [f"{cell}-{i:04d}" for i in range(size)]
    for record in records:
        assert list(record) == ["id", "op", "a", "b", "expr", "answer"] and record["op"] == op
        a, b = record["a"], record["b"]
        assert len(a) == n and len(b) == m and a[0] != "0" and b[0] != "0"
        assert record["expr"] == template.format(op1=a, op2=b)  # a*b= and a//b=, as mul_1_10 and div_1_10
        assert record["answer"] == str(ANSWER[op](int(a), int(b)))
    assert len({r["expr"] for r in records}) == size


def test_every_tier_refuses_them_with_its_limit():
    """Their operands are past every tier's mul/div limits (a of at most 10 digits, b or the quotient at most
    15): refused before any model call, until adapters for the long machines exist."""
    for tier in TIER_LIMITS:
        for cell in SPECS:
            for problem in load_cell(cell):
                with pytest.raises(BeyondTierError, match=f"the {tier} tier supports {SPECS[cell][0]} with"):
                    check_supported(tier, problem["expr"])


class NeverCalled:
    fingerprint = "none"

    def generate(self, prompts, adapter):
        raise AssertionError("a model call was made for an expression the tier cannot run")


@pytest.mark.parametrize("cell", list(SPECS))
def test_the_caef_lm_eval_model_refuses_them_before_any_call(cell):
    model = CaefLM(step_model=NeverCalled())
    request = Instance("generate_until", {}, (load_cell(cell)[0]["expr"], {"until": ["\n"]}), idx=0)
    with pytest.raises(BeyondTierError, match="at most 10 digits"):
        model.generate_until([request])
