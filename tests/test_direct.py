"""Baseline prompts are the protocol's strings, verbatim."""

from caef_bench.data.direct import chat_prompt, direct_prompt, direct_samples


def test_direct_prompt_arithmetic():
    assert direct_prompt("45+67=", "add") == (
        "Please calculate the expression.\n"
        "The expression is: 45+67=.\n"
        "The final answer should be presented in integer form!\n"
        "Your output should be an integer.\n"
        "The answer is: "
    )


def test_direct_prompt_comparison():
    assert direct_prompt("45==67=", "eq") == (
        "Please judge the expression is true or false.\n"
        "The expression is: 45==67=.\n"
        "The final answer should be True or False!\n"
        "Your output should be a word.\n"
        "The answer is: "
    )


def test_chat_prompts():
    assert chat_prompt("9//2=", "div") == (
        "Please calculate the expression. The expression is: 9//2=. The final answer should be presented "
        "in integer form. In your output, the final answer should be on its own line at the end, "
        "starting with 'Answer: '."
    )
    assert chat_prompt("3<4=", "lt") == (
        "Please judge the expression is true or false. The expression is 3<4=. "
        "The final answer that you give should be true or false."
    )


def test_direct_samples():
    problem = {"id": "gt_5-0000", "op": "gt", "a": "12345", "b": "54321", "expr": "12345>54321=", "answer": "False"}
    [sample] = direct_samples([problem])
    assert sample == {"prompt": direct_prompt("12345>54321=", "gt"), "completion": "False", "meta": problem}
