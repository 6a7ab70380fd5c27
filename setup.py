"""Ships the data caef-bench runs on inside its wheel (the rest of the build is pyproject.toml).

tasks/ (lm-eval's task files, their hooks, the test sets), checkpoints/tiny/ and tiny-direct-protocol/
(the tiny tier) and baselines/ (Table 1's systems) live at the top of the
checkout, where people edit and train them, not inside the package. A wheel
gets a copy of them under caef_bench/bundled/, which caef_bench.paths finds
when the package does not run from a checkout. An editable install
(`pip install -e .`) copies nothing: it reads the checkout itself.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
BUNDLED = "bundled"  # caef_bench.paths.BUNDLED_DIR's name
DATA = {"tasks": "tasks", "baselines": "baselines", "checkpoints/tiny": "checkpoints/tiny",
        "checkpoints/tiny-direct-protocol": "checkpoints/tiny-direct-protocol"}
# Resumable training state (checkpoints/**/.runs, hundreds of MB) and caches are not the shipped data.
SKIPPED = shutil.ignore_patterns(".*", "__pycache__", "*.pyc")


class BuildWithData(build_py):
    def run(self):
        if getattr(self, "editable_mode", False):
            return super().run()
        # build_py only adds to build/lib: a module or data file deleted since the last build
        # would otherwise go into the wheel
        shutil.rmtree(Path(self.build_lib) / "caef_bench", ignore_errors=True)
        super().run()
        for source, target in DATA.items():
            shutil.copytree(ROOT / source, Path(self.build_lib) / "caef_bench" / BUNDLED / target, ignore=SKIPPED)


setup(cmdclass={"build_py": BuildWithData})
