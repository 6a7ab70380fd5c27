"""Expressions as people type them: blanks around the operator and the '=', a missing '=',
read as the template by `solve`, `serve` (completions and chat) and the `caef` lm-eval model, which echo
the expression they solved; what has no plain meaning stays a one-line error."""

import pytest

from caef_bench.machines import parse_expression, typed_expression
from caef_bench.runtime.oracle import OracleModel
from caef_bench.serve.app import create_app
from serving import uvicorn_thread


@pytest.mark.parametrize("typed, template", [
    ("12 + 34", "12+34="),
    ("12+34", "12+34="),
    ("12+34=", "12+34="),
    (" 7 < 7 ", "7<7="),
    ("12 + 34 = ", "12+34="),
    ("\t99 // 7\n", "99//7="),
    ("45 == 67", "45==67="),
    ("45==67", "45==67="),
    ("1000000*7", "1000000*7="),
])
def test_what_a_person_types_is_read_as_the_template(typed, template):
    assert typed_expression(typed) == template
    assert str(parse_expression(typed_expression(typed))) == template


@pytest.mark.parametrize("typed, reason", [
    ("abc+1", "operand 'abc' is not a non-negative integer"),
    ("4 5+6", "spaces are not allowed inside a number"),
    ("12+34=46", "without an answer after it"),
    ("12 + 34 = 46", "without an answer after it"),
    ("-5 + 3", "signed operands"),
    ("45 % 6", "unknown operator '%'"),
    ("", "empty expression"),
    ("   ", "empty expression"),
    ("45", "missing operator"),
])
def test_what_has_no_plain_meaning_stays_an_error(typed, reason):
    with pytest.raises(ValueError, match=reason):
        parse_expression(typed_expression(typed))


def test_the_strict_template_reader_is_unchanged():
    """The machines read model outputs and test sets by the exact template: nothing is mended there."""
    for text in ("12 + 34=", "12+34"):
        with pytest.raises(ValueError):
            parse_expression(text)


def test_the_tier_check_takes_typed_input_and_gives_the_template():
    from caef_bench.models.limits import BeyondTierError, check_supported

    assert check_supported("tiny", " 12 + 34 ") == "12+34="
    with pytest.raises(BeyondTierError, match="at most 10 digits"):
        check_supported("tiny", "12345678901 * 3")


@pytest.mark.parametrize("typed, printed", [("12 + 34", "12+34=46"), ("12+34", "12+34=46"), (" 7 < 7 ", "7<7=False")])
def test_solve_prints_the_expression_it_solved(typed, printed, capsys):
    from caef_bench.cli import main

    with uvicorn_thread(create_app(OracleModel(), "tiny")) as base:
        assert main(["solve", typed, "--backend", "openai", "--base-url", base + "/v1"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == printed


def test_solve_refuses_what_it_cannot_read_in_one_line(capsys):
    from caef_bench.cli import main

    assert main(["solve", "abc+1"]) == 2  # refused before any model is loaded
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "operand 'abc' is not a non-negative integer" in err


def test_serve_answers_typed_prompts_and_chat_questions():
    from fastapi.testclient import TestClient

    with TestClient(create_app(OracleModel(), "tiny")) as client:
        reply = client.post("/v1/completions", json={"model": "caef-tiny", "prompt": ["12 + 34", " 7 < 7 ", "99//7"]})
        assert [c["text"] for c in reply.json()["choices"]] == ["46", "False", "14"]
        chat = client.post("/v1/chat/completions", json={"model": "caef-tiny",
                                                         "messages": [{"role": "user", "content": "What is 12 + 34?"}]})
        assert chat.json()["choices"][0]["message"]["content"] == "12+34=46\nAnswer: 46"
        bad = client.post("/v1/completions", json={"model": "caef-tiny", "prompt": "4 5+6"})
        assert bad.status_code == 400 and "spaces are not allowed inside a number" in bad.json()["error"]["message"]


def test_the_caef_lm_eval_model_reads_typed_contexts(tmp_path):
    from lm_eval.api.instance import Instance

    from caef_bench.evaluate.lm_eval_models import CaefLM, problem_id

    model = CaefLM(step_model=OracleModel(), records=str(tmp_path))
    requests = [Instance("generate_until", {}, (context, {"until": ["\n"]}), idx=i)
                for i, context in enumerate(["12 + 34", "12+34=", "4 5+6"])]
    assert model.generate_until(requests) == ["46", "46", ""]
    assert problem_id("12+34=") in model.records.read_text()  # recorded under the template's id
