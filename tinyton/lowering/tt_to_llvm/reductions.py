"""
`tt.reduce_sum` / `reduce_max` / `reduce_min` along one axis.

Three stages, each only where the layout spreads the axis: over the thread's registers,
over lanes with `shfl.sync.bfly` (every lane of a butterfly ends with the full value),
and over warps through one shared-memory round: each warp writes its partials, and after
a barrier every thread combines all warps' partials for its results, in the same order,
so replicas agree bit for bit. The result has the layout `slice(input layout, axis)`.
Floats reduce in f32 (f64 in f64), narrow ints in 32 bits; float max/min propagate NaN, as NumPy's do.
"""

from __future__ import annotations

from collections.abc import Callable
from math import prod

from xdsl.dialects import llvm
from xdsl.dialects.builtin import AnyFloat, IntegerType, f32, i32
from xdsl.ir import Attribute, SSAValue

from tinyton.dialects import nvvm, tt
from tinyton.lowering.tt_to_llvm.casts import convert
from tinyton.lowering.tt_to_llvm.context import KernelContext, lowers_tile
from tinyton.lowering.tt_to_llvm.elementwise import binary_fn
from tinyton.lowering.tt_to_llvm.layouts import Layout, bits_along
from tinyton.lowering.tt_to_llvm.shared import byte_size, load_tile, store_tile

COMBINE = {tt.ReduceSumOp: tt.AddOp, tt.ReduceMaxOp: tt.MaximumOp, tt.ReduceMinOp: tt.MinimumOp}

Combine = Callable[[SSAValue, SSAValue], SSAValue]


def _tree(values: list[SSAValue], combine: Combine) -> SSAValue:
    """Pairwise combination: short dependency chains for the in-thread stage."""
    while len(values) > 1:
        pairs = [combine(a, b) for a, b in zip(values[::2], values[1::2])]
        values = pairs + values[len(values) & ~1 :]
    return values[0]


def _shuffle_xor(ctx: KernelContext, value: SSAValue, lane_mask: int) -> SSAValue:
    return ctx.value(
        nvvm.ShflOp(nvvm.ShflKind.BFLY, ctx.const(-1), value, ctx.const(lane_mask), ctx.const(0x1F))
    )


def shuffle(ctx: KernelContext, value: SSAValue, lane_mask: int) -> SSAValue:
    """`shfl.sync.bfly` of a value of any type up to 64 bits, moved as one or two i32 words."""
    t = value.type
    bits = IntegerType(t.bitwidth)
    word = ctx.value(llvm.BitcastOp(value, bits)) if isinstance(t, AnyFloat) else value
    if t.bitwidth == 64:
        low = _shuffle_xor(ctx, ctx.value(llvm.TruncOp(word, i32)), lane_mask)
        high = ctx.value(llvm.TruncOp(ctx.value(llvm.LShrOp(word, ctx.const(32, bits))), i32))
        high = ctx.value(llvm.ZExtOp(_shuffle_xor(ctx, high, lane_mask), bits))
        out = ctx.value(llvm.OrOp(ctx.value(llvm.ZExtOp(low, bits)), ctx.value(llvm.ShlOp(high, ctx.const(32, bits)))))
    elif t.bitwidth < 32:
        out = ctx.value(llvm.TruncOp(_shuffle_xor(ctx, ctx.value(llvm.ZExtOp(word, i32)), lane_mask), bits))
    else:
        out = _shuffle_xor(ctx, word, lane_mask)
    return ctx.value(llvm.BitcastOp(out, t)) if isinstance(t, AnyFloat) else out


def _compute_type(elem: Attribute) -> Attribute:
    """Floats reduce in f32 (f64 in f64), ints in 32 bits or their own wider type, keeping signedness."""
    if tt.is_float(elem):
        return elem if elem.bitwidth > 32 else f32
    return elem if elem.bitwidth >= 32 else IntegerType(32, elem.signedness.data)


def partials_layout(out: Layout, warp_bits: list[int]) -> Layout:
    """The partials as a tile of shape `(warps along the axis, *out.shape)`, one row per warp."""
    return Layout(
        (1 << len(warp_bits), *out.shape),
        tuple((0, *b) for b in out.reg),
        tuple((0, *b) for b in out.lane),
        tuple((1 << warp_bits.index(i) if i in warp_bits else 0, *b) for i, b in enumerate(out.warp)),
    )


def partials_read_layout(written: Layout, out: Layout, warp_bits: list[int]) -> Layout:
    """How every thread reads the partials of all warps for each of its results: the warp dimension moves
    into registers, after the result registers."""
    return Layout(
        written.shape,
        written.reg + tuple((1 << j, *(0,) * out.rank) for j in range(len(warp_bits))),
        written.lane,
        tuple((0, *b) for b in out.warp),
    )


def _across_warps(
    ctx: KernelContext, partials: list[SSAValue], out: Layout, warp_bits: list[int], combine: Combine
) -> list[SSAValue]:
    written = partials_layout(out, warp_bits)
    read = partials_read_layout(written, out, warp_bits)
    elem = partials[0].type
    nbytes = prod(written.shape) * byte_size(elem)
    start = ctx.smem_buffer(nbytes, "a reduction across warps")
    store_tile(ctx, partials, written, elem, start)
    ctx.barrier()
    values = load_tile(ctx, read, written.shape, elem, start)
    ctx.smem_read(start, nbytes)
    n = out.num_regs
    return [_tree(values[s::n], combine) for s in range(n)]


@lowers_tile(*COMBINE)
def lower_reduce(ctx: KernelContext, op: tt.ReduceOp, layout: Layout | None) -> list[SSAValue]:
    axis = op.axis.value.data
    src = ctx.layout_of(op.input)
    out = src.slice(axis)
    elem = tt.element_type(op.input.type)
    compute = _compute_type(elem)
    fn = binary_fn(COMBINE[type(op)], compute)

    def combine(a: SSAValue, b: SSAValue) -> SSAValue:
        return fn(ctx, a, b)

    groups: list[list[SSAValue]] = [[] for _ in range(out.num_regs)]
    for r, value in enumerate(ctx.get(op.input, src)):
        groups[src.slice_reg_index(r, axis)].append(convert(ctx, value, elem, compute))
    partials = [_tree(g, combine) for g in groups]
    for bit in bits_along(src.lane, axis):
        partials = [combine(p, shuffle(ctx, p, 1 << bit)) for p in partials]
    warp_bits = bits_along(src.warp, axis)
    if warp_bits:
        partials = _across_warps(ctx, partials, out, warp_bits, combine)
    return [convert(ctx, p, compute, elem) for p in partials]
