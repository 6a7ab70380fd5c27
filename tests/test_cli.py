"""The command line: readable and JSON traces, and one-line errors with exit code 2 for bad input."""

import json
import subprocess
import sys

import pytest

from caef_bench.cli import main
from caef_bench.machines import trace


def test_trace_prints_numbered_steps_with_callees_indented(capsys):
    assert main(["trace", "89*2="]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "89*2=  (MUL, 5 transitions)"
    assert out[1] == "     0  MUL, q0, [HEAD1]|9|8 [HEAD2]|2 [COUNT] [OUTPUT]"
    assert "           1.0  LESS_THAN, q0, [HEAD1] |1[HEAD2] |2 [OUTPUT]" in out
    assert out[-1] == "result: 89*2=178"


def test_trace_json_lists_every_transition_in_execution_order(capsys):
    assert main(["trace", "--json", "4531-1504="]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    transitions = [r for r in records if r["kind"] == "transition"]
    top = [(r["input"], r["output"]) for r in transitions if r["depth"] == 0]
    assert top == trace("sub", 4531, 1504)
    assert transitions[1]["machine"] == "REFLECTION" and transitions[1]["path"] == "1.1"
    assert records[-1] == {"kind": "result", "input": "4531-1504=", "result": "4531-1504=3027"}


def test_trace_runs_an_auxiliary_machine_directly(capsys):
    assert main(["trace", "--op", "left_mask", "13027"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "halt: LEFT_MASK, qH,  |7|2|0|3|1[HEAD] |7|2|0|3"


@pytest.mark.parametrize("expr,message", [
    ("-5+3=", "signed operands"),
    ("5+-3=", "signed operands"),
    ("4 5+6=", "spaces"),
    ("45%6=", "unknown operator '%'"),
    ("4a+6=", "operand '4a' is not a non-negative integer"),
    ("45**6=", "unknown operator '**'"),
    ("45/6=", "unknown operator '/'"),
    ("١٢+3=", "operand '١٢' is not a non-negative integer"),
    ("45+=", "missing second operand"),
    ("45+67", "must end with '='"),
    ("5//0=", "division by zero"),
    ("45-67=", "a >= b"),
    ("", "empty expression"),
    ("007+1=", "leading zero"),
])
def test_bad_input_is_one_line_and_exit_code_2(capsys, expr, message):
    assert main(["trace", expr]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err


def test_a_tier_given_as_model_is_refused_naming_tier(capsys):
    """--model was once solve's name for a tier; it is lm-eval's model class now, and the error says which to use."""
    with pytest.raises(SystemExit) as stop:
        main(["solve", "--model", "smollm2-135m", "1+1="])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "a tier is --tier" in err.strip().splitlines()[-1]


def test_module_entry_point_and_exit_code():
    ok = subprocess.run([sys.executable, "-m", "caef_bench", "trace", "7+7="], capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.splitlines()[-1] == "result: 7+7=14"
    bad = subprocess.run([sys.executable, "-m", "caef_bench", "trace", "7+x="], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("caef-bench: error:")


def test_machines_import_only_the_standard_library():
    code = (
        "import sys; before = set(sys.modules); import caef_bench.machines\n"
        "new = {m.split('.')[0] for m in set(sys.modules) - before}\n"
        "print(','.join(sorted(new - set(sys.stdlib_module_names) - {'caef_bench'})))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


def test_a_previous_report_that_is_not_there_is_refused_before_anything_runs(tmp_path):
    with pytest.raises(SystemExit, match="no such report"):
        main(["run", "--suite", "repeated", "--systems", "caef-tiny", "--cells", "repeated_add_10_p1", "--limit", "1",
              "--onestep-per-cell", "0", "--previous", str(tmp_path / "missing.json"), "--out", str(tmp_path)])
