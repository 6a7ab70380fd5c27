"""lab/diagnosis/direct_by_length.py: a direct adapter read below exact match, length by length."""

import importlib.util
import json
from pathlib import Path

import pytest

from caef_bench.train.curve import parse_fractions, train_curve
from caef_bench.train.recipe import TrainRequest
from micro_model import micro_tiny_base  # noqa: F401  (pytest fixture)

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("direct_by_length", ROOT / "lab/diagnosis/direct_by_length.py")
BY_LENGTH = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(BY_LENGTH)


def test_a_digit_is_right_at_its_place_counted_from_the_units():
    assert BY_LENGTH.digits_right("73269", "73269") == 5
    assert BY_LENGTH.digits_right("73268", "73269") == 4
    assert BY_LENGTH.digits_right("3269", "73269") == 4  # a digit short at the top
    assert BY_LENGTH.digits_right("173269", "73269") == 5  # one too many at the top
    assert BY_LENGTH.digits_right("732690", "73269") == 0  # shifted: no digit at its place
    assert BY_LENGTH.digits_right("", "8") == 0


def test_each_place_is_scored_over_the_answers_that_have_it():
    # units right in all three, tens in one of three, hundreds (only "108" has one) wrong
    assert BY_LENGTH.right_by_place(["15", "21", "8"], ["15", "11", "108"]) == [1.0, 1 / 3, 0.0]
    assert BY_LENGTH.right_by_place(["", "9"], ["9", "9"]) == [0.5]  # no reply: no digit right


def _micro_adapter(tmp_path, base, steps: int) -> Path:
    """A direct add adapter trained `steps` steps of 2 on the micro base: a snapshot folder to read."""
    request = TrainRequest(preset="tiny", out=tmp_path / "curve", base=str(base), executors=(),
                           aligners=(), direct=("add",), progress=False, command="(test)",
                           overrides={"stage2_steps": steps, "stage2_batch": 2, "max_len": 6})
    train_curve(request, parse_fractions("1"))
    return tmp_path / "curve" / "frac_1"


def test_each_length_is_asked_problems_of_that_length_and_scored(tmp_path, micro_tiny_base):
    adapters = _micro_adapter(tmp_path, micro_tiny_base, steps=2)
    out = tmp_path / "by_length.json"
    BY_LENGTH.main(["--adapters", str(adapters), "--op", "add", "--lengths", "1,3",
                    "--n", "4", "--base", str(micro_tiny_base), "--json", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert [(row["length"], row["n"]) for row in rows] == [(1, 4), (3, 4)]
    a, b = rows[1]["example"]["expr"].rstrip("=").split("+")
    assert len(a) == len(b) == 3 and rows[1]["example"]["answer"] == str(int(a) + int(b))
    assert all(0 <= row[key] <= 1 for row in rows for key in ("exact", "digits_right", "length_right"))


def test_saved_readings_print_as_one_table_with_how_far_each_run_was_trained(tmp_path, micro_tiny_base, capsys):
    adapters = _micro_adapter(tmp_path, micro_tiny_base, steps=3)
    saved = tmp_path / "reading.json"
    BY_LENGTH.main(["--adapters", str(adapters), "--op", "add", "--lengths", "1,5",
                    "--n", "2", "--base", str(micro_tiny_base), "--label", "micro run", "--json", str(saved)])
    assert json.loads(saved.read_text())["trained"] == {"steps": 3, "samples": 6}
    capsys.readouterr()
    BY_LENGTH.main(["--table", str(saved)])
    header, _, row = capsys.readouterr().out.splitlines()
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[:4] == ["micro run", "add", "3", "6"]
    assert "exact, 2 digits" in header and cells[5] == "–"  # a length not measured is shown as such
    assert "length right at 5" in header

    BY_LENGTH.main(["--table", str(saved), "--places", "5"])
    header, _, row = capsys.readouterr().out.splitlines()
    places = [cell.strip() for cell in header.strip("|").split("|")][3:]
    assert places[:5] == ["units", "tens", "hundreds", "thousands", "10^4"]  # a carry adds 10^5 to some
    shares = json.loads(saved.read_text())["rows"][1]["right_by_place"]
    assert [cell.strip() for cell in row.strip("|").split("|")][3:] == [f"{share:.0%}" for share in shares]

    figure = tmp_path / "places.png"
    BY_LENGTH.main(["--table", str(saved), "--places", "5", "--figure", str(figure)])
    assert figure.stat().st_size > 5_000
    with pytest.raises(SystemExit):
        BY_LENGTH.main(["--table", str(saved), "--figure", str(figure)])  # the figure draws the places at a length
    with pytest.raises(SystemExit, match="no place-by-place reading at 4 digits"):
        BY_LENGTH.main(["--table", str(saved), "--places", "4", "--figure", str(figure)])
