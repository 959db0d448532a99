"""
`scf.for`, `scf.while` and `scf.if` become LLVM blocks; tiles cross block boundaries as one block
argument per register, in the layout the assignment chose for the loop-carried value or
the `if` result (yielded values are converted to it).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate

from xdsl.dialects import llvm, scf
from xdsl.ir import Block, SSAValue

from tinyton.lowering.tt_to_llvm.context import (
    SMEM_ANYWHERE,
    KernelContext,
    llvm_type,
    lowers,
)
from tinyton.lowering.tt_to_llvm.layouts import Layout


def _layouts(ctx: KernelContext, values: Sequence[SSAValue]) -> list[Layout | None]:
    return [ctx.assign.layout.get(v) for v in values]


def _flatten(ctx: KernelContext, values: Sequence[SSAValue], layouts: Sequence[Layout | None]) -> list[SSAValue]:
    return [reg for v, layout in zip(values, layouts) for reg in ctx.get(v, layout)]


def _bind(
    ctx: KernelContext, values: Sequence[SSAValue], layouts: Sequence[Layout | None], regs: Sequence[SSAValue]
) -> None:
    """Give `values` their registers, taken in order from `regs`."""
    counts = [layout.num_regs if layout is not None else 1 for layout in layouts]
    for v, layout, end, count in zip(values, layouts, accumulate(counts), counts):
        ctx.set(v, layout, regs[end - count : end])


@lowers(scf.ForOp)
def lower_for(ctx: KernelContext, op: scf.ForOp) -> None:
    body = op.body.block
    layouts = _layouts(ctx, op.res)

    def iteration(iv: SSAValue, carried: list[SSAValue]) -> list[SSAValue]:
        ctx.set(body.args[0], None, [iv])
        _bind(ctx, body.args[1:], layouts, carried)
        ctx.lower_block(body)
        return _flatten(ctx, body.last_op.operands, layouts)

    inits = _flatten(ctx, op.iter_args, layouts)
    bounds = [ctx.scalar(v) for v in (op.lb, op.ub, op.step)]
    _bind(ctx, op.res, layouts, ctx.loop(*bounds, inits, iteration))


@lowers(scf.WhileOp)
def lower_while(ctx: KernelContext, op: scf.WhileOp) -> None:
    """header(carried): `before` computes the condition -> body(forwarded): `after` -> header; the loop
    leaves to exit(forwarded), whose arguments are the results."""
    before, after = op.before_region.block, op.after_region.block
    layouts = _layouts(ctx, op.res)
    types = [llvm_type(v.type) for v, layout in zip(op.res, layouts) for _ in range(layout.num_regs if layout else 1)]
    inits = _flatten(ctx, op.arguments, layouts)
    header = ctx.new_block(types)
    ctx.insert(llvm.BrOp(header, *inits))
    ctx.move_to(header)
    ctx.smem_pending = SMEM_ANYWHERE  # an iteration may read shared memory that the next one overwrites
    _bind(ctx, before.args, layouts, header.args)
    ctx.lower_block(before)
    condition = before.last_op
    forwarded = _flatten(ctx, condition.args, layouts)
    body, exit_block = ctx.new_block(types), Block(arg_types=types)
    ctx.insert(llvm.CondBrOp(ctx.scalar(condition.condition), body, forwarded, exit_block, forwarded))
    ctx.move_to(body)
    _bind(ctx, after.args, layouts, body.args)
    ctx.lower_block(after)
    ctx.insert(llvm.BrOp(header, *_flatten(ctx, after.last_op.operands, layouts)))
    ctx.func.body.add_block(exit_block)
    ctx.move_to(exit_block)
    ctx.smem_pending = SMEM_ANYWHERE
    _bind(ctx, op.res, layouts, exit_block.args)


@lowers(scf.IfOp)
def lower_if(ctx: KernelContext, op: scf.IfOp) -> None:
    layouts = _layouts(ctx, op.output)
    merge = Block(
        arg_types=[
            llvm_type(v.type) for v, layout in zip(op.output, layouts) for _ in range(layout.num_regs if layout else 1)
        ]
    )
    regions = [r for r in (op.true_region, op.false_region) if r.blocks]
    targets = [ctx.new_block() for _ in regions]
    ctx.insert(llvm.CondBrOp(ctx.scalar(op.cond), targets[0], [], targets[1] if len(targets) > 1 else merge, []))
    before = ctx.smem_pending
    after = [] if len(regions) > 1 else [before]
    for region, target in zip(regions, targets):
        ctx.move_to(target)
        ctx.smem_pending = before
        ctx.lower_block(region.block)
        ctx.insert(llvm.BrOp(merge, *_flatten(ctx, region.block.last_op.operands, layouts)))
        after.append(ctx.smem_pending)
    ctx.func.body.add_block(merge)
    ctx.move_to(merge)
    pending = [p for p in after if p is not None]
    ctx.smem_pending = (min(p[0] for p in pending), max(p[1] for p in pending)) if pending else None
    _bind(ctx, op.output, layouts, merge.args)
