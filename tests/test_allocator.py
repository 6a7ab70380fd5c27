"""`caef-bench train` re-executes itself under jemalloc where it is installed, and manifests record
the CPU model and the allocator a run trained under."""
import ctypes.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from caef_bench.train.allocator import (CHOICE, NO_PURGING, PURGING, active_allocator, keeps_pages,
                                        preload_environment, relaunch_command)

# jemalloc where the loader finds it, or the library file $CAEF_BENCH_ALLOCATOR names. .ci/run installs
# libjemalloc2 and sets CAEF_BENCH_TEST_JEMALLOC=required: there these tests run, or fail; elsewhere they
# skip where jemalloc is not installed.
_CHOSEN = os.environ.get(CHOICE, "")
JEMALLOC = (_CHOSEN if "/" in _CHOSEN else None) or ctypes.util.find_library("jemalloc")
REQUIRED = os.environ.get("CAEF_BENCH_TEST_JEMALLOC") == "required"
needs_jemalloc = pytest.mark.skipif(not JEMALLOC and not REQUIRED,
                                    reason="jemalloc is not installed (apt install libjemalloc2)")


def found(name):
    return {"jemalloc": "libjemalloc.so.2"}.get(name)


def test_preloads_jemalloc_before_the_users_own_preloads_and_keeps_the_rest():
    env = preload_environment({"LD_PRELOAD": "/opt/libfoo.so", "HOME": "/root"}, system="linux", find=found)
    assert env == {"LD_PRELOAD": "libjemalloc.so.2 /opt/libfoo.so", "HOME": "/root", "MALLOC_CONF": NO_PURGING}
    assert preload_environment(env, system="linux", find=found) is None  # the re-executed process goes on
    assert preload_environment({}, system="linux", find=found)["LD_PRELOAD"] == "libjemalloc.so.2"
    mine = preload_environment({"MALLOC_CONF": "narenas:2"}, system="linux", find=found)
    assert mine["MALLOC_CONF"] == "narenas:2"


def test_only_the_tiny_tiers_base_keeps_its_pages_and_any_other_purges_them(tmp_path):
    # a larger base's freed tensors vary in size step by step: kept, they grew SmolLM2's run to the OOM killer
    from caef_bench.paths import TINY_CHECKPOINTS

    assert keeps_pages(None) and keeps_pages("tiny") and keeps_pages(str(TINY_CHECKPOINTS / "base"))
    assert not keeps_pages("smollm2-135m") and not keeps_pages("llama-3.1-8b") and not keeps_pages(str(tmp_path))
    # the long route's samples vary from ~100 to ~1,500 tokens: kept, its pages grew the tiny base's run to the OOM killer
    assert keeps_pages(None, ["add", "sub"]) and not keeps_pages(None, ["add", "long_div"])
    assert not keeps_pages(str(TINY_CHECKPOINTS / "base"), ["digit_mul"])
    purged = preload_environment({}, keep_pages=False, system="linux", find=found)
    assert purged["MALLOC_CONF"] == PURGING != NO_PURGING
    mine = preload_environment({"MALLOC_CONF": "narenas:2"}, keep_pages=False, system="linux", find=found)
    assert mine["MALLOC_CONF"] == "narenas:2"


@pytest.mark.parametrize("environ, system, find", [
    ({}, "darwin", found),                                         # LD_PRELOAD is the Linux loader's
    ({CHOICE: "system"}, "linux", found),                          # the user's choice
    ({CHOICE: "System"}, "linux", found),
    ({"LD_PRELOAD": "/usr/lib/libjemalloc.so.2"}, "linux", found),  # already there (or re-executed: no loop)
    ({"LD_PRELOAD": "libjemalloc.so.2"}, "linux", found),          # as the re-execution preloads it
    ({"LD_PRELOAD": "a.so:/usr/lib/libtcmalloc_minimal.so.4"}, "linux", found),  # another fast one, kept
    ({}, "linux", lambda name: None),                              # not installed
])
def test_goes_on_as_it_is(environ, system, find):
    assert preload_environment(environ, system=system, find=find) is None


def test_a_run_without_jemalloc_installed_says_so_unless_the_user_chose_the_allocator():
    from caef_bench.train.allocator import missing_jemalloc_hint

    absent = lambda name: None  # noqa: E731
    assert "apt install libjemalloc2" in missing_jemalloc_hint({}, system="linux", find=absent)
    assert missing_jemalloc_hint({}, system="linux", find=found) is None  # it will be preloaded
    assert missing_jemalloc_hint({CHOICE: "system"}, system="linux", find=absent) is None
    assert missing_jemalloc_hint({"LD_PRELOAD": "libmine.so"}, system="linux", find=absent) is None
    assert missing_jemalloc_hint({}, system="darwin", find=absent) is None


def test_a_library_file_named_by_the_user_is_preloaded_and_a_missing_one_is_an_error(tmp_path):
    library = tmp_path / "libjemalloc.so.2"
    library.write_bytes(b"")
    env = preload_environment({CHOICE: str(library)}, system="linux", find=lambda name: None)
    assert env["LD_PRELOAD"] == str(library) and env["MALLOC_CONF"] == NO_PURGING
    with pytest.raises(ValueError, match="names no file"):
        preload_environment({CHOICE: str(tmp_path / "absent.so")}, system="linux", find=found)
    done = _run(["-m", "caef_bench", "train", "--preset", "nope"], **{CHOICE: str(tmp_path / "absent.so")})
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "names no file" in done.stderr


def test_jemalloc_is_found_where_ci_installed_it():
    if REQUIRED:
        assert JEMALLOC, "CAEF_BENCH_TEST_JEMALLOC=required, yet no jemalloc is found (apt install libjemalloc2)"


def _chosen_library() -> dict:
    """The environment that points a started process at the library these tests use."""
    return {CHOICE: JEMALLOC} if JEMALLOC and "/" in JEMALLOC and JEMALLOC == _CHOSEN else {}


def test_relaunches_the_script_the_user_ran_or_the_module(tmp_path):
    script = tmp_path / "caef-bench"
    script.write_text("#!/usr/bin/env python\n")
    assert relaunch_command(["train"], str(script), "/py") == ["/py", str(script), "train"]
    main = tmp_path / "caef_bench" / "__main__.py"
    main.parent.mkdir()
    main.write_text("")
    assert relaunch_command(["train"], str(main), "/py") == ["/py", "-m", "caef_bench", "train"]
    assert relaunch_command(["train"], "-c", "/py") == ["/py", "-m", "caef_bench", "train"]


def test_names_the_allocator_mapped_into_the_process(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text("7f00-7f10 r-xp 0 08:01 12 /usr/lib/x86_64-linux-gnu/libc.so.6\n")
    assert active_allocator(maps) == "system"
    maps.write_text(maps.read_text() + "7f20-7f30 r-xp 0 08:01 13 /usr/lib/x86_64-linux-gnu/libjemalloc.so.2\n")
    assert active_allocator(maps) == "jemalloc"
    assert active_allocator(tmp_path / "absent") == "unknown"


def _run(args, **env):
    environ = {k: v for k, v in os.environ.items() if k not in (CHOICE, "LD_PRELOAD", "MALLOC_CONF")}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=600,
                          env={**environ, **env})


@needs_jemalloc
def test_the_preloaded_library_is_the_one_reported():
    code = "from caef_bench.train.allocator import active_allocator; print(active_allocator())"
    assert _run(["-c", code], LD_PRELOAD=JEMALLOC).stdout.strip() == "jemalloc"
    assert _run(["-c", code]).stdout.strip() == "system"


@needs_jemalloc
def test_train_reexecutes_once_with_its_arguments():
    # An unknown preset fails after the re-execution and before any training: the error shows
    # the arguments reached the new process, and the single notice that it did not loop.
    done = _run(["-m", "caef_bench", "train", "--preset", "nope"], **_chosen_library())
    assert done.returncode == 2
    assert done.stderr.count("training under jemalloc") == 1 and "pages kept" in done.stderr
    assert "unknown preset 'nope'" in done.stderr
    other = _run(["-m", "caef_bench", "train", "--preset", "nope", "--base", "smollm2-135m"], **_chosen_library())
    assert other.returncode == 2 and "unused pages handed back after ~10 s" in other.stderr
    long = _run(["-m", "caef_bench", "train", "--preset", "nope", "--executors", "long_div", "--aligners", ""],
                **_chosen_library())
    assert long.returncode == 2 and "unused pages handed back after ~10 s" in long.stderr
    kept = _run(["-m", "caef_bench", "train", "--preset", "nope"], **{CHOICE: "system"})
    assert kept.returncode == 2 and "jemalloc" not in kept.stderr


@needs_jemalloc
def test_the_console_script_reexecutes_as_itself():
    script = Path(sys.executable).parent / "caef-bench"
    if not script.is_file():
        pytest.skip("the caef-bench script is not installed beside this Python")
    done = _run([str(script), "train", "--preset", "nope"], **_chosen_library())
    assert done.returncode == 2 and done.stderr.count("training under jemalloc") == 1


def test_manifests_name_the_cpu_model_and_the_allocator(tmp_path):
    import torch

    from caef_bench.train.loop import cpu_model, describe_device

    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\nflags\t\t: avx2\n")
    assert cpu_model(info) == "AMD EPYC"
    info.write_text("processor\t: 0\n")
    assert cpu_model(info) == cpu_model(tmp_path / "absent") != ""
    described = describe_device(torch.device("cpu"))
    assert described.startswith(f"cpu ({cpu_model()}, ") and described.endswith(f"{active_allocator()} allocator)")
