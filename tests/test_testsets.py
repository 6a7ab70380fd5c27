"""The committed test sets: reproducible bytes, the protocol's ranges, correct answers."""

import json
import operator
import shutil
from pathlib import Path

import pytest

from caef_bench.data import testsets
from caef_bench.data.testsets import (
    DEFAULT_DATA_DIR,
    check_test_sets,
    generate_cell,
    length_records,
    load_cell,
    long_cells,
    long_muldiv_cells,
    repeated_cells,
    table1_cells,
    verify_manifest,
)

PROTOCOL = json.loads((Path(testsets.__file__).parents[1] / "protocol" / "protocol.json").read_text())
TEMPLATES = PROTOCOL["expression_templates"]
# Ground truth recomputed here with Python ints, independently of the generator.
TRUTH = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "div": operator.floordiv,
    "gt": operator.gt,
    "lt": operator.lt,
    "eq": operator.eq,
}
TABLE1_KEYS = ["id", "op", "a", "b", "expr", "answer"]
REPEATED_KEYS = TABLE1_KEYS + ["pattern", "period", "prefix_len"]


@pytest.fixture(scope="module")
def cells():
    return {name: load_cell(name) for name in table1_cells() + repeated_cells()}


def test_cell_names():
    assert table1_cells() == [
        f"{op}_{n}" for op in ("add", "sub", "gt", "lt", "eq") for n in (5, 10, 50, 100)
    ] + ["mul_1_10", "div_1_10"]
    # five operators x three lengths x six patterns, and mul and div at 10 digits x six patterns
    assert len(repeated_cells()) == 5 * 3 * 6 + 2 * 6
    assert "repeated_add_50_p1" in repeated_cells() and "repeated_eq_100_control" in repeated_cells()
    assert "repeated_sub_100_round" in repeated_cells() and "repeated_div_10_round" in repeated_cells()


def test_committed_files_match_their_manifest():
    assert verify_manifest(DEFAULT_DATA_DIR) == []
    manifest = json.loads((DEFAULT_DATA_DIR / "MANIFEST.json").read_text())
    assert manifest["seed"] == testsets.DEFAULT_SEED
    assert manifest["generator_version"] == testsets.GENERATOR_VERSION
    assert sorted(manifest["files"]) == sorted(
        f"{c}.jsonl" for c in table1_cells() + repeated_cells() + long_cells() + long_muldiv_cells())


def test_regeneration_is_byte_identical_to_the_committed_files():
    assert check_test_sets(DEFAULT_DATA_DIR) == []


def test_generation_depends_only_on_seed_and_cell():
    assert generate_cell("add_10", seed=7) == generate_cell("add_10", seed=7)
    assert generate_cell("add_10", seed=7) != generate_cell("add_10", seed=8)
    with pytest.raises(ValueError, match="unknown test-set cell"):
        generate_cell("add_7")


def test_verify_manifest_reports_tampering(tmp_path):
    shutil.copytree(DEFAULT_DATA_DIR, tmp_path, dirs_exist_ok=True)
    (tmp_path / "add_5.jsonl").write_text("{}\n")
    (tmp_path / "extra.jsonl").write_text("")
    (tmp_path / "eq_5.jsonl").unlink()
    problems = verify_manifest(tmp_path)
    assert "add_5.jsonl: SHA-256 differs from the manifest" in problems
    assert "add_5.jsonl: 1 lines, manifest says 1000" in problems
    assert "eq_5.jsonl: missing" in problems
    assert "extra.jsonl: not in the manifest" in problems


def test_cli_writes_then_checks(tmp_path, capsys):
    assert testsets.main(["--out", str(tmp_path), "--check"]) == 1
    assert testsets.main(["--out", str(tmp_path), "--seed", "3"]) == 0
    assert testsets.main(["--out", str(tmp_path), "--seed", "3", "--check"]) == 0
    assert testsets.main(["--out", str(tmp_path), "--check"]) == 1  # other seed, other bytes
    assert load_cell("mul_1_10", tmp_path) == generate_cell("mul_1_10", seed=3)


def test_long_cells_follow_the_protocol_past_100_digits():
    """add, sub, gt, lt, eq at 200, 500 and 1,000 digits: Table 1's draws (equal lengths, sub a >= b, eq
    half equal), the protocol's templates, 100 problems a cell, small enough to commit (~4.5 MB in all)."""
    assert long_cells() == [f"{op}_{n}" for op in ("add", "sub", "gt", "lt", "eq") for n in (200, 500, 1000)]
    sizes = {200: 100, 500: 100, 1000: 100}
    total = 0
    for cell in long_cells():
        op, digits = cell.split("_")[0], int(cell.split("_")[1])
        records = load_cell(cell)
        total += (DEFAULT_DATA_DIR / f"{cell}.jsonl").stat().st_size
        assert len(records) == sizes[digits]
        assert [r["id"] for r in records] == [f"{cell}-{i:04d}" for i in range(sizes[digits])]
        for record in records:
            assert list(record) == TABLE1_KEYS and record["op"] == op
            _check_record(record, cell)
            assert len(record["a"]) == len(record["b"]) == digits and record["a"][0] != "0" != record["b"][0]
            if op == "sub":
                assert int(record["a"]) >= int(record["b"])
        if op == "eq":
            assert sum(r["answer"] == "True" for r in records) == sizes[digits] // 2
        assert records == length_records(op, digits, sizes[digits])  # the probes' draw, at a committed length
    assert total < 5_000_000


def test_length_records_draw_any_length_as_the_cells_do():
    assert length_records("add", 100, 1000) == load_cell("add_100")
    probe = length_records("gt", 110, 20)
    assert probe == length_records("gt", 110, 20) and len(probe) == 20
    assert all(len(r["a"]) == len(r["b"]) == 110 for r in probe) and probe[0]["id"] == "gt_110-0000"
    assert length_records("add", 110, 5, seed=1) != length_records("add", 110, 5)
    with pytest.raises(ValueError, match="length_records takes"):
        length_records("mul", 10, 5)


def _check_record(record, cell):
    op, a, b = record["op"], int(record["a"]), int(record["b"])
    assert record["a"] == str(a) and record["b"] == str(b)  # canonical decimals
    assert record["expr"] == TEMPLATES[op].format(op1=record["a"], op2=record["b"])
    assert record["answer"] == str(TRUTH[op](a, b))
    assert record["id"].startswith(f"{cell}-")


@pytest.mark.parametrize("cell", table1_cells())
def test_table1_cell_follows_the_protocol(cells, cell):
    records = cells[cell]
    assert len(records) == 1000
    assert [r["id"] for r in records] == [f"{cell}-{i:04d}" for i in range(1000)]
    op = cell.split("_")[0]
    for record in records:
        assert list(record) == TABLE1_KEYS and record["op"] == op
        _check_record(record, cell)
        a, b = record["a"], record["b"]
        if op == "mul":
            assert 1 <= len(a) <= 10 and 1 <= int(b) <= 15
        elif op == "div":
            assert 1 <= int(record["answer"]) <= 15
            assert 1 <= len(b) <= 10 and int(b) >= 1
        else:
            digits = int(cell.split("_")[1])
            assert len(a) == len(b) == digits
            assert a[0] != "0" and b[0] != "0"
        if op == "sub":
            assert int(a) >= int(b)


def test_eq_cells_are_exactly_balanced(cells):
    for cell in ("eq_5", "eq_10", "eq_50", "eq_100"):
        assert sum(r["answer"] == "True" for r in cells[cell]) == 500


def test_comparison_answers_are_not_constant(cells):
    for cell in ("gt_5", "lt_5", "gt_100", "lt_100"):
        true_share = sum(r["answer"] == "True" for r in cells[cell]) / 1000
        assert 0.4 < true_share < 0.6


def test_mul_and_div_cover_their_ranges(cells):
    assert {len(r["a"]) for r in cells["mul_1_10"]} == set(range(1, 11))
    assert {int(r["b"]) for r in cells["mul_1_10"]} == set(range(1, 16))
    assert {r["a"] for r in cells["mul_1_10"] if len(r["a"]) == 1} == set("0123456789")
    assert {int(r["answer"]) for r in cells["div_1_10"]} == set(range(1, 16))
    assert {len(r["b"]) for r in cells["div_1_10"]} == set(range(1, 11))
    assert any(int(r["a"]) % int(r["b"]) for r in cells["div_1_10"])  # remainders occur


def _is_periodic(number, period, prefix_len):
    """Digits 1 .. prefix_len-1 repeat with ``period`` (digit 0 is free)."""
    return all(number[i] == number[i - period] for i in range(1 + period, prefix_len))


def _is_round(number):
    """10^k, 10^k - 1, d*10^j, 10^k + a number of 1-2 digits, 10^k - a number of 1-2 digits (data.structured)."""
    n = len(number)
    return (number[1:].strip("0") == "" or set(number) == {"9"} or number[:-2] == "1" + "0" * (n - 3)
            or set(number[:-2]) == {"9"})


def _differing_positions(a, b):
    return [i for i, (x, y) in enumerate(zip(a, b)) if x != y]


@pytest.mark.parametrize("cell", repeated_cells())
def test_repeated_cell_has_the_claimed_structure(cells, cell):
    _, op, digits, pattern = cell.split("_")
    digits = int(digits)
    records = cells[cell]
    assert len(records) == 200
    for record in records:
        assert list(record) == REPEATED_KEYS and record["op"] == op and record["pattern"] == pattern
        _check_record(record, cell)
        a, b, period, prefix_len = record["a"], record["b"], record["period"], record["prefix_len"]
        if op in ("mul", "div"):  # the patterned operand is mul's a, div's divisor (10 digits); b, the quotient 1-15
            patterned, small = (a, int(b)) if op == "mul" else (b, int(record["answer"]))
            assert len(patterned) == digits and patterned[0] != "0" and 1 <= small <= 15
            if op == "div":
                assert int(a) // int(b) == small
            a = b = patterned
        assert len(a) == len(b) == digits and a[0] != "0" and b[0] != "0"
        if pattern == "round":
            assert (period, prefix_len) == (None, 0)
            assert all(_is_round(x) for x in (a,) if op in ("gt", "lt", "eq")) and all(
                _is_round(x) for x in ((a, b) if op not in ("gt", "lt", "eq") else (a,)))
        elif pattern == "control":
            assert (period, prefix_len) == (None, 0)
        elif pattern == "mixed":
            assert period in (1, 2, 3) and digits // 2 < prefix_len <= digits - 2
        else:
            assert (period, prefix_len) == (int(pattern[1]), digits)
        periodic_operands = [a] if op in ("gt", "lt", "eq") else [a, b]
        if period is not None:
            assert all(_is_periodic(x, period, prefix_len) for x in periodic_operands)
        if op in ("gt", "lt", "eq"):
            differing = _differing_positions(a, b)
            assert len(differing) <= 1
            assert all((prefix_len or digits) // 2 <= i < (prefix_len or digits) for i in differing)
        if op == "sub":
            assert int(a) >= int(b)
    if op == "eq":
        assert sum(r["answer"] == "True" for r in records) == 100
    if op in ("gt", "lt"):
        assert sum(r["a"] == r["b"] for r in records) == 50
    if op == "div" and pattern != "control":  # remainders 0 and divisor - 1 each about a third of the time
        remainders = [int(r["a"]) % int(r["b"]) for r in records]
        assert remainders.count(0) > 40 and sum(rem == int(r["b"]) - 1 for rem, r in zip(remainders, records)) > 40


def test_pure_periods_are_minimal(cells):
    """p2/p3 runs are not a shorter period in disguise (no 4444 in a p2 cell)."""
    for cell in ("repeated_add_50_p2", "repeated_add_50_p3"):
        for record in cells[cell]:
            for x in (record["a"], record["b"]):
                assert len(set(x[1:])) > 1


def test_period_1_cells_include_nines_and_zero_runs(cells):
    runs = {x[1:] for r in cells["repeated_sub_50_p1"] for x in (r["a"], r["b"])}
    assert "9" * 49 in runs and "0" * 49 in runs
    assert any(r["a"] == "9" * 50 or r["b"] == "9" * 50 for r in cells["repeated_add_50_p1"] + cells["repeated_sub_50_p1"])
