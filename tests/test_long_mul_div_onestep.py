"""One-step cells of the long route's adapters (evaluate.onestep.LONG_ROUTE_CELLS; docs/long-mul-div.md): at the
long test cells' lengths, the machines' own transitions and conversions, and what training records after
training them."""

import json

import pytest

from caef_bench.data.testsets import load_cell
from caef_bench.evaluate.onestep import (LONG_ROUTE_CELLS, _score_cells, aligner_cases, cell_digits, cells_for,
                                         executor_cases, one_step_check)
from caef_bench.machines import next_text, parse


class CharCodec:
    """A codec whose tokens are characters: enough to bound the cases' completions."""

    def completion_ids(self, text):
        return list(text) + [0]


def test_the_long_adapters_cells_are_the_long_test_cells():
    for kind, op, cells in [("executor", "long_mul", ["mul_20x20", "mul_50x50"]),
                            ("aligner", "long_mul", ["mul_20x20", "mul_50x50"]),
                            ("executor", "digit_mul", ["mul_20x20", "mul_50x50"]),
                            ("executor", "long_div", ["div_40by20", "div_100by10"]),
                            ("aligner", "long_div", ["div_40by20", "div_100by10"])]:
        assert cells_for(op, kind) == cells == cells_for(op, kind, structured=True), (kind, op)
    assert [cell_digits(c) for c in ("mul_20x20", "mul_50x50", "div_40by20", "div_100by10")] == [20, 50, 40, 100]
    assert [cell_digits(c) for c in ("add_5", "sub9_100", "struct_10", "mul_1_10")] == [5, 100, 10, 10]  # as before
    assert cells_for("mul") == ["mul_1_10"] and cells_for("add")[:4] == ["add_5", "add_10", "add_50", "add_100"]


@pytest.mark.parametrize("op, cell", [(op, cell) for op, cells in LONG_ROUTE_CELLS.items() for cell in cells])
def test_executor_cases_are_the_machines_steps_on_the_cells_problems(op, cell):
    cases = executor_cases(op, cell, 4, seed=0)
    assert len(cases) == 4 and cases == executor_cases(op, cell, 4, seed=0)  # seeded
    machine = {"long_mul": "LONG_MUL", "long_div": "LONG_DIV", "digit_mul": "DIGIT_MUL"}[op]
    rows = load_cell(cell)
    a_digits = len(rows[0]["a"])
    for prompt, target in cases:
        assert prompt.startswith(machine + ", ") and target.startswith(machine + ", ")
        assert next_text("executor", op, prompt) == target
        a_cells = parse(prompt).state.tapes[0].digits if op == "digit_mul" else None
        if a_cells is not None:  # DIGIT_MUL's a is the problem's a: 20 or 50 digits, times one digit
            assert len(a_cells) == a_digits
    # every step of the drawn problems (or, for DIGIT_MUL, of a drawn call): more cases, the same machines
    every = executor_cases(op, cell, 2, seed=0, every_step=True)
    assert len(every) > 2 and all(next_text("executor", op, p) == t for p, t in every)


@pytest.mark.parametrize("op, cell", [("long_mul", "mul_20x20"), ("long_mul", "mul_50x50"),
                                      ("long_div", "div_40by20"), ("long_div", "div_100by10")])
def test_aligner_cases_convert_the_cells_expressions_to_the_long_machines_and_back(op, cell):
    cases = aligner_cases(op, cell, 4, seed=0)
    answers = {row["expr"]: row["answer"] for row in load_cell(cell)}
    machine = {"long_mul": "LONG_MUL", "long_div": "LONG_DIV"}[op]
    for index, (prompt, target) in enumerate(cases):
        assert next_text("aligner", op, prompt) == target
        if index % 2 == 0:  # (I): the test cell's expression to the long machine's start
            assert prompt in answers and target.startswith(machine + ", q0")
        else:  # (O): its halt to the expression with the cell's answer
            expr, _, answer = target.partition("=")
            assert prompt.startswith(machine + ", qH") and answers[expr + "="] == answer


def test_a_right_model_scores_every_long_cell_and_max_len_keeps_the_trained_lengths():
    right = lambda prompts, limits, drafts: list(drafts)  # noqa: E731  (the expected texts: what the oracle writes)
    for kind, op in [("executor", "long_mul"), ("executor", "digit_mul"), ("executor", "long_div"),
                     ("aligner", "long_mul"), ("aligner", "long_div")]:
        scores = _score_cells(right, CharCodec(), kind, op, 3, 0, False)
        assert list(scores) == list(LONG_ROUTE_CELLS[op]) and all(s["accuracy"] == 1.0 and s["n"] == 3
                                                                   for s in scores.values()), (kind, op)
    assert list(_score_cells(right, CharCodec(), "executor", "long_div", 2, 0, False, max_len=50)) == ["div_40by20"]
    wrong = lambda prompts, limits, drafts: [d[:-1] for d in drafts]  # noqa: E731
    assert _score_cells(wrong, CharCodec(), "executor", "digit_mul", 2, 0, False)["mul_20x20"]["accuracy"] == 0.0


def test_training_a_long_adapter_records_its_one_step_accuracy(tmp_path):
    """The check training runs after each adapter (train.recipe): on the long cells within its max_len."""
    from caef_bench.models.tiny import TinyShape
    from caef_bench.train.recipe import TrainRequest, run_training

    micro = TinyShape(hidden=32, layers=2, heads=2, ffn=64, max_positions=8192)
    request = TrainRequest(preset="tiny", out=tmp_path, executors=("digit_mul",), aligners=(), direct=(),
                           overrides={"base_steps": 1, "base_batch": 2, "stage2_steps": 1, "stage2_batch": 2,
                                      "max_len": 20},
                           one_step_check=one_step_check(1, 0), progress=False, tiny_shape=micro)
    run_training(request)
    manifest = json.loads((tmp_path / "executors/digit_mul/manifest.json").read_text())
    accuracy = manifest["one_step_accuracy"]
    assert list(accuracy) == ["mul_20x20"] and accuracy["mul_20x20"]["n"] == 1  # 50x50 is past max_len 20
