"""Kernel control flow: `for` loops (unrolled, or `scf.for` carrying variables) and `if` (resolved at
compile time, or `scf.if` yielding variables), as a mixin of the code generator.

A runtime loop carries the variables its body reassigns that hold numbers or tiles before it; a carried
variable must keep its type, unless the body never reads its previous value (then it is only unavailable
after the loop). A runtime `if` yields the variables both branches define, with one type. Names that end
up without a value become `Undefined`, which reports why when read.
"""

from __future__ import annotations

import ast
from typing import Any

from xdsl.dialects import scf
from xdsl.dialects.builtin import i32
from xdsl.ir import Block, Region

from tinyton.dialects.tt import element_type, is_float, shape_of
from tinyton.errors import CompilationError
from tinyton.frontend.semantic import TileBuilder
from tinyton.frontend.values import (
    SELECT,
    Tile,
    builtin_name,
    describe,
    is_number,
    promote,
)

UNROLL_MAX_TRIPS = 8
"""Loops with constexpr bounds and at most this many iterations are unrolled at compile time."""


class Undefined:
    """A name without a value at this point (defined in one branch only, inside a runtime loop, ...)."""

    def __init__(self, message: str):
        self.message = message


def assigned_names(stmts: list[ast.stmt]) -> set[str]:
    return {n.id for s in stmts for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


class ControlFlow:
    """`visit_If` and `visit_For` of `KernelCodegen`, which provides the scope, the builder and the
    visitors (`visit`, `visit_body`, `arguments`, `line`)."""

    b: TileBuilder
    scope: dict[str, Any]
    region_depth: int  # > 0 inside runtime loops and branches

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
        cond = self.b.truth(cond, "if")
        outer, blocks, scopes = self.scope, [Block(), Block()], []
        self.region_depth += 1
        try:
            for body, block in zip((node.body, node.orelse), blocks):
                self.scope = dict(outer)
                with self.b.at_end(block):
                    self.visit_body(body)
                scopes.append(self.scope)
        finally:
            self.scope = outer
            self.region_depth -= 1
        names, yields = [], ([], [])
        for name in sorted(assigned_names(node.body) | assigned_names(node.orelse)):
            merged = self.merge_branches(name, scopes, blocks, node)
            if isinstance(merged, tuple):
                names.append(name)
                for values, v in zip(yields, merged):
                    values.append(v.value)
            elif merged is not None:
                self.scope[name] = merged
        for block, values in zip(blocks, yields):
            block.add_op(scf.YieldOp(*values))
        types = [v.type for v in yields[0]]
        op = self.b.insert(scf.IfOp(cond.value, types, Region(blocks[0]), Region(blocks[1])))
        for name, result in zip(names, op.results):
            self.scope[name] = Tile(result)

    def merge_branches(self, name: str, scopes: list[dict], blocks: list[Block], node: ast.If) -> Any:
        """The value of `name` after a runtime `if`: one value, one per branch to yield, or None."""
        values = [s.get(name) for s in scopes]
        if values[0] is values[1]:  # unchanged, or the same value in both branches
            return values[0]
        where = f"the `if` at line {self.line(node)}"
        if not all(isinstance(v, Tile) or is_number(v) for v in values):
            return Undefined(
                f"`{name}` does not get a number or tile in both branches of {where}; assign it before the `if`"
            )
        if all(is_number(v) for v in values) and values[0] == values[1] and type(values[0]) is type(values[1]):
            return values[0]
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
        return tuple(tiles)

    def visit_For(self, node: ast.For) -> None:
        if node.orelse:
            raise CompilationError("for ... else is not supported in kernels")
        if not isinstance(node.target, ast.Name):
            raise CompilationError("the loop variable must be a single name")
        it = node.iter
        fn = self.visit(it.func) if isinstance(it, ast.Call) else None
        if fn is not range and builtin_name(fn) != "static_range":
            raise CompilationError("kernels loop over range(...) or tt.static_range(...) only")
        args, kwargs = self.arguments(it)
        if kwargs or not 1 <= len(args) <= 3:
            raise CompilationError("range takes 1 to 3 positional arguments")
        bounds = (0, args[0], 1) if len(args) == 1 else (*args, 1) if len(args) == 2 else tuple(args)
        if not any(isinstance(b, Tile) for b in bounds):
            if not all(isinstance(b, int) for b in bounds):
                raise CompilationError(f"range bounds must be integers, got {', '.join(map(describe, bounds))}")
            trips = range(*bounds) if bounds[2] else None
            if trips is not None and (builtin_name(fn) == "static_range" or len(trips) <= UNROLL_MAX_TRIPS):
                for i in trips:
                    self.scope[node.target.id] = i
                    self.visit_body(node.body)
                return
        elif builtin_name(fn) == "static_range":
            raise CompilationError("tt.static_range needs constexpr bounds; use range() for runtime bounds")
        if isinstance(bounds[2], int) and bounds[2] <= 0:
            raise CompilationError(f"a runtime loop needs a positive step, got {bounds[2]}")
        self.runtime_loop(node, [self.loop_bound(b) for b in bounds])

    def loop_bound(self, bound: Any) -> Tile:
        if isinstance(bound, Tile) and (bound.shape or is_float(bound.type) or bound.is_pointer):
            raise CompilationError(f"range bounds must be integer scalars, got {describe(bound)}")
        return self.b.cast(bound, i32)

    def runtime_loop(self, node: ast.For, bounds: list[Tile]) -> None:
        """`scf.for` carrying the reassigned variables that hold numbers or tiles before the loop."""
        var = node.target.id
        assigned = assigned_names(node.body) - {var}
        carried = [n for n in sorted(assigned) if isinstance(self.scope.get(n), Tile) or is_number(self.scope.get(n))]
        inits = [self.b.tile(self.scope[n], n) for n in carried]
        block = Block(arg_types=[i32, *(t.type for t in inits)])
        outer = self.scope
        self.scope = {**outer, var: Tile(block.args[0]), **{n: Tile(a) for n, a in zip(carried, block.args[1:])}}
        self.region_depth += 1
        try:
            with self.b.at_end(block):
                self.visit_body(node.body)
                kept = [self.carry_out(n, arg, node) for n, arg in zip(carried, block.args[1:])]
            body_scope = self.scope
        finally:
            self.scope = outer
            self.region_depth -= 1
        block.add_op(scf.YieldOp(*(k.value for k in kept if k is not None)))
        for arg, k in reversed(list(zip(block.args[1:], kept))):
            if k is None:
                block.erase_arg(arg)
        loop = self.b.insert(scf.ForOp(*(b.value for b in bounds), [t.value for t, k in zip(inits, kept) if k], block))
        results = iter(loop.results)
        line = self.line(node)
        for n, k in zip(carried, kept):
            self.scope[n] = Tile(next(results)) if k else Undefined(
                f"`{n}` changes type inside the runtime loop at line {line}; it cannot be used after the loop"
            )
        for n in assigned - set(carried):
            if n not in outer or body_scope.get(n) is not outer[n]:
                self.scope[n] = Undefined(
                    f"`{n}` is assigned inside the runtime loop at line {line} and cannot be used after it; "
                    "assign it a number or tile before the loop"
                )
        self.scope[var] = Undefined(f"the loop variable `{var}` of the runtime loop at line {line} ends with it")

    def carry_out(self, name: str, arg: Any, node: ast.For) -> Tile | None:
        """The value yielded for a carried variable, or None to drop it (type changed, never read)."""
        new = self.scope.get(name)
        if is_number(new):
            new = self.b.operand(new, element_type(arg.type), shape_of(arg.type))
        if isinstance(new, Tile) and new.type == arg.type:
            return new
        if arg.first_use is None:
            return None
        after = new.type if isinstance(new, Tile) else describe(new)
        raise CompilationError(
            f"loop-carried variable `{name}` is {arg.type} before the loop but {after} after the loop body; "
            "it must keep its type across iterations: initialise it with that type (e.g. tt.zeros(shape, "
            "tt.float32), 0.0 instead of 0, or .to(...))"
        )
