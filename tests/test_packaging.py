"""A plain `pip install .` (not -e) runs from any folder, and caef_bench.paths says where the data is.

The wheel carries tasks/, checkpoints/tiny/ (and tiny-direct-protocol/) and baselines/ under caef_bench/bundled/ (setup.py copies
them there); the installed package must find them there, not in a checkout it no longer knows of. The default
run builds the wheel and checks its files and the data root of its unpacked copy; installing it with pip
and solving and running lm-eval from it are slow (`pytest -m slow`).
"""

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from caef_bench import paths

REPO = Path(__file__).resolve().parents[1]
WHEEL_LIMIT = 40_000_000  # bytes; about 20 MB today (36 MB unpacked), most of it the tiny tier's weights


def _env(**extra) -> dict:
    env = {key: value for key, value in os.environ.items() if key != paths.ENV_DATA}
    return {**env, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", **extra}


def _python(args: list[str], cwd: Path, **env) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, *args], cwd=cwd, env=_env(**env), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("wheel")
    # pip builds in the source tree (build/lib, setup.py's copies): from a copy of the checkout, so that two
    # test sessions at once (.ci/run runs the slow checks beside the default suite) never share one build/.
    source = tmp_path_factory.mktemp("source") / REPO.name
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(".*", "__pycache__", "build", "*.egg-info", "work"))
    # --no-build-isolation: build with this environment's setuptools, offline, as a user's `pip install .` would
    _python(["-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(folder), str(source)],
            cwd=folder)
    (built,) = folder.glob("*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """The wheel installed into a folder of its own; with it on PYTHONPATH it shadows the editable install,
    and this environment still supplies the dependencies."""
    target = tmp_path_factory.mktemp("site")
    _python(["-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)], cwd=target)
    return target


@pytest.fixture
def outside(tmp_path) -> Path:
    """A working folder outside the checkout: nothing may be found relative to it."""
    assert REPO not in tmp_path.resolve().parents
    return tmp_path


def _files(*folders: str, suffix: str = "") -> set[str]:
    """The checkout's files under `folders` that setup.py ships (no dot-files or caches), relative to it."""
    found = set()
    for folder in folders:
        for path in (REPO / folder).rglob(f"*{suffix}"):
            relative = path.relative_to(REPO)
            if path.is_file() and not any(p.startswith(".") or p == "__pycache__" for p in relative.parts):
                found.add(relative.as_posix())
    return found


def test_the_wheel_carries_the_data_and_the_code_and_not_the_training_state(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    bundled = "caef_bench/bundled/"
    for needed in ("tasks/utils.py", "tasks/_bare_template_yaml", "tasks/table1/caef_add_5.yaml",
                   "tasks/data/MANIFEST.json", "tasks/data/add_5.jsonl", "checkpoints/tiny/base/config.json",
                   "checkpoints/tiny/executors/add/adapter_model.safetensors", "baselines/caef-tiny.yaml"):
        assert bundled + needed in names
    shipped = {name.removeprefix(bundled) for name in names if name.startswith(bundled)}
    assert shipped == _files("tasks", "baselines", "checkpoints/tiny", "checkpoints/tiny-direct-protocol")  # all, no more
    modules = {name for name in names if name.startswith("caef_bench/") and not name.startswith(bundled)}
    assert _files("caef_bench", suffix=".py") <= modules
    assert not [name for name in names if "/.runs/" in name or "__pycache__" in name]
    assert wheel.stat().st_size < WHEEL_LIMIT


def test_the_unpacked_wheel_finds_its_data_inside_itself(wheel, tmp_path_factory, outside):
    unpacked = tmp_path_factory.mktemp("unpacked")  # what an install puts in site-packages, without pip
    zipfile.ZipFile(wheel).extractall(unpacked)
    code = "import caef_bench, caef_bench.paths as p; print(caef_bench.__file__, p.DATA_ROOT, p.TASKS_DIR, sep='\\n')"
    module, root, tasks = _python(["-c", code], cwd=outside, PYTHONPATH=str(unpacked)).stdout.split()
    assert Path(module).parent == unpacked / "caef_bench"
    assert Path(root) == unpacked / "caef_bench" / "bundled" and Path(tasks) == Path(root) / "tasks"


def test_the_data_root_is_the_override_else_the_checkout(outside, monkeypatch):
    monkeypatch.delenv(paths.ENV_DATA, raising=False)
    assert paths.data_root() == REPO  # these tests run from the checkout (an editable install or its folder)
    code = "from caef_bench import paths; print(paths.DATA_ROOT, paths.TASKS_DIR, paths.TINY_CHECKPOINTS, sep='\\n')"
    shown = _python(["-c", code], cwd=outside, **{paths.ENV_DATA: str(outside)}).stdout.split()
    assert shown == [str(outside), str(outside / "tasks"), str(outside / "checkpoints" / "tiny")]


@pytest.mark.slow
def test_an_installed_wheel_solves_from_its_own_data(installed, outside):
    code = "import caef_bench, caef_bench.paths as p; print(caef_bench.__file__, p.DATA_ROOT, sep='\\n')"
    module, root = _python(["-c", code], cwd=outside, PYTHONPATH=str(installed)).stdout.split()
    assert Path(module).parent == installed / "caef_bench"
    assert Path(root) == installed / "caef_bench" / "bundled"
    solved = _python(["-m", "caef_bench", "solve", "45+67="], cwd=outside, PYTHONPATH=str(installed))
    assert solved.stdout.splitlines()[0] == "45+67=112"


@pytest.mark.slow
def test_an_installed_wheel_runs_an_lm_eval_task(installed, outside):
    ran = _python(["-m", "caef_bench", "lm-eval", "--model", "caef", "--tasks", "caef_add_5", "--limit", "2",
                   "--output_path", "out"], cwd=outside, PYTHONPATH=str(installed))
    assert str(installed / "caef_bench" / "bundled" / "tasks" / "table1" / "caef_add_5.yaml") in ran.stderr
    (results,) = (outside / "out").rglob("results_*.json")
    report = json.loads(results.read_text())
    assert report["results"]["caef_add_5"]["exact_match,none"] == 1.0  # the bundled tiny tier, right on both
    assert report["n-samples"]["caef_add_5"]["effective"] == 2
    assert not (outside / "tasks").exists() and not (outside / "checkpoints").exists()
