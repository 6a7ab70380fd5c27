"""Every command line the project records still parses: reproduce.sh's main job, the commands that made
each committed result (results/*.json and their reports' opening lines) and each shipped checkpoint's
rounds (checkpoints/**/manifest.json). README.md and docs/*.md are test_doc_commands'.

A recorded command that no longer parses is a result nobody can remake by copying its header. The one
exception: the `caef-bench train` rounds behind the shipped tiny tier (checkpoints/tiny*/), whose options
of their day (the sequential --<name>-share chances, --position-scheme, --anonymous-cells, ...) are
now preset fields. What remakes those adapters is the tiny preset (caef_bench/train/presets/tiny.yaml:
tests/test_presets.py checks its plans against these manifests' rounds, tests/test_sampler_draws.py its
draws byte for byte); a recorded round is checked to name only options or preset fields."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from test_doc_commands import _lm_eval_parser, _parse

ROOT = Path(__file__).resolve().parent.parent
CONTROL = {"&", "&&", "||", ";", "|"}


def _commands(text: str):
    """The argument lists of each `caef-bench` command in a shell line (`a & b`: two)."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words, found = list(lexer), []
    for i, word in enumerate(words):
        if word == "caef-bench" and (i == 0 or words[i - 1] in CONTROL):
            end = next((j for j in range(i + 1, len(words)) if words[j] in CONTROL), len(words))
            found.append(words[i + 1:end])
    return found


def _strings(node):
    if isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)
    elif isinstance(node, str) and node.startswith("caef-bench "):
        yield node


def _recorded():
    found = []
    # reproduce.sh calls the CLI as "$cli", its outputs under "$out"
    script = (ROOT / "reproduce.sh").read_text().replace('"${CAEF_LIMIT:-5}"', "5").replace('"$out"', "results/local")
    script = re.sub(r"\\\n\s*", " ", script)  # a command continued on the next line is one line
    for number, line in enumerate(script.splitlines(), 1):
        if '"$cli" ' in line:
            found.append(("reproduce.sh", number, "caef-bench " + line.split('"$cli" ', 1)[1]))
    for path in sorted([*(ROOT / "results").rglob("*.json"), *(ROOT / "checkpoints").rglob("manifest.json")]):
        for text in sorted(set(_strings(json.loads(path.read_text())))):
            found.append((str(path.relative_to(ROOT)), 0, text))
    for path in sorted((ROOT / "results").rglob("*.md")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for span in re.findall(r"`(caef-bench [^`]*)`", line):
                # an elided command shows its shape only; a bare `caef-bench NAME` names a command
                if "..." not in span and "…" not in span and len(span.split()) > 2:
                    found.append((str(path.relative_to(ROOT)), number, span))
    return [pytest.param(args, text, id=f"{where}:{number}:{k}")
            for where, number, text in found for k, args in enumerate(_commands(text))]


def _replayed_by_the_preset(where: str, args: list[str]) -> bool:
    return where.startswith("checkpoints/tiny") and args[:1] == ["train"]


RECORDED = _recorded()


def test_the_records_hold_commands():
    places = {param.id.split(":")[0].split("/")[0] for param in RECORDED}
    assert {"reproduce.sh", "results", "checkpoints"} <= places and len(RECORDED) > 100


def _check_a_shipped_round(args: list[str], line: str) -> None:
    """Each option of a shipped tiny round is an option of train now, or a preset field (one of the tiny
    preset's plans holds it), or one of the mix's shares as the sequential chances of its day."""
    from dataclasses import fields

    from caef_bench.cli import build_parser
    from caef_bench.train.mix import SEQUENTIAL
    from caef_bench.train.presets import RUN_SETTINGS, Preset

    train = next(action.choices["train"] for action in build_parser()._actions if getattr(action, "choices", None)
                 and "train" in action.choices)
    options = {string for action in train._actions for string in action.option_strings}
    names = {f.name for f in fields(Preset)} | set(RUN_SETTINGS) | set(SEQUENTIAL)
    for word in args[1:]:
        if word.startswith("--"):
            flag = word.split("=")[0]
            assert flag in options or flag[2:].replace("-", "_") in names, f"{flag} is neither option nor field: {line}"


@pytest.mark.parametrize("args, line", RECORDED)
def test_a_recorded_command_parses(args, line, request):
    where = request.node.callspec.id.split(":")[0]
    from caef_bench.cli import _keep_expressions_positional, build_parser

    if args[:1] == ["lm-eval"]:  # lm-eval's own arguments (caef_bench.cli.main passes them through)
        _parse(_lm_eval_parser(), ["run", *args[1:]], line)
        return
    if _replayed_by_the_preset(where, args):
        _check_a_shipped_round(args, line)
        return
    parsed = _parse(build_parser(), _keep_expressions_positional(args), line)
    if parsed.command == "run":
        from caef_bench.evaluate.suites import SUITES

        assert parsed.suite in SUITES


@pytest.mark.parametrize("line, suite", [
    ("run --suite table2 --limit 5", "table2"),
    ("run --limit 5 --suite=caef --device cpu", "caef"),
    ("run repeated --cells repeated_add_10_p1", "repeated"),
])
def test_suite_as_an_option_and_as_a_subcommand_parse_alike(line, suite):
    from caef_bench.cli import build_parser

    parsed = build_parser().parse_args(shlex.split(line))
    assert parsed.suite == suite and parsed.handler is build_parser().parse_args(["run", suite]).handler


@pytest.mark.parametrize("line", ["run --suite table1 --tier tiny", "run --suite repeated --backend openai",
                                  "run --suite caef --systems caef-tiny", "run --suite table2 --previous x.json"])
def test_an_option_a_suite_does_not_take_is_refused_by_name(line, capsys):
    from caef_bench.cli import build_parser

    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(shlex.split(line))
    assert exit_.value.code == 2
    assert f"not options of `caef-bench run {line.split()[2]}`" in capsys.readouterr().err
