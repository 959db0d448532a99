"""The parsed source of a `@tt.jit` function: AST, parameters, namespaces, kernel or array program."""

from __future__ import annotations

import ast
import dis
import inspect
import sys
import textwrap
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tinyton.errors import CompilationError, SourceLocation
from tinyton.frontend.returns import hoist_returns


class constexpr:
    """Annotation of a compile-time parameter (`BLOCK: tt.constexpr`).

    Its value is folded into the kernel (usable in shapes, `tt.arange` bounds and `range`) and is part of
    the specialisation key, so each distinct value compiles one variant."""

    def __init__(self, value: Any):
        self.value = value


@dataclass(frozen=True)
class Param:
    """A parameter of the function; constexpr ones are folded into the kernel."""

    name: str
    constexpr: bool
    default: Any  # inspect.Parameter.empty when there is none
    node: ast.arg


def constexpr_value(value: Any) -> Any:
    """A Python value as the code generator sees it: NumPy scalars become Python numbers, lists tuples."""
    if isinstance(value, constexpr):
        return value.value
    if isinstance(value, list):
        return tuple(value)
    numpy = sys.modules.get("numpy")  # a NumPy scalar exists only once NumPy is loaded: never load it here
    return value.item() if numpy is not None and isinstance(value, numpy.generic) else value


class Namespace(Mapping[str, Any]):
    """The names a function sees, read when looked up (closure cells, then its module's globals): a
    helper defined later in the module resolves at the first launch, not at decoration."""

    def __init__(self, fn: Callable[..., Any]):
        self.globals: dict[str, Any] = fn.__globals__
        self.cells: dict[str, Any] = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))

    def __getitem__(self, name: str) -> Any:
        cell = self.cells.get(name)
        if cell is not None:
            try:
                return cell.cell_contents
            except ValueError:  # an empty cell: the variable is not assigned yet
                pass
        return self.globals[name]

    def __contains__(self, name: object) -> bool:
        try:
            self[name]  # type: ignore[index]
        except KeyError:
            return False
        return True

    def __iter__(self) -> Iterator[str]:
        return iter({**self.globals, **self.cells})

    def __len__(self) -> int:
        return len({**self.globals, **self.cells})


@dataclass(frozen=True)
class KernelSource:
    """Everything the code generator and the launcher need from the Python function, parsed once."""

    fn: Callable[..., Any]
    tree: ast.FunctionDef
    where: SourceLocation
    params: tuple[Param, ...]
    is_kernel: bool  # no `return <value>`: launched with kernel[grid](...)
    namespace: Namespace  # closure variables over globals, read live
    body: tuple[ast.stmt, ...]  # the body with every `return` in tail position (returns.hoist_returns)

    @property
    def name(self) -> str:
        return self.fn.__name__

    def error(self, node: ast.AST, message: str) -> CompilationError:
        return CompilationError(message).locate(self.where, node)

    @staticmethod
    def parse(fn: Callable[..., Any]) -> KernelSource:
        try:
            lines, first_line = inspect.getsourcelines(fn)
        except (OSError, TypeError) as e:
            raise CompilationError(
                f"cannot read the source of `{fn.__qualname__}` ({e}): kernels compile from their source, so "
                "define them in a .py file (not in `python -c` or a REPL)"
            ) from None
        indent = len(lines[0]) - len(lines[0].lstrip())
        where = SourceLocation(inspect.getsourcefile(fn) or fn.__code__.co_filename, first_line, indent)
        try:
            fdef = ast.parse(textwrap.dedent("".join(lines))).body[0]
        except SyntaxError:  # a lambda's line is not a statement of its own
            raise CompilationError(
                f"@tt.jit decorates plain `def` functions; `{fn.__qualname__}` is not one", where.filename, first_line
            ) from None
        if not isinstance(fdef, ast.FunctionDef):
            raise CompilationError("@tt.jit decorates plain `def` functions").locate(where, fdef)
        namespace = Namespace(fn)
        is_kernel = _is_kernel(fdef)
        params = _params(fn, fdef, where, namespace, is_kernel)
        return KernelSource(fn, fdef, where, params, is_kernel, namespace, tuple(hoist_returns(fdef.body)))


def _params(
    fn: Callable[..., Any], fdef: ast.FunctionDef, where: SourceLocation, namespace: Namespace, is_kernel: bool
) -> tuple[Param, ...]:
    a = fdef.args
    for node, kind in ((a.vararg, "*args"), (a.kwarg, "**kwargs"), (a.kwonlyargs[:1], "keyword-only")):
        if node and is_kernel:
            target = node[0] if isinstance(node, list) else node
            raise CompilationError(f"{kind} parameters are not supported in @tt.jit functions").locate(where, target)
    defaults = inspect.signature(fn).parameters
    return tuple(
        Param(arg.arg, _is_constexpr(arg.annotation, namespace), defaults[arg.arg].default, arg)
        for arg in (*a.posonlyargs, *a.args)
    )


def _is_constexpr(annotation: ast.expr | None, namespace: Namespace) -> bool:
    """`tt.constexpr` (any spelling that resolves to it), or a string annotation naming it."""
    if annotation is None:
        return False
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return annotation.value.rsplit(".", 1)[-1] == "constexpr"
    try:
        value = eval(compile(ast.Expression(annotation), "<annotation>", "eval"), {}, namespace)
    except Exception:
        return ast.unparse(annotation).rsplit(".", 1)[-1] == "constexpr"
    return value is constexpr


def _is_kernel(fdef: ast.FunctionDef) -> bool:
    """A kernel has no `return <value>` (nested functions aside); an array program returns arrays."""
    pending: list[ast.AST] = list(fdef.body)
    while pending:
        node = pending.pop()
        value = node.value if isinstance(node, ast.Return) else None
        if value is not None and not (isinstance(value, ast.Constant) and value.value is None):
            return False
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            pending.extend(ast.iter_child_nodes(node))
    return True


def returns_values(fn: Callable[..., Any]) -> bool:
    """Whether `fn`'s bytecode has a `return <value>`: tells kernels from array programs when the source
    cannot be read (`python -c`, a REPL)."""
    previous = None
    for ins in dis.get_instructions(fn):
        implicit = previous is not None and previous.opname == "LOAD_CONST" and previous.argval is None
        if (ins.opname == "RETURN_CONST" and ins.argval is not None) or (ins.opname == "RETURN_VALUE" and not implicit):
            return True
        previous = ins
    return False
