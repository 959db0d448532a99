"""Emit the tt code of a region's ops: masked loads and stores, elementwise ops (the programs' indices and
addresses: program_indices.py).

Values live in *scopes*: the program scope (per-row values, hoisted out of loops) and a chunk scope
(values varying along the reduced axis, recomputed per chunk of a looped row). A value's tile shape
follows its map: it has a tile dimension only where it varies, so per-row values stay `[ROWS, 1]`
(or scalars) and are broadcast in registers where an elementwise op needs them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.ir import Operation, OpResult, SSAValue

from tinyton.analysis.domain import Domain, Map, is_trivial
from tinyton.analysis.views import Stride, View, contiguous_strides
from tinyton.dialects import tt, tta
from tinyton.dialects.tt import element_type, is_float, shape_of
from tinyton.lowering.fusion.cache_policy import hints
from tinyton.lowering.fusion.casts import numpy_cast
from tinyton.lowering.fusion.emitter import Emitter, broadcast_shape, f32, identity
from tinyton.lowering.fusion.geometry import Geometry
from tinyton.lowering.fusion.index_check import checked_index
from tinyton.lowering.fusion.matmul_descriptors import descriptor_store
from tinyton.lowering.fusion.powers import power
from tinyton.lowering.fusion.program_indices import ProgramIndices, Scope
from tinyton.lowering.fusion.reduction_kinds import COMBINE, accumulator_element, scan_kind
from tinyton.lowering.fusion.puts import store_put
from tinyton.lowering.fusion.sorting import sort_rows

BINARY: dict[type[Operation], type[Operation]] = {
    tta.AddOp: tt.AddOp, tta.SubOp: tt.SubOp, tta.MulOp: tt.MulOp, tta.DivOp: tt.DivOp,
    tta.FloorDivOp: tt.FloorDivOp, tta.ModOp: tt.ModOp, tta.MaximumOp: tt.MaximumOp,
    tta.MinimumOp: tt.MinimumOp, tta.AndOp: tt.AndOp, tta.OrOp: tt.OrOp, tta.XorOp: tt.XorOp,
    tta.ShlOp: tt.ShlOp, tta.ShrOp: tt.ShrOp, tta.CopysignOp: tt.CopysignOp, tta.Atan2Op: tt.Atan2Op,
    tta.HypotOp: tt.HypotOp, tta.FmaxOp: tt.FmaxOp, tta.FminOp: tt.FminOp,
}
UNARY: dict[type[Operation], type[Operation]] = {
    tta.NegOp: tt.NegOp, tta.AbsOp: tt.AbsOp, tta.ExpOp: tt.ExpOp, tta.LogOp: tt.LogOp,
    tta.SqrtOp: tt.SqrtOp, tta.RsqrtOp: tt.RsqrtOp, tta.TanhOp: tt.TanhOp, tta.SinOp: tt.SinOp,
    tta.CosOp: tt.CosOp, tta.TanOp: tt.TanOp, tta.Exp2Op: tt.Exp2Op, tta.Log2Op: tt.Log2Op,
    tta.Log10Op: tt.Log10Op, tta.Log1pOp: tt.Log1pOp, tta.Expm1Op: tt.Expm1Op, tta.ErfOp: tt.ErfOp,
    tta.FloorOp: tt.FloorOp, tta.CeilOp: tt.CeilOp, tta.TruncOp: tt.TruncOp, tta.RintOp: tt.RintOp,
}
IN_REGISTERS = (tta.ReshapeOp, tta.TransposeOp, tta.BroadcastToOp)
"""Layout ops that are free in registers once the domain analysis accepted them (maps did the work)."""


def fmod(em: Emitter, a: SSAValue, b: SSAValue) -> SSAValue:
    """NumPy's `fmod`: `tt.rem` (the dividend's sign; C's exact fmod for floats), but 0 for an int remainder by 0,
    where `tt.rem` gives the dividend."""
    rem = em.binary(tt.RemOp, a, b)
    element = element_type(rem.type)
    if is_float(element):
        return rem
    zero = em.const(0, element)
    return em.select(em.cmp("eq", b, zero), zero, rem)


class RegionEmitter(ProgramIndices):
    """Shared state of one kernel: domain, geometry, kernel pointers of the region's inputs."""

    def __init__(self, dom: Domain, geom: Geometry, em: Emitter, ptrs: dict[SSAValue, SSAValue],
                 evict: str | None = None):
        super().__init__(dom, geom, em)
        self.ptrs = ptrs
        self.load_hints = hints(evict)
        """Properties of the loads of the region's inputs (`cache_policy.py`)."""
        self.scan_carry: dict[Operation, SSAValue] = {}
        """Per scan of a looped row: its running total before the current chunk (the walk's carried value)."""
        self.scan_next: dict[Operation, SSAValue] = {}
        """Per scan of a looped row: its running total after the current chunk."""
        self.split_buffers: tuple[SSAValue, SSAValue] | None = None
        """A split K loop's partial products and per-tile counters (kernel pointers; `split_k.py`)."""

    @staticmethod
    def load_strides(view: View, m: Map) -> dict[int, Stride]:
        """Domain axis -> how the load of `view` through map `m` walks memory along it (the axes it varies along):
        an element stride, or the pieces of a merged dim."""
        return {a: st for a, st in ((a, view.load_stride(j)) for j, a in enumerate(m)) if a is not None and st != 0}

    def load_tile(self, value: SSAValue, m: Map) -> tuple[tuple, tuple[int, ...]]:
        """(memo key, tile shape) of the load of input `value` through map `m`: equal keys are one load."""
        view = self.dom.view(value)
        strides = self.load_strides(view, m)
        return _load_key(view, strides), self.geom.tile_shape({*strides, *self.bounded_axes(view, m)})

    def load(self, view: View, m: Map, scope: Scope) -> SSAValue:
        """Load a view of an input, indexed through map `m`; hoisted when it does not vary per chunk.
        A view with bounds (a padded or concatenated slice) masks the lanes outside them, which read its fill."""
        strides = self.load_strides(view, m)
        bounded = self.bounded_axes(view, m)
        target = scope if self.kvar([*strides, *bounded]) else self.root
        key = _load_key(view, strides)
        if target.get(key) is None:
            with self.em.inside(target.block):
                target.memo[key] = self._load(view, m, strides, target)
        return target.get(key)

    def _load(self, view: View, m: Map, strides: dict[int, Stride], scope: Scope) -> SSAValue:
        em = self.em
        element = element_type(view.base.type)
        inside = self._inside(view, m, scope)
        if inside is False:  # the view reads nothing but its fill
            return em.const(view.fill or 0, element)
        offset = em.i32(view.offset) if view.offset else None
        ptr, shape = self.pointers(self.ptrs[view.base], strides, scope, offset)
        if inside is None:
            return em.emit(tt.LoadOp(ptr, self.mask(shape, scope), **self.load_hints))
        shape = broadcast_shape(shape, shape_of(inside.type))
        mask = em.and_(self.mask(shape, scope), em.to_shape(inside, shape))
        other = em.const(view.fill or 0, element, shape)
        return em.emit(tt.LoadOp(em.to_shape(ptr, shape), mask, other, **self.load_hints))

    @staticmethod
    def bounded_axes(view: View, m: Map) -> list[int]:
        """The domain axes along which `view` leaves its bounds (the load's mask varies along them)."""
        if view.bounds is None:
            return []
        return [a for a, b, n in zip(m, view.bounds, view.shape) if a is not None and b != (0, n)]

    def _inside(self, view: View, m: Map, scope: Scope) -> SSAValue | bool | None:
        """The lanes of a load of `view` inside its bounds: an i1 tile, None (all), False (none)."""
        return inside_bounds(self.em, view, m, lambda a: self.offsets({a: 1}, scope))

    def store(self, value: SSAValue, ptr: SSAValue, scope: Scope) -> None:
        """Write region value `value` to its (contiguous) output buffer `ptr`."""
        if isinstance(value, OpResult) and isinstance(value.op, tta.PutOp):
            return store_put(self, value.op, ptr, scope)
        m = self.dom.map_of(value)
        reg = self.operand_value(value, m, scope)
        if self.geom.notes.get("WARP_SPECIALIZE") and descriptor_store(self, value, ptr, reg):
            return  # a warp-specialised kernel's consumers store the tile with TMA
        strides = {a: st for a, st in zip(m, contiguous_strides(shape_of(value.type))) if a is not None}
        p, shape = self.pointers(ptr, strides, scope)
        shape = broadcast_shape(shape, shape_of(reg.type))
        if shape and shape_of(p.type) != shape:
            p = self.em.to_shape(p, shape)
        first = self.first_tiles(set(strides))
        mask = self.em.and_(self.mask(shape, scope), self.em.to_shape(first, shape) if first is not None else None)
        self.em.emit(tt.StoreOp(p, self.em.to_shape(reg, shape), mask))

    # ---- values --------------------------------------------------------------------------
    def operand_value(self, value: SSAValue, m: Map, scope: Scope) -> SSAValue:
        """A register value, or an input (view) loaded through map `m`."""
        if value in self.dom.maps:
            got = scope.get(value)
            assert got is not None, f"value used before it was emitted: {value}"
            return got
        return self.load(self.dom.view(value), m, scope)

    def operand(self, op: Operation, index: int, scope: Scope) -> SSAValue:
        return self.operand_value(op.operands[index], self.dom.operand_map(op, index), scope)

    def scope_for(self, value: SSAValue, scope: Scope) -> Scope:
        return scope if self.kvar(self.dom.maps[value]) else self.root

    def compute(self, op: Operation, scope: Scope) -> SSAValue:
        """Emit elementwise / gather / in-register layout op `op` into the scope where it belongs."""
        result = op.results[0]
        target = self.scope_for(result, scope)
        with self.em.inside(target.block):
            value = self._emit(op, target)
        target.memo[result] = value
        return value

    def _emit(self, op: Operation, scope: Scope) -> SSAValue:
        em = self.em
        args = lambda: [self.operand(op, i, scope) for i in range(len(op.operands))]
        if isinstance(op, tta.ConstantOp):
            return em.const(op.value.value.data, op.result.type)
        if isinstance(op, tta.ArangeOp):  # the index along its domain axis, plus start
            (axis,) = self.dom.map_of(op.result)
            index = self.offsets({axis: 1}, scope) if axis is not None else None
            return em.add(index if index is not None else em.i32(0), em.i32(op.start.value.data))
        if isinstance(op, (tta.ArgReduceOp, tta.ArgSortOp)) and is_trivial(op):  # the one element's index
            return em.const(0, element_type(op.result.type))
        if isinstance(op, IN_REGISTERS) or is_trivial(op):
            return args()[0]
        if isinstance(op, tta.PutOp):  # its values, stored into the destination by `store`
            return self.operand(op, 1, scope)
        if isinstance(op, tta.TakeOp):
            return self._gather(op, scope)
        if isinstance(op, tta.CheckIndexOp):  # `arange(n)[idx]`: the index itself, checked
            return checked_index(em, args()[0], op.size.value.data, 0, lambda shape: self.mask(shape, scope))[0]
        if isinstance(op, tta.ScanOp):
            return self._scan(op, scope)
        if isinstance(op, tta.SortingOp):
            return self._sort(op, scope)
        if isinstance(op, tta.DivOp) and self._row_divisor(op):
            return self._divide_by_row(op, scope)
        return self.elementwise(op, args())

    def elementwise(self, op: Operation, args: Sequence[SSAValue]) -> SSAValue:
        """Elementwise op `op` on the tiles (or scalars) `args` of its operands."""
        em = self.em
        if isinstance(op, tta.CmpOp):
            return em.cmp(op.predicate.data, *args)
        if isinstance(op, tta.WhereOp):
            return em.select(*args)
        if isinstance(op, tta.CastOp):
            return numpy_cast(em, args[0], element_type(op.result.type))
        if type(op) in UNARY:
            return em.emit(UNARY[type(op)](args[0]))
        if isinstance(op, tta.PowOp):
            return power(em, *args)
        if isinstance(op, tta.FmodOp):
            return fmod(em, *args)
        return em.binary(BINARY[type(op)], *args)

    def _scan(self, op: tta.ScanOp, scope: Scope) -> SSAValue:
        """A running sum or product along the reduced axis, in f32 for floats (as reductions accumulate).
        In a looped row the chunk's scan continues the total carried from the chunks before it
        (`scan_carry`), and the chunk's total (lanes past the row neutral) gives the next one. An operand
        constant along the axis (a broadcast: a scalar or a tile without the axis's dim) is first spread
        along it, so that each lane counts the elements before it (cumsum of [2, 2, 2] is [2, 4, 6])."""
        em, kind, el = self.em, scan_kind(op), element_type(op.result.type)
        k = self.geom.k
        x = em.cast(self.operand(op, 0, scope), accumulator_element(el))
        x = em.to_shape(x, broadcast_shape(shape_of(x.type), self.geom.tile_shape({self.dom.red})))
        carry = self.scan_carry.get(op)
        if carry is not None and k.mask is not None:
            x = em.select(k.mask, x, em.const(identity(kind, element_type(x.type)), element_type(x.type)))
        out = em.scan(kind, x, k.dim)
        if carry is not None:
            out = em.binary(COMBINE[kind], out, carry)
            self.scan_next[op] = em.binary(COMBINE[kind], carry, em.reduce(kind, x, k.dim))
        return em.cast(out, el)

    def _sort(self, op: tta.SortingOp, scope: Scope) -> SSAValue:
        """The row sorted whole in registers (`sorting.py`); a sort and an argsort of one row (torch's `sort`
        gives both) share the network."""
        em, k = self.em, self.geom.k
        assert k.dim == self.geom.rank - 1, "a sort's row is the tile's last dim (`geometry.plan`)"
        key = ("sort", op.input, op.is_descending)
        if scope.get(key) is None:
            x = self.operand(op, 0, scope)
            x = em.to_shape(x, broadcast_shape(shape_of(x.type), self.geom.tile_shape({self.dom.red})))
            index = em.to_shape(k.index, shape_of(x.type))
            scope.memo[key] = sort_rows(em, x, index, k.mask, op.is_descending)
        values, index = scope.get(key)
        return values if isinstance(op, tta.SortOp) else em.cast(index, element_type(op.result.type))

    def _row_divisor(self, op: tta.DivOp) -> bool:
        """A float division of row elements by one value per row (softmax's `e / sum(e)`)."""
        el = element_type(op.result.type)
        return (is_float(el) and el.bitwidth <= 32 and self.kvar(self.dom.maps[op.result])
                and not self.kvar(self.dom.operand_map(op, 1)))

    def _divide_by_row(self, op: tta.DivOp, scope: Scope) -> SSAValue:
        """`a / d` for a per-row `d`: one reciprocal r per row, then q = a·r per element; an f32 quotient
        is refined by one Newton step, q + (a - q·d)·r (Markstein: correctly rounded for a normal d), a
        16-bit one rounds the f32 product. `div.rn.f32` per element cost ~12 instructions and a branch on
        the GPU: a 32768-wide fp16 softmax ran at 68 % of Triton's (whose `/` is the approximate
        `div.full`). Where the residual is NaN (d = 0, d or a infinite) or a·r overflowed to ±inf (then the
        residual is ∓inf, and the step would add inf - inf), a·r is already IEEE's quotient. A d below 2^-64
        (subnormal ones among them, whose reciprocal overflows) divides `a·2^64` by `d·2^64`, the same quotient
        (fuzz seed 64 case 2393: -0.22 / 1e-39 was -inf, not -2.2e38)."""
        em, key, el = self.em, ("reciprocal", op.operands[1]), element_type(op.result.type)
        if key not in self.root.memo:  # per row: hoisted out of the chunk loop
            with em.inside(self.root.block):
                d = em.cast(self.operand(op, 1, self.root), f32)
                tiny = em.cmp("lt", em.emit(tt.AbsOp(d)), em.const(2.0**-64, f32))
                scale = em.select(tiny, em.const(2.0**64, f32), em.const(1.0, f32))
                d = em.binary(tt.MulOp, d, scale)  # exact: a power of two, and d * 2^64 stays below 1
                self.root.memo[key] = (d, em.binary(tt.DivOp, em.const(1.0, f32), d), scale)
        d, r, scale = self.root.memo[key]
        a = em.cast(self.operand(op, 0, scope), f32)
        # exact unless a/d overflows anyway; `a` may vary along axes the divisor does not and the reverse (a
        # column reduction's `x1[:, None] / x2`: [32, 1] by [1, 2]), so both broadcast (seed 20261203 case 8714)
        a = em.binary(tt.MulOp, a, scale)
        q = em.binary(tt.MulOp, a, r)
        if el != f32:
            return em.cast(q, el)
        shape = shape_of(q.type)
        d, r, a = (em.to_shape(v, shape) for v in (d, r, a))
        residual = em.emit(tt.FmaOp(em.emit(tt.NegOp(q)), d, a))
        undefined = em.cmp("ne", residual, residual)
        kept = em.binary(tt.OrOp, undefined, em.cmp("eq", em.emit(tt.AbsOp(q)), em.const(float("inf"), f32)))
        return em.select(kept, q, em.emit(tt.FmaOp(residual, r, q)))

    def _gather(self, op: tta.TakeOp, scope: Scope) -> SSAValue:
        """`table[..., idx, ...]`: the indices (negative ones wrap, as in NumPy) become offsets. An index
        outside `[-n, n)` stops the kernel (`checked_index`: NumPy's IndexError) and is never read."""
        em, dom = self.em, self.dom
        view = dom.view(op.table)
        tmap, axis = dom.take_table_axes(op)
        idx, inside = checked_index(em, self.operand(op, 1, scope), view.shape[axis], axis,
                                    lambda shape: self.mask(shape, scope))
        strides = {a: st for a, st in zip(tmap, view.strides) if a is not None and st != 0}
        extra = em.add(em.mul_int(idx, view.strides[axis]), em.i32(view.offset) if view.offset else None)
        ptr, shape = self.pointers(self.ptrs[view.base], strides, scope, extra)
        return em.emit(tt.LoadOp(ptr, em.and_(self.mask(shape, scope), em.to_shape(inside, shape))))


def _load_key(view: View, strides: dict[int, Stride]) -> tuple:
    """The memo key of a load: one view base read with the same strides is one load."""
    return ("load", view.base, tuple(sorted(strides.items())), view.offset, view.bounds, view.fill)


def inside_bounds(em: Emitter, view: View, m: Map, index: Callable[[int], SSAValue]) -> SSAValue | bool | None:
    """The lanes of a load of `view` through map `m` that lie inside its bounds (a padded or concatenated
    piece): an i1 tile, None (all), False (none); `index(a)` is the lanes' index along domain axis `a`."""
    if view.bounds is None:
        return None
    inside = None
    for a, (lo, hi), n in zip(m, view.bounds, view.shape):
        if (lo, hi) == (0, n):
            continue
        if a is None:  # a size-1 dim: index 0
            if not lo <= 0 < hi:
                return False
            continue
        i = index(a)
        if lo > 0:
            inside = em.and_(inside, em.cmp("ge", i, em.i32(lo)))
        if hi < n:
            inside = em.and_(inside, em.cmp("lt", i, em.i32(hi)))
    return inside
