"""Load the functions of a user's Python file without running its script part.

Examples are scripts (they launch kernels at top level), so the CLI executes only a file's imports,
function and class definitions and simple assignments, then picks the named `@tt.jit` function.
"""

from __future__ import annotations

import ast
import sys
import traceback
from pathlib import Path
from typing import Any

from tinyton.errors import CompilationError
from tinyton.frontend.jit import JITFunction

_KEPT = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)


def _is_definition(node: ast.stmt) -> bool:
    if isinstance(node, _KEPT):
        return True
    # `BLOCK = 1024`, `EPS: float = 1e-6`: module constants that kernels may read.
    value = getattr(node, "value", None)
    return isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(value, ast.Constant)


def _source(file: Path) -> str:
    """The text of a Python file, or a CompilationError saying why it is not one."""
    if not file.exists():
        raise CompilationError(f"no such file: {file}")
    if not file.is_file():
        raise CompilationError(f"{file} is not a file; give the .py file that defines the @tt.jit function")
    if file.suffix != ".py":
        raise CompilationError(f"{file} is not a Python file (.py); give the .py file that defines the @tt.jit function")
    data = file.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CompilationError(f"{file} is not Python source: byte {e.start} (0x{data[e.start]:02x}) is not UTF-8 text") from None


def load_definitions(path: str) -> dict[str, Any]:
    """The namespace of `path` after running only its definitions."""
    file = Path(path)
    try:
        tree = ast.parse(_source(file), filename=str(file))
    except SyntaxError as e:
        raise CompilationError(f"not valid Python: {e.msg}", str(file), e.lineno or 0, e.offset or 0) from None
    tree.body = [node for node in tree.body if _is_definition(node)]
    namespace: dict[str, Any] = {"__name__": f"tinyton_cli_{file.stem}", "__file__": str(file)}
    sys.path.insert(0, str(file.parent.resolve()))
    try:
        exec(compile(tree, str(file), "exec"), namespace)
    except Exception as e:  # the user's own definitions failed (a missing import, a decorator's error)
        if isinstance(e, CompilationError):
            raise
        line = next((f.lineno for f in reversed(traceback.extract_tb(e.__traceback__)) if f.filename == str(file)), 0)
        raise CompilationError(
            f"defining the functions of {file.name} raised {type(e).__name__}: {e}", str(file), line
        ) from None
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
    namespace = load_definitions(path)
    found = {k: v for k, v in namespace.items() if isinstance(v, JITFunction) and v.is_kernel}
    listed = ", ".join(found) or "none"
    if name is None:
        if not found:
            raise LookupError(f"{path} defines no @tt.jit kernel (a function without `return <value>`)")
        if len(found) > 1:
            raise LookupError(f"{path} defines {len(found)} @tt.jit kernels ({listed}); pick one with -k NAME")
        return next(iter(found.values()))
    if name not in found and isinstance(namespace.get(name), JITFunction):
        raise LookupError(
            f"{path}: {name} is an array program (it returns a value), not a kernel; draw its fusion with "
            f"`tinyton graph {path}:{name} --shape ...`"
        )
    if name not in found:
        raise LookupError(f"{path} has no @tt.jit kernel {name!r} (its kernels: {listed}); check the -k NAME")
    return found[name]
