"""
`tt.reduce`: reductions whose combine is a region, on tuples of values (`tt.scan` is in scan.py).

The combine region holds scalar tt ops; each use lowers it again with its block arguments bound to
the registers at hand (`combine`). A reduction runs the stages of `reductions` on tuples: over the
thread's registers, across lanes with `shfl.sync.bfly` (`reductions.shuffle`), across warps
through one shared-memory round.
"""

from __future__ import annotations

from math import prod

from xdsl.ir import Attribute, SSAValue

from tinyton.dialects import tt
from tinyton.lowering.tt_to_llvm.context import KernelContext, lowers
from tinyton.lowering.tt_to_llvm.layouts import Layout, bits_along
from tinyton.lowering.tt_to_llvm.reductions import partials_layout, partials_read_layout, shuffle
from tinyton.lowering.tt_to_llvm.shared import byte_size, load_tile, store_tile

Values = list[SSAValue]


def combine(ctx: KernelContext, op: tt.CombineReduceOp | tt.ScanOp, lhs: Values, rhs: Values) -> Values:
    """The combine region lowered once more, on `lhs` and `rhs`."""
    block = op.combine.block
    for arg, reg in zip(block.args, [*lhs, *rhs]):
        ctx.set(arg, None, [reg])
    ctx.lower_block(block)
    return [ctx.scalar(v) for v in block.last_op.operands]


def _tree(ctx: KernelContext, op: tt.CombineReduceOp, values: list[Values]) -> Values:
    while len(values) > 1:
        pairs = [combine(ctx, op, a, b) for a, b in zip(values[::2], values[1::2])]
        values = pairs + values[len(values) & ~1 :]
    return values[0]


def _across_warps(
    ctx: KernelContext, op: tt.CombineReduceOp, partials: list[Values], out: Layout, warp_bits: list[int]
) -> list[Values]:
    """Each warp writes its partials (one array per input), every thread combines all warps'."""
    written = partials_layout(out, warp_bits)
    read = partials_read_layout(written, out, warp_bits)
    elems: list[Attribute] = [v.type for v in partials[0]]
    sizes = [-(-prod(written.shape) * byte_size(e) // 16) * 16 for e in elems]
    start = ctx.smem_buffer(sum(sizes), "a reduction across warps")
    offsets = [start + sum(sizes[:k]) for k in range(len(elems))]
    for k, (elem, offset) in enumerate(zip(elems, offsets)):
        store_tile(ctx, [p[k] for p in partials], written, elem, offset)
    ctx.barrier()
    loaded = [load_tile(ctx, read, written.shape, e, o) for e, o in zip(elems, offsets)]
    ctx.smem_read(start, sum(sizes))
    n = out.num_regs
    return [_tree(ctx, op, [list(t) for t in zip(*(values[s::n] for values in loaded))]) for s in range(n)]


@lowers(tt.CombineReduceOp)
def lower_reduce(ctx: KernelContext, op: tt.CombineReduceOp) -> None:
    axis = op.axis.value.data
    src = ctx.layout_of(op.inputs[0])
    out = src.slice(axis)
    inputs = [ctx.get(v, src) for v in op.inputs]
    groups: list[list[Values]] = [[] for _ in range(out.num_regs)]
    for r, values in enumerate(zip(*inputs)):
        groups[src.slice_reg_index(r, axis)].append(list(values))
    partials = [_tree(ctx, op, g) for g in groups]
    for bit in bits_along(src.lane, axis):
        partials = [combine(ctx, op, p, [shuffle(ctx, v, 1 << bit) for v in p]) for p in partials]
    warp_bits = bits_along(src.warp, axis)
    if warp_bits:
        partials = _across_warps(ctx, op, partials, out, warp_bits)
    layout = out if out.rank else None
    for k, result in enumerate(op.outputs):
        ctx.set(result, layout, [p[k] for p in partials])
