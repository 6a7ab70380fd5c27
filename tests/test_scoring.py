"""Answer extraction and scoring edge cases."""

import math
import subprocess
import sys
from pathlib import Path

import pytest

from caef_bench.evaluate.scoring import (
    accuracy,
    exact_match,
    extract_answer,
    extract_chat_answer,
    extract_direct_answer,
    wilson_interval,
)


@pytest.mark.parametrize(
    "prediction, target, expected",
    [
        ("112", "112", True),
        ("  112\n", "112", True),
        ("0112", "112", False),  # padded answers are not the answer
        ("+112", "112", False),
        ("-112", "112", False),
        ("113", "112", False),
        ("", "0", False),
        (None, "112", False),
        ("True", "True", True),
        ("true", "True", True),
        ("TRUE", "True", True),
        (" false ", "False", True),
        ("False", "True", False),
        ("yes", "True", False),
    ],
)
def test_exact_match(prediction, target, expected):
    assert exact_match(prediction, target) is expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Answer: 80235", "80235"),
        ("Let me add.\n12345 + 67890 = 80235\nAnswer: 80235\n", "80235"),
        ("Answer: 1\nOn second thought...\nAnswer: 2", "2"),  # the last Answer line wins
        ("**Answer:** 1,234", "1234"),
        ("**Answer: 1,234,567.**", "1234567"),
        ("Answer: `42`.", "42"),
        ("### Final Answer: $\\boxed{99}$", "99"),
        ("answer:   7  ", "7"),
        ("Answer: -5", "-5"),  # kept so that it is scored wrong, not dropped
        ("Answer: \u22125", "-5"),
        ("Answer: 12345+67890=80235", "80235"),  # restated expression
        ("Answer: 80235\nHope this helps!", "80235"),
        ("The result is 80235.", None),  # no Answer line
        ("Answer: I cannot compute this.", None),
        ("", None),
    ],
)
def test_extract_chat_answer_arithmetic(text, expected):
    assert extract_chat_answer(text, "add") == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The expression is true.", "True"),
        ("TRUE", "True"),
        ("false", "False"),
        ("Is it true? Comparing digit by digit, it is false.", "False"),  # last occurrence
        ("Answer: true\nAlthough one might think it is false.", "True"),  # Answer line preferred
        ("**Answer:** False", "False"),
        ("The statement is untrue", None),  # whole words only
        ("I am not sure.", None),
        # SmolLM2's replies: the verdict first, then a restatement that ends in the other word
        ("False. The expression is 82030==90040 is not a true statement.", "False"),
        ("True. 5>3 is a true statement, not a false one.", "True"),
        ("The expression 5>3 is not true.", "False"),  # negated
        ("12>30 is not a false statement", "True"),
        ("Is 12>3 true? Yes, 12 is greater than 3, so the expression is true.", "True"),
        ("Is it false? No: the expression is true.", "True"),  # the question is not the verdict
        ("`false`", "False"),
    ],
)
def test_extract_chat_answer_comparison(text, expected):
    assert extract_chat_answer(text, "gt") == expected


@pytest.mark.parametrize(
    "text, op, expected",
    [
        ("80235", "add", "80235"),
        (" 80235\nThe answer is 80235", "add", "80235"),
        ("\n\n80235.", "add", "80235"),
        ("80235 is the answer", "add", "80235"),
        ("-3", "sub", "-3"),
        ("1,024", "mul", "1024"),
        ("The answer is 5", "add", None),
        ("", "add", None),
        ("True", "eq", "True"),
        ("true.", "lt", "True"),
        ("FALSE\n", "gt", "False"),
        ("Truely", "gt", None),
        ("1", "eq", None),
    ],
)
def test_extract_direct_answer(text, op, expected):
    assert extract_direct_answer(text, op) == expected


def test_extract_answer_styles():
    assert extract_answer(" 112 ", "add", "bare") == "112"
    assert extract_answer("112 and more", "add", "bare") == "112 and more"  # bare is strict
    assert extract_answer("112 and more", "add", "direct") == "112"
    assert extract_answer("Sum.\nAnswer: 112", "add", "chat") == "112"
    with pytest.raises(ValueError, match="unknown prompt style"):
        extract_answer("112", "add", "fewshot")


def _wilson_closed_form(k, n, z=1.96):
    p = k / n
    center = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return center - half, center + half


def test_wilson_interval_known_values():
    low, high = wilson_interval(0, 10)
    assert low == pytest.approx(0.0, abs=1e-12) and high == pytest.approx(0.27754, abs=1e-5)
    low, high = wilson_interval(10, 10)
    assert low == pytest.approx(0.72246, abs=1e-5) and high == pytest.approx(1.0, abs=1e-12)
    low, high = wilson_interval(5, 10)
    assert (low, high) == pytest.approx((0.23659, 0.76341), abs=1e-5)
    for k, n in ((5, 10), (1, 3), (987, 1000), (13, 1000)):
        assert wilson_interval(k, n) == pytest.approx(_wilson_closed_form(k, n))
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError):
        wilson_interval(11, 10)


def test_accuracy():
    records = [{"correct": True}] * 3 + [{"correct": False}]
    result = accuracy(records)
    assert result["n"] == 4 and result["correct"] == 3 and result["accuracy"] == 0.75
    assert (result["ci_low"], result["ci_high"]) == wilson_interval(3, 4)
    assert accuracy([]) == {"n": 0, "correct": 0, "accuracy": 0.0, "ci_low": 0.0, "ci_high": 1.0}


def test_scoring_stays_import_light():
    code = "import sys, caef_bench.evaluate.scoring; print(sorted({'torch', 'transformers', 'numpy'} & set(sys.modules)))"
    repo_root = Path(__file__).resolve().parents[1]
    result = subprocess.run([sys.executable, "-c", code], cwd=repo_root, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_exact_trace_counts_only_right_answers_reached_without_a_wrong_step():
    from caef_bench.evaluate.suites import _exact_traces
    from caef_bench.report.tables import CAEF_METRICS, markdown_table
    from caef_bench.runtime import Divergence, ProblemRecord

    slip = Divergence(step=90, adapter="executor_gt", error_class="wrong_command", expected="a", got="b")
    records = [ProblemRecord("a", "2>1=", "traced", "True", "True", outcome="answered"),
               ProblemRecord("b", "2>1=", "traced", "True", "True", outcome="answered", first_divergence=slip),
               ProblemRecord("c", "1>2=", "traced", "False", "True", outcome="answered", first_divergence=slip)]
    exact = _exact_traces(records)
    assert (exact["n"], exact["accuracy"]) == (3, 1 / 3)
    table = markdown_table({"gt_5": {"end_to_end": exact, "exact trace": exact}}, CAEF_METRICS, "T", "h")
    assert "| Greater_than | exact trace, ours |" in table and "exact trace, paper" not in table


def test_onestep_table_lists_the_wrong_outputs_where_they_first_differ():
    from caef_bench.report.tables import first_difference, onestep_markdown

    expected = "SUB q5\n" + "|3" * 40 + "\nNo command to execute."
    got = "SUB q5\n" + "|3" * 40 + "|0\nNo command to execute."
    assert first_difference(expected, got, context=4) == ("…|3|3⏎No …", "…|3|3|0⏎N…")
    stats = {"n": 2, "correct": 1, "accuracy": 0.5, "ci_low": 0.1, "ci_high": 0.9,
             "failures": [{"prompt": "p", "expected": expected, "got": got}]}
    text = onestep_markdown({"executor_sub": {"sub_100": stats}}, "header")
    assert "### Wrong outputs" in text and "executor_sub, sub_100" in text and "|0⏎No command" in text
    clean = onestep_markdown({"executor_sub": {"sub_100": {**stats, "correct": 2, "accuracy": 1.0, "failures": []}}}, "h")
    assert "Wrong outputs" not in clean


@pytest.mark.parametrize("answer, target, right", [
    ("112", "112", True), ("0112", "112", False), (" 112", "112", True), ("+112", "112", False),
    ("1,120", "1120", False), ("112.", "112", False), ("true", "True", True), ("False", "True", False),
    ("", "0", False), (None, "5", False),
])
def test_caef_runs_and_the_lm_eval_tasks_score_an_answer_alike(answer, target, right):
    """One rule, the module docstring's: a CAEF record's answer and the same text through the bare lm-eval
    task's hook both get the verdict the rule gives (no padding, sign or separator; True/False in any case)."""
    import importlib.util

    from caef_bench.evaluate.scoring import is_correct
    from caef_bench.paths import TASKS_DIR
    from caef_bench.runtime import ProblemRecord

    spec = importlib.util.spec_from_file_location("caef_task_hooks", TASKS_DIR / "utils.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    op = "gt" if target in ("True", "False") else "add"
    record = ProblemRecord("p", "1>2=" if op == "gt" else "1+1=", "traced", target, answer,
                           outcome="answered" if answer is not None else "unparseable")
    task = hooks.process_results_bare({"op": op, "answer": target}, [answer or ""])
    assert is_correct(record) is right
    assert task["exact_match"] == float(right)
