"""Every command in README.md and docs/*.md runs as written: each `caef-bench ...` line of a fenced code
block (a `\\` continuation joined to its line) is parsed by the CLI's own argparse parser, so a misspelt
subcommand, a renamed flag or a dropped option fails here, not in a new user's shell; the names argparse
leaves free (`--suite`, `--systems`, `--cells`) are checked against what exists. `caef-bench lm-eval ...` and
`lm_eval ...` lines are parsed by lm-evaluation-harness's parser. Only parsing: nothing is run. A line whose
placeholder (DIR, PATH, NAME: a word in capitals, or $VAR) argparse cannot take as written is skipped."""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
ELISIONS = {"...", "…"}  # "caef-bench train ... --executors gt": the options given on the line before


def _code_lines(path: Path):
    """(line number, logical line) of every fenced code block, backslash continuations joined."""
    in_block, pending, start = False, "", 0
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            in_block, pending = not in_block, ""
            continue
        if not in_block:
            continue
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        yield start, pending + line
        pending = ""


def _commands(words: list[str], program: str):
    """The argument lists of `program` in one shell line: after environment assignments, and inside
    an assignment whose value is itself a command (T="caef-bench train --base ...")."""
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        value = words.pop(0).partition("=")[2]
        if value.startswith(program + " "):
            yield shlex.split(value)[1:]
    if words and words[0] == program:
        yield words[1:]


def _collect(program: str):
    found = []
    for path in DOCUMENTS:
        for number, line in _code_lines(path):
            try:
                words = shlex.split(line, comments=True)
            except ValueError:  # not shell (an example's output): no command to check
                continue
            for args in _commands(words, program):
                found.append(pytest.param([w for w in args if w not in ELISIONS], line.strip(),
                                          id=f"{path.relative_to(ROOT)}:{number}"))
    return found


CAEF_BENCH_LINES = _collect("caef-bench")
LM_EVAL_LINES = _collect("lm_eval")


def test_the_documents_show_commands():
    assert len(CAEF_BENCH_LINES) > 20 and LM_EVAL_LINES  # the extraction itself works


def _parse(parser: argparse.ArgumentParser, args: list[str], line: str) -> argparse.Namespace:
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            return parser.parse_args(args)
    except SystemExit:
        if any(_placeholder(word) and len(word) > 1 for word in args):  # `--cells PATTERN`, `DIR/base`: a shape
            pytest.skip(f"a placeholder that argparse cannot take as written: {line}")
        pytest.fail(f"does not parse: {line}\n{errors.getvalue().strip()}")


def _placeholder(value: str) -> bool:
    """NAME, DIR, DIR/base, N, $op: a word the reader fills in."""
    head = value.split("/")[0].split("=")[-1]
    return (head.isupper() and head.isalpha()) or value.startswith("$")


def _lm_eval_parser() -> argparse.ArgumentParser:
    harness = pytest.importorskip("lm_eval._cli.harness")
    cli = harness.HarnessCLI()
    parser = getattr(cli, "_parser", None)
    if parser is None:
        pytest.skip("this lm-eval's command line keeps its parser elsewhere")
    return parser


@pytest.mark.parametrize("args, line", CAEF_BENCH_LINES)
def test_caef_bench_commands_parse(args, line):
    from caef_bench.cli import _keep_expressions_positional, build_parser

    if args[:1] == ["lm-eval"]:  # passed to lm-eval untouched (caef_bench.cli.main)
        _parse(_lm_eval_parser(), ["run", *args[1:]], line)
        return
    parsed = _parse(build_parser(), _keep_expressions_positional(args), line)
    if parsed.command != "run":
        return
    from caef_bench.data.testsets import table1_cells
    from caef_bench.evaluate.suites import SUITES

    assert parsed.suite in SUITES, f"unknown suite {parsed.suite!r} in: {line}"
    if parsed.cells and parsed.suite == "repeated":  # names or shell patterns of the repeated-digit cells
        from caef_bench.evaluate.repeated import select_cells

        select_cells(parsed.cells)  # raises on a pattern that matches no cell
    elif parsed.cells and parsed.suite == "long_mul_div":  # the long multiplication and division cells
        from caef_bench.evaluate.long_mul_div import select_cells

        select_cells(parsed.cells)
    elif parsed.cells:
        unknown = [c for c in parsed.cells.split(",") if c not in table1_cells() and not _placeholder(c)]
        assert not unknown, f"unknown cell(s) {unknown} in: {line}"
    if getattr(parsed, "systems", None):  # table1, repeated and long_mul_div run systems; caef and table2 a model
        from caef_bench.evaluate.systems import load_systems

        unknown = [s for s in parsed.systems.split(",") if s not in load_systems() and not _placeholder(s)]
        assert not unknown, f"unknown system(s) {unknown} in: {line}"


@pytest.mark.parametrize("args, line", LM_EVAL_LINES)
def test_lm_eval_commands_parse(args, line):
    _parse(_lm_eval_parser(), ["run", *args], line)
