"""The runtime package holds runtime only: it never imports Airflow, the tools or the Airflow face.

Executors get ``lakehouse`` alone (zipped by spark-submit's --py-files), and a job's driver should
not pay for Airflow's import; each module is imported in a fresh interpreter, as an executor would.
"""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import lakehouse

RUNTIME_MODULES = sorted(
    module.name for module in pkgutil.walk_packages(lakehouse.__path__, prefix="lakehouse.")
)
FORBIDDEN = ("airflow", "lakehouse_airflow", "lakehouse_tools")

pytestmark = pytest.mark.unit


def test_every_runtime_module_is_found():
    assert {"lakehouse.runner", "lakehouse.runtime.available_now", "lakehouse.catalog"} <= set(
        RUNTIME_MODULES
    )


def test_no_runtime_module_imports_airflow_or_the_tools():
    probe = (
        "import importlib, sys\n"
        f"for name in {RUNTIME_MODULES!r}:\n"
        "    importlib.import_module(name)\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({FORBIDDEN!r})))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]", result.stdout


def import_graph(packages=("lakehouse", "lakehouse_airflow", "lakehouse_tools")) -> dict:
    """Module -> the project modules it imports anywhere in its body (function-level imports too)."""
    include = Path(lakehouse.__file__).resolve().parents[1]
    files = {}
    for path in include.rglob("*.py"):
        parts = list(path.relative_to(include).with_suffix("").parts)
        if parts[0] in packages:
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path

    def module_of(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for module, path in files.items():
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
        graph[module] = {m for m in map(module_of, imported) if m and m != module}
    return graph


def cycles(graph: dict) -> list[list[str]]:
    """The import circles: strongly connected components of more than one module."""
    order, low, stack, found = {}, {}, [], []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for imported in graph[module]:
            if imported not in order:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], order[imported])
        if low[module] == order[module]:
            component = []
            while not component or component[-1] != module:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return found


def test_the_cycle_finder_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circles_between_project_modules():
    graph = import_graph()
    assert "lakehouse.catalog" in graph and "lakehouse_tools.cli" in graph
    assert cycles(graph) == []
