"""An operator whose adapters a tier lacks is refused in one line that names them and says how to train
them, before any model runs: on `solve`, `run`, `serve` and the `caef` lm-eval model, on every tier."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from caef_bench.models import loading
from caef_bench.models.limits import MissingAdaptersError, check_adapters, train_command
from caef_bench.models.names import operator_adapters
from caef_bench.paths import TINY_CHECKPOINTS
from caef_bench.runtime.oracle import OracleModel


class PartialOracle(OracleModel):
    """The machines' oracle, standing for a tier that has only some adapters."""

    def __init__(self, adapters):
        super().__init__()
        self.available_adapters = frozenset(adapters)


def _no_model_may_load(monkeypatch):
    def refuse(*_args, **_kwargs):
        raise AssertionError("a model was loaded for an operator the tier cannot run")

    monkeypatch.setattr(loading, "load_base", refuse)


def _error_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1, captured.err  # one line, no traceback
    return lines[0]


def test_each_operator_calls_its_aligner_its_executor_and_its_composers_callees():
    assert operator_adapters("add") == ("aligner_add", "executor_add")
    assert operator_adapters("gt") == ("aligner_gt", "executor_gt")
    assert operator_adapters("sub") == ("aligner_sub", "executor_sub", "executor_reflection", "executor_add",
                                        "executor_left_mask")
    assert set(operator_adapters("mul")) == {"aligner_mul", "executor_mul", "executor_lt", "executor_add"}
    assert set(operator_adapters("div")) == {"aligner_div", "executor_div", "executor_gt", "executor_add"}


def test_the_message_names_every_missing_adapter_and_the_command_that_trains_them(tmp_path):
    with pytest.raises(MissingAdaptersError) as raised:
        check_adapters("smollm2-135m", ["sub"], {"executor_add", "aligner_add"}, tmp_path / "adapters")
    message = str(raised.value)
    assert "\n" not in message
    assert "aligner_sub, executor_sub, executor_reflection, executor_left_mask" in message
    assert ("caef-bench train --preset smollm2 --base smollm2-135m --out " + str(tmp_path / "adapters") +
            " --executors sub,reflection,left_mask --aligners sub") in message
    check_adapters("smollm2-135m", ["add"], {"executor_add", "aligner_add"})  # has them: nothing to say
    check_adapters("tiny", ["sub"], None)  # a bare base answers every call itself
    assert train_command("tiny", None, ["executor_mul"]) == "caef-bench train --preset tiny --executors mul"
    with pytest.raises(MissingAdaptersError, match="the server at http://h:1/v1 serves no executor_gt, which gt"):
        check_adapters("tiny", ["gt"], {"aligner_gt"}, server="http://h:1/v1")


def test_solve_on_smollm2_without_adapters_fails_in_one_line_before_any_model_loads(tmp_path, monkeypatch, capsys):
    """The issue's case: `solve --tier smollm2-135m "12+34="` ran the bare base in aligner_add's place."""
    from caef_bench.cli import main
    from caef_bench.models import smollm2

    monkeypatch.setattr(smollm2, "converted_dir", lambda convert=True: tmp_path / "base")  # no conversion needed
    monkeypatch.setattr(loading, "SMOLLM2_CHECKPOINTS", tmp_path / "checkpoints" / "smollm2-135m")
    _no_model_may_load(monkeypatch)
    assert main(["solve", "--tier", "smollm2-135m", "12+34="]) == 2
    line = _error_line(capsys)
    assert "smollm2-135m tier has no aligner_add, executor_add" in line
    assert "caef-bench train --preset smollm2 --base smollm2-135m" in line and "--executors add --aligners add" in line


def _tiny_without(tmp_path: Path, *missing: str) -> Path:
    """checkpoints/tiny as links, less the adapter folders named (executors/mul, ...)."""
    folder = tmp_path / "tiny"
    for kind in ("executors", "aligners"):
        (folder / kind).mkdir(parents=True)
        for adapter in (TINY_CHECKPOINTS / kind).iterdir():
            if f"{kind}/{adapter.name}" not in missing:
                os.symlink(adapter, folder / kind / adapter.name)
    os.symlink(TINY_CHECKPOINTS / "base", folder / "base")
    return folder


def test_solve_and_run_on_the_tiny_tier_refuse_an_operator_it_lacks(tmp_path, monkeypatch, capsys):
    from caef_bench.cli import main

    checkpoints = _tiny_without(tmp_path, "executors/mul")
    _no_model_may_load(monkeypatch)
    assert main(["solve", "--checkpoints", str(checkpoints), "123*12="]) == 2
    line = _error_line(capsys)
    assert "the tiny tier has no executor_mul in" in line and "which mul needs" in line
    assert f"caef-bench train --preset tiny --out {checkpoints} --executors mul`" in line
    assert main(["run", "--suite", "caef", "--checkpoints", str(checkpoints), "--cells", "add_5,mul_1_10",
                 "--limit", "1", "--out", str(tmp_path / "out"), "--records", str(tmp_path / "records")]) == 2
    assert "has no executor_mul in" in _error_line(capsys)
    assert not (tmp_path / "out").exists() and not (tmp_path / "records").exists()


def test_the_caef_lm_eval_model_refuses_an_operator_its_tier_lacks():
    from caef_bench.evaluate.lm_eval_models import CaefLM

    class Request:
        def __init__(self, context):
            self.args = (context, {"until": []})

    model = CaefLM(tier="smollm2-135m", step_model=PartialOracle(operator_adapters("add")))
    assert model.generate_until([Request("12+34=")]) == ["46"]
    with pytest.raises(MissingAdaptersError, match="no aligner_gt, executor_gt"):
        model.generate_until([Request("12+34="), Request("5>3=")])


def test_the_server_answers_an_operator_it_lacks_with_a_400_naming_the_adapters():
    from fastapi.testclient import TestClient

    from caef_bench.serve.app import create_app

    with TestClient(create_app(PartialOracle(operator_adapters("add")), "smollm2-135m")) as client:
        reply = client.post("/v1/completions", json={"model": "caef-smollm2-135m", "prompt": "12+34="})
        assert reply.status_code == 200 and reply.json()["choices"][0]["text"] == "46"
        reply = client.post("/v1/completions", json={"model": "caef-smollm2-135m", "prompt": "99>98="})
        assert reply.status_code == 400
        message = reply.json()["error"]["message"]
        assert "smollm2-135m tier has no aligner_gt, executor_gt" in message and "\n" not in message
        reply = client.post("/v1/chat/completions", json={"model": "caef-smollm2-135m",
                                                          "messages": [{"role": "user", "content": "7*3="}]})
        assert reply.status_code == 400 and "aligner_mul, executor_mul" in reply.json()["error"]["message"]


def test_an_endpoint_names_the_adapters_its_server_lists(monkeypatch):
    from caef_bench.runtime.backends import check_operators
    from caef_bench.runtime.endpoint import EndpointStepModel

    model = EndpointStepModel("http://127.0.0.1:9/v1")
    listing = {"caef-tiny": {}, "aligner_add": {}, "executor_add": {}}
    monkeypatch.setattr(model, "models", lambda: listing)
    assert model.available_adapters == {"aligner_add", "executor_add"}
    check_operators(model, "tiny", ["add"])
    with pytest.raises(MissingAdaptersError, match="the server at http://127.0.0.1:9/v1 serves no aligner_eq"):
        check_operators(model, "tiny", ["eq"])
    monkeypatch.setattr(model, "models", lambda: {})  # a server that lists nothing: nothing to check
    check_operators(model, "tiny", ["eq"])


def test_the_smollm2_tier_looks_for_its_shipped_adapters_and_none_asks_for_the_bare_base(tmp_path, monkeypatch):
    from caef_bench.models import smollm2

    monkeypatch.setattr(smollm2, "converted_dir", lambda convert=True: tmp_path / "base")
    assert loading.get_tier("smollm2-135m").adapters == loading.SMOLLM2_CHECKPOINTS
    bare = loading.get_tier("smollm2-135m", adapters=None)
    assert bare.adapters is None and loading.available_adapters(bare) is None
    assert loading.available_adapters(loading.get_tier("smollm2-135m", adapters=tmp_path / "none")) == frozenset()
    found = loading.available_adapters(loading.get_tier("tiny", adapters=_tiny_without(tmp_path, "aligners/add")))
    assert found == ({f"executor_{op}" for op in ("add", "sub", "mul", "div", "gt", "lt", "eq", "reflection", "left_mask")}
                     | {f"aligner_{op}" for op in ("sub", "mul", "div", "gt", "lt", "eq")})
