"""Early returns: rewrite a function body so that every `return` is the last statement of its block.

`if c: ...; return x` followed by more statements becomes `if c: ...; return x` / `else: <the rest>`:
each branch that can fall through gets the statements after the `if`. The code generator then treats a
`return` as "the function's result is x" (a hidden variable that a runtime `if` merges like any other),
which turns a `return` inside a runtime `if` into structured control flow (`scf.if`) with no goto. A
`return` inside a loop is left alone: the code generator refuses it.
"""

from __future__ import annotations

import ast

RESULT = "return value"
"""The hidden scope name holding a function's result (not a Python identifier: no clash with user names)."""


def has_return(node: ast.AST) -> bool:
    """Whether `node` holds a `return` of its own function (nested functions aside)."""
    pending = [node]
    while pending:
        n = pending.pop()
        if isinstance(n, ast.Return):
            return True
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            pending.extend(ast.iter_child_nodes(n))
    return False


def terminates(stmts: list[ast.stmt]) -> bool:
    """Whether every path through `stmts` ends in a `return`."""
    if not stmts:
        return False
    last = stmts[-1]
    return isinstance(last, ast.Return) or (
        isinstance(last, ast.If) and terminates(last.body) and terminates(last.orelse)
    )


def hoist_returns(stmts: list[ast.stmt]) -> list[ast.stmt]:
    """`stmts` with the code after each `if` that returns moved into its branches that fall through
    (and the dead code after a `return` dropped)."""
    out: list[ast.stmt] = []
    for i, stmt in enumerate(stmts):
        if isinstance(stmt, ast.Return):
            out.append(stmt)
            return out
        if isinstance(stmt, ast.If) and has_return(stmt):
            rest = stmts[i + 1 :]
            body = stmt.body if terminates(stmt.body) else [*stmt.body, *rest]
            orelse = stmt.orelse if terminates(stmt.orelse) else [*stmt.orelse, *rest]
            out.append(ast.copy_location(ast.If(test=stmt.test, body=hoist_returns(body), orelse=hoist_returns(orelse)), stmt))
            return out
        out.append(stmt)
    return out
