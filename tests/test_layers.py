"""The package's stages import down the data's journey only: machines -> data -> models ->
train / runtime -> evaluate / serve -> report -> cli (and its commands). A module that imports a later stage (at the top or
inside a function) makes the earlier stage depend on everything after it."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "caef_bench"
# Stage of each subpackage or top-level module; the same number: siblings, which may not import
# each other (training and the runtime share models, not each other).
STAGES = {"paths": 0, "machines": 0, "data": 1, "models": 2, "train": 3, "runtime": 3, "evaluate": 4, "serve": 4,
          "report": 5, "cli": 6, "commands": 6, "__main__": 6}


def _stage_name(module: str) -> str | None:
    """'caef_bench.models.loading' -> 'models'; modules outside the package -> None."""
    parts = module.split(".")
    return parts[1] if parts[0] == "caef_bench" and len(parts) > 1 else None


def _imports(source: str, package: str) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in a module's source, relative ones resolved
    against its package ('caef_bench.evaluate')."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found.append((node.lineno, module))
            if module == "caef_bench":  # `from caef_bench import models`, `from .. import models`
                found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return found


def backward_imports(own: str, source: str, package: str) -> list[str]:
    """The imports of a module of stage `own` that run back up the journey (or across to a sibling)."""
    backwards = []
    for line, module in _imports(source, package):
        other = _stage_name(module)
        if other is None or other == own or other not in STAGES:
            continue
        if STAGES[other] > STAGES[own] or {own, other} == {"train", "runtime"}:
            backwards.append(f"line {line} imports {module} ({own} is stage {STAGES[own]}, {other} stage {STAGES[other]})")
    return backwards


def _sources():
    return sorted(p for p in PACKAGE.rglob("*.py") if "bundled" not in p.parts)


def test_the_stage_table_names_every_part_of_the_package():
    parts = {p.relative_to(PACKAGE).parts[0].removesuffix(".py") for p in _sources()}
    assert parts - {"__init__"} <= set(STAGES), sorted(parts - {"__init__"} - set(STAGES))


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_import_runs_back_up_the_journey(path):
    own = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    if own != "__init__":
        assert not backward_imports(own, path.read_text(), package), path


def test_the_check_sees_backward_and_sideways_imports():
    assert backward_imports("models", "from caef_bench.evaluate import scoring\n", "caef_bench.models")
    assert backward_imports("data", "def f():\n    from ..report import tables\n", "caef_bench.data")
    assert backward_imports("train", "from caef_bench import runtime\n", "caef_bench.train")
    assert backward_imports("runtime", "import caef_bench.train.loop\n", "caef_bench.runtime")
    assert not backward_imports("evaluate", "from ..runtime import Problem\nfrom . import scoring\n",
                                "caef_bench.evaluate")


def _module_name(path: Path) -> str:
    parts = ("caef_bench",) + path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_circles(sources: dict[str, str]) -> list[list[str]]:
    """Circles of modules importing each other ({module: source}), at the top or inside a function: each the
    modules of one strongly connected part of the import graph, where there is more than one."""
    modules = set(sources)
    graph = {}
    for module, source in sources.items():
        package = module if module in {m.rpartition(".")[0] for m in modules} else module.rpartition(".")[0]
        graph[module] = {imported for _, imported in _imports(source, package) if imported in modules and imported != module}
    order, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(module):  # Tarjan's strongly connected components
        order[module] = low[module] = len(order)
        stack.append(module)
        on_stack.add(module)
        for other in graph[module]:
            if other not in order:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], order[other])
        if low[module] == order[module]:
            part = []
            while not part or part[-1] != module:
                part.append(stack.pop())
                on_stack.discard(part[-1])
            if len(part) > 1:
                circles.append(sorted(part))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return circles


def test_no_modules_import_each_other():
    sources = {_module_name(path): path.read_text() for path in _sources()}
    assert import_circles(sources) == []


def test_an_import_circle_through_a_function_level_import_is_found():
    sources = {"caef_bench.machines.text": "def f():\n    from .long import g\n",
               "caef_bench.machines.long": "from .text import f\n", "caef_bench.machines.other": "import os\n"}
    assert import_circles(sources) == [["caef_bench.machines.long", "caef_bench.machines.text"]]
