"""Kernel loops: `for` over `range` / `tt.range` / `tt.static_range` and `while`, as a mixin of the code
generator.

`for` with constexpr bounds unrolls when it runs at most UNROLL_MAX_TRIPS times (always for
`tt.static_range`); otherwise (and always for `tt.range`, as in Triton) it becomes `scf.for` over i32 (i64
when a bound needs it), carrying the variables the body reassigns; a negative or runtime step runs as
Python's range does (`loop_space`). `tt.range(..., num_stages=, loop_unroll_factor=)` puts
`tt.num_stages` / `tt.loop_unroll_factor` attributes on the `scf.for` for the lowering to read.
`while` runs at compile time while its condition is a constexpr and becomes `scf.while` once it is a
runtime scalar. A carried variable must keep its type, unless (in `for`) the body never reads its previous
value (then it is only unavailable after the loop). Both loops carry block pointers and tensor descriptors as
their scalars. `break` and `continue` are refused, as in Triton.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from typing import Any

from xdsl.dialects import scf
from xdsl.dialects.builtin import IntegerAttr, IntegerType, UnitAttr, i32, i64
from xdsl.ir import Block, Region

from tinyton.dialects.tt import element_type, is_float, shape_of
from tinyton.errors import CompilationError
from tinyton.frontend.block_pointers import is_aggregate
from tinyton.frontend.control_flow import Undefined, assigned_names
from tinyton.frontend.semantic import TileBuilder
from tinyton.frontend.values import Tile, builtin_name, describe, is_number

UNROLL_MAX_TRIPS = 8
"""Loops with constexpr bounds and at most this many iterations are unrolled at compile time."""
CONSTEXPR_WHILE_MAX_TRIPS = 4096
"""A `while` whose condition stays a constexpr this long is taken for an endless loop."""
LOOP_HINTS = {"num_stages": "tt.num_stages", "loop_unroll_factor": "tt.loop_unroll_factor"}
"""`tt.range` keyword -> the `scf.for` attribute that carries it."""
LOOP_FLAGS = {"warp_specialize": "tt.warp_specialize"}
"""`tt.range` keywords that, True, put a unit attribute on the `scf.for`
(tinyton/lowering/tt_to_llvm/warp_specialize.py)."""


class Loops:
    """`visit_For` and `visit_While` of `KernelCodegen`, which provides the scope, the builder and the
    visitors (`visit`, `visit_body`, `arguments`, `line`)."""

    b: TileBuilder
    scope: dict[str, Any]
    loop_depth: int

    def visit_For(self, node: ast.For) -> None:
        if node.orelse:
            raise CompilationError("for ... else is not supported in kernels")
        if not isinstance(node.target, ast.Name):
            raise CompilationError("the loop variable must be a single name")
        it = node.iter
        fn = self.visit(it.func) if isinstance(it, ast.Call) else None
        kind = "python" if fn is range else builtin_name(fn)
        if kind not in ("python", "static_range", "range"):
            raise CompilationError("kernels loop over range(...), tt.range(...) or tt.static_range(...) only")
        args, kwargs = self.arguments(it)
        bounds, hints = loop_arguments(fn, args, kwargs)
        self.loop_depth += 1
        try:
            if not any(isinstance(b, Tile) for b in bounds):
                if not all(isinstance(b, int) for b in bounds):
                    raise CompilationError(f"range bounds must be integers, got {', '.join(map(describe, bounds))}")
                trips = range(*bounds) if bounds[2] else None
                if trips is not None and (kind == "static_range" or (kind == "python" and len(trips) <= UNROLL_MAX_TRIPS)):
                    for i in trips:
                        self.scope[node.target.id] = i
                        self.visit_body(node.body)
                    return
            elif kind == "static_range":
                raise CompilationError("tt.static_range needs constexpr bounds; use tt.range() for runtime bounds")
            if isinstance(bounds[2], int) and bounds[2] == 0:
                raise CompilationError("range() step must not be zero")
            self.runtime_loop(node, bounds, hints)
        finally:
            self.loop_depth -= 1

    def loop_bound(self, bound: Any, iv: IntegerType) -> Tile:
        if isinstance(bound, Tile) and (bound.shape or is_float(bound.type) or bound.is_pointer):
            raise CompilationError(f"range bounds must be integer scalars, got {describe(bound)}")
        if not isinstance(bound, (Tile, int)):  # as Python's range, which takes no floats
            raise CompilationError(f"range bounds must be integers, got {describe(bound)}; use an int")
        return self.b.cast(bound, iv)

    def loop_space(self, bounds: tuple[Any, Any, Any]) -> tuple[list[Tile], Callable[[Tile], Tile] | None]:
        """The `scf.for` bounds of `range(start, end, step)`, and how the body gets the loop variable from the
        `scf.for`'s counter (None: it is the counter). The counter is i64 when a bound needs it (an i64 value,
        or a constant beyond int32), as Triton's. A positive constexpr step is the `scf.for`'s own; any other
        step (negative, or a runtime value of either sign) counts the trips as Python's range does (a runtime
        sign test picks the direction; a runtime step of 0 runs no trip) and the variable is
        `start + k * step`."""
        iv = i64 if any(_needs_64_bits(b) for b in bounds) else i32
        start, end, step = (self.loop_bound(b, iv) for b in bounds)
        if isinstance(bounds[2], int) and bounds[2] > 0:
            return [start, end, step], None
        b = self.b

        def count(distance: Tile, stride: Tile) -> Tile:  # ceil(max(distance, 0) / stride), stride > 0
            return b.binary("//", b.binary("+", b.binary("maximum", distance, 0), b.binary("-", stride, 1)), stride)

        backward = count(b.binary("-", start, end), b.binary("maximum", b.unary("neg", step), 1))
        if isinstance(bounds[2], int):
            trips = backward
        else:
            forward = count(b.binary("-", end, start), b.binary("maximum", step, 1))
            trips = b.where(b.binary(">", step, 0), forward, b.where(b.binary("<", step, 0), backward, 0))
        return [b.cast(0, iv), trips, b.cast(1, iv)], lambda k: b.binary("+", start, b.binary("*", k, step))

    def carried_names(self, body: list[ast.stmt], exclude: set[str]) -> tuple[set[str], list[str]]:
        """(names the body assigns, those of them that hold numbers or tiles now: the loop carries them)."""
        assigned = assigned_names(body) - exclude
        values = [n for n in sorted(assigned) if isinstance(self.scope.get(n), Tile) or is_number(self.scope.get(n))]
        return assigned, values + [n for n in sorted(assigned) if is_aggregate(self.scope.get(n))]

    def split_aggregates(self, names: list[str]) -> tuple[list[str], dict[str, Any]]:
        """`names` with each aggregate (a block pointer) replaced by slot names `name#i` for its values, which
        the scope then holds; and the aggregates by name (templates to rebuild them from the slots)."""
        aggregates = {n: self.scope[n] for n in names if is_aggregate(self.scope[n])}
        slots = []
        for n in names:
            if n not in aggregates:
                slots.append(n)
                continue
            for i, value in enumerate(aggregates[n].tiles()):
                self.scope[f"{n}#{i}"] = value
                slots.append(f"{n}#{i}")
        return slots, aggregates

    def join_aggregates(self, aggregates: dict[str, Any]) -> None:
        """Rebuild each aggregate from its slots in the scope (Undefined if a slot is)."""
        for n, template in aggregates.items():
            values = [self.scope.pop(f"{n}#{i}") for i in range(len(template.tiles()))]
            bad = next((v for v in values if isinstance(v, Undefined)), None)
            self.scope[n] = bad if bad is not None else template.with_tiles(values)

    def spill_aggregates(self, aggregates: dict[str, Any]) -> None:
        """Put the body's new value of each aggregate into its slots (a value of another kind fails the
        slots' type check)."""
        for n, template in aggregates.items():
            new = self.scope.get(n)
            same = type(new) is type(template) and len(new.tiles()) == len(template.tiles())
            for i in range(len(template.tiles())):
                self.scope[f"{n}#{i}"] = new.tiles()[i] if same else new

    def runtime_loop(self, node: ast.For, bounds: tuple[Any, Any, Any], hints: dict[str, int | bool]) -> None:
        """`scf.for` carrying the reassigned variables that hold numbers or tiles before the loop."""
        var = node.target.id
        space, variable = self.loop_space(bounds)
        assigned, carried = self.carried_names(node.body, {var})
        carried, aggregates = self.split_aggregates(carried)
        inits = [self.b.tile(self.scope[n], n) for n in carried]
        block = Block(arg_types=[space[0].type, *(t.type for t in inits)])
        outer = self.scope
        self.scope = {**outer, **{n: Tile(a) for n, a in zip(carried, block.args[1:])}}
        self.join_aggregates(aggregates)
        try:
            with self.b.at_end(block):
                counter = Tile(block.args[0])
                self.scope[var] = counter if variable is None else variable(counter)
                self.visit_body(node.body)
                self.spill_aggregates(aggregates)
                kept = [self.carry_out(n, arg, strict=False) for n, arg in zip(carried, block.args[1:])]
            body_scope = self.scope
        finally:
            self.scope = outer
        block.add_op(scf.YieldOp(*(k.value for k in kept if k is not None)))
        for arg, k in reversed(list(zip(block.args[1:], kept))):
            if k is None:
                block.erase_arg(arg)
        loop = scf.ForOp(*(b.value for b in space), [t.value for t, k in zip(inits, kept) if k], block)
        for name, value in hints.items():
            if name in LOOP_FLAGS:
                loop.attributes[LOOP_FLAGS[name]] = UnitAttr()
            else:
                loop.attributes[LOOP_HINTS[name]] = IntegerAttr(value, 32)
        self.b.insert(loop)
        results = iter(loop.results)
        line = self.line(node)
        for n, k in zip(carried, kept):
            self.scope[n] = Tile(next(results)) if k else Undefined(
                f"`{n.split('#')[0]}` changes type inside the runtime loop at line {line}; it cannot be used after "
                "the loop"
            )
        self.join_aggregates(aggregates)
        self.forget_body_names(assigned - set(carried) - set(aggregates), outer, body_scope, line)
        self.scope[var] = Undefined(f"the loop variable `{var}` of the runtime loop at line {line} ends with it")

    def forget_body_names(self, names: set[str], outer: dict[str, Any], body_scope: dict[str, Any], line: int) -> None:
        for n in names:
            if n not in outer or body_scope.get(n) is not outer[n]:
                self.scope[n] = Undefined(
                    f"`{n}` is assigned inside the runtime loop at line {line} and cannot be used after it; "
                    "assign it a number or tile before the loop"
                )

    def carry_out(self, name: str, arg: Any, strict: bool) -> Tile | None:
        """The value yielded for a carried variable, or None to drop it (type changed, never read, and
        not `strict`)."""
        new = self.scope.get(name)
        if is_number(new):
            new = self.b.operand(new, element_type(arg.type), shape_of(arg.type))
        if isinstance(new, Tile) and new.type == arg.type:
            return new
        if arg.first_use is None and not strict:
            return None
        after = new.type if isinstance(new, Tile) else describe(new)
        raise CompilationError(
            f"loop-carried variable `{name}` is {arg.type} before the loop but {after} after the loop body; "
            "it must keep its type across iterations: initialise it with that type (e.g. tt.zeros(shape, "
            "tt.float32), 0.0 instead of 0, or .to(...))"
        )

    # ---- while ----------------------------------------------------------------------------------

    def visit_While(self, node: ast.While) -> None:
        if node.orelse:
            raise CompilationError("while ... else is not supported in kernels")
        self.loop_depth += 1
        try:
            for _ in range(CONSTEXPR_WHILE_MAX_TRIPS):
                cond = self.probe(node.test)
                if isinstance(cond, Tile):
                    self.runtime_while(node)
                    return
                if not cond:
                    return
                self.visit_body(node.body)
            raise CompilationError(
                f"this while loop's condition stayed a true constexpr for {CONSTEXPR_WHILE_MAX_TRIPS} iterations"
            )
        finally:
            self.loop_depth -= 1

    def probe(self, test: ast.expr) -> Any:
        """The condition's value if it is a constexpr, else some Tile (its ops are thrown away)."""
        scratch = Block()
        with self.b.at_end(scratch):
            value = self.visit(test)
        for op in reversed(list(scratch.ops)):
            scratch.erase_op(op)
        return value

    def runtime_while(self, node: ast.While) -> None:
        """`scf.while`: the condition in the `before` region, the body in `after`, carrying the variables
        the body reassigns (they must keep their types)."""
        assigned, carried = self.carried_names(node.body, set())
        carried, aggregates = self.split_aggregates(carried)
        inits = [self.b.tile(self.scope[n], n) for n in carried]
        types = [t.type for t in inits]
        before, after = Block(arg_types=types), Block(arg_types=types)
        outer = self.scope
        try:
            self.scope = {**outer, **{n: Tile(a) for n, a in zip(carried, before.args)}}
            self.join_aggregates(aggregates)
            with self.b.at_end(before):
                cond = self.visit(node.test)
                if not isinstance(cond, Tile) or cond.shape:
                    raise CompilationError(f"a while condition must be a scalar, got {describe(cond)}")
                before.add_op(scf.ConditionOp(self.b.truth(cond, "while").value, *before.args))
            self.scope = {**outer, **{n: Tile(a) for n, a in zip(carried, after.args)}}
            self.join_aggregates(aggregates)
            with self.b.at_end(after):
                self.visit_body(node.body)
                self.spill_aggregates(aggregates)
                yielded = [self.carry_out(n, arg, strict=True) for n, arg in zip(carried, after.args)]
            body_scope = self.scope
        finally:
            self.scope = outer
        after.add_op(scf.YieldOp(*(y.value for y in yielded)))
        loop = self.b.insert(scf.WhileOp([t.value for t in inits], types, Region(before), Region(after)))
        for n, r in zip(carried, loop.results):
            self.scope[n] = Tile(r)
        self.join_aggregates(aggregates)
        self.forget_body_names(assigned - set(carried) - set(aggregates), outer, body_scope, self.line(node))


def _needs_64_bits(bound: Any) -> bool:
    if isinstance(bound, Tile):
        return isinstance(bound.element, IntegerType) and bound.element.bitwidth == 64
    return isinstance(bound, int) and not -(2**31) <= bound < 2**31


def loop_arguments(
    fn: Any, args: list[Any], kwargs: dict[str, Any]
) -> tuple[tuple[Any, Any, Any], dict[str, int | bool]]:
    """((start, end, step), loop hints) of `range(...)` / `tt.range(...)` / `tt.static_range(...)`."""
    if fn is range:
        if kwargs or not 1 <= len(args) <= 3:
            raise CompilationError("range takes 1 to 3 positional arguments")
        named = dict(zip(("arg1", "arg2", "step"), args))
    else:
        try:
            bound = inspect.signature(fn).bind(*args, **kwargs)
        except TypeError as e:
            raise CompilationError(f"tt.{builtin_name(fn)}(): {e}") from None
        bound.apply_defaults()
        named = bound.arguments
    start, end, step = named["arg1"], named.get("arg2"), named.get("step")
    bounds = (0, start, 1 if step is None else step) if end is None else (start, end, 1 if step is None else step)
    hints = {}
    for name in LOOP_HINTS:
        value = named.get(name)
        if value is not None:
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise CompilationError(f"tt.range(): {name} must be a constexpr non-negative int, got {describe(value)}")
            hints[name] = value
    for name in LOOP_FLAGS:
        value = named.get(name, False)
        if not isinstance(value, bool):
            raise CompilationError(f"tt.range(): {name} must be a constexpr bool, got {describe(value)}")
        if value:
            hints[name] = True
    return bounds, hints
