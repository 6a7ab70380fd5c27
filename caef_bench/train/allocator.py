"""The C allocator a training run uses: jemalloc where it is installed, glibc's malloc otherwise.

Why: micro-batches of every width churn the heap. Under glibc's malloc a long run's resident
memory cycles by gigabytes and its steps slow down as it goes; jemalloc (without purging) holds
a flat working set at the same or a better speed (the measurements are in docs/training.md).
The allocator is chosen when a process starts, so `caef-bench train` re-executes itself once
with jemalloc preloaded, as the same command line (`pgrep -f caef-bench` finds it) and process id.

Set CAEF_BENCH_ALLOCATOR=system to keep the C library's malloc, or to the path of a jemalloc library
the loader does not find by itself (a conda environment's, a build of your own). Nothing here imports torch.
"""
from __future__ import annotations

import ctypes.util
import os
import sys
from pathlib import Path
from typing import Callable, Iterable, Mapping

CHOICE = "CAEF_BENCH_ALLOCATOR"  # "system" keeps the C library's malloc; a path names the jemalloc to preload
KNOWN = ("jemalloc", "tcmalloc")  # allocators already preloaded (by the user, or by the re-execution: no loop)
# jemalloc hands pages unused for ~10 s back to the system by default, and a training step (a few
# seconds) allocates them again, page fault by page fault, which costs a CPU run a fifth of its
# speed; without purging there are none, and a training step's working set recurs, so the peak is
# all it ever holds. A MALLOC_CONF of the user's own is kept instead.
NO_PURGING = "dirty_decay_ms:-1,muzzy_decay_ms:-1"
# ... on the tiny tier's base, where that was measured. A larger base's steps free tensors of sizes that
# change from step to step (SmolLM2's logits: tokens x 49,152, hundreds of MB each), and without purging
# jemalloc kept every one: a SmolLM2 direct adapter grew ~280 MB a step, 9 GB in 24 steps, and was killed
# for memory at 22.8 GB; with pages unused for ~10 s handed back it held 1.4-1.9 GB at the same speed
# (docs/training.md). Every other base trains under this.
PURGING = "dirty_decay_ms:10000,muzzy_decay_ms:10000"


def preload_environment(environ: Mapping[str, str], *, keep_pages: bool = True, system: str = sys.platform,
                        find: Callable[[str], str | None] = ctypes.util.find_library) -> dict | None:
    """The environment to re-execute the process in with jemalloc preloaded, or None to go on
    as it is: not Linux (LD_PRELOAD is the Linux loader's), the user chose the system allocator,
    a known allocator is already preloaded (so the re-executed process goes on), or jemalloc is
    not installed (`apt install libjemalloc2`). The user's own preloads stay, after it, and
    jemalloc is told not to purge (`keep_pages`: the tiny tier's base, `keeps_pages`) or to purge
    after ~10 s (any other base) unless MALLOC_CONF says otherwise. ValueError when
    CAEF_BENCH_ALLOCATOR names a library file that is not there."""
    choice = environ.get(CHOICE, "")
    if not system.startswith("linux") or choice.lower() == "system":
        return None
    preloaded = [entry for entry in environ.get("LD_PRELOAD", "").replace(":", " ").split() if entry]
    if any(name in Path(entry).name for entry in preloaded for name in KNOWN):
        return None
    if "/" in choice and not Path(choice).is_file():
        raise ValueError(f"{CHOICE}={choice} names no file: give the path of a jemalloc library "
                         f"(libjemalloc.so.2), or 'system' to keep the C library's malloc")
    library = choice if "/" in choice else find("jemalloc")
    if not library:
        return None
    return {"MALLOC_CONF": NO_PURGING if keep_pages else PURGING, **environ,
            "LD_PRELOAD": " ".join([library, *preloaded])}


def missing_jemalloc_hint(environ: Mapping[str, str], *, system: str = sys.platform,
                          find: Callable[[str], str | None] = ctypes.util.find_library) -> str | None:
    """One line saying a run goes on under glibc's malloc because jemalloc is not installed, where that is why
    (a fresh machine: a long run slows down step by step and nothing else would say so); None otherwise."""
    # a choice or a preload of the user's own is not for us to second-guess
    if not system.startswith("linux") or environ.get(CHOICE) or environ.get("LD_PRELOAD") or find("jemalloc"):
        return None
    return ("caef-bench: jemalloc is not installed (apt install libjemalloc2): training under the C library's "
            "malloc, whose long runs slow down as they go (docs/training.md)")


def keeps_pages(base: str | None, ops: Iterable[str] = ()) -> bool:
    """Whether a run on `base` (train's and train-curve's --base: None for the tiny tier's own, a
    tier's name or a folder) training the adapters of `ops` (its --executors and --aligners) keeps
    jemalloc's pages (`NO_PURGING`): the tiny tier's base on the paper's operators only, where that was
    measured; any other may grow without bound (`PURGING`)."""
    from caef_bench.machines import LONG_EXECUTOR_OPS

    # The long route's samples run from ~100 to ~1,500 tokens, so a step's tensors change size as a
    # larger base's do: with pages kept, executor_long_div's run on the tiny base grew to 21.6 GB and
    # was killed for memory on a 24 GB machine.
    if set(ops) & set(LONG_EXECUTOR_OPS):
        return False
    if base is None or base == "tiny":
        return True
    from caef_bench.paths import TINY_CHECKPOINTS

    return Path(base).resolve() == (TINY_CHECKPOINTS / "base").resolve()


def relaunch_command(argv: list[str], program: str, python: str) -> list[str]:
    """The command that runs this invocation again as the user launched it: the `caef-bench`
    script by its path, so that `pgrep -f caef-bench` and `pkill` still find the run, or
    `python -m caef_bench` (its __main__.py cannot run as a file: it imports relatively)."""
    if Path(program).name != "__main__.py" and Path(program).is_file():
        return [python, program, *argv]
    return [python, "-m", "caef_bench", *argv]


def reexecute_with_jemalloc(argv: list[str], base: str | None = None, ops: Iterable[str] = ()) -> None:
    """Replace this process by the same command with jemalloc preloaded, where
    `preload_environment` says to (its pages kept or purged as `keeps_pages(base, ops)` says);
    otherwise return and let the caller go on."""
    try:
        environment = preload_environment(os.environ, keep_pages=keeps_pages(base, ops))
    except ValueError as error:  # before anything else runs: the CLI's one-line error and exit code
        print(f"caef-bench: error: {error}", file=sys.stderr)
        sys.exit(2)
    if environment is None:
        hint = missing_jemalloc_hint(os.environ)
        if hint:
            print(hint, file=sys.stderr, flush=True)
        return
    pages = {NO_PURGING: "pages kept", PURGING: "unused pages handed back after ~10 s"}.get(
        environment["MALLOC_CONF"], f"MALLOC_CONF={environment['MALLOC_CONF']}")
    print(f"caef-bench: training under jemalloc ({environment['LD_PRELOAD'].split()[0]}, {pages}; "
          f"{CHOICE}=system keeps the system allocator)", file=sys.stderr, flush=True)
    os.execve(sys.executable, relaunch_command(argv, sys.argv[0], sys.executable), environment)


def active_allocator(maps: str | Path = "/proc/self/maps") -> str:
    """The allocator this process runs under, as manifests record it: a known one whose library
    is mapped into the process, else the C library's ("system"; "unknown" where there is no
    /proc to read)."""
    try:
        mapped = Path(maps).read_text()
    except OSError:
        return "unknown"
    for name in KNOWN:
        if f"lib{name}" in mapped:
            return name
    return "system"
