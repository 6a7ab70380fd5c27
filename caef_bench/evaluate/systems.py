"""Systems under test as data: one YAML file per system in `baselines/`, as lm-eval holds tasks.

A system names the paper row it stands for, the lm-eval model type and its model_args, the task
group its prompts come from, chat template on or off, generation settings, its default number of
problems per cell on a CPU, and what it needs to run (a GPU, environment variables, a model
package). Adding a system is adding a file; `caef-bench run --suite table1` runs every system
that can run here and names the reason for each one that cannot.

model_args values may name things that differ between machines:
  {smollm2}          the converted SmolLM2-135M-Instruct folder (caef_bench.models.smollm2)
  {env:NAME}         the environment variable NAME
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from caef_bench.paths import BASELINES_DIR, TASKS_DIR

PAPER_ROWS = ("CAEF", "LLaMA 3.1 (L)", "LLaMA 3.1 (I)", "GPT-4o")
TASK_GROUPS = {"caef_table1": "", "caef_table1_direct": "_direct", "caef_table1_chat": "_chat"}
# {smollm2}: SmolLM2's converted weights; {data}: the data root (a checkout's top folder), so that a path in a
# system file does not depend on where a command runs; {env:NAME}: an environment variable
_PLACEHOLDER = re.compile(r"\{(smollm2|data|env:[A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class System:
    name: str
    model: str  # the lm-eval model type: hf, vllm, openai-chat-completions, caef, ...
    tasks: str  # the task group: caef_table1, caef_table1_direct or caef_table1_chat
    paper_row: str | None = None
    description: str = ""
    model_args: dict = field(default_factory=dict)
    apply_chat_template: bool = False
    gen_kwargs: dict = field(default_factory=dict)
    batch_size: int | str | None = None
    limit: int | None = None  # problems per cell by default (None: the whole test set)
    requires: dict = field(default_factory=dict)  # gpu: true, env: [NAME, ...], smollm2: true, adapters: true
    # The cells it runs on by default (comma-separated names or shell patterns; None: all), and why not
    # the others (Table 1 says so): a system trained for some operators and lengths only.
    cells: str | None = None
    cells_why: str = ""
    path: Path | None = None

    def own_cells(self, cells: list[str]) -> list[str]:
        """Of a run's `cells`, those this system runs on by default (`cells`)."""
        if not self.cells:
            return list(cells)
        patterns = [p for p in self.cells.split(",") if p]
        return [cell for cell in cells if any(fnmatch.fnmatchcase(cell, pattern) for pattern in patterns)]

    def task(self, cell: str) -> str:
        """The lm-eval task of one test cell in this system's prompt style: add_100 -> caef_add_100_chat; a
        repeated-digit cell goes to the same style's repeated group (caef_repeated, caef_repeated_direct,
        caef_repeated_chat): repeated_add_10_p1 -> caef_repeated_add_10_p1_chat."""
        return f"caef_{cell}{TASK_GROUPS[self.tasks]}"

    def unavailable(self, cells: list[str] | None = None, checkpoints: str | None = None) -> str | None:
        """Why this system cannot run on this machine, in one line; None when it can. `cells`: the test cells a
        run asks it (default: its own of Table 1's), whose operators' adapters it must have; `checkpoints`: the
        adapter folder a run gives it instead of its own (`--checkpoints`)."""
        missing = [name for name in self.requires.get("env", ()) if not os.environ.get(name)]
        if missing:
            return f"needs {', '.join(missing)} set"
        if self.requires.get("gpu"):
            import torch

            if not torch.cuda.is_available():
                return "needs a GPU (none here)"
        if self.requires.get("smollm2"):
            from caef_bench.models.smollm2 import INSTALL_HINT, find_gguf

            if find_gguf() is None:
                return f"needs SmolLM2-135M-Instruct: {INSTALL_HINT}"
        if self.requires.get("adapters"):
            return self.missing_adapters(cells, checkpoints)
        return None

    def missing_adapters(self, cells: list[str] | None = None, checkpoints: str | None = None) -> str | None:
        """For a system of one of this project's tiers (model_args `tier`, `checkpoints`, or the run's
        `checkpoints` instead): which adapters `cells` (default: its own of Table 1's) need that the tier
        lacks, and the command that trains them; None when it has them all. A run asked fewer cells needs
        fewer adapters (a tier trained on add alone runs add_5)."""
        from caef_bench.data.testsets import CELLS, table1_cells
        from caef_bench.models.limits import MissingAdaptersError, check_adapters, train_command
        from caef_bench.models.loading import adapter_dir, available_adapters, tier_with_checkpoints

        args = self.resolved_model_args()
        tier = tier_with_checkpoints(args["tier"], checkpoints or args.get("checkpoints"))
        ops = sorted({CELLS[cell].op for cell in (self.own_cells(table1_cells()) if cells is None else cells)})
        if self.model == "caef-direct":  # the LoRA-direct adapters, direct/<op>/
            missing = [f"direct_{op}" for op in ops
                       if tier.adapters is None or adapter_dir(tier.adapters, "direct", op) is None]
            return (f"the {tier.name} tier has no {', '.join(missing)}: train them with "
                    f"`{train_command(tier.name, tier.adapters, missing)}`") if missing else None
        try:
            check_adapters(tier.name, ops, available_adapters(tier), tier.adapters)
        except MissingAdaptersError as error:
            return str(error)
        return None

    def resolved_model_args(self) -> dict:
        """model_args with their placeholders filled in for this machine."""
        def fill(value):
            if not isinstance(value, str):
                return value
            return _PLACEHOLDER.sub(lambda match: _placeholder(match.group(1)), value)

        return {key: fill(value) for key, value in self.model_args.items()}

    def problems_per_cell(self, limit: int | None = None, limits: dict | None = None, cell: str | None = None) -> int | None:
        """This system's N in a run (on `cell`): `limits` by its name and a pattern the cell matches
        (--limits NAME@PATTERN=N), else by its name (--limits NAME=N), else the run's `limit`, else its own."""
        limits = limits or {}
        if cell is not None:
            for pattern, n in self.cell_limits(limits).items():
                if fnmatch.fnmatchcase(cell, pattern):
                    return n
        return limits.get(self.name, limit if limit is not None else self.limit)

    def lm_eval_limit(self, limit: int | None = None, limits: dict | None = None) -> int | None:
        """This system's N for one lm-eval call, which takes a single --limit for all of its tasks."""
        if self.cell_limits(limits):
            raise ValueError(f"--limits {self.name}@PATTERN=N: a per-cell N is for CAEF traced by the repeated "
                             f"suite; {self.name} runs through lm-eval, one N for all its cells")
        return self.problems_per_cell(limit, limits)

    def cell_limits(self, limits: dict | None) -> dict[str, int]:
        """{cell pattern: N} of this system's NAME@PATTERN=N entries in `limits`, in the order given."""
        return {key.partition("@")[2]: n for key, n in (limits or {}).items()
                if "@" in key and key.partition("@")[0] == self.name}

    def lm_eval_argv(self, cells: list[str], limit: int | None, output: Path, cache: Path | None) -> list[str]:
        """The arguments of `caef-bench lm-eval` (lm-eval's own CLI) that run these cells."""
        args = ",".join(f"{key}={value}" for key, value in self.resolved_model_args().items())
        argv = ["--model", self.model, "--model_args", args, "--tasks", ",".join(self.task(c) for c in cells),
                "--output_path", str(output), "--log_samples", "--include_path", str(TASKS_DIR)]
        if self.apply_chat_template:
            argv.append("--apply_chat_template")
        if self.gen_kwargs:
            argv += ["--gen_kwargs", ",".join(f"{key}={value}" for key, value in self.gen_kwargs.items())]
        if self.batch_size is not None:
            argv += ["--batch_size", str(self.batch_size)]
        if limit:
            argv += ["--limit", str(limit)]
        if cache is not None:
            argv += ["--use_cache", str(cache)]
        return argv


def _placeholder(name: str) -> str:
    if name == "smollm2":
        from caef_bench.models.smollm2 import converted_dir

        return str(converted_dir())
    if name == "data":
        from caef_bench.paths import data_root

        return str(data_root())
    value = os.environ.get(name[4:])
    if not value:
        raise ValueError(f"model_args need the environment variable {name[4:]}")
    return value


def load_system(path: str | Path) -> System:
    import yaml

    path = Path(path)
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    unknown = set(data) - {f for f in System.__dataclass_fields__ if f != "path"}
    if unknown:
        raise ValueError(f"{path}: unknown field(s) {', '.join(sorted(unknown))}")
    for required in ("name", "model", "tasks"):
        if not data.get(required):
            raise ValueError(f"{path}: '{required}' is required")
    if data["tasks"] not in TASK_GROUPS:
        raise ValueError(f"{path}: tasks must be one of {', '.join(TASK_GROUPS)}, not {data['tasks']!r}")
    if data.get("paper_row") not in (None, *PAPER_ROWS):
        raise ValueError(f"{path}: paper_row must be one of {', '.join(PAPER_ROWS)} or null")
    return System(**data, path=path)


def load_systems(folder: str | Path = BASELINES_DIR) -> dict[str, System]:
    """Every system in the folder, by name (file order)."""
    systems = {}
    for path in sorted(Path(folder).glob("*.y*ml")):
        system = load_system(path)
        if system.name in systems:
            raise ValueError(f"two systems named {system.name!r}: {systems[system.name].path} and {path}")
        systems[system.name] = system
    if not systems:
        raise FileNotFoundError(f"no system files (*.yaml) in {folder}")
    return systems


def choose_systems(names: str | None) -> tuple[dict[str, System], list[str]]:
    """Every system of baselines/ and the names a comma-separated `names` picks (default all); an
    unknown name is an error naming the known ones."""
    systems = load_systems()
    chosen = names.split(",") if names else list(systems)
    unknown = [name for name in chosen if name not in systems]
    if unknown:
        raise ValueError(f"unknown system(s) {', '.join(unknown)}; systems in baselines/: {', '.join(systems)}")
    return systems, chosen


def cells_of(items: list[str] | None, systems, cells: list[str], select_cells) -> dict[str, list[str]]:
    """--cells-of NAME=PATTERN,... (repeatable) -> {system: its cells}: a slow system on fewer of the
    suite's `cells`; select_cells turns the patterns into cell names."""
    chosen = {}
    for item in items or ():
        name, _, patterns = item.partition("=")
        if name not in systems:
            raise ValueError(f"--cells-of: unknown system {name!r}; systems in baselines/: {', '.join(systems)}")
        chosen[name] = [cell for cell in select_cells(patterns) if cell in cells]
    return chosen


def system_limits(text: str | None, known) -> dict[str, int]:
    """--limits 'caef-tiny=10,lora-direct-tiny=50,caef-tiny@repeated_*_10_*=200' -> {name or name@pattern: N}."""
    limits = {}
    for item in (i for i in (text or "").split(",") if i):
        key, equals, value = item.partition("=")
        name, _, pattern = key.partition("@")
        if not equals or not value.isdigit() or name not in known or (key != name and not pattern):
            raise ValueError(f"--limits takes SYSTEM=N or SYSTEM@CELL_PATTERN=N, comma-separated, with systems of "
                             f"baselines/ ({', '.join(known)}), not {item!r}")
        limits[key] = int(value)
    return limits
