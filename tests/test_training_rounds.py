"""The learning-rate schedule, further pre-training rounds (--base-init), bf16 adapters, batched draft checks."""

import json

import pytest
import torch
from safetensors import safe_open

from caef_bench.machines import trace
from caef_bench.models.codec import CaefCodec
from caef_bench.models.decoding import greedy_ids, verify_drafts
from caef_bench.models.tiny import TinyShape, build_tiny_base
from caef_bench.train.loop import lr_factor
from caef_bench.train.recipe import TrainRequest, run_training

MICRO = TinyShape(hidden=32, layers=2, heads=2, ffn=64, max_positions=8192)


def test_lr_warms_up_then_decays_to_its_floor_on_a_cosine():
    assert lr_factor(0, 100, 10, "cosine", 0.05) == pytest.approx(0.1)
    assert lr_factor(9, 100, 10, "cosine", 0.05) == pytest.approx(1.0)
    assert lr_factor(10, 100, 10, "cosine", 0.05) == pytest.approx(1.0)
    middle = lr_factor(55, 100, 10, "cosine", 0.05)
    assert 0.05 < middle < 1.0 and middle == pytest.approx(0.05 + 0.95 * 0.5)
    assert lr_factor(100, 100, 10, "cosine", 0.05) == pytest.approx(0.05)
    assert lr_factor(50, 100, 10, "constant", 0.05) == 1.0
    with pytest.raises(ValueError, match="unknown lr decay"):
        lr_factor(50, 100, 0, "linear", 0.05)


def _request(out, **extra):
    return TrainRequest(preset="tiny", out=out, executors=("add",), aligners=(), progress=False,
                        tiny_shape=MICRO, overrides={"base_steps": 4, "stage2_steps": 2, "max_len": 4,
                                                     **extra.pop("overrides", {})}, **extra)


def test_a_further_round_starts_from_the_given_base_and_records_its_history(tmp_path):
    from transformers import AutoModelForCausalLM

    run_training(_request(tmp_path / "round1"))
    first = json.loads((tmp_path / "round1/base/manifest.json").read_text())
    # zero further steps: the new base must be exactly the one it started from
    run_training(_request(tmp_path / "round2", base_init=tmp_path / "round1/base", overrides={"base_steps": 0}))
    second = json.loads((tmp_path / "round2/base/manifest.json").read_text())
    assert second["initialised_from"] == first and first["initialised_from"] == "random (seed)"
    before = AutoModelForCausalLM.from_pretrained(tmp_path / "round1/base").state_dict()
    after = AutoModelForCausalLM.from_pretrained(tmp_path / "round2/base").state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_adapters_are_stored_in_bf16(tmp_path):
    run_training(_request(tmp_path))
    with safe_open(str(tmp_path / "executors/add/adapter_model.safetensors"), framework="pt") as f:
        dtypes = {f.get_tensor(k).dtype for k in f.keys()}
    assert dtypes == {torch.bfloat16}
    manifest = json.loads((tmp_path / "executors/add/manifest.json").read_text())
    assert "stage1" not in manifest["stages"]
    assert manifest["one_step_accuracy"] is None  # no one_step_check was given: nothing measured


def test_batched_draft_check_agrees_with_greedy_decoding():
    model = build_tiny_base(MICRO, seed=3).eval()
    codec = CaefCodec("coupled")
    prompts = [codec.prompt_ids(source) for source, _ in trace("add", 45, 67)[:3]]
    limit = 8
    greedy = [greedy_ids(model, [p], codec, limit)[0] for p in prompts]
    # a right draft is accepted whole; a draft wrong at one token gives greedy's tokens up to that miss
    exact = verify_drafts(model, codec, prompts, greedy, [limit] * len(prompts))
    assert all(ok and tokens == g for (ok, tokens), g in zip(exact, greedy))
    wrong = [g[:2] + [(g[2] + 1) % 50 + 5] + g[3:] for g in greedy]
    checked = verify_drafts(model, codec, prompts, wrong, [limit] * len(prompts))
    for (ok, tokens), g in zip(checked, greedy):
        assert not ok and tokens == g[:3]


def test_a_further_adapter_round_starts_from_the_earlier_adapter(tmp_path):
    run_training(_request(tmp_path / "round1"))
    first = json.loads((tmp_path / "round1/executors/add/manifest.json").read_text())
    # the same base, each adapter started from round 1's, zero further steps: the very same weights
    run_training(_request(tmp_path / "round2", base=str(tmp_path / "round1/base"), adapter_init=tmp_path / "round1",
                          overrides={"stage2_steps": 0}))
    second = json.loads((tmp_path / "round2/executors/add/manifest.json").read_text())
    assert second["initialised_from"] == first
    with safe_open(str(tmp_path / "round1/executors/add/adapter_model.safetensors"), framework="pt") as f:
        before = {k: f.get_tensor(k) for k in f.keys()}
    with safe_open(str(tmp_path / "round2/executors/add/adapter_model.safetensors"), framework="pt") as f:
        after = {k: f.get_tensor(k) for k in f.keys()}
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    with pytest.raises(FileNotFoundError, match="no executor adapter for add"):
        run_training(_request(tmp_path / "round3", base=str(tmp_path / "round1/base"), adapter_init=tmp_path / "nowhere"))


def test_equal_and_short_operands_get_the_shares_asked_for():
    from caef_bench.train.sources import MachineSource

    plain = MachineSource([("executor", "add")], max_len=100, seed=0)
    weighted = MachineSource([("executor", "add")], max_len=100, seed=0, mix={"equal": 0.4, "short": 0.2})
    assert "equal" not in plain.fingerprint and "equal=0.4" in weighted.fingerprint

    def shares(source):
        lengths = [(len(s["meta"]["a"]), len(s["meta"]["b"])) for s in source.batch(0, 2000)]
        return (sum(a == b for a, b in lengths) / len(lengths), sum(max(a, b) <= 10 for a, b in lengths) / len(lengths))

    equal, short = shares(weighted)
    assert 0.37 < equal < 0.47 and 0.18 < short < 0.28  # 0.4 (+1% uniform), 0.2 (+1% uniform, +0.4% equal)
    equal, short = shares(plain)
    assert equal < 0.03 and short < 0.03


def test_comparisons_get_equal_and_one_digit_apart_pairs_at_the_step_that_decides():
    from caef_bench.machines import run
    from caef_bench.train.sources import MachineSource

    source = MachineSource([("executor", "eq")], max_len=30, seed=0, mix={"same": 0.3, "near": 0.4})
    assert "same=0.3,near=0.4" in source.fingerprint
    samples = source.batch(0, 2000)
    pairs = [(s["meta"]["a"], s["meta"]["b"]) for s in samples]
    same = sum(a == b for a, b in pairs) / len(pairs)
    near = [s for s, (a, b) in zip(samples, pairs)
            if len(a) == len(b) and sum(x != y for x, y in zip(a, b)) == 1]
    assert 0.3 < same < 0.4  # 0.3, plus random pairs that happen to be equal (1-digit classes, eq's own quarter)
    assert 0.35 < len(near) / len(pairs) < 0.5
    # Half the near pairs train the transition whose next command first compares the changed digit.
    deciding = 0
    for sample in near:
        a, b = sample["meta"]["a"], sample["meta"]["b"]
        k = next(i for i, (x, y) in enumerate(zip(a[::-1], b[::-1])) if x != y)
        source_text, target = run("eq", int(a), int(b)).transition(k)
        deciding += sample["prompt"] == source_text and "False" in target.split("\n")[1]
    assert 0.45 < deciding / len(near) < 0.7
    # Other machines draw as before.
    plain = MachineSource([("executor", "add")], max_len=30, seed=0)
    assert MachineSource([("executor", "add")], max_len=30, seed=0, mix={"near": 0.4}).batch(3, 8) == plain.batch(3, 8)


def test_sub_pairs_have_differences_with_leading_zeros():
    from caef_bench.train.sources import MachineSource

    source = MachineSource([("executor", "sub")], max_len=30, seed=0, mix={"same": 0.2, "near": 0.3})
    pairs = [(int(s["meta"]["a"]), int(s["meta"]["b"])) for s in source.batch(0, 1000)]
    assert all(a >= b for a, b in pairs)  # still a non-negative difference
    assert 0.18 < sum(a == b for a, b in pairs) / len(pairs) < 0.25
    # the difference is shorter than the operands (left_mask erases zeros) about half the time
    assert 0.4 < sum(len(str(a - b)) < len(str(a)) - 1 for a, b in pairs) / len(pairs) < 0.6


def test_composer_share_draws_transitions_of_the_calls_composers_make():
    from caef_bench.machines import run
    from caef_bench.train.sources import MachineSource

    source = MachineSource([("executor", "add")], max_len=20, seed=0, mix={"composer_calls": 0.5})
    assert "composer_calls=0.5" in source.fingerprint
    samples = source.batch(0, 400)
    called = [s for s in samples if "caller" in s["meta"]]
    assert 0.4 < len(called) / len(samples) < 0.6
    assert {s["meta"]["caller"] for s in called} == {"sub", "mul"}
    for sample in called[:40]:  # each is a transition of an ADD call inside that composer's run
        meta = sample["meta"]
        calls = [c for _, c in run(meta["caller"], int(meta["a"]), int(meta["b"])).calls() if c.machine == "ADD"]
        assert any(c.transition(meta["step"]) == (sample["prompt"], sample["completion"])
                   for c in calls if meta["step"] < len(c))
    # MUL's first call adds a to itself: operands that random draws almost never give
    assert any("[HEAD1] |" in s["prompt"] and s["prompt"].split("[HEAD1] ")[1].split("[HEAD2]")[0]
               == s["prompt"].split("[HEAD2] ")[1].split(" [C]")[0] for s in called if s["meta"]["caller"] == "mul")
    assert MachineSource([("executor", "add")], max_len=20, seed=0).batch(3, 8) == \
        MachineSource([("executor", "add")], max_len=20, seed=0, mix={"composer_calls": 0.0}).batch(3, 8)


def test_count_share_draws_mul_s_less_than_calls_and_leaves_the_composer_share_as_it_was():
    from caef_bench.machines import run
    from caef_bench.train.sources import MachineSource

    source = MachineSource([("executor", "lt")], max_len=10, seed=0, mix={"count_calls": 0.5})
    called = [s for s in source.batch(0, 200) if "caller" in s["meta"]]
    assert 0.35 < len(called) / 200 < 0.65 and {s["meta"]["caller"] for s in called} == {"mul"}
    for sample in called[:20]:  # each is a transition of a LESS_THAN call inside MUL's run: its count against b
        meta = sample["meta"]
        calls = [c for _, c in run("mul", int(meta["a"]), int(meta["b"])).calls() if c.machine == "LESS_THAN"]
        assert any(c.transition(meta["step"]) == (sample["prompt"], sample["completion"])
                   for c in calls if meta["step"] < len(c))
    # composer_calls still passes lt over (the shipped adapters' draws stay what they were)
    assert MachineSource([("executor", "lt")], max_len=10, seed=0, mix={"composer_calls": 0.5}).batch(3, 8) == \
        MachineSource([("executor", "lt")], max_len=10, seed=0).batch(3, 8)
    # and count_calls passes add over
    assert MachineSource([("executor", "add")], max_len=10, seed=0, mix={"count_calls": 0.5}).batch(3, 8) == \
        MachineSource([("executor", "add")], max_len=10, seed=0).batch(3, 8)


def test_structured_call_share_draws_the_composers_calls_on_structured_operands():
    from itertools import groupby

    from caef_bench.machines import run
    from caef_bench.train.sources import MachineSource

    samples = MachineSource([("executor", "add")], max_len=12, seed=0, mix={"structured_calls": 1.0}).batch(0, 200)
    assert all(s["meta"].get("structured_call") for s in samples)
    assert {s["meta"]["caller"] for s in samples} == {"sub", "mul", "div"}
    for sample in samples[:20]:  # a transition of an ADD call inside that composer's run
        meta = sample["meta"]
        calls = [c for _, c in run(meta["caller"], int(meta["a"]), int(meta["b"])).calls() if c.machine == "ADD"]
        assert any(c.transition(meta["step"]) == (sample["prompt"], sample["completion"])
                   for c in calls if meta["step"] < len(c))
    # structured: a third or more of the composers' a (4+ digits) are half a run of one digit; of random draws, ~1%
    def half_a_run(a: str) -> bool:
        return 2 * max(len(list(run_)) for _, run_ in groupby(a)) >= len(a)

    a_values = [s["meta"]["a"] for s in samples if len(s["meta"]["a"]) >= 4]
    assert sum(map(half_a_run, a_values)) > len(a_values) / 3


def test_top_runs_on_a_tier_built_for_short_operands_stay_within_its_lengths():
    from caef_bench.train.sources import MachineSource

    samples = MachineSource([("executor", "gt")], max_len=12, seed=22, mix={"top_runs": 1.0}).batch(0, 200)
    lengths = [max(len(s["meta"]["a"]), len(s["meta"]["b"])) for s in samples]
    assert all(s["meta"].get("top_run") for s in samples)
    assert min(lengths) == 3 and max(lengths) == 12


def test_adapters_on_a_given_base_use_its_scheme_unless_told_otherwise(tmp_path):
    from caef_bench.train.recipe import _base

    save_dir = tmp_path / "base"
    from caef_bench.models.tiny import save_tiny_base

    save_tiny_base(build_tiny_base(MICRO, seed=0), save_dir, "coupled")
    _, codec = _base(_request(tmp_path / "a", base=str(save_dir)), "test")
    assert codec.scheme == "coupled"
    _, codec = _base(_request(tmp_path / "b", base=str(save_dir), overrides={"position_scheme": "coupled-expr"}), "test")
    assert codec.scheme == "coupled-expr"
    from caef_bench.models.tiny import set_position_scheme, tier_info

    set_position_scheme(save_dir, "coupled-expr")
    assert tier_info(save_dir) == {"position_scheme": "coupled-expr", "tokenizer": "caef"}
    with pytest.raises(ValueError, match="unknown position scheme"):
        set_position_scheme(save_dir, "rotary")


def test_coupled_ids_on_a_base_with_its_own_tokenizer_are_refused(tmp_path):
    from caef_bench.train.recipe import _base
    from micro_model import build_micro_model

    pretrained = build_micro_model(tmp_path / "pretrained")
    _, codec = _base(_request(tmp_path / "a", base=str(pretrained)), "test")
    assert codec.scheme == "standard"
    with pytest.raises(ValueError, match="needs the CAEF tokenizer"):
        _base(_request(tmp_path / "b", base=str(pretrained), overrides={"position_scheme": "coupled"}), "test")


def test_left_mask_draws_differences_with_leading_zeros_to_erase():
    import random

    from caef_bench.data.training import draw_operands

    rng = random.Random(0)
    values = [str(draw_operands("left_mask", (12, 0), rng)[0]) for _ in range(4000)]
    sub_shaped = [v for v in values if v.startswith("1") and len(v) == 12]
    with_zeros = [v for v in sub_shaped if v[1] == "0"]
    assert all(len(v) == 12 for v in values)
    assert 0.25 < len(with_zeros) / len(values) < 0.35  # a quarter forced, plus chance zeros


def test_left_mask_samples_lean_on_the_steps_that_erase_the_top():
    from caef_bench.train.sources import MachineSource

    samples = MachineSource([("executor", "left_mask")], max_len=60, seed=0).batch(0, 2000)
    erasing = [s for s in samples if s["prompt"].startswith("LEFT_MASK, q2") or s["prompt"].endswith("q2")]
    assert len(erasing) / len(samples) > 0.3  # about 1 in 20 when steps are drawn uniformly
    # the step that erases the carried 1 and decides from the digit below: both answers well represented
    erase = [s["completion"].split("\n")[-1] for s in samples if s["prompt"].endswith("[OUTPUT] 0, q2")]
    assert len(erase) / len(samples) > 0.2
    assert 0.35 < erase.count("CMD [OUTPUT] LEFT, q2") / len(erase) < 0.65


@pytest.mark.parametrize("op", ["reflection", "sub", "add"])
def test_nines_share_draws_the_steps_that_carry_reflections_dropped_zeros(op):
    from caef_bench.machines import parse, run
    from caef_bench.train.sources import MachineSource

    source = MachineSource([("executor", op)], max_len=30, seed=0, mix={"nines": 0.5})
    assert "nines=0.5" in source.fingerprint
    samples = source.batch(0, 300)
    drawn = [s for s in samples if s["meta"].get("nines")]
    assert 0.4 < len(drawn) / len(samples) < 0.6
    for sample in drawn:
        a, b = int(sample["meta"]["a"]), int(sample["meta"]["b"])
        if op == "reflection" and str(b)[0] != "9":  # a complement whose top digit stays
            machine_run = run("reflection", a, b)
            assert set(str(a)) == {"9"} and machine_run.kept == len(str(a))
        else:
            assert a >= b and len(str(a)) == len(str(b)) and str(b)[0] == "9"
            sub = run("sub", a, b)
            machine_run = {"sub": sub, "reflection": sub.phases[1].callee, "add": sub.phases[2].callee}[op]
        assert machine_run.transition(sample["meta"]["step"]) == (sample["prompt"], sample["completion"])
    if op == "reflection":  # every one from the step that writes `CMD q2` on: the completions are that
        # last q1 state (both for zeros and for complements whose top digit stays), q2 or qH states,
        completions = [parse(s["completion"]) for s in drawn]
        assert all(c.state.q in ("q2", "qH") or (c.state.q == "q1" and c.command.next_q == "q2") for c in completions)
        kinds = [c.state.q for c in completions]
        assert kinds.count("q1") > 10 and kinds.count("qH") > 5
        # and the q2 commands both drop digits and halt
        commands = [s["completion"].split("\n")[1] for s in drawn if parse(s["completion"]).state.q == "q2"]
        assert 0.3 < sum("LEFT" in c for c in commands) / len(commands) < 0.7
    # without the share the stream is the one it always was
    assert MachineSource([("executor", op)], max_len=30, seed=0).batch(3, 8) == \
        MachineSource([("executor", op)], max_len=30, seed=0, mix={"nines": 0.0}).batch(3, 8)


def test_return_share_draws_the_composer_steps_that_read_a_callees_halt():
    from caef_bench.machines import run
    from caef_bench.machines.text import HALT_LINE
    from caef_bench.train.sources import MachineSource

    source = MachineSource([("executor", "sub")], max_len=30, seed=0, mix={"returns": 0.5})
    assert "returns=0.5" in source.fingerprint
    samples = source.batch(0, 300)
    drawn = [s for s in samples if s["meta"].get("returns")]
    assert 0.4 < len(drawn) / len(samples) < 0.6
    for sample in drawn:
        machine_run = run("sub", int(sample["meta"]["a"]), int(sample["meta"]["b"]))
        assert machine_run.transition(sample["meta"]["step"]) == (sample["prompt"], sample["completion"])
        assert HALT_LINE in sample["prompt"]
    # every such step of SUB's runs is drawn (REFLECTION's return, each ADD's, LEFT_MASK's)
    assert {s["meta"]["step"] for s in drawn} == {1, 2, 3, 4}
    # machines that call nothing, and an unweighted stream, are as they always were
    assert "returns" not in MachineSource([("executor", "add")], max_len=30, seed=0, mix={"returns": 0.5}).fingerprint
    assert MachineSource([("executor", "sub")], max_len=30, seed=0).batch(3, 8) == \
        MachineSource([("executor", "sub")], max_len=30, seed=0, mix={"returns": 0.0}).batch(3, 8)


def test_long_share_draws_operands_of_more_than_fifty_digits_and_leaves_other_streams_alone():
    from caef_bench.train.samplers import LONG
    from caef_bench.train.sources import MachineSource

    def long_part(source):
        lengths = [max(len(s["meta"]["a"]), len(s["meta"]["b"] or "")) for s in source.batch(0, 400)]
        return sum(n > LONG for n in lengths) / len(lengths)

    for op in ("add", "reflection"):
        source = MachineSource([("executor", op)], max_len=100, seed=0, mix={"equal": 0.2, "long": 0.6})
        assert "long=0.6" in source.fingerprint
        # uniform over (len a, len b) classes, 3 in 4 have an operand above 50 digits (equal ones 1 in 2);
        # (0.7 with equal_share 0.2); with 0.6 of the draws from those alone, 0.85
        unweighted = long_part(MachineSource([("executor", op)], max_len=100, seed=0, mix={"equal": 0.2}))
        assert 0.62 < unweighted < 0.78 and 0.79 < long_part(source) < 0.92, op
    nines = MachineSource([("executor", "reflection")], max_len=100, seed=0, mix={"nines": 1.0, "nines_long": 1.0})
    assert all(len(s["meta"]["a"]) > LONG for s in nines.batch(0, 100))
    # without it, weighted and nines streams are the ones they always were
    for mix in ({"equal": 0.4, "short": 0.2}, {"nines": 0.5}):
        assert MachineSource([("executor", "reflection")], max_len=100, seed=0, mix=mix).batch(3, 8) == \
            MachineSource([("executor", "reflection")], max_len=100, seed=0,
                          mix={**mix, "long": 0.0, "nines_long": 0.0}).batch(3, 8)


def test_half_the_nines_draws_have_a_run_of_one_or_two_nines_as_random_pairs_mostly_do():
    import random

    from caef_bench.data.training import nines_on_top
    from caef_bench.train.sources import MachineSource

    def runs(few_share):
        rng = random.Random(0)
        return [len(str(b)) - len(str(b).lstrip("9")) for b in (nines_on_top(rng, 100, few_share)[1] for _ in range(400))]

    assert sum(n <= 2 for n in runs(0.0)) < 30  # uniform over 1..100
    assert 0.45 < sum(n <= 2 for n in runs(0.5)) / 400 < 0.6
    source = MachineSource([("executor", "reflection")], max_len=100, seed=0, mix={"nines": 1.0})
    assert "draws[nines=1.0]" in source.fingerprint
    zeros = [len(str(int(s["meta"]["b"]))) - len(str(int(s["meta"]["b"])).lstrip("9")) for s in source.batch(0, 200)
             if str(s["meta"]["b"]).startswith("9")]
    assert sum(n <= 2 for n in zeros) > len(zeros) / 3


def test_run_lengths_draw_two_runs_of_lengths_at_most_one_apart_for_aligners_and_executors():
    from itertools import groupby

    from caef_bench.data.testsets import solve
    from caef_bench.data.training import expression
    from caef_bench.machines import run
    from caef_bench.train.sources import MachineSource

    def a_typed_run(number: str) -> bool:  # d…d, or a top digit over a run of one digit
        return len(list(groupby(number[1:]))) <= 1

    for kind, op in (("aligner", "gt"), ("aligner", "sub"), ("executor", "eq"), ("executor", "sub")):
        samples = MachineSource([(kind, op)], max_len=10, seed=0, mix={"run_lengths": 1.0}).batch(0, 100)
        assert all(s["meta"]["run_lengths"] and s["meta"]["kind"] == kind for s in samples)
        pairs = [(s["meta"]["a"], s["meta"]["b"]) for s in samples]
        assert all(a_typed_run(a) and a_typed_run(b) and abs(len(a) - len(b)) <= 1 for a, b in pairs)
        assert sum(len(a) != len(b) for a, b in pairs) > len(pairs) / 2  # mostly one apart
        assert max(max(len(a), len(b)) for a, b in pairs) <= 10
        if op == "sub":
            assert all(int(a) >= int(b) for a, b in pairs)
        for sample in samples[:20]:
            a, b = int(sample["meta"]["a"]), int(sample["meta"]["b"])
            machine_run = run(op, a, b)
            if kind == "aligner":  # the start text from the expression, or the expression and answer from the halt
                assert (sample["prompt"], sample["completion"]) in (
                    (expression(op, a, b), machine_run.start_text()),
                    (machine_run.text(-1), expression(op, a, b) + solve(op, a, b)))
            else:
                assert machine_run.transition(sample["meta"]["step"]) == (sample["prompt"], sample["completion"])


def test_run_lengths_draw_divs_typed_runs_with_the_papers_quotients_half_at_a_callees_halt():
    from itertools import groupby

    from caef_bench.machines import run
    from caef_bench.train.sources import MachineSource

    def a_typed_run(number: str) -> bool:
        return len(list(groupby(number[1:]))) <= 1

    samples = MachineSource([("executor", "div")], max_len=10, seed=0, mix={"run_lengths": 1.0}).batch(0, 200)
    pairs = [(s["meta"]["a"], s["meta"]["b"]) for s in samples]
    assert all(a_typed_run(a) and a_typed_run(b) and len(a) - len(b) in (0, 1) for a, b in pairs)
    assert all(int(a) // int(b) <= 15 for a, b in pairs) and sum(int(a) // int(b) >= 10 for a, b in pairs) > 5
    assert max(len(b) for _, b in pairs) == 10
    at_halts = 0
    for sample in samples:
        machine_run = run("div", int(sample["meta"]["a"]), int(sample["meta"]["b"]))
        assert machine_run.transition(sample["meta"]["step"]) == (sample["prompt"], sample["completion"])
        at_halts += sample["meta"]["step"] in {step for step, _ in machine_run.calls()}
    assert at_halts / len(samples) > 0.5  # half drawn there, and most of DIV's other steps read one too
    aligned = MachineSource([("aligner", "div")], max_len=10, seed=0, mix={"run_lengths": 1.0}).batch(0, 50)
    assert all(s["meta"]["run_lengths"] and int(s["meta"]["a"]) // int(s["meta"]["b"]) <= 15 for s in aligned)


def test_run_lengths_pass_over_mul_and_change_no_draw_at_zero():
    from caef_bench.train import mix
    from caef_bench.train.sources import MachineSource

    assert "run_lengths" not in mix.applying("aligner", "mul", {"run_lengths": 0.3})
    assert MachineSource([("aligner", "gt")], max_len=10, seed=0, mix={"run_lengths": 0.0, "structured": 0.5}).batch(2, 8) \
        == MachineSource([("aligner", "gt")], max_len=10, seed=0, mix={"structured": 0.5}).batch(2, 8)


def test_sub_results_draw_subs_last_step_on_differences_of_every_length():
    from collections import Counter

    from caef_bench.machines import run
    from caef_bench.train import mix
    from caef_bench.train.sources import MachineSource

    samples = MachineSource([("executor", "sub")], max_len=10, seed=3, mix={"sub_results": 1.0}).batch(0, 400)
    pairs = [(int(s["meta"]["a"]), int(s["meta"]["b"])) for s in samples]
    assert all(s["meta"]["sub_results"] for s in samples) and all(a >= b for a, b in pairs)
    for sample, (a, b) in zip(samples[:30], pairs):  # the halt step: LEFT_MASK's result copied
        machine_run = run("sub", a, b)
        assert (sample["prompt"], sample["completion"]) == machine_run.transition(len(machine_run) - 1)
        assert sample["completion"].startswith("SUB, qH")
    sizes = Counter(len(str(a - b)) for a, b in pairs if len(str(a)) == 10)
    assert set(sizes) == set(range(1, 11)) and min(sizes.values()) >= 5  # short differences of a long a too
    assert "sub_results" not in mix.applying("executor", "add", {"sub_results": 0.3})


def test_div_runs_draw_div_on_divisors_with_an_inner_run_and_its_calls():
    import random
    import re

    from caef_bench.machines import run
    from caef_bench.train import mix
    from caef_bench.data.structured import inner_run
    from caef_bench.train.sources import MachineSource

    rng = random.Random(0)
    for n in range(4, 11):
        for _ in range(50):
            digits = inner_run(rng, n)
            assert len(digits) == n and digits[0] != "0"
            assert re.search(r"(\d)\1\1", digits)  # a run of 3 or more
    samples = MachineSource([("executor", "div")], max_len=10, seed=5, mix={"div_runs": 1.0}).batch(0, 300)
    assert all(s["meta"]["div_runs"] for s in samples)
    returns = 0
    for sample in samples:
        a, b = int(sample["meta"]["a"]), int(sample["meta"]["b"])
        machine_run = run("div", a, b)
        assert machine_run.transition(sample["meta"]["step"]) == (sample["prompt"], sample["completion"])
        returns += sample["meta"]["step"] in [step for step, _ in machine_run.calls()]
    assert returns >= 120  # about half the draws read a callee's halt
    calls = MachineSource([("executor", "gt")], max_len=10, seed=5, mix={"div_runs": 1.0}).batch(0, 50)
    assert all(s["meta"]["caller"] == "div" and s["prompt"].startswith("GREATER_THAN") for s in calls)
    assert "div_runs" not in mix.applying("executor", "sub", {"div_runs": 0.3})


def test_low_nines_draw_sub_on_an_a_or_b_ending_in_nines_half_at_its_call_of_reflection():
    from caef_bench.machines import run
    from caef_bench.train.sources import MachineSource

    samples = MachineSource([("executor", "sub")], max_len=10, seed=7, mix={"low_nines": 1.0}).batch(0, 300)
    calls = ends_a = 0
    for sample in samples:
        a, b = int(sample["meta"]["a"]), int(sample["meta"]["b"])
        assert sample["meta"]["low_nines"] and 9 in (a % 10, b % 10) and 0 <= b <= a
        assert run("sub", a, b).transition(sample["meta"]["step"]) == (sample["prompt"], sample["completion"])
        calls += sample["meta"]["step"] == 0 and "REFLECTION, q0, [HEAD1] |9" in sample["completion"]
        ends_a += a % 10 == 9
    assert 130 <= calls <= 230 and 110 <= ends_a <= 230  # half at the call, and the protocol's edge steps
    nines = {len(s["meta"]["a"]) - len(s["meta"]["a"].rstrip("9")) for s in samples}
    assert {1, 5, 9, 10} <= nines


def test_near_rounds_draw_a_round_number_less_a_small_d_half_at_subs_second_call_of_add():
    from caef_bench.machines import run
    from caef_bench.train import mix
    from caef_bench.train.sources import MachineSource

    samples = MachineSource([("executor", "sub")], max_len=10, seed=11, mix={"near_rounds": 1.0}).batch(0, 300)
    second_adds = 0
    for sample in samples:
        a, b = int(sample["meta"]["a"]), int(sample["meta"]["b"])
        assert sample["meta"]["near_rounds"] and 0 <= b < a and len(set(str(a)[1:])) <= 1
        assert a - b <= 10 ** max(1, len(str(a)) // 2)
        assert run("sub", a, b).transition(sample["meta"]["step"]) == (sample["prompt"], sample["completion"])
        # the second call's first tape: the first call's sum a + REFLECTION(b), a top 1 one cell past a's top
        first_sum = a + 10 ** len(str(a)) - 1 - b
        tape = "|" + "|".join(reversed(str(first_sum)))
        second_adds += f"[CALL] ADD, q4\nADD, q0, [HEAD1] {tape}[HEAD2]" in sample["completion"]
    assert 120 <= second_adds <= 220
    assert sum(s["meta"]["a"].endswith("00000") for s in samples) >= 30  # round numbers among them
    assert "near_rounds" not in mix.applying("executor", "add", {"near_rounds": 0.3})
