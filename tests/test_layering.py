"""The import graph of `tinyton/` flows one way, bottom to top (docs/design.md, "Layers").

Every import counts, at module level or inside a function (a lazy import only delays loading, it does not
change who depends on whom), `if TYPE_CHECKING:` ones and `lazy_module("...")` calls (tinyton/lazy.py) too. A module may import modules of a lower
layer and of its own package; two packages of the same layer (rewrites and lowering) stay independent.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parent.parent / "tinyton"

LAYERS: list[list[str]] = [
    ["tinyton.errors", "tinyton.intmath", "tinyton.lazy", "tinyton.limits", "tinyton.profiling"],
    ["tinyton.elements", "tinyton.numpy_dtypes"],
    ["tinyton.dtypes"],
    ["tinyton.dialects"],
    ["tinyton.analysis"],
    ["tinyton.rewrites", "tinyton.lowering"],
    ["tinyton.passes"],
    ["tinyton.runtime"],
    ["tinyton.compiler"],
    ["tinyton.frontend"],
    ["tinyton.language"],
    ["tinyton.cli", "tinyton.tools", "tinyton.torch", "tinyton.universe", "tinyton"],
]
"""Bottom to top. A module belongs to the longest prefix listed; `tinyton` itself is the package face."""


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _group(module: str) -> tuple[int, str]:
    """(layer index, group name) of a module."""
    best: tuple[int, str] | None = None
    for rank, groups in enumerate(LAYERS):
        for group in groups:
            if (module == group or module.startswith(group + ".")) and (best is None or len(group) > len(best[1])):
                best = (rank, group)
    assert best is not None, f"{module} belongs to no layer: add it to LAYERS"
    return best


def _imports(module: str) -> set[str]:
    """The tinyton modules that `module` imports, anywhere in its file."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "lazy_module" and node.args:
            found.add(ast.literal_eval(node.args[0]))
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:  # `from pkg import submodule` depends on the submodule
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base)
    return {m for m in found if m in MODULES and m != module}


GRAPH = nx.DiGraph([(m, dep) for m in MODULES for dep in _imports(m)])
GRAPH.add_nodes_from(MODULES)


def test_every_module_has_a_layer() -> None:
    for module in MODULES:
        _group(module)


def test_no_import_cycle() -> None:
    cycles = [" -> ".join([*c, c[0]]) for c in nx.simple_cycles(GRAPH)]
    assert not cycles, "import cycles:\n  " + "\n  ".join(cycles[:20])


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_flow_down(module: str) -> None:
    rank, group = _group(module)
    wrong = []
    for dep in sorted(GRAPH.successors(module)):
        dep_rank, dep_group = _group(dep)
        if dep_group != group and dep_rank >= rank:
            wrong.append(f"{dep} (layer {dep_rank}: {dep_group})")
    assert not wrong, f"{module} (layer {rank}: {group}) imports upwards or sideways: {', '.join(wrong)}"
