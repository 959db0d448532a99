"""Kernel semantics of reductions and scans with a combine function (`tl.reduce`, `associative_scan`,
`argmax`/`argmin`, `max(..., return_indices=True)`, `xor_sum`, `cumsum`, `cumprod`), as a mixin of
`TileBuilder`.

A combine is a Python callable `(lhs tiles, rhs tiles) -> values` that emits scalar ops into the
`tt.reduce`/`tt.scan` region: the builtins' own, or a user `@jit` function the code generator inlines
(`call_function`). Argmax/argmin break ties toward the lower index and treat NaN as the largest value
(smallest for argmin is its mirror), so the result does not depend on the order the GPU combines in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import prod
from typing import Any

from xdsl.dialects.builtin import IntegerType, Signedness, bf16, f32, i1, i32

from tinyton.dialects import tt
from tinyton.errors import CompilationError
from tinyton.frontend.values import Tile, describe

Combine = Callable[[list[Tile], list[Tile]], Sequence[Any]]


class CombineOps:
    """Combine-based builtins of `TileBuilder`; `call_function(fn, args)` inlines a `@jit` function (set
    by the code generator)."""

    call_function: Callable[[Any, list[Tile]], Any]

    def _combine_inputs(self, x: Any, what: str) -> list[Tile]:
        inputs = list(x) if isinstance(x, tuple) else [x]
        if not inputs or not all(isinstance(t, Tile) and t.shape and not t.is_pointer for t in inputs):
            raise CompilationError(f"{what} takes a tile of numbers (or a tuple of them), got {describe(x)}")
        if len({t.shape for t in inputs}) != 1:
            raise CompilationError(f"{what}: the tiles have different shapes {[list(t.shape) for t in inputs]}")
        return inputs

    def _axis_of(self, inputs: list[Tile], axis: Any, what: str) -> tuple[list[Tile], int]:
        """Inputs and a non-negative axis; `axis=None` flattens the inputs first (as Triton)."""
        if axis is None:
            return [self.reshape(t, (prod(t.shape),)) for t in inputs], 0
        rank = len(inputs[0].shape)
        if not isinstance(axis, int) or not -rank <= axis < rank:
            raise CompilationError(f"{what}: axis must be a constexpr int in [{-rank}, {rank}), got {describe(axis)}")
        return inputs, axis % rank

    def _region(self, inputs: list[Tile], combine: Combine) -> Any:
        block = tt.CombineReduceOp.block_for([t.value for t in inputs])
        n = len(inputs)
        with self.at_end(block):
            results = combine([Tile(a) for a in block.args[:n]], [Tile(a) for a in block.args[n:]])
            if len(results) != n:
                raise CompilationError(f"the combine function returns {len(results)} values for {n} inputs")
            yields = [self.operand(r, t.element, ()) for r, t in zip(results, inputs)]
            self.insert(tt.CombineYieldOp(*(y.value for y in yields)))
        return block

    def reduce_with(self, x: Any, axis: Any, combine: Combine, keep_dims: bool, what: str) -> list[Tile]:
        inputs = self._combine_inputs(x, what)
        rank = len(inputs[0].shape)
        inputs, ax = self._axis_of(inputs, axis, what)
        op = self.insert(tt.CombineReduceOp([t.value for t in inputs], ax, self._region(inputs, combine)))
        outs = [Tile(r) for r in op.results]
        if keep_dims:
            keep = (1,) * rank if axis is None else None
            outs = [self.reshape(o, keep) if keep else self.expand_dims(o, ax) for o in outs]
        return outs

    def scan_with(self, x: Any, axis: Any, combine: Combine, reverse: bool, what: str) -> list[Tile]:
        inputs = self._combine_inputs(x, what)
        inputs, ax = self._axis_of(inputs, axis, what)
        block = self._region(inputs, combine)
        op = self.insert(tt.ScanOp([t.value for t in inputs], ax, block, bool(reverse)))
        return [Tile(r) for r in op.results]

    def user_combine(self, fn: Any) -> Combine:
        def combine(lhs: list[Tile], rhs: list[Tile]) -> Sequence[Any]:
            out = self.call_function(fn, [*lhs, *rhs])
            return out if isinstance(out, tuple) else (out,)

        return combine

    def reduce_fn(self, x: Any, axis: Any, fn: Any, keep_dims: bool) -> Any:
        outs = self.reduce_with(x, axis, self.user_combine(fn), keep_dims, "tl.reduce")
        return tuple(outs) if isinstance(x, tuple) else outs[0]

    def scan_fn(self, x: Any, axis: Any, fn: Any, reverse: bool) -> Any:
        outs = self.scan_with(x, axis, self.user_combine(fn), reverse, "tl.associative_scan")
        return tuple(outs) if isinstance(x, tuple) else outs[0]

    def _better(self, kind: str, a: Tile, b: Tile) -> Tile:
        """Whether `a` wins over `b` for argmax (`kind` "max") or argmin, NaN winning both."""
        wins = self.binary(">" if kind == "max" else "<", a, b)
        if tt.is_float(a.type):
            wins = self.binary("|", wins, self.binary("&", self.binary("!=", a, a), self.binary("==", b, b)))
        return wins

    def _equal(self, a: Tile, b: Tile) -> Tile:
        same = self.binary("==", a, b)
        if tt.is_float(a.type):
            same = self.binary("|", same, self.binary("&", self.binary("!=", a, a), self.binary("!=", b, b)))
        return same

    def with_indices(self, kind: str, x: Any, axis: Any, keep_dims: bool, what: str) -> tuple[Tile, Tile]:
        """(max or min, its index) along `axis`; ties go to the lowest index."""
        (x,) = self._combine_inputs(x, what)
        (x,), ax = self._axis_of([x], axis, what)
        if x.element == i1:
            x = self.cast(x, i32)
        index = self.arange(0, x.shape[ax])
        for d in range(len(x.shape)):
            if d != ax:
                index = self.expand_dims(index, d)
        index = self.broadcast(index, x.shape)

        def combine(lhs: list[Tile], rhs: list[Tile]) -> list[Tile]:
            (a, ia), (b, ib) = lhs, rhs
            tie = self.binary("&", self._equal(a, b), self.binary("<", ia, ib))
            take = self.binary("|", self._better(kind, a, b), tie)
            return [self.where(take, a, b), self.where(take, ia, ib)]

        value, idx = self.reduce_with((x, index), ax, combine, keep_dims, what)
        return value, idx

    def xor_sum(self, x: Any, axis: Any, keep_dims: bool) -> Tile:
        (t,) = self._combine_inputs(x, "tl.xor_sum")
        if tt.is_float(t.type):
            raise CompilationError("tl.xor_sum needs integer tiles")
        return self.reduce_with(t, axis, lambda l, r: [self.binary("^", l[0], r[0])], keep_dims, "tl.xor_sum")[0]

    def cumulative(self, op: str, x: Any, axis: Any, reverse: bool, what: str, dtype: Any = None) -> Tile:
        """`cumsum` (op "+") or `cumprod` ("*") as Triton's: bf16 scans in f32; a cumsum of ints narrower than
        32 bits (booleans too) in int32 (uint32 for unsigned ones), or in `dtype` when given."""
        (t,) = self._combine_inputs(x, what)
        if dtype is not None:
            t = self.cast(t, dtype)
        elif t.element == bf16:
            t = self.cast(t, f32)
        elif t.element == i1 or (op == "+" and isinstance(t.element, IntegerType) and t.element.bitwidth < 32):
            unsigned = t.element != i1 and t.element.signedness.data == Signedness.UNSIGNED
            t = self.cast(t, IntegerType(32, Signedness.UNSIGNED) if unsigned else i32)
        return self.scan_with(t, axis, lambda l, r: [self.binary(op, l[0], r[0])], reverse, what)[0]
