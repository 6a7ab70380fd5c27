"""An adapter's mix: each share the fraction of the draws it names, the samplers drawn in the
registry's order, and the shares before the mix (sequential chances) converted exactly."""

from __future__ import annotations

import pytest

from caef_bench.train import mix as mixes
from caef_bench.train.presets import PRESETS, SHIPPED_ROUNDS
from caef_bench.train.samplers import REGISTRY
from caef_bench.train.sources import MachineSource


def test_the_registry_holds_each_sampler_with_why_it_exists_in_the_order_draws_roll_for_them():
    assert tuple(REGISTRY) == mixes.SAMPLERS == tuple(mixes.SHARES)[:len(mixes.SAMPLERS)]
    assert all(len(draw.__doc__.split()) > 30 for draw in REGISTRY.values())
    assert {share.of for share in mixes.SHARES.values()} == {"draws", "class draws", "structured draws",
                                                            "nines draws", "top_steps draws"}


def _fractions(source: MachineSource, n: int = 3000) -> dict[str, float]:
    samples = [s for step in range(n // 250) for s in source.batch(step, 250)]
    named = {"nines": "nines", "top_steps": "top_steps", "carry_runs": "carry_run", "wide": "wide",
             "sub_calls": "sub_call"}
    counts = {name: sum(bool(s["meta"].get(flag)) for s in samples) for name, flag in named.items()}
    counts["structured"] = sum(bool(s["meta"].get("structured")) and not s["meta"].get("top_steps") for s in samples)
    return {name: count / len(samples) for name, count in counts.items()}


def test_a_share_is_the_fraction_of_the_draws_it_names():
    """executor_add's shipped mix: its top_steps_share of 0.6, after nines 0.15, was 51% of its draws."""
    plan = PRESETS["tiny"].for_adapter("executor", "add")
    drawn = _fractions(MachineSource([("executor", "add")], 100, seed=4, mix=plan.mix))
    for name in ("nines", "top_steps", "wide", "sub_calls", "carry_runs", "structured"):
        assert abs(drawn[name] - plan.mix[name]) < 0.03, (name, drawn[name], plan.mix[name])
    assert plan.mix["top_steps"] == 0.51
    mine = _fractions(MachineSource([("executor", "add")], 100, seed=4, mix={"carry_runs": 0.2, "structured": 0.4}))
    assert abs(mine["carry_runs"] - 0.2) < 0.03 and abs(mine["structured"] - 0.4) < 0.03


def test_the_shipped_mixes_are_their_manifests_sequential_settings_and_back():
    for name, shipped in SHIPPED_ROUNDS.items():
        kind, _, op = name.partition("_")
        settings = mixes.to_sequential(kind, op, shipped["mix"])
        assert mixes.from_sequential(kind, op, settings) == shipped["mix"], name
    # executor_add, as its manifest's preset records it (same and near do nothing for add)
    assert mixes.to_sequential("executor", "add", SHIPPED_ROUNDS["executor_add"]["mix"])["top_steps_share"] == 0.6


def test_a_share_given_replaces_its_fraction_in_the_plan_and_keeps_the_rest():
    tiny = PRESETS["tiny"]
    plan = tiny.for_adapter("executor", "add").mix
    assert tiny.for_adapter("executor", "add", {"mix": {"top_steps": 0.3}}).mix == {**plan, "top_steps": 0.3}


@pytest.mark.parametrize("mix, message", [
    ({"nines": 0.6, "top_steps": 0.5}, "sum to 1.1"),
    ({"structured": 0.7, "same": 0.2, "near": 0.2}, "sum to 1.1"),
    ({"equal": 0.6, "long": 0.6}, "equal, short and long"),
    ({"nines": 1.5}, r"\[0, 1\]"),
    ({"ninez": 0.1}, "unknown share"),
])
def test_a_mix_that_cannot_be_drawn_is_refused(mix, message):
    with pytest.raises(ValueError, match=message):
        MachineSource([("executor", "sub")] if "near" in mix else [("executor", "add")], 100, seed=0, mix=mix)


def test_a_share_that_does_not_apply_to_an_adapter_is_passed_over():
    """nines is for reflection, sub and add: gt's draws (and its fingerprint) stay without it."""
    plain = MachineSource([("executor", "gt")], 100, seed=0)
    other = MachineSource([("executor", "gt")], 100, seed=0, mix={"nines": 0.9, "same": 0.5})
    assert other.fingerprint == plain.fingerprint + ":draws[same=0.5]"


def test_share_options_parse_as_names_and_fractions():
    assert mixes.parse(["nines=0.2,top-steps=0.3", "wide=0.1"]) == {"nines": 0.2, "top_steps": 0.3, "wide": 0.1}
    for bad in (["nines"], ["nines=lots"], ["ninez=0.1"], ["nines=2"]):
        with pytest.raises(ValueError):
            mixes.parse(bad)


def test_carry_in_draws_steps_that_write_a_digit_with_a_carry_of_one_on_the_mix_lengths():
    """The digit such a step writes is a + b + 1: the step SmolLM2's executor_add missed end to end."""
    from caef_bench.machines import run

    source = MachineSource([("executor", "add")], 10, seed=5, mix={"carry_in": 0.5, "equal": 1.0})
    samples = [s for step in range(40) for s in source.batch(step, 10)]
    drawn = [s for s in samples if s["meta"].get("carry_in")]
    assert 0.4 < len(drawn) / len(samples) < 0.6
    for sample in drawn:
        a, b = int(sample["meta"]["a"]), int(sample["meta"]["b"])
        assert len(str(a)) == len(str(b))  # equal: 1.0 is every class draw's length
        assert (sample["prompt"], sample["completion"]) == run("add", a, b).transition(sample["meta"]["step"])
        state, command = sample["completion"].split("\n")
        assert "[C]1 " in state and "[OUTPUT] " in command
    # a mix without it draws as before: the roll is not made
    plain = MachineSource([("executor", "add")], 10, seed=5, mix={"equal": 1.0})
    assert not any(s["meta"].get("carry_in") for step in range(5) for s in plain.batch(step, 10))


def test_carry_to_ten_draws_the_steps_where_a_carry_makes_a_digit_pair_ten():
    """a + b = 9 under the heads with a carry of 1: the command writes 0 and carries 1 again."""
    from caef_bench.machines import run

    source = MachineSource([("executor", "add")], 10, seed=3, mix={"carry_to_ten": 0.5})
    samples = [s for step in range(30) for s in source.batch(step, 10)]
    drawn = [s for s in samples if s["meta"].get("carry_to_ten")]
    assert 0.4 < len(drawn) / len(samples) < 0.6
    for sample in drawn:
        a, b = int(sample["meta"]["a"]), int(sample["meta"]["b"])
        step = sample["meta"]["step"]
        assert (sample["prompt"], sample["completion"]) == run("add", a, b).transition(step)
        state, command = sample["completion"].split("\n")
        assert "[C]1 " in state and command.startswith("CMD: [C] 1, [OUTPUT] 0,")
        # the pair the heads reach: digit `step` from the right (0 past an operand's top), plus the carry
        digit = [int(str(n)[::-1][step]) if step < len(str(n)) else 0 for n in (a, b)]
        assert sum(digit) == 9


# (op, max_len, seed, share, batches, batch size, command prefix, the column's (carry, digit), fewest columns seen)
COLUMN_CASES = [
    # SmolLM2's executor_add round 9 wrote 9 + 6 with no carry as 16: random and structured operands give such a
    # column in about one step of 200; ~480 draws over the 200 columns
    ("add", 10, 4, 0.8, 60, 10, "CMD: ", lambda x, y, c: divmod(x + y + c, 10), 150),
    # the tiny executor_digit_mul's second round missed only product digits under a right carry; ~720 draws over
    # its 450 (a's digit, the digit d, a carry below d) columns, ~360 of them seen
    ("digit_mul", 50, 5, 0.9, 40, 20, "CMD ", lambda x, y, c: divmod(x * y + c, 10), 320),
]


@pytest.mark.parametrize("op, max_len, seed, share, batches, size, prefix, works, seen", COLUMN_CASES)
def test_column_sums_draws_every_column_alike(op, max_len, seed, share, batches, size, prefix, works, seen):
    """Each column (a's digit, b's digit, the carry in) as often as any other, with the machine's own step."""
    from collections import Counter

    from caef_bench.machines import run

    source = MachineSource([("executor", op)], max_len, seed=seed, mix={"column_sums": share})
    samples = [s for step in range(batches) for s in source.batch(step, size)]
    drawn = [s for s in samples if s["meta"].get("column_sums")]
    assert share - 0.1 < len(drawn) / len(samples) < share + 0.07
    for sample in drawn:
        a, b = int(sample["meta"]["a"]), int(sample["meta"]["b"])
        assert (sample["prompt"], sample["completion"]) == run(op, a, b).transition(sample["meta"]["step"])
        state, command = sample["completion"].split("\n")
        x, y, carry = (int(d) for d in sample["meta"]["column_sums"])
        assert op == "add" or (y == b and carry < b)  # DIGIT_MUL's b is its digit, and its carry stays below it
        # the column under the heads, and the command the machine gives it: its carry and its digit
        assert f"[HEAD1]|{x}" in state and f"[HEAD2]|{y}" in state and f"[C]{carry} " in state
        carry_out, digit = works(x, y, carry)
        assert command.startswith(f"{prefix}[C] {carry_out}, [OUTPUT] {digit},")
    columns = Counter(s["meta"]["column_sums"] for s in drawn)
    assert len(columns) > seen and max(columns.values()) < 12  # none favoured


def test_longest_draws_two_operands_of_the_longest_length_and_leaves_other_mixes_as_they_were():
    source = MachineSource([("aligner", "gt")], 10, seed=2, mix={"longest": 0.5, "equal": 0.5})
    samples = [s for step in range(40) for s in source.batch(step, 10)]
    longest = [s for s in samples if len(s["meta"]["a"]) == len(s["meta"]["b"]) == 10]
    # half the draws are (10, 10); of the others, half are equal lengths of which a tenth are 10
    assert 0.45 < len(longest) / len(samples) < 0.65
    with_zero = MachineSource([("aligner", "gt")], 10, seed=2, mix={"longest": 0.0, "equal": 0.5})
    without = MachineSource([("aligner", "gt")], 10, seed=2, mix={"equal": 0.5})
    assert with_zero.batch(3, 10) == without.batch(3, 10)
