"""Kernel branches: `if` and runtime ternaries (resolved at compile time, or `scf.if` yielding variables),
as a mixin of the code generator; loops are in loops.py.

A runtime `if` yields the variables both branches define, with one type (tuples element by element, so a
helper's `return a, b` from both branches merges too; block pointers and tensor descriptors of one block
shape scalar by scalar). Names that end up without a value become
`Undefined`, which reports why when read.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from xdsl.dialects import scf
from xdsl.ir import Block, Region

from tinyton.dialects.tt import element_type, shape_of
from tinyton.errors import CompilationError
from tinyton.frontend.block_pointers import is_aggregate
from tinyton.frontend.returns import RESULT, has_return
from tinyton.frontend.semantic import TileBuilder
from tinyton.frontend.values import SELECT, Tile, is_number, promote

TERNARY = "ternary value"
"""The hidden scope name of a runtime ternary's value while its arms are generated."""


class Undefined:
    """A name without a value at this point (defined in one branch only, inside a runtime loop, ...)."""

    def __init__(self, message: str):
        self.message = message


@dataclass(frozen=True)
class _Yielded:
    """A value that differs between the branches: one tile per branch, yielded by the `scf.if`."""

    tiles: tuple[Tile, Tile]


@dataclass(frozen=True)
class _Aggregate:
    """A block pointer (or tensor descriptor) that differs between the branches: its scalars merged one by
    one, rebuilt on `template` after the `scf.if`."""

    template: Any
    slots: tuple[Any, ...]


def assigned_names(stmts: list[ast.stmt]) -> set[str]:
    return {n.id for s in stmts for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


class ControlFlow:
    """`visit_If` and runtime ternaries of `KernelCodegen`, which provides the scope, the builder and the
    visitors (`visit`, `visit_body`, `line`)."""

    b: TileBuilder
    scope: dict[str, Any]

    def visit_If(self, node: ast.If) -> None:
        cond = self.visit(node.test)
        if not isinstance(cond, Tile):
            self.visit_body(node.body if cond else node.orelse)
            return
        if cond.shape:
            raise CompilationError(
                f"`if` needs a scalar condition, got a tile of shape {list(cond.shape)}; choose elementwise "
                "with tt.where(cond, a, b)"
            )
        names = assigned_names(node.body) | assigned_names(node.orelse) | ({RESULT} if has_return(node) else set())
        arms = [lambda: self.visit_body(node.body), lambda: self.visit_body(node.orelse)]
        self.branch(cond, arms, names, f"the `if` at line {self.line(node)}")

    def ternary(self, cond: Tile, node: ast.IfExp) -> Any:
        """A runtime `a if c else b` on a scalar: an `scf.if` in which only the taken arm runs."""

        def arm(expr: ast.expr) -> Callable[[], None]:
            return lambda: self.scope.__setitem__(TERNARY, self.visit(expr))

        self.branch(cond, [arm(node.body), arm(node.orelse)], {TERNARY}, f"the conditional expression at line {self.line(node)}")
        value = self.scope.pop(TERNARY)
        if isinstance(value, Undefined):
            raise CompilationError(value.message.replace(f"`{TERNARY}`", "the value"))
        return value

    def branch(self, cond: Tile, arms: list[Callable[[], None]], names: set[str], where: str) -> None:
        """Generate `arms` (then, else) in the two regions of an `scf.if` on the scalar `cond`, and give
        the `names` they assign their merged values."""
        cond = self.b.truth(cond, "if")
        outer, blocks, scopes = self.scope, [Block(), Block()], []
        try:
            for arm, block in zip(arms, blocks):
                self.scope = dict(outer)
                with self.b.at_end(block):
                    arm()
                scopes.append(self.scope)
        finally:
            self.scope = outer
        merged = {n: self.merge_branches(n, [s.get(n) for s in scopes], blocks, where) for n in sorted(names)}
        pending = [leaf for value in merged.values() for leaf in _leaves(value)]
        for k, block in enumerate(blocks):
            block.add_op(scf.YieldOp(*(p.tiles[k].value for p in pending)))
        types = [p.tiles[0].type for p in pending]
        op = self.b.insert(scf.IfOp(cond.value, types, Region(blocks[0]), Region(blocks[1])))
        results = {id(p): Tile(r) for p, r in zip(pending, op.results)}
        for name, value in merged.items():
            self.scope[name] = _resolve(value, results)

    def merge_branches(self, name: str, values: list[Any], blocks: list[Block], where: str) -> Any:
        """The value of `name` after a runtime `if`: one value, `_Yielded` tiles, or a tuple of those."""
        if values[0] is values[1]:  # unchanged, or the same value in both branches
            return values[0]
        if all(isinstance(v, tuple) for v in values) and len(values[0]) == len(values[1]):
            return tuple(
                self.merge_branches(f"{name}[{k}]", [v[k] for v in values], blocks, where) for k in range(len(values[0]))
            )
        if not any(isinstance(v, Tile) for v in values) and type(values[0]) is type(values[1]):
            try:
                if values[0] == values[1]:
                    return values[0]
            except (TypeError, ValueError):
                pass
        if all(is_aggregate(v) for v in values):
            return self.merge_aggregates(name, values, blocks, where)
        if not all(isinstance(v, Tile) or is_number(v) for v in values):
            return Undefined(
                f"`{name}` does not get a number or tile in both branches of {where}; assign it before the `if`"
            )
        typed = [v for v in values if isinstance(v, Tile)]
        target = typed[0].type if typed else promote(SELECT, [type(v) for v in values], "if")
        tiles = []
        for v, block in zip(values, blocks):
            with self.b.at_end(block):
                tiles.append(v if isinstance(v, Tile) else self.b.operand(v, element_type(target), shape_of(target)))
        if tiles[0].type != tiles[1].type:
            return Undefined(
                f"`{name}` has type {tiles[0].type} in one branch of {where} and {tiles[1].type} in the other; "
                "give it one type (e.g. with .to(...))"
            )
        return _Yielded((tiles[0], tiles[1]))


    def merge_aggregates(self, name: str, values: list[Any], blocks: list[Block], where: str) -> Any:
        """Two block pointers (or descriptors) of one kind and block: their scalars merged one by one."""
        first, second = values
        if type(first) is not type(second) or first.with_tiles(second.tiles()) != second:
            return Undefined(
                f"`{name}` is a different kind of block pointer (block shape, order or padding) in the two "
                f"branches of {where}; give it one in both"
            )
        tiles = [v.tiles() for v in values]
        slots = tuple(
            self.merge_branches(f"{name}#{k}", [t[k] for t in tiles], blocks, where) for k in range(len(tiles[0]))
        )
        bad = next((s for s in slots if isinstance(s, Undefined)), None)
        return bad if bad is not None else _Aggregate(first, slots)


def _leaves(value: Any) -> list[_Yielded]:
    if isinstance(value, _Yielded):
        return [value]
    if isinstance(value, _Aggregate):
        return _leaves(value.slots)
    return [leaf for v in value for leaf in _leaves(v)] if isinstance(value, tuple) else []


def _resolve(value: Any, results: dict[int, Tile]) -> Any:
    if isinstance(value, _Yielded):
        return results[id(value)]
    if isinstance(value, _Aggregate):
        return value.template.with_tiles([_resolve(s, results) for s in value.slots])
    return tuple(_resolve(v, results) for v in value) if isinstance(value, tuple) else value

