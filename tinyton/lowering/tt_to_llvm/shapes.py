"""
Shape ops: `tt.trans`, `tt.reshape` and `tt.hint` reuse registers, `tt.join`/`tt.split` pair registers.

A transposed tile's layout is its input's with the basis entries permuted (`Layout.permute`), so the
registers are the same. A reshape keeps the row-major order of the elements, and every tile size is a power
of two, so its layout is its input's with each basis's row-major offset read in the new shape
(`Layout.reshape`): the same registers again (a tile reshaped to another layout than that is converted as
any value is). A join puts the new size-2 dimension in register bit 0 (`with_pair_dim`): each thread
interleaves the registers of the two halves, and a split takes them apart again (after a layout conversion
if the input holds the pair elsewhere).
"""

from __future__ import annotations

from xdsl.ir import SSAValue

from tinyton.dialects import tt
from tinyton.lowering.tt_to_llvm.context import KernelContext, lowers, lowers_tile
from tinyton.lowering.tt_to_llvm.layouts import Layout


def _inverse(order: list[int]) -> list[int]:
    inverse = [0] * len(order)
    for i, d in enumerate(order):
        inverse[d] = i
    return inverse


@lowers_tile(tt.TransOp)
def lower_trans(ctx: KernelContext, op: tt.TransOp, layout: Layout | None) -> list[SSAValue]:
    assert layout is not None
    return ctx.get(op.input, layout.permute(_inverse(list(op.order.get_values()))))


@lowers_tile(tt.HintOp)
def lower_hint(ctx: KernelContext, op: tt.HintOp, layout: Layout | None) -> list[SSAValue]:
    return ctx.get(op.input, layout)


@lowers_tile(tt.JoinOp)
def lower_join(ctx: KernelContext, op: tt.JoinOp, layout: Layout | None) -> list[SSAValue]:
    assert layout is not None and layout.has_pair_dim()
    half = layout.without_pair_dim()
    return [r for pair in zip(ctx.get(op.lhs, half), ctx.get(op.rhs, half)) for r in pair]


@lowers(tt.SplitOp)
def lower_split(ctx: KernelContext, op: tt.SplitOp) -> None:
    half = ctx.layout_of(op.lhs)
    regs = ctx.get(op.input, half.with_pair_dim())
    ctx.set(op.lhs, half, regs[0::2])
    ctx.set(op.rhs, half, regs[1::2])


@lowers_tile(tt.ReshapeOp)
def lower_reshape(ctx: KernelContext, op: tt.ReshapeOp, layout: Layout | None) -> list[SSAValue]:
    assert layout is not None
    return ctx.get(op.input, layout.reshape(tt.shape_of(op.input.type)))
