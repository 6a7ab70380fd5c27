"""lab/diagnosis/typed_problems.py: direct adapters asked what a person would type, each answer computed."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("typed_problems", ROOT / "lab/diagnosis/typed_problems.py")
TYPED = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(TYPED)


class _Answers:
    """A stand-in for evaluate.direct.DirectModel: replies with the answer, but wrongly where told."""

    def __init__(self, wrong: dict[str, str]):
        self.wrong, self.asked = wrong, []

    def ask(self, op, exprs, answers):
        self.asked.append(op)
        return [f" {self.wrong.get(expr, answer)}\n" for expr, answer in zip(exprs, answers)]


def test_each_problem_is_scored_against_its_computed_answer_by_the_benchmarks_rule():
    model = _Answers({"10000-1=": "999", "99999<100000=": "False"})
    rows = TYPED.ask(model, ["sub", "lt"])
    assert model.asked == ["sub", "lt"] and {row["op"] for row in rows} == {"sub", "lt"}
    by_problem = {row["problem"]: row for row in rows}
    assert by_problem["10000-1="]["answer"] == "9999" and not by_problem["10000-1="]["right"]
    assert by_problem["99999-99999="]["answer"] == "0" and by_problem["99999-99999="]["right"]
    assert by_problem["99999<100000="]["answer"] == "True" and not by_problem["99999<100000="]["right"]
    assert sum(row["right"] for row in rows) == len(rows) - 2


def test_the_problems_are_what_a_person_types_not_the_test_sets_draws():
    kinds = {(op, kind) for op, _, _, kind in TYPED.TYPED}
    assert ("add", "runs of 9s, two lengths") in kinds and ("sub", "equal operands: zero") in kinds
    assert any(len(str(a)) != len(str(b)) for op, a, b, _ in TYPED.TYPED if op in ("add", "sub", "gt", "lt"))
