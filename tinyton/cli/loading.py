"""Load the functions of a user's Python file without running its script part.

Examples are scripts (they launch kernels at top level), so the CLI executes only a file's imports,
function and class definitions and simple assignments, then picks the named `@tt.jit` function.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

_KEPT = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)


def _is_definition(node: ast.stmt) -> bool:
    if isinstance(node, _KEPT):
        return True
    # `BLOCK = 1024`, `EPS: float = 1e-6`: module constants that kernels may read.
    value = getattr(node, "value", None)
    return isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(value, ast.Constant)


def load_definitions(path: str) -> dict[str, Any]:
    """The namespace of `path` after running only its definitions."""
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    tree = ast.parse(file.read_text(), filename=str(file))
    tree.body = [node for node in tree.body if _is_definition(node)]
    namespace: dict[str, Any] = {"__name__": f"tinyton_cli_{file.stem}", "__file__": str(file)}
    sys.path.insert(0, str(file.parent.resolve()))
    try:
        exec(compile(tree, str(file), "exec"), namespace)
    finally:
        sys.path.pop(0)
    return namespace


def load_function(path: str, name: str) -> Any:
    """The function `name` of `path`: the Python function itself when it is wrapped in `@tt.jit`."""
    namespace = load_definitions(path)
    if not callable(namespace.get(name)):
        raise LookupError(f"{path} has no function {name!r}")
    return getattr(namespace[name], "fn", namespace[name])


def load_jit_function(path: str, name: str | None) -> Any:
    """The `@tt.jit` function `name` of `path` (the only one when `name` is None)."""
    from tinyton.frontend.jit import JITFunction

    namespace = load_definitions(path)
    found = {k: v for k, v in namespace.items() if isinstance(v, JITFunction)}
    if name is None:
        if len(found) != 1:
            raise LookupError(f"{path} defines {len(found)} @tt.jit functions ({', '.join(found) or 'none'}); pick one")
        return next(iter(found.values()))
    if name not in found:
        raise LookupError(f"{path} has no @tt.jit function {name!r} (it has: {', '.join(found) or 'none'})")
    return found[name]
