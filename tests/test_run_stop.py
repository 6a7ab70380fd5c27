"""Stopping `caef-bench run --suite table1` stops its lm-eval child too (`evaluate.table1.run_child`):
the child is told to stop the way Ctrl-C tells it, so it keeps what it finished, and the run ends
with the signal's exit code instead of leaving an orphan to run on."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DEADLINE_S = 300  # for what the tests wait for: a process to start or end (seconds, on a loaded machine minutes)

# The child: writes its pid, then one line per "request" until Ctrl-C, when it notes that it unwound.
# (Ctrl-C's default handler is set again: a suite started in the background inherits SIGINT ignored.)
CHILD = """
import os, signal, sys, time
from pathlib import Path
signal.signal(signal.SIGINT, signal.default_int_handler)
folder = Path(sys.argv[1])
(folder / "pid").write_text(str(os.getpid()))
try:
    for i in range(10_000):
        with open(folder / "done", "a") as f:
            f.write(f"{i}\\n")
        time.sleep(0.05)
except KeyboardInterrupt:
    (folder / "unwound").write_text("kept what it finished")
    sys.exit(130)
"""

# The parent: what run_system does with its lm-eval command.
PARENT = """
import sys
from caef_bench.evaluate.table1 import RunStopped, run_child
try:
    sys.exit(run_child([sys.executable, "-c", sys.argv[1], sys.argv[2]], grace=float(sys.argv[3])))
except RunStopped as stop:
    print(stop, file=sys.stderr)
    sys.exit(stop.exit_code)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _start(tmp_path: Path, grace: float = 30, child: str = CHILD) -> tuple[subprocess.Popen, int]:
    parent = subprocess.Popen([sys.executable, "-c", PARENT, child, str(tmp_path), str(grace)], cwd=REPO,
                              stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + DEADLINE_S
    # at work once a line is done: the file exists from the child's open(), before its first line is written
    while not (tmp_path / "done").is_file() or not (tmp_path / "done").read_text().endswith("\n"):
        assert parent.poll() is None and time.monotonic() < deadline, "the child did not start"
        time.sleep(0.05)
    return parent, int((tmp_path / "pid").read_text())


@pytest.mark.parametrize("sent, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_stopped_run_stops_its_child_which_keeps_what_it_finished(tmp_path, sent, code):
    parent, child = _start(tmp_path)  # the child is at work, the parent's handlers set before it started
    parent.send_signal(sent)  # `kill PID`, or Ctrl-C (the child is in its own session: only the parent gets it)
    assert parent.wait(DEADLINE_S) == code
    assert not _alive(child)
    assert (tmp_path / "unwound").read_text() == "kept what it finished"
    assert len((tmp_path / "done").read_text().splitlines()) >= 1
    assert f"{signal.Signals(sent).name} stopped the run and its lm-eval child" in parent.stderr.read()


def test_a_child_that_ignores_ctrl_c_is_terminated_after_the_grace_period(tmp_path):
    stubborn = CHILD.replace("signal.signal(signal.SIGINT, signal.default_int_handler)",
                             "signal.signal(signal.SIGINT, signal.SIG_IGN)")
    parent, child = _start(tmp_path, grace=0.5, child=stubborn)
    parent.send_signal(signal.SIGTERM)
    assert parent.wait(DEADLINE_S) == 143
    assert not _alive(child) and not (tmp_path / "unwound").exists()


def test_a_child_that_finishes_gives_its_exit_code(tmp_path):
    from caef_bench.evaluate.table1 import run_child

    assert run_child([sys.executable, "-c", "import sys; sys.exit(3)"]) == 3


@pytest.mark.slow
def test_killing_a_table1_run_stops_lm_eval_and_the_rerun_resumes(tmp_path):
    """The real thing: `kill PID` of `caef-bench run --suite table1` once CAEF has recorded some problems."""
    import json

    import psutil

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    command = [sys.executable, "-m", "caef_bench", "run", "--suite", "table1", "--systems", "caef-tiny",
               "--cells", "add_5,sub_10", "--limit", "4", "--out", str(tmp_path / "results"),
               "--work", str(tmp_path / "work")]
    run = subprocess.Popen(command, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    records = tmp_path / "work" / "records" / "lm-eval"  # caef-tiny's records (its model_args), per weights
    deadline = time.monotonic() + 1200
    while not any(path.stat().st_size for path in records.rglob("lm_eval.jsonl")):
        assert run.poll() is None and time.monotonic() < deadline, run.stderr.read()[-3000:]
        time.sleep(0.5)
    children = psutil.Process(run.pid).children(recursive=True)
    assert children  # lm-eval runs as a child process
    run.send_signal(signal.SIGTERM)
    assert run.wait(120) == 143
    psutil.wait_procs(children, timeout=30)
    assert not [child for child in children if child.is_running() and child.status() != psutil.STATUS_ZOMBIE]
    kept = [json.loads(line)["id"] for path in records.rglob("lm_eval.jsonl") for line in path.read_text().splitlines()]
    assert kept and "stopped the run and its lm-eval child" in run.stderr.read()
    again = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800)
    assert again.returncode == 0, again.stderr[-3000:]
    after = [json.loads(line)["id"] for path in records.rglob("lm_eval.jsonl") for line in path.read_text().splitlines()]
    assert after[:len(kept)] == kept and len(after) == len(set(after)) == 8  # none redone, none lost
