"""reproduce.sh's main job prints the wall time of each part and of the whole job.

The job's steps run here with a stub in caef-bench's place (CAEF_BENCH_CLI) that returns at once: what is
checked is which parts run, with which commands, and the lines that report their times, never a time itself.
"""

import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _bash(script: str, **env) -> subprocess.CompletedProcess:
    """`script` after sourcing reproduce.sh (which then only defines its functions), in the checkout."""
    done = subprocess.run(["bash", "-c", f"source ./reproduce.sh && {script}"], cwd=REPO,
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done


@pytest.mark.parametrize("seconds, text", [
    (0, "0m00s"), (59, "0m59s"), (723, "12m03s"), (3599, "59m59s"), (3600, "1h00m00s"), (3725, "1h02m05s"),
])
def test_durations_read_as_minutes_and_seconds_or_hours(seconds, text):
    assert _bash(f"duration {seconds}").stdout == text


def test_the_main_job_prints_each_parts_wall_time_after_it_and_the_total_at_the_end(tmp_path):
    stub = tmp_path / "caef-bench"
    stub.write_text('#!/bin/sh\necho "caef-bench $*"\n')
    stub.chmod(0o755)
    lines = _bash("main_job", CAEF_BENCH_CLI=str(stub), CAEF_LIMIT="3").stdout.splitlines()
    commands = [line for line in lines if line.startswith("caef-bench ")]
    assert commands == [
        "caef-bench data testsets --check", "caef-bench trace 89*2=",
        "caef-bench run --suite table1 --out results/local --cells-of caef-tiny=*_5,*_10,mul_1_10,div_1_10 "
        "--cells-of lora-direct-smollm2-135m=add_5,add_10,sub_5,sub_10,gt_5,gt_10,lt_5,lt_10 "
        "--cells-of caef-smollm2-135m=*_5,*_10 --limits caef-smollm2-135m=5,lora-direct-smollm2-135m=5",
        "caef-bench run --suite table2 --tier tiny --limit 3 --out results/local",
    ]  # (checkpoints/tiny/ is in the checkout: no training part)
    timed = [re.fullmatch(r"== part (\w+) took \d+m\d\ds", line) for line in lines]
    assert [match[1] for match in timed if match] == ["testsets", "trace", "table1", "table2"]
    in_order = [line for line in lines if line.startswith(("caef-bench ", "== part "))]
    assert [line.startswith("== part ") for line in in_order] == [False, True] * 4  # each time after its command
    assert re.fullmatch(r"== the main job took \d+m\d\ds", lines[-1])
