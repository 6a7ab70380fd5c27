"""lab/diagnosis/draw_shapes.py: which operand pairs count as a run against a shorter operand."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("draw_shapes", ROOT / "lab/diagnosis/draw_shapes.py")
draw_shapes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(draw_shapes)


def test_a_run_counts_against_a_shorter_operand_on_either_side():
    nines = draw_shapes.run_pattern("9", 5)
    assert draw_shapes.holds("99999", "1", nines, 3) and draw_shapes.holds("1", "1999990", nines, 3)
    assert not draw_shapes.holds("99999", "123", nines, 3)  # two digits shorter only
    assert not draw_shapes.holds("9999", "1", nines, 3)  # a run of four
    fives = draw_shapes.run_pattern(None, 5)  # any one digit
    assert not draw_shapes.holds("55555", "1", nines, 3) and draw_shapes.holds("55555", "1", fives, 3)
    assert not draw_shapes.holds("12121212", "1", draw_shapes.run_pattern(None, 2), 3)


def test_it_redraws_an_adapters_recorded_mix(tmp_path, capsys):
    draw_shapes.main([str(ROOT / "checkpoints/tiny/executors/add"), "--batches", "2"])
    printed = capsys.readouterr().out
    assert printed.startswith("executor_add (seed ") and " of 128 draws (" in printed
