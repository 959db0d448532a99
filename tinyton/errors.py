"""`CompilationError`: a user-facing error that points at the kernel's (or array program's) source line.

It sits at the bottom of the import graph: every layer, from the dialects' verifiers to the CLI, may
raise it or add a location to it.
"""

from __future__ import annotations

import ast
import linecache
import os
import sys
from dataclasses import dataclass
from functools import lru_cache
from types import CodeType
from typing import Any

_TINYTON_DIR = os.path.dirname(os.path.abspath(__file__))


@dataclass(frozen=True)
class SourceLocation:
    """Where a kernel's AST came from: node positions are relative to the dedented source."""

    filename: str
    first_line: int  # file line of the AST's line 1
    indent: int  # columns removed by dedenting

    def of(self, node: ast.AST) -> tuple[int, int]:
        """File line and 1-based column of `node`."""
        return self.first_line + node.lineno - 1, self.indent + node.col_offset + 1


class CompilationError(Exception):
    """A kernel cannot be compiled; `str(err)` is `file:line:col: message`, the source line and a caret.

    Raised without a location by the semantic layer; the code generator adds the location of the
    statement or expression it was compiling (`locate`), so every message names the user's line.
    """

    def __init__(self, message: str, filename: str | None = None, line: int = 0, col: int = 0):
        self.message, self.filename, self.line, self.col = message, filename, line, col
        super().__init__(self._render())

    @property
    def located(self) -> bool:
        return self.filename is not None

    def locate(self, where: SourceLocation, node: ast.AST) -> CompilationError:
        """This error at `node` (unchanged when it already has a location or `node` has none)."""
        if self.located or not hasattr(node, "lineno"):
            return self
        line, col = where.of(node)
        return CompilationError(self.message, where.filename, line, col)

    def _render(self) -> str:
        if not self.located:
            return self.message
        source = linecache.getline(self.filename, self.line).rstrip()
        text = f"{self.filename}:{self.line}:{self.col}: {self.message}"
        if source:
            text += f"\n    {source}\n    {' ' * (self.col - 1)}^"
        return text


def user_location() -> tuple[str, int, int]:
    """`(file, line, column)` of the innermost frame outside the tinyton package: the user's code.

    The column (1-based, 0 when unknown) is the start of the expression being evaluated."""
    frame = sys._getframe(1)
    while frame is not None:
        if _is_user_file(frame.f_code.co_filename):
            col = 0
            if hasattr(frame.f_code, "co_positions"):  # Python >= 3.11
                positions = _positions(frame.f_code)
                if 0 <= frame.f_lasti // 2 < len(positions):
                    col = (positions[frame.f_lasti // 2][2] or -1) + 1
            return frame.f_code.co_filename, frame.f_lineno, col
        frame = frame.f_back
    return "<unknown>", 0, 0


@lru_cache(maxsize=256)
def _is_user_file(filename: str) -> bool:
    path = os.path.abspath(filename)
    return not path.startswith(_TINYTON_DIR + os.sep) and not path.startswith("<frozen")


@lru_cache(maxsize=64)
def _positions(code: CodeType) -> list[tuple[int | None, ...]]:
    """The code's instruction positions, listed once per code object (a traced program calls
    `user_location` once per op, and a long program's position table is long)."""
    return list(code.co_positions())


def error(message: str) -> CompilationError:
    """A CompilationError at the user's current line: `softmax.py:3:9: operands could not ...`."""
    return CompilationError(message, *user_location())


class CallError(CompilationError, TypeError, ValueError):
    """A call of a `@tt.jit` function that cannot work as written (arguments, launch options, grid).

    Located at the user's call line; a TypeError and a ValueError too, as Python's own call errors are."""


def call_error(message: str) -> CallError:
    """A CallError at the user's current line."""
    return CallError(message, *user_location())


def op_error(op: Any, message: str) -> CompilationError:
    """A CompilationError about an IR op: `kernel.mlir:4:5: tt.program_id: message`.

    The location is the op's `loc(...)` (tinyton-opt gives every parsed op its place in the input file,
    tracing gives the user's Python line); an op without one is named with its function."""
    loc = getattr(op, "location", None)
    if all(hasattr(loc, f) for f in ("filename", "line", "column")):
        return CompilationError(f"{op.name}: {message}", loc.filename.data, loc.line.data, loc.column.data)
    parent = op.parent_op() if hasattr(op, "parent_op") else None
    while parent is not None and not hasattr(parent, "sym_name"):
        parent = parent.parent_op()
    where = f" (in @{parent.sym_name.data})" if parent is not None and parent.sym_name is not None else ""
    return CompilationError(f"{op.name}{where}: {message}")
