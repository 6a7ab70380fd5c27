"""caef-bench: CAEF's machines, training, runtime and benchmarks from the command line.

A thin entry point: each command is a module of caef_bench/commands/, its handler a call into the
stage packages."""

from __future__ import annotations

import argparse
import shlex
import sys

from .commands import COMMANDS, lm_eval
from .commands.run import suite_first


class _Parser(argparse.ArgumentParser):
    """The top-level parser, which also reads `run --suite NAME` (what users type and results record)
    as the suite's own subcommand, `run NAME`."""

    def parse_known_args(self, args=None, namespace=None):
        args = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(suite_first(args), namespace)

    def parse_args(self, args=None, namespace=None):
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:  # name the (sub)command they were given to, whose -h lists what it takes
            where = " ".join(getattr(parsed, name) for name in ("command", "data_command", "suite")
                             if getattr(parsed, name, None))
            hint = "; a tier is --tier (--model names lm-eval's model class, on `caef-bench lm-eval`)" \
                if "--model" in extras and getattr(parsed, "command", None) != "lm-eval" else ""
            self.error(f"unrecognized arguments: {' '.join(extras)} (not options of `caef-bench {where}`{hint})")
        return parsed


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="caef-bench", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=argparse.ArgumentParser)
    for command in COMMANDS:
        command.register(commands)
    return parser


def _keep_expressions_positional(argv: list[str]) -> list[str]:
    """argparse reads "-5+3=" as an unknown option; mark it as an operand so it gets a real error."""
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if len(arg) > 1 and arg[0] == "-" and arg[1].isdigit():
            return argv[:i] + ["--"] + argv[i:]
    return argv


def _quiet_libraries() -> None:
    """Keep the libraries' loading bars and deprecation notes out of the CLI's output."""
    import os
    import warnings

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    warnings.filterwarnings("ignore", category=FutureWarning)


def main(argv: list[str] | None = None) -> int:
    _quiet_libraries()
    parser = build_parser()
    invoked_as_program = argv is None  # a caller's own argv (tests) never re-executes the process
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["lm-eval"]:  # lm-eval's arguments pass through untouched
        args = argparse.Namespace(command="lm-eval", handler=lm_eval.run, lm_eval_args=argv[1:])
    else:
        args = parser.parse_args(_keep_expressions_positional(argv))
    args.command_line = "caef-bench " + " ".join(shlex.quote(a) for a in argv)  # recorded with every result
    if invoked_as_program and getattr(args, "reexecute_with_jemalloc", False):
        # Before torch is imported: the allocator is fixed when a process starts (see allocator.py).
        from .train.allocator import reexecute_with_jemalloc

        ops = [op for kind in ("executors", "aligners") for op in (getattr(args, kind, None) or "").split(",") if op]
        reexecute_with_jemalloc(argv, getattr(args, "base", None), ops)
    try:
        code = args.handler(args)
    except (ValueError, FileNotFoundError) as error:
        # Bad input or a missing model is the user's to fix: one clear line, exit code 2, no traceback.
        print(f"caef-bench: error: {error}", file=sys.stderr)
        return 2
    except Exception as error:
        if not hasattr(error, "exit_code"):  # a stop signal that ended a run, an endpoint or journal that failed
            raise
        print(f"caef-bench: {error}", file=sys.stderr)
        return error.exit_code
    if invoked_as_program and getattr(args, "exit_at_once", False):
        # the command has printed all it has to say and writes no file (solve): skip the interpreter's
        # teardown of torch and transformers, a second or two of an interactive command's wall time
        import os

        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
