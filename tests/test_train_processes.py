"""`caef-bench train --processes N`: the adapters dealt into N shares, each a `caef-bench train` subprocess of
the same command into the same --out (subprocess mocked: nothing trains here)."""

import sys
from unittest import mock

import pytest

from caef_bench import cli
from caef_bench.train import processes
from caef_bench.train.processes import share_commands, split_adapters

ADAPTERS = [("executor", "add"), ("executor", "sub"), ("executor", "gt"), ("aligner", "add"), ("aligner", "gt")]


def test_the_adapters_are_dealt_round_robin_into_at_most_n_nonempty_shares():
    assert split_adapters(ADAPTERS, 2) == [[("executor", "add"), ("executor", "gt"), ("aligner", "gt")],
                                           [("executor", "sub"), ("aligner", "add")]]
    assert split_adapters(ADAPTERS, 1) == [ADAPTERS]
    assert split_adapters(ADAPTERS[:2], 8) == [[("executor", "add")], [("executor", "sub")]]
    shares = split_adapters(ADAPTERS, 3)
    assert sorted(a for share in shares for a in share) == sorted(ADAPTERS)  # each adapter exactly once
    with pytest.raises(ValueError):
        split_adapters(ADAPTERS, 0)


def test_each_share_is_the_same_command_with_its_own_adapters_into_the_same_out():
    argv = ["train", "--preset", "smollm2", "--base", "smollm2-135m", "--out", "work/s", "--device", "cuda",
            "--processes", "2", "--executors", "add,sub,gt", "--aligners=add,gt", "--batch", "64"]
    commands = share_commands(argv, ADAPTERS, 2, train_base=False)
    common = [sys.executable, "-m", "caef_bench", "train", "--preset", "smollm2", "--base", "smollm2-135m",
              "--out", "work/s", "--device", "cuda", "--batch", "64"]
    assert commands == [common + ["--executors", "add,gt", "--aligners", "gt", "--direct", ""],
                        common + ["--executors", "sub", "--aligners", "add", "--direct", ""]]


def test_the_base_is_trained_first_alone_and_a_share_keeps_only_the_shares_its_adapters_draw():
    argv = ["train", "--out", "work/t", "--pro", "2", "--share", "top_steps=0.5,near=0.1", "--ex", "add,gt",
            "--aligners", "add"]
    adapters = [("executor", "add"), ("executor", "gt"), ("aligner", "add")]
    base, first, second = share_commands(argv, adapters, 2, train_base=True)
    tail = [sys.executable, "-m", "caef_bench", "train", "--out", "work/t"]
    assert base == tail + ["--executors", "", "--aligners", "", "--direct", ""]  # no adapter: no share
    # executor_add draws top_steps, executor_gt near (a comparison's); aligner_add neither
    assert first == tail + ["--share", "top_steps=0.5", "--executors", "add", "--aligners", "add",
                            "--direct", ""]
    assert second == tail + ["--share", "near=0.1", "--executors", "gt", "--aligners", "", "--direct", ""]


def test_the_command_runs_the_base_then_the_shares_side_by_side():
    started = []

    class Process:
        def __init__(self, command):
            started.append(command)

        def wait(self):
            return 0

    with mock.patch.object(processes.subprocess, "run", return_value=mock.Mock(returncode=0)) as run, \
            mock.patch.object(processes.subprocess, "Popen", side_effect=Process):
        code = cli.main(["train", "--out", "work/never", "--executors", "add,sub,gt", "--aligners", "",
                         "--processes", "3", "--quiet"])
    assert code == 0
    (base,), _ = run.call_args
    assert base[3:] == ["train", "--out", "work/never", "--quiet", "--executors", "", "--aligners", "",
                        "--direct", ""]
    assert [command[-6:] for command in started] == [["--executors", op, "--aligners", "", "--direct", ""]
                                                      for op in ("add", "sub", "gt")]


def test_a_failed_base_starts_no_share_and_its_exit_code_is_the_commands():
    with mock.patch.object(processes.subprocess, "run", return_value=mock.Mock(returncode=3)), \
            mock.patch.object(processes.subprocess, "Popen") as popen:
        code = cli.main(["train", "--out", "work/never", "--executors", "add,sub", "--aligners", "",
                         "--processes", "2"])
    assert code == 3
    popen.assert_not_called()


def test_a_given_base_needs_no_base_process_and_a_failed_share_fails_the_command():
    waits = iter([0, 2])
    with mock.patch.object(processes.subprocess, "run") as run, \
            mock.patch.object(processes.subprocess, "Popen",
                              side_effect=lambda command: mock.Mock(wait=lambda: next(waits))):
        code = cli.main(["train", "--preset", "smollm2", "--base", "smollm2-135m", "--out", "work/never",
                         "--executors", "add", "--aligners", "add", "--processes", "2"])
    assert code == 2
    run.assert_not_called()
