"""`caef-bench train --processes N`: the requested adapters trained in N processes side by side.

One training process keeps a GPU far from busy (a tiny adapter's steps are small), so on an accelerator the
adapters are split into N shares, each trained by a `caef-bench train` subprocess of the same command into the
same --out (each adapter has a folder of its own there). A base the command pre-trains (the tiny preset without
--base) is trained first, in one process, since every adapter trains on it. Each subprocess resumes from its
checkpoints as a single command does, so the same command goes on after a stop.
"""

from __future__ import annotations

import shlex
import subprocess
import sys

# the options each share's command sets itself (its adapters; --processes: none further)
SPLIT_OPTIONS = ("--processes", "--executors", "--aligners", "--direct")


def split_adapters(adapters: list[tuple[str, str]], processes: int) -> list[list[tuple[str, str]]]:
    """Adapters (kind, op) dealt round-robin into at most `processes` non-empty shares."""
    if processes < 1:
        raise ValueError(f"--processes takes a number of processes, at least 1, not {processes}")
    shares = [adapters[i::processes] for i in range(min(processes, len(adapters)))]
    return [share for share in shares if share]


def _without(argv: list[str], options: tuple[str, ...]) -> list[str]:
    """argv less every option of `options` and its value (`--opt V`, `--opt=V`, or argparse's unique prefix)."""
    def matches(token: str) -> bool:
        name = token.partition("=")[0]
        return token.startswith("--") and len(name) > 3 and any(option.startswith(name) for option in options)

    kept, skip = [], False
    for token in argv:
        if skip:
            skip = False
        elif matches(token):
            skip = "=" not in token
        else:
            kept.append(token)
    return kept


def _shares_for(argv: list[str], adapters: list[tuple[str, str]]) -> list[str]:
    """The --share settings of argv that some of `adapters` draw from (a share for none of them is refused)."""
    from caef_bench.train import mix

    given, rest, take = [], [], False
    for token in argv:
        if take:
            given.append(token)
            take = False
        elif token == "--share":
            take = True
        elif token.startswith("--share="):
            given.append(token.partition("=")[2])
        else:
            rest.append(token)
    kept = [item for value in given for item in value.split(",") if item
            and any(mix.SHARES[item.partition("=")[0].strip().replace("-", "_")].applies(kind, op)
                    for kind, op in adapters)]
    return rest + (["--share", ",".join(kept)] if kept else [])


def share_commands(argv: list[str], adapters: list[tuple[str, str]], processes: int,
                   train_base: bool) -> list[list[str]]:
    """The subprocess commands, in order: the base's (when `train_base`), then one per share of the adapters.
    argv is the `train ...` command's own arguments; each command is `python -m caef_bench train ...`."""
    common = _without(argv, SPLIT_OPTIONS)

    def command(share: list[tuple[str, str]]) -> list[str]:
        ops = {kind: ",".join(op for k, op in share if k == kind) for kind in ("executor", "aligner", "direct")}
        return [sys.executable, "-m", "caef_bench", *_shares_for(common, share),
                "--executors", ops["executor"], "--aligners", ops["aligner"], "--direct", ops["direct"]]

    commands = [command([])] if train_base else []
    return commands + [command(share) for share in split_adapters(adapters, processes)]


def train_in_processes(command_line: str, adapters: list[tuple[str, str]], processes: int,
                       train_base: bool) -> int:
    """Run share_commands: the base's to its end, then the shares side by side; the first failure's exit code."""
    argv = shlex.split(command_line)[1:]  # (the recorded command line: "caef-bench train ...")
    commands = share_commands(argv, adapters, processes, train_base)
    if train_base:
        print("the base first:", shlex.join(commands[0][3:]), flush=True)
        code = subprocess.run(commands[0]).returncode
        if code:
            return code
        commands = commands[1:]
    running = []
    for command in commands:
        print(f"process {len(running) + 1} of {len(commands)}:", shlex.join(command[3:]), flush=True)
        running.append(subprocess.Popen(command))
    codes = [process.wait() for process in running]
    return next((code for code in codes if code), 0)
