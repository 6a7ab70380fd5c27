"""The structured-operand samplers (caef_bench.data.structured): seeded, in each operator's shape, and of their kind."""

import random

import pytest

from caef_bench.data.structured import KINDS, SAMPLERS, change_digit, digit_run, periodic, round_number, structured_pair
from caef_bench.data.testsets import named_rng
from caef_bench.data.training import classes
from caef_bench.machines import EXECUTOR_OPS, run

OPS = EXECUTOR_OPS  # add sub mul div gt lt eq reflection left_mask


def _draws(kind, op, n=60, seed=0):
    rng = named_rng(seed, f"test/{kind}/{op}")
    every = classes(op, 100)
    return [(cls, SAMPLERS[kind].pair(rng, op, cls)) for cls in (rng.choice(every) for _ in range(n))]


@pytest.mark.parametrize("kind", KINDS)
def test_the_same_seed_draws_the_same_operands_and_another_seed_others(kind):
    op = "add"
    assert _draws(kind, op, seed=3) == _draws(kind, op, seed=3)
    assert _draws(kind, op, seed=3) != _draws(kind, op, seed=4)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("op", OPS)
def test_operands_fit_the_operator_and_its_class_and_the_machine_runs_them(kind, op):
    if not SAMPLERS[kind].applies_to(op):
        with pytest.raises(ValueError, match="do not apply"):
            SAMPLERS[kind].pair(random.Random(0), op, classes(op, 100)[0])
        return
    for (first, second), (a, b) in _draws(kind, op, n=25):
        if op == "mul":
            assert len(str(a)) <= first and b == (1 if kind == "small" else second)
        elif op == "div":
            assert a // b == second and len(str(b)) == (1 if kind == "small" else first)
        elif op == "left_mask":
            assert b is None and len(str(a)) <= first
        elif op == "reflection":
            assert a == 10**first - 1 and len(str(b)) <= second
        else:
            same_length = kind in ("equal", "near", "small")
            assert max(len(str(a)), len(str(b))) <= max(first, second)
            if not same_length:
                assert sorted((len(str(a)), len(str(b)))) == sorted((first, second))
            if op == "sub":
                assert a >= b
        run(op, a, b)  # inside the machine's domain


def test_each_kind_draws_what_it_says():
    rng = named_rng(0, "test/kinds")
    for _ in range(200):
        n = rng.randint(2, 100)
        a, b = SAMPLERS["equal"].operands(rng, n, n)
        assert a == b and len(a) == n
        a, b = SAMPLERS["near"].operands(rng, n, n)
        assert len(a) == len(b) == n and sum(x != y for x, y in zip(a, b)) == 1
        assert SAMPLERS["small"].operands(rng, n, n)[1] in ("0", "1")
        rounded = round_number(rng, n)
        assert rounded in ("1" + "0" * (n - 1), "9" * n) or rounded[1:].strip("0") == "" \
            or rounded.startswith("1" + "0" * (n - 3)) or rounded.startswith("9" * (n - 2))
        pattern = periodic(rng, n)
        assert len(pattern) == n and any(all(pattern[i] == pattern[i - p] for i in range(p + 1, n)) for p in (2, 3))
        assert len(change_digit(rng, pattern)) == n


def test_runs_of_0s_and_9s_come_at_every_length_and_offset():
    """The issue's demand: runs of one digit, 0s and 9s above all, at every length 1-100 and every offset."""
    rng = named_rng(0, "test/runs")
    lengths, whole, offsets = set(), 0, set()
    for _ in range(20000):
        n = rng.randint(1, 100)
        digits = digit_run(rng, n)
        assert len(digits) == n and (n == 1 or digits[0] != "0")
        runs = [length for d in "09" for _, length in _runs(digits, d)]
        lengths.update(runs)
        whole += n >= 10 and max(runs, default=0) >= n - 1
    for _ in range(30000):  # where the runs start, in 100-digit operands
        offsets.update(start for d in "09" for start, length in _runs(digit_run(rng, 100), d) if length >= 2)
    assert set(range(1, 101)) <= lengths
    assert whole > 1000  # the whole operand a run (999…9, 1000…0) a sizeable share of the time
    assert set(range(0, 91)) <= offsets


def _runs(digits, d):
    """(start, length) of each run of the digit d."""
    out, start = [], None
    for i, ch in enumerate(digits + "#"):
        if ch == d and start is None:
            start = i
        elif ch != d and start is not None:
            out.append((start, i - start))
            start = None
    return out


def test_a_pair_draws_only_kinds_that_apply():
    rng = named_rng(0, "test/pair")
    kinds = {structured_pair(rng, "mul", (5, 7))[0] for _ in range(200)}
    assert kinds == {k for k in KINDS if SAMPLERS[k].applies_to("mul")} and "equal" not in kinds
    with pytest.raises(ValueError, match="none of the structured kinds"):
        structured_pair(rng, "mul", (5, 7), kinds=("equal",))


def test_a_machine_source_draws_structured_operands_at_its_share_and_leaves_other_streams_alone():
    from caef_bench.train.sources import MachineSource

    adapters = [("aligner", "add"), ("executor", "gt"), ("aligner", "div")]
    plain = MachineSource(adapters, 100, seed=1)
    assert "structured" not in plain.fingerprint
    mixed = MachineSource(adapters, 100, seed=1, mix={"structured": 0.5})
    assert mixed.fingerprint == plain.fingerprint + ":draws[structured=0.5]"
    samples = [s for step in range(6) for s in mixed.batch(step, 64)]
    share = sum("structured" in s["meta"] for s in samples) / len(samples)
    assert 0.4 < share < 0.6
    assert {s["meta"]["structured"] for s in samples if "structured" in s["meta"]} == set(KINDS)
    for sample in samples:
        meta = sample["meta"]
        if meta["kind"] == "aligner" and sample["prompt"].endswith("="):  # (I): the expression of the drawn operands
            assert sample["prompt"].startswith(meta["a"]) and sample["prompt"][:-1].endswith(meta["b"])
    # with no share, the draws are those the source made before the share existed
    again = MachineSource(adapters, 100, seed=1, mix={"structured": 0.0})
    assert [s["prompt"] for s in again.batch(3, 16)] == [s["prompt"] for s in plain.batch(3, 16)]


def test_a_long_structured_share_draws_two_long_operands_of_one_length():
    from caef_bench.train.sources import MachineSource

    adapters = [("aligner", "sub"), ("executor", "gt"), ("executor", "left_mask")]
    base = MachineSource(adapters, 100, seed=2, mix={"structured": 1.0})
    tilted = MachineSource(adapters, 100, seed=2, mix={"structured": 1.0, "structured_long": 1.0})
    assert "draws[structured=1.0,structured_long=1.0]" in tilted.fingerprint and "long" not in base.fingerprint

    def lengths(source):  # (the small kind's b is 0 or 1 whatever the class)
        return [(len(s["meta"]["a"]), len(s["meta"]["b"])) for step in range(4) for s in source.batch(step, 32)
                if s["meta"]["op"] != "left_mask" and s["meta"]["structured"] != "small"]

    # sub may swap its operands, never change their lengths; every pair is one length above 50 digits
    assert all(la == lb > 50 for la, lb in lengths(tilted))
    assert sum(la == lb > 50 for la, lb in lengths(base)) < len(lengths(base)) / 2
    masks = [len(s["meta"]["a"]) for step in range(4) for s in tilted.batch(step, 32) if s["meta"]["op"] == "left_mask"]
    assert masks and min(masks) > 50


def test_a_wide_share_draws_subs_calls_whose_fields_hold_101_digits():
    import re

    from caef_bench.train.sources import MachineSource

    adapters = [("executor", "left_mask"), ("executor", "add")]
    plain = MachineSource(adapters, 100, seed=3)
    wide = MachineSource(adapters, 100, seed=3, mix={"wide": 1.0})
    assert "draws[wide=1.0]" in wide.fingerprint and "wide" not in plain.fingerprint
    samples = [s for step in range(3) for s in wide.batch(step, 16)]
    assert all(s["meta"]["wide"] and s["meta"]["caller"] == "sub" for s in samples)
    # a above 90 digits (b may be shorter: b = 0 or 1, round numbers); REFLECTION pads b to a's length
    assert all(len(s["meta"]["a"]) > 90 and int(s["meta"]["a"]) >= int(s["meta"]["b"]) for s in samples)

    def widest_field(text: str) -> int:
        return max(len(re.findall(r"\|\d", field)) for field in text.split("\n")[0].split(" "))

    # SUB's sum of two 100-digit operands has 101 digits: the one field longer than any operand drawn
    assert any(widest_field(s["prompt"]) == 101 for s in samples if s["meta"]["op"] == "left_mask")
    assert any(widest_field(s["completion"]) == 101 for s in samples if s["meta"]["op"] == "add")
    for s in samples:  # each is the callee's own transition at the step it names
        a, b = int(s["meta"]["a"]), int(s["meta"]["b"])
        callees = [p.callee for p in run("sub", a, b).phases if p.callee is not None]
        assert any(c.transition(s["meta"]["step"]) == (s["prompt"], s["completion"])
                   for c in callees if s["meta"]["step"] < len(c))
    # the share leaves other executors' draws alone
    assert _draws_as_without("gt", seed=3, wide=1.0)


def test_a_sub_call_share_draws_subs_calls_above_50_digits_leaning_on_the_halting_steps():
    from caef_bench.machines import OPERATIONS
    from caef_bench.train.sources import MachineSource

    adapters = [("executor", "left_mask"), ("executor", "add")]
    source = MachineSource(adapters, 100, seed=5, mix={"sub_calls": 1.0})
    assert "draws[sub_calls=1.0]" in source.fingerprint
    assert "sub_calls" not in MachineSource(adapters, 100, seed=5, mix={"wide": 1.0}).fingerprint
    samples = [s for step in range(6) for s in source.batch(step, 32)]
    assert all(s["meta"]["sub_call"] for s in samples)
    # a above 50 digits, never only above 90: the repeated cells' 50-digit subtractions are in them
    lengths = [len(s["meta"]["a"]) for s in samples]
    assert min(lengths) > 50 and any(length <= 90 for length in lengths)
    # equal operands (SUB's difference all zeros) and add's own runs are both drawn, neither dominates
    equal = sum(s["meta"]["a"] == s["meta"]["b"] for s in samples)
    plain = sum(s["meta"]["caller"] == "add" for s in samples)
    assert 0 < equal < len(samples) / 4 and 0 < plain < len(samples) / 4
    assert all(s["meta"]["caller"] == "sub" for s in samples if s["meta"]["op"] == "left_mask")
    tail = 0
    for s in samples:  # each is the callee's own transition at the step it names
        a, b, step = int(s["meta"]["a"]), int(s["meta"]["b"]), s["meta"]["step"]
        if s["meta"]["caller"] == "add":
            callees = [run("add", a, b)]
        else:
            callees = [p.callee for p in run("sub", a, b).phases
                       if p.callee is not None and p.callee.machine == OPERATIONS[s["meta"]["op"]].machine]
        matching = [c for c in callees if step < len(c) and c.transition(step) == (s["prompt"], s["completion"])]
        assert matching
        tail += any(step >= len(c) - 3 for c in matching)
    # a uniform step of a run of 50-420 steps is one of its last three well under a tenth of the time
    assert tail > len(samples) / 3
    # the share leaves other executors' draws alone
    assert _draws_as_without("gt", seed=5, sub_calls=1.0)


def test_a_top_run_share_draws_comparisons_of_a_run_below_another_top_digit():
    from caef_bench.train.sources import MachineSource

    source = MachineSource([("executor", "eq"), ("executor", "gt")], 100, seed=7, mix={"top_runs": 1.0})
    assert "draws[top_runs=1.0]" in source.fingerprint
    assert "top_runs" not in MachineSource([("executor", "add")], 100, seed=7, mix={"top_runs": 1.0}).fingerprint
    samples = [s for step in range(4) for s in source.batch(step, 32)]
    assert all(s["meta"]["top_run"] for s in samples)
    tops = 0
    for s in samples:
        op, a, b, step = s["meta"]["op"], s["meta"]["a"], s["meta"]["b"], s["meta"]["step"]
        # one operand is a top digit over a run of another digit, the other equal or one digit apart
        assert any(len(set(x[1:])) == 1 and x[0] != x[1] for x in (a, b))
        assert len(a) == len(b) > 10 and sum(x != y for x, y in zip(a, b)) <= 1
        machine_run = run(op, int(a), int(b))
        assert machine_run.transition(step) == (s["prompt"], s["completion"])
        tops += a == b and step >= len(machine_run) - 3
    # the steps where equal operands' heads reach the top digit are drawn often, not once in a million
    assert tops > len(samples) / 10
    assert any(len(s["meta"]["a"]) > 50 for s in samples) and any(len(s["meta"]["a"]) <= 50 for s in samples)
    assert _draws_as_without("add", seed=7, top_runs=1.0)


def test_a_carry_run_share_draws_additions_carrying_through_a_run_of_nines_to_its_end():
    from caef_bench.train.sources import MachineSource

    source = MachineSource([("executor", "add")], 100, seed=7, mix={"carry_runs": 1.0})
    assert "draws[carry_runs=1.0]" in source.fingerprint
    assert "carry_runs" not in MachineSource([("executor", "gt")], 100, seed=7, mix={"carry_runs": 1.0}).fingerprint
    samples = [s for step in range(4) for s in source.batch(step, 32)]
    assert all(s["meta"]["carry_run"] for s in samples)
    ends = 0
    for s in samples:
        a, b, step = s["meta"]["a"], int(s["meta"]["b"]), s["meta"]["step"]
        # a: a run of more than ten 9s under a digit that is not 9, 51-101 digits; b at most three digits
        run_length = len(a) - len(a.rstrip("9"))
        assert 10 < run_length < len(a) <= 101 and len(a) > 50 and 1 <= b <= 999
        assert run("add", int(a), b).transition(step) == (s["prompt"], s["completion"])
        # the step where the carry stops: the input's command carries 1, the output's none
        ends += "CMD: [C] 1" in s["prompt"] and "CMD: [C] 0" in s["completion"]
    # drawn uniformly, that step is one in 50-100; here about one in eight (half the draws are the
    # four steps from the one before it)
    assert ends > len(samples) / 10
    assert _draws_as_without("gt", seed=7, carry_runs=1.0)


def test_a_carry_run_under_a_single_top_digit_keeps_that_digit_above_0():
    import random

    from caef_bench.train.mix import chances
    from caef_bench.train.samplers import carry_runs
    from caef_bench.train.sources import MachineSource

    class Lowest(random.Random):
        """Each draw at one end: the longest sum, a run of 9s under one digit, that digit the first choice."""

        def randint(self, a, b):
            return b

        def choice(self, seq):
            return seq[0]

        def random(self):
            return 0.0

    source = MachineSource([("executor", "add")], 100, seed=7, mix={"carry_runs": 1.0})
    sample = carry_runs(source, "executor", "add", Lowest(), None, chances("executor", "add", source.mix))
    a = sample["meta"]["a"]
    # one digit over a run of one hundred 9s: 0 there would leave a run with nothing to stop its carry
    assert len(a) == 101 and a.endswith("9" * 100) and a[0] in "12345678"


def test_a_top_steps_share_draws_the_last_steps_of_long_random_sums():
    from caef_bench.train.samplers import calls_of
    from caef_bench.train.sources import MachineSource

    source = MachineSource([("executor", "add")], 100, seed=7, mix={"top_steps": 1.0})
    assert "draws[top_steps=1.0]" in source.fingerprint
    assert "top_steps" not in MachineSource([("executor", "gt")], 100, seed=7, mix={"top_steps": 1.0}).fingerprint
    samples = [s for step in range(3) for s in source.batch(step, 32)]
    callers = {"add": 0, "sub": 0}
    for s in samples:
        meta = s["meta"]
        a, b, caller = int(meta["a"]), int(meta["b"]), meta["caller"]
        assert meta["top_steps"] and 90 < len(meta["a"]) == len(meta["b"]) <= 100
        # ADD's own run on the pair, or SUB's first call of ADD (a + reflection(b))
        callee = run("add", a, b) if caller == "add" else calls_of("add", "sub", a, b)[0]
        assert len(callee) - TOP_STEPS_DRAWN <= meta["step"] < len(callee)
        assert callee.transition(meta["step"]) == (s["prompt"], s["completion"])
        callers[caller] += 1
    assert min(callers.values()) > len(samples) / 4
    # half the pairs are exactly 100 digits, Table 1's add_100 and sub_100
    assert sum(len(s["meta"]["a"]) == 100 for s in samples) > len(samples) / 3
    assert _draws_as_without("gt", seed=7, top_steps=1.0)


def test_a_top_steps_structured_share_puts_structured_long_sums_among_the_top_steps_draws():
    from caef_bench.train.sources import MachineSource

    source = MachineSource([("executor", "add")], 100, seed=7, mix={"top_steps": 1.0, "top_steps_structured": 0.5})
    assert "draws[top_steps=1.0,top_steps_structured=0.5]" in source.fingerprint
    samples = [s for step in range(4) for s in source.batch(step, 32)]
    drawn = [(s, *_drawn_call(s)) for s in samples]
    # SUB's draws from both of its ADD calls: a + reflection(b), then that sum + 1
    assert {call for s, call, _ in drawn if s["meta"]["caller"] == "sub"} == {0, 1}
    structured = [(s, callee) for s, _, callee in drawn if s["meta"].get("structured")]
    assert len(samples) / 4 < len(structured) < 3 * len(samples) / 4
    below_top = 0
    for s, callee in structured:
        meta = s["meta"]
        assert meta["top_steps"] and 90 < len(meta["a"]) <= 100
        assert callee.transition(meta["step"]) == (s["prompt"], s["completion"])
        below_top += meta["step"] < len(callee) - TOP_STEPS_DRAWN
    # half of the structured draws at any step of the run, where its runs of one digit are
    assert below_top > len(structured) / 4
    # a run of one digit of at least ten in most structured pairs; random pairs hardly ever hold one
    assert sum(any(d * 10 in s["meta"]["a"] + " " + s["meta"]["b"] for d in "0123456789")
               for s, _ in structured) > len(structured) / 2
    # without the share every top-steps draw is on random operands
    plain = MachineSource([("executor", "add")], 100, seed=7, mix={"top_steps": 1.0})
    assert not any(s["meta"].get("structured") for s in plain.batch(1, 32))


def test_a_deciding_steps_share_draws_the_top_pair_of_long_random_comparisons():
    from caef_bench.train.sources import MachineSource

    source = MachineSource([("executor", "lt"), ("executor", "gt")], 100, seed=7, mix={"deciding_steps": 1.0})
    assert "draws[deciding_steps=1.0]" in source.fingerprint
    for other in ("add", "eq"):
        assert "deciding_steps" not in MachineSource([("executor", other)], 100, seed=7, mix={"deciding_steps": 1.0}).fingerprint
    samples = [s for step in range(3) for s in source.batch(step, 32)]
    from_the_end = []
    for s in samples:
        meta = s["meta"]
        assert meta["deciding_steps"] and 90 < len(meta["a"]) == len(meta["b"]) <= 100
        machine_run = run(meta["op"], int(meta["a"]), int(meta["b"]))
        assert machine_run.transition(meta["step"]) == (s["prompt"], s["completion"])
        from_the_end.append(len(machine_run) - 1 - meta["step"])
    # the last three steps: the one moving the heads onto the top digit pair and deciding the answer there,
    # the one writing it, the halt
    assert set(from_the_end) == {0, 1, 2}
    top_pairs = [s for s, back in zip(samples, from_the_end) if back == 2]
    assert top_pairs and all(f"[HEAD1]|{s['meta']['a'][0]}" in s["completion"]
                             and f"[HEAD2]|{s['meta']['b'][0]}" in s["completion"] for s in top_pairs)
    # half the pairs exactly 100 digits, Table 1's 100-digit cells
    assert sum(len(s["meta"]["a"]) == 100 for s in samples) > len(samples) / 3
    # the other executors' draws are as without the share
    assert _draws_as_without("add", seed=7, deciding_steps=1.0)
    assert _draws_as_without("eq", seed=7, deciding_steps=1.0)


def _drawn_call(sample: dict) -> tuple[int, object]:
    """(index, run) of the ADD run a top-steps sample was drawn from: the pair's own run for the
    caller add, SUB's calls of ADD in order for sub (the one whose step is the sample's input)."""
    from caef_bench.train.samplers import calls_of

    meta = sample["meta"]
    a, b, step = int(meta["a"]), int(meta["b"]), meta["step"]
    runs = [run("add", a, b)] if meta["caller"] == "add" else calls_of("add", "sub", a, b)
    return next((i, r) for i, r in enumerate(runs) if step < len(r) and r.transition(step)[0] == sample["prompt"])


TOP_STEPS_DRAWN = 12  # samplers.TOP_STEPS, written out: the test states what is drawn


def _draws_as_without(op: str, seed: int, **share) -> bool:
    """Whether op's executor draws the same samples with `share` as without it: a share for other
    machines leaves its draws alone."""
    from caef_bench.train.sources import MachineSource

    def prompts(mix) -> list[str]:
        return [s["prompt"] for s in MachineSource([("executor", op)], 100, seed=seed, mix=mix).batch(0, 8)]

    return prompts(share) == prompts({})
