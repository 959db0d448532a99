"""A small builder for tt kernels: constants, implicit splat/broadcast, i32 index arithmetic, loops.

tt ops never broadcast implicitly; `binary` inserts the `tt.splat` / `tt.broadcast` a hand-writer would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import numpy as np
from xdsl.dialects import scf
from xdsl.dialects.builtin import (
    Float16Type,
    Float32Type,
    FloatAttr,
    IntegerAttr,
    UnitAttr,
    i1,
    i32,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from tinyton.dialects import tt
from tinyton.dialects.tt import element_type, is_float, shape_of, tile_type
from tinyton.dtypes import ELEMENT_TO_NUMPY, constant_key

Shape = tuple[int, ...]
f32 = Float32Type()


def broadcast_shape(*shapes: Shape) -> Shape:
    """The common tile shape (all tiles of a kernel share one rank; scalars are `()`)."""
    return tuple(np.broadcast_shapes(*shapes))


def identity(kind: str, element: Attribute) -> float | int:
    """Neutral element of a reduction `kind` ("sum", "prod", "max", "min"; "argmax"/"argmin" as max/min)
    for `element`."""
    kind = kind.removeprefix("arg")
    if kind in ("sum", "prod"):
        one = kind == "prod"
        return float(one) if is_float(element) else int(one)
    if is_float(element):
        return float("-inf") if kind == "max" else float("inf")
    if element == i1:
        return 0 if kind == "max" else 1
    info = np.iinfo(ELEMENT_TO_NUMPY[element])
    return int(info.min) if kind == "max" else int(info.max)


SCAN_RUN = 32
"""Elements of a `tt.scan` axis (held whole in each thread's registers) that `Emitter.scan` emits at least
per run; rows of up to SCAN_RUN * SCAN_RUNS elements take runs of SCAN_RUN."""
SCAN_RUNS = 64
"""Runs a row is cut into at most (their [runs, runs] combination is spread over the threads)."""


class Emitter:
    """Appends tt ops at an insertion point; `at(block)` switches blocks (loop bodies)."""

    def __init__(self, block: Block):
        self.block = block
        self._consts: dict[tuple, SSAValue] = {}
        """Constants, splats and broadcasts already emitted, per block (emitted once, reused)."""
        self._open: list[Block] = []
        """The blocks `continue_if` left, innermost last."""

    def emit(self, op: Operation) -> SSAValue:
        Rewriter.insert_op(op, InsertPoint.at_end(self.block))
        return op.results[0] if op.results else None  # type: ignore[return-value]

    # ---- constants and shapes ------------------------------------------------------------
    def const(self, value: float | bool, element: Attribute, shape: Shape = ()) -> SSAValue:
        """A constant of `element` type, scalar or tile; memoised per block."""
        key = (self.block, shape, constant_key(value, element))
        if key not in self._consts:
            if is_float(element):
                attr = FloatAttr(float(value), element)
            else:
                attr = IntegerAttr(int(value) if element != i1 else int(bool(value)), element)
            self._consts[key] = self.emit(tt.ConstantOp(attr, tile_type(element, shape)))
        return self._consts[key]

    def i32(self, value: int) -> SSAValue:
        return self.const(value, i32)

    def to_shape(self, value: SSAValue, shape: Shape) -> SSAValue:
        """Splat a scalar or broadcast a tile (size-1 dims) to `shape`."""
        have = shape_of(value.type)
        if have == shape:
            return value
        assert not have or (len(have) == len(shape) and all(h in (1, n) for h, n in zip(have, shape))), (
            f"internal error: a {list(have)} tile cannot broadcast to {list(shape)}")  # else LLVM's garbage on a GPU
        key = (self.block, value, shape)
        if key not in self._consts:
            op = tt.SplatOp(value, shape) if not have else tt.BroadcastOp(value, shape)
            self._consts[key] = self.emit(op)
        return self._consts[key]

    def expand(self, value: SSAValue, axis: int) -> SSAValue:
        return self.emit(tt.ExpandDimsOp(value, axis))

    # ---- arithmetic ------------------------------------------------------------------------
    def binary(self, cls: type[Operation], a: SSAValue, b: SSAValue) -> SSAValue:
        shape = broadcast_shape(shape_of(a.type), shape_of(b.type))
        return self.emit(cls(self.to_shape(a, shape), self.to_shape(b, shape)))

    def cmp(self, predicate: str, a: SSAValue, b: SSAValue) -> SSAValue:
        shape = broadcast_shape(shape_of(a.type), shape_of(b.type))
        return self.emit(tt.CmpOp(predicate, self.to_shape(a, shape), self.to_shape(b, shape)))

    def select(self, cond: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        shape = broadcast_shape(*(shape_of(v.type) for v in (cond, a, b)))
        return self.emit(tt.SelectOp(*(self.to_shape(v, shape) for v in (cond, a, b))))

    def finite_max(self, m: SSAValue) -> SSAValue:
        """A running maximum to subtract before `exp`: -inf (nothing seen yet) becomes 0, so that
        `exp(x - m)` of an all -inf row is exp(-inf) = 0, not exp(-inf - -inf) = NaN (online softmax)."""
        el = element_type(m.type)
        return self.select(self.cmp("eq", m, self.const(float("-inf"), el)), self.const(0.0, el), m)

    def cast(self, value: SSAValue, element: Attribute) -> SSAValue:
        return value if element_type(value.type) == element else self.emit(tt.CastOp(value, element))

    def and_(self, a: SSAValue | None, b: SSAValue | None) -> SSAValue | None:
        """Conjunction of optional masks (None is all-true)."""
        if a is None or b is None:
            return a if b is None else b
        return self.binary(tt.AndOp, a, b)

    # Integer index arithmetic that folds the trivial cases a hand-writer would not write.
    def add(self, a: SSAValue | None, b: SSAValue | None) -> SSAValue | None:
        if a is None or b is None:
            return a if b is None else b
        return self.binary(tt.AddOp, a, b)

    def mul_int(self, a: SSAValue, k: int) -> SSAValue:
        return a if k == 1 else self.binary(tt.MulOp, a, self.i32(k))

    def div_int(self, a: SSAValue, k: int) -> SSAValue:
        return a if k == 1 else self.binary(tt.FloorDivOp, a, self.i32(k))

    def mod_int(self, a: SSAValue, k: int) -> SSAValue:
        return self.binary(tt.ModOp, a, self.i32(k))

    def arange(self, n: int, rank: int = 1, dim: int = 0) -> SSAValue:
        """`arange(n)` shaped to run along tile dimension `dim` of a rank-`rank` tile."""
        value = self.emit(tt.ArangeOp(0, n))
        return self.expand(value, 1 - dim) if rank == 2 else value

    def reduce(self, kind: str, value: SSAValue, axis: int) -> SSAValue:
        """Reduce a tile along `axis`, keeping the rank (a rank-1 tile reduces to a scalar)."""
        if not shape_of(value.type):  # a one-element row
            return value
        if kind == "prod":
            out = self.combine_reduce([value], axis, lambda a, b: [self.binary(tt.MulOp, a[0], b[0])])[0]
        else:
            cls = {"sum": tt.ReduceSumOp, "max": tt.ReduceMaxOp, "min": tt.ReduceMinOp}[kind]
            out = self.emit(cls(value, axis))
        return self.expand(out, axis) if len(shape_of(value.type)) == 2 else out

    def better(self, kind: str, a: SSAValue, b: SSAValue) -> SSAValue:
        """Whether `a` beats `b` for "argmax" (larger) or "argmin" (smaller); a NaN beats any number (NumPy)."""
        wins = self.cmp("gt" if kind == "argmax" else "lt", a, b)
        if is_float(element_type(a.type)):
            wins = self.binary(tt.OrOp, wins, self.and_(self.cmp("ne", a, a), self.cmp("eq", b, b)))
        return wins

    def arg_reduce(self, kind: str, value: SSAValue, index: SSAValue, axis: int) -> tuple[SSAValue, SSAValue]:
        """(best value, its index) along `axis` for "argmax"/"argmin", keeping the rank: ties and NaNs go to
        the lowest index, so the result does not depend on the order the lanes combine in."""
        if not shape_of(value.type):
            return value, index

        def combine(lhs: list[SSAValue], rhs: list[SSAValue]) -> list[SSAValue]:
            (a, ia), (b, ib) = lhs, rhs
            same = self.cmp("eq", a, b)
            if is_float(element_type(a.type)):
                same = self.binary(tt.OrOp, same, self.and_(self.cmp("ne", a, a), self.cmp("ne", b, b)))
            take = self.binary(tt.OrOp, self.better(kind, a, b), self.and_(same, self.cmp("lt", ia, ib)))
            return [self.select(take, a, b), self.select(take, ia, ib)]

        out = self.combine_reduce([value, index], axis, combine)
        if len(shape_of(value.type)) == 2:
            out = [self.expand(v, axis) for v in out]
        return out[0], out[1]

    def scan(self, kind: str, value: SSAValue, axis: int) -> SSAValue:
        """Inclusive running "sum" or "prod" of a tile along `axis`.

        `tt.scan` holds the whole axis in each thread's registers, so a row of more than `SCAN_RUN`
        elements is cut into runs: each run scanned in registers, then combined with what the runs before
        it total (a masked [runs, runs] reduction, whose work is spread over the threads)."""
        shape = shape_of(value.type)
        if not shape:
            return value
        n = shape[axis]
        if len(shape) != 1 or n <= SCAN_RUN:
            return self._register_scan(kind, value, axis)
        width = max(SCAN_RUN, n // SCAN_RUNS)
        runs = n // width
        grid = self.emit(tt.ReshapeOp(value, (runs, width)))
        local, totals = self._register_scan(kind, grid, 1), self.reduce(kind, grid, 1)  # [runs, width], [runs, 1]
        el = element_type(value.type)
        row, col = self.arange(runs, 2, 0), self.arange(runs, 2, 1)  # [runs, 1], [1, runs]
        earlier = self.cmp("lt", col, row)
        square = (runs, runs)
        each = self.to_shape(self.emit(tt.ReshapeOp(totals, (1, runs))), square)
        before = self.reduce(kind, self.select(earlier, each, self.const(identity(kind, el), el, square)), 1)
        out = self.binary(tt.AddOp if kind == "sum" else tt.MulOp, local, before)
        return self.emit(tt.ReshapeOp(out, (n,)))

    def _register_scan(self, kind: str, value: SSAValue, axis: int) -> SSAValue:
        op = tt.AddOp if kind == "sum" else tt.MulOp
        block = tt.ScanOp.block_for([value])
        with self.inside(block):
            self.emit(tt.CombineYieldOp(self.binary(op, block.args[0], block.args[1])))
        return self.emit(tt.ScanOp([value], axis, block))

    def combine_reduce(self, values: list[SSAValue], axis: int,
                        combine: Callable[[list[SSAValue], list[SSAValue]], list[SSAValue]]) -> list[SSAValue]:
        """`tt.reduce` of `values` along `axis` with the scalar combine `combine(lhs, rhs)`."""
        block = tt.CombineReduceOp.block_for(values)
        n = len(values)
        with self.inside(block):
            self.emit(tt.CombineYieldOp(*combine(list(block.args[:n]), list(block.args[n:]))))
        op = tt.CombineReduceOp(values, axis, block)
        self.emit(op)
        return list(op.results)

    def for_loop(
        self, lb: int | SSAValue, ub: int | SSAValue, step: int, carried: Sequence[SSAValue],
        body: Callable[[SSAValue, list[SSAValue]], list[SSAValue]], num_stages: int | None = None,
        warp_specialize: bool = False, pingpong: bool = False,
    ) -> list[SSAValue]:
        """`scf.for` over i32 with loop-carried values; `body(iv, carried) -> new carried`; `num_stages`
        asks the pipeliner for that depth, `warp_specialize` for a producer warpgroup, `pingpong` for the
        consumer warpgroups to issue their dots in turns.

        The body is built before the loop op is inserted, so code emitted meanwhile into the enclosing
        block (hoisted loop invariants) lands before the loop."""
        outer = self.block
        bound = lambda v: v if isinstance(v, SSAValue) else self.i32(v)  # noqa: E731
        bounds = [bound(lb), bound(ub), self.i32(step)]
        block = Block(arg_types=[i32, *(v.type for v in carried)])
        self.block = block
        new = body(block.args[0], list(block.args[1:]))
        self.emit(scf.YieldOp(*new))
        self.block = outer
        loop = scf.ForOp(*bounds, list(carried), block)
        if num_stages is not None:
            loop.attributes[tt.NUM_STAGES_ATTR] = IntegerAttr(num_stages, 32)
        if warp_specialize:
            loop.attributes[tt.WARP_SPECIALIZE_ATTR] = UnitAttr()
        if pingpong:
            loop.attributes[tt.PINGPONG_ATTR] = UnitAttr()
        self.emit(loop)
        return list(loop.results)

    def branch(self, cond: SSAValue, then: Callable[[], list[SSAValue]],
               otherwise: Callable[[], list[SSAValue]]) -> list[SSAValue]:
        """`scf.if` on a scalar i1 whose branches `then()` and `otherwise()` give values of the same types: its
        results. Both are built before the op is inserted, as `for_loop`'s body is."""
        outer = self.block
        blocks, types = [], []
        for build in (then, otherwise):
            self.block = Block()
            values = build()
            self.emit(scf.YieldOp(*values))
            blocks.append(self.block)
            types = [v.type for v in values]
        self.block = outer
        op = scf.IfOp(cond, types, Region(blocks[0]), Region(blocks[1]))
        self.emit(op)
        return list(op.results)

    def continue_if(self, cond: SSAValue) -> None:
        """Emit what follows only where `cond` (a scalar i1) holds: into the then-block of an `scf.if`, until
        `close_branches` (the rest of a kernel that only some of its programs finish)."""
        then = Block()
        self.emit(scf.IfOp(cond, [], Region(then), Region(Block([scf.YieldOp()]))))
        self._open.append(self.block)
        self.block = then

    def continue_in_last(self, counter: SSAValue, arrivals: int) -> None:
        """Count this program in at `counter` (an i32 in memory, 0 before the first of `arrivals` programs) and
        emit what follows only in the program that counts last, which sets it back to 0 for the next launch.
        A barrier and the count's release order every thread's stores before it, the last program's acquire
        its loads after it (which should bypass L1: `cache=".cg"`)."""
        self.emit(tt.DebugBarrierOp())
        arrived = self.emit(tt.AtomicRMWOp("add", counter, self.i32(1), sem="acq_rel", scope="gpu"))
        self.continue_if(self.cmp("eq", arrived, self.i32(arrivals - 1)))
        self.emit(tt.StoreOp(counter, self.i32(0)))

    def close_branches(self) -> None:
        """End the blocks `continue_if` opened, innermost first, and emit after them again."""
        while self._open:
            self.emit(scf.YieldOp())
            self.block = self._open.pop()

    @contextmanager
    def inside(self, block: Block) -> Iterator[None]:
        """Emit into `block` for a while (loop invariants go to the enclosing block)."""
        saved, self.block = self.block, block
        try:
            yield
        finally:
            self.block = saved


__all__ = ["Emitter", "Float16Type", "broadcast_shape", "f32", "identity"]
