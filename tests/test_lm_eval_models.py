"""caef-bench's lm-eval models: CAEF behind generate_until (records, resume, lm-eval's request cache)
and the command that is lm-eval's own CLI with them registered."""

import json
import os
import subprocess
import sys
from pathlib import Path

from lm_eval.api.instance import Instance

from caef_bench.evaluate.lm_eval_models import CaefLM, _operator_of_direct_prompt, problem_id
from caef_bench.data.direct import direct_prompt
from caef_bench.runtime import load_records
from caef_bench.runtime.oracle import OracleModel

REPO = Path(__file__).resolve().parents[1]


def _requests(contexts):
    return [Instance("generate_until", {}, (context, {"until": ["\n"]}), idx=i) for i, context in enumerate(contexts)]


class _Hook:
    def __init__(self):
        self.added = []

    def add_partial(self, method, args, result):
        self.added.append((method, args, result))


def test_caef_answers_each_expression_and_hands_every_answer_to_lm_evals_cache(tmp_path):
    model = CaefLM(step_model=OracleModel(), records=str(tmp_path))
    model.cache_hook = _Hook()
    contexts = ["45+67=", "99-99=", "12>3=", "45+67=", "7*3=", "not an expression"]
    assert model.generate_until(_requests(contexts)) == ["112", "0", "True", "112", "21", ""]
    cached = {args[0]: answer for _, args, answer in model.cache_hook.added}
    assert cached == {"45+67=": "112", "99-99=": "0", "12>3=": "True", "7*3=": "21"}
    assert all(args[1] == {"until": ["\n"]} for _, args, _ in model.cache_hook.added)  # the request's own args


def test_a_rerun_reads_what_the_records_hold_and_solves_only_the_rest(tmp_path):
    first = CaefLM(step_model=OracleModel(), records=str(tmp_path))
    first.generate_until(_requests(["45+67=", "3-1="]))
    oracle = OracleModel()
    again = CaefLM(step_model=oracle, records=str(tmp_path))
    assert again.generate_until(_requests(["45+67=", "3-1=", "5+5="])) == ["112", "2", "10"]
    records = load_records(again.records)
    assert [r.id for r in records] == [problem_id(e) for e in ("45+67=", "3-1=", "5+5=")]  # each once
    assert {adapter for adapter, _ in oracle.calls} == {"aligner_add", "executor_add"}  # only 5+5= was solved


def test_the_direct_models_adapter_is_read_off_the_protocol_prompt():
    assert _operator_of_direct_prompt(direct_prompt("12==12=", "eq")) == "eq"
    assert _operator_of_direct_prompt(direct_prompt("12//5=", "div")) == "div"


def test_caef_bench_lm_eval_is_lm_evals_cli_with_caef_registered(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    run = subprocess.run([sys.executable, "-m", "caef_bench", "lm-eval", "--model", "caef", "--tasks", "caef_add_5",
                          "--limit", "3", "--output_path", str(tmp_path)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "|caef_add_5|" in run.stdout.replace(" ", "") and "exact_match" in run.stdout
    (results,) = tmp_path.rglob("results_*.json")
    report = json.loads(results.read_text())
    # the shipped tiny tier answers the first add_5 problems right (results/table1_caef.md: 200 of 200)
    assert report["results"]["caef_add_5"]["exact_match,none"] == 1.0
    assert report["n-samples"]["caef_add_5"]["effective"] == 3


class _FingerprintedOracle(OracleModel):
    """The oracle with adapter fingerprints, as a loaded tier has them."""

    fingerprint = "w1"

    def __init__(self, fingerprints):
        super().__init__()
        self.adapter_fingerprints = fingerprints


ADAPTERS_W1 = {"aligner_add": "a1", "executor_add": "e1"}


def _suite_records(tmp_path, name: str, target: str | None = None):
    """A suite's records of weights w1 (ADAPTERS_W1) under the root's <tier>-<weights>/ folder: the
    file `name` holding 45+67= solved by the machines, traced; its path."""
    from caef_bench.runtime import Problem, solve_to_file
    from caef_bench.runtime.reuse import write_weights

    suite = tmp_path / "records" / "tiny-w1"
    suite.mkdir(parents=True)
    write_weights(suite, "w1", ADAPTERS_W1)
    solve_to_file([Problem("add_5-0000", "45+67=", target)], OracleModel(), suite / name, mode="traced")
    return suite / name


def test_caef_answers_unchanged_adapters_calls_from_the_caef_suites_records(tmp_path):
    adapters = ADAPTERS_W1
    _suite_records(tmp_path, "caef_add_5.jsonl")

    # The executor changed since; the aligner did not: only the executor's calls are generated.
    model = _FingerprintedOracle({**adapters, "executor_add": "e2"})
    caef = CaefLM(step_model=model, records=str(tmp_path / "lm"), reuse_steps=str(tmp_path / "records"))
    assert caef.generate_until(_requests(["45+67="])) == ["112"]
    assert {adapter for adapter, _ in model.calls} == {"executor_add"}
    steps = load_records(caef.records)[0].steps
    assert [s.reused for s in steps if s.adapter == "aligner_add"] == [True, True]
    assert not any(s.reused for s in steps if s.adapter == "executor_add")


def test_caef_answers_from_the_caef_suites_packed_records_when_no_adapter_changed(tmp_path):
    """Records brought back from an accelerator hold no step texts (full_evaluation.py packs them): where
    every adapter of the cell is unchanged, the expression is answered with its record, nothing solved."""
    import json

    from caef_bench.runtime import reference_steps

    adapters = ADAPTERS_W1
    path = _suite_records(tmp_path, "caef_add_5.jsonl", "112")
    packed = [{**json.loads(line), "steps": []} for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps(record) + "\n" for record in packed))

    model = _FingerprintedOracle(adapters)
    caef = CaefLM(step_model=model, records=str(tmp_path / "lm"), reuse_steps=str(tmp_path / "records"))
    assert caef.generate_until(_requests(["45+67=", "12+34="])) == ["112", "46"]
    assert sum(n for _, n in model.calls) == len(list(reference_steps("12+34=")))  # 12+34= alone was solved
    by_expr = {record.expr: record for record in load_records(caef.records)}
    assert by_expr["45+67="].carried_from == "w1" and by_expr["45+67="].target is None
    assert by_expr["12+34="].carried_from is None and by_expr["12+34="].steps

    # an adapter of the cell changed: its record answers nothing, and 45+67= is solved
    changed = _FingerprintedOracle({**adapters, "executor_add": "e2"})
    again = CaefLM(step_model=changed, reuse_steps=str(tmp_path / "records"))
    assert again.generate_until(_requests(["45+67="])) == ["112"]
    assert "executor_add" in {adapter for adapter, _ in changed.calls}


def test_caef_without_records_to_reuse_generates_every_call(tmp_path, capsys):
    model = _FingerprintedOracle({"aligner_add": "a1", "executor_add": "e1"})
    caef = CaefLM(step_model=model, reuse_steps=str(tmp_path / "nothing-here"))
    assert caef.generate_until(_requests(["45+67="])) == ["112"]
    assert "no records to reuse" in capsys.readouterr().err
    assert {adapter for adapter, _ in model.calls} == {"aligner_add", "executor_add"}


def test_caef_answers_unchanged_adapters_calls_from_an_earlier_lm_eval_runs_records(tmp_path):
    """Its records folder names the weights and adapters it ran (weights.json), so a later run on weights
    where one adapter changed answers the others' calls from it, and says where they came from."""
    from caef_bench.runtime.reuse import read_weights

    adapters = {"aligner_add": "a1", "executor_add": "e1"}
    first = CaefLM(step_model=_FingerprintedOracle(adapters), records=str(tmp_path / "lm"), tier="tiny")
    assert first.generate_until(_requests(["45+67="])) == ["112"]
    assert read_weights(first.records.parent) == {"weights": "w1", "adapters": adapters, "reused_from": []}

    changed = _FingerprintedOracle({**adapters, "executor_add": "e2"})
    changed.fingerprint = "w2"
    again = CaefLM(step_model=changed, records=str(tmp_path / "lm"), reuse_steps=str(first.records.parent))
    assert again.records.parent != first.records.parent
    assert again.generate_until(_requests(["45+67="])) == ["112"]
    assert {adapter for adapter, _ in changed.calls} == {"executor_add"}
    assert read_weights(again.records.parent)["reused_from"] == [{"folder": str(first.records.parent),
                                                                  "weights": "w1"}]


def test_caef_never_answers_an_aligner_call_from_table2s_records_whose_aligners_are_the_machines(tmp_path):
    """Table 2 runs the executors alone, the machines standing in for the aligners: its records' aligner
    steps are exact whatever the adapter writes, so reusing them would hide the aligner's mistakes."""
    import json

    adapters = ADAPTERS_W1
    path = _suite_records(tmp_path, "table2_add_5.jsonl", "112")
    # mark the table's aligner steps, to see whether one is answered from it
    records = [json.loads(line) for line in path.read_text().splitlines()]
    for record in records:
        for step in record["steps"]:
            if step["adapter"] == "aligner_add":
                step["output"] = "MARKED " + step["output"]
    path.write_text("".join(json.dumps(record) + "\n" for record in records))

    model = _FingerprintedOracle(adapters)
    caef = CaefLM(step_model=model, records=str(tmp_path / "lm"), reuse_steps=str(tmp_path / "records"))
    assert caef.generate_until(_requests(["45+67="])) == ["112"]
    steps = load_records(caef.records)[0].steps
    assert [s.reused for s in steps if s.adapter == "aligner_add"] == [None, None]
    assert all(s.reused for s in steps if s.adapter == "executor_add")
    assert [adapter for adapter, _ in model.calls] == ["aligner_add", "aligner_add"]


def test_max_in_flight_solves_problems_a_few_at_a_time_so_records_grow_as_they_finish(tmp_path):
    oracle = OracleModel()
    model = CaefLM(step_model=oracle, records=str(tmp_path), max_in_flight="1")  # as lm-eval passes model_args
    assert model.generate_until(_requests(["45+67=", "12>3="])) == ["112", "True"]
    adapters = [adapter for adapter, _ in oracle.calls]
    last_add = max(i for i, adapter in enumerate(adapters) if adapter.endswith("_add"))
    assert all(not adapter.endswith("_add") for adapter in adapters[last_add + 1:])
    assert all(adapter.endswith("_add") for adapter in adapters[:last_add + 1])  # gt waited for add to finish
    together = OracleModel()
    CaefLM(step_model=together, records=str(tmp_path / "together")).generate_until(_requests(["45+67=", "12>3="]))
    assert [adapter for adapter, _ in together.calls][:2] != adapters[:2]  # by default both start in round one
