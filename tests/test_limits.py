"""Operands beyond what a tier was built for are refused at the edge, with the tier and the limit."""

import pytest
from lm_eval.api.instance import Instance

from caef_bench.cli import main
from caef_bench.data.testsets import load_cell, long_cells, repeated_cells, table1_cells
from caef_bench.evaluate.lm_eval_models import CaefLM
from caef_bench.models.limits import TIER_LIMITS, BeyondTierError, check_supported


@pytest.mark.parametrize("expr", ["1" * 100 + "+" + "9" * 100 + "=", "9999999999*15=", "149999999985//9999999999=",
                                  "5" * 100 + "==" + "5" * 100 + "="])
def test_the_protocols_largest_operands_are_supported(expr):
    check_supported("tiny", expr)


@pytest.mark.parametrize("expr, named", [
    ("3" * 1001 + "-1=", "sub operands of at most 1000 digits run a window at a time (got 1001)"),
    ("1" + "<" + "2" * 1001 + "=", "lt operands of at most 1000 digits run a window at a time (got 1001)"),
    ("1" * 1200 + "+1=", "add operands of at most 1000 digits run a window at a time (got 1200)"),
    ("12345678901*3=", "at most 10 digits"),
    ("5*16=", "b at most 15"),
    ("1000//7=", "quotient at most 15 (got a divisor of 1 digit and quotient 142)"),
])
def test_operands_beyond_the_tier_name_the_limit(expr, named):
    with pytest.raises(BeyondTierError, match="the tiny tier supports") as error:
        check_supported("tiny", expr)
    assert named in str(error.value)


def test_a_1001_digit_subtraction_exits_2_before_any_model_is_loaded(capsys, tmp_path):
    # The checkpoints folder does not exist: the limit, not a missing model, is what stops it.
    code = main(["solve", "2" * 1001 + "-" + "1" * 1001 + "=", "--checkpoints", str(tmp_path / "nowhere")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "the tiny tier supports sub operands of at most 1000 digits run a window at a time (got 1001)" in err
    assert "the longest windowed runs measured (results/long_operands.md)" in err


def test_the_long_cells_are_within_the_tiny_tier_windowed():
    for cell in table1_cells() + repeated_cells():
        for problem in load_cell(cell):
            check_supported("tiny", problem["expr"])
    for cell in long_cells():  # 200 to 1,000 digits: every length operator runs windowed, sub too
        for problem in load_cell(cell)[:3]:
            check_supported("tiny", problem["expr"])


def test_a_pasted_1001_digit_subtraction_is_one_line_naming_the_limit(capsys):
    a, b = "7" + load_cell("sub_1000")[0]["a"], load_cell("sub_1000")[0]["b"]
    assert main(["solve", f"{a} - {b}"]) == 2  # as a person pastes it: spaces, no '='
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "unparseable" not in err
    assert "the tiny tier supports sub operands of at most 1000 digits run a window at a time (got 1001)" in err
    assert len(err) < 700  # the expression is shortened, not printed whole


def test_every_tier_has_limits():
    from caef_bench.models.loading import TIERS

    assert set(TIERS) == set(TIER_LIMITS)


class NeverCalled:
    fingerprint = "none"

    def generate(self, prompts, adapter):
        raise AssertionError("a model call was made for an expression the tier cannot run")


def test_the_caef_lm_eval_model_refuses_before_solving_anything():
    model = CaefLM(step_model=NeverCalled())
    requests = [Instance("generate_until", {}, (context, {"until": ["\n"]}), idx=i)
                for i, context in enumerate(["45+67=", "3" * 1020 + "-1="])]
    with pytest.raises(BeyondTierError, match="at most 1000 digits"):
        model.generate_until(requests)


@pytest.mark.parametrize("argv, message", [
    (["solve", "45+67=", "--tier", "gpt-7"], "unknown tier 'gpt-7'"),
    (["solve", "45^67="], "unknown operator"),
])
def test_unknown_tier_and_operator_are_one_line_exit_2(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


@pytest.mark.parametrize("expr, named", [
    ("1" * 5000 + "+1=", "the tiny tier supports add operands of at most 1000 digits run a window at a time (got 5000)"),
    ("1 - " + "2" * 5000, "the tiny tier supports sub operands of at most 1000 digits run a window at a time (got 5000)"),
    ("9" * 4400 + "//7=", "the tiny tier supports div operands of at most 12 digits (got 4400)"),
])
def test_operands_longer_than_python_reads_name_the_tiers_limit(capsys, expr, named):
    assert main(["solve", expr]) == 2
    err = capsys.readouterr().err
    assert named in err and err.count("\n") == 1
    assert "Exceeds the limit" not in err and "Traceback" not in err


def test_the_caef_lm_eval_model_refuses_a_5000_digit_operand_by_the_tiers_limit():
    model = CaefLM(step_model=NeverCalled())
    requests = [Instance("generate_until", {}, ("5" * 5000 + "==5=", {"until": ["\n"]}), idx=0)]
    with pytest.raises(BeyondTierError, match="at most 1000 digits run a window at a time"):
        model.generate_until(requests)


def test_smollm2_runs_whole_states_to_its_trained_10_digits_and_add_and_comparisons_windowed_past_them():
    tier = "smollm2-135m"
    for expr in ["9999999999-1=", "1234567890*15=", "6" * 100 + "+" + "7" * 100 + "=", "1" * 60 + ">" + "2" * 59 + "="]:
        check_supported(tier, expr)
    for expr, named in [("1" * 11 + "-1=", "sub operands of at most 10 digits (got 11)"),
                        ("1" * 11 + "==1=", None), ("1" * 101 + "+1=", "add operands of at most 100 digits run a "
                                                                         "window at a time (got 101)")]:
        if named is None:
            check_supported(tier, expr)
            continue
        with pytest.raises(BeyondTierError, match="the smollm2-135m tier supports") as error:
            check_supported(tier, expr)
        assert named in str(error.value)


def test_the_caef_lm_eval_model_says_in_its_results_config_how_it_runs_long_operands():
    info = CaefLM(tier="smollm2-135m", step_model=NeverCalled()).get_model_info()
    assert info["caef_tier"] == "smollm2-135m" and info["caef_weights"] == "none"
    assert info["caef_windowing"] == {"ops": ["add", "gt", "lt", "eq"], "past_digits": 10, "width": 10, "back": 4,
                                      "chunk": 9, "up_to_digits": TIER_LIMITS["smollm2-135m"].windowed_digits,
                                      "measured_to": "results/table1.md"}
    assert CaefLM(tier="llama-3.1-8b", step_model=NeverCalled()).get_model_info()["caef_windowing"] is None


def test_a_measurement_run_past_the_longest_windowed_length_says_so_and_still_refuses_the_rest():
    model = CaefLM(tier="smollm2-135m", step_model=NeverCalled(), windowed_digits=100)
    assert model.get_model_info()["caef_windowing"]["up_to_digits"] == 100
    assert "measurement run" in model.get_model_info()["caef_windowing"]["measured_to"]
    for context, named in [("1" * 101 + "+1=", "add operands of at most 100 digits"),
                           ("1" * 11 + "-1=", "sub operands of at most 10 digits")]:  # sub is not windowed there
        request = Instance("generate_until", {}, (context, {"until": ["\n"]}), idx=0)
        with pytest.raises(BeyondTierError, match=named):
            model.generate_until([request])
    with pytest.raises(ValueError, match="runs nothing a window at a time"):
        CaefLM(tier="llama-3.1-8b", step_model=NeverCalled(), windowed_digits=100)
