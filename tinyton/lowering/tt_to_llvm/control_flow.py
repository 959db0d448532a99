"""
`scf.for`, `scf.while` and `scf.if` become LLVM blocks; tiles cross block boundaries as one block
argument per register, in the layout the assignment chose for the loop-carried value or
the `if` result (yielded values are converted to it). A 16-bit float tile crosses them two elements to an i32
(`_packs`): a register holds a whole 32-bit word on the GPU, so the halves carried one by one took twice the
registers (the overlapped attention loop's fp16 probabilities, 64 a thread instead of 32 at 128 x 128 blocks).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import llvm, scf
from xdsl.dialects.builtin import Attribute, IntegerType, i32
from xdsl.ir import Block, Operation, SSAValue

from tinyton.dialects import tt
from tinyton.lowering.tt_to_llvm.context import (
    SMEM_ANYWHERE,
    KernelContext,
    llvm_type,
    lowers,
)
from tinyton.lowering.tt_to_llvm.layouts import Layout

I16 = IntegerType(16)


def _layouts(ctx: KernelContext, values: Sequence[SSAValue]) -> list[Layout | None]:
    return [ctx.assign.layout.get(v) for v in values]


def _packs(value: SSAValue, layout: Layout | None) -> bool:
    """Whether `value` crosses a block boundary as pairs of 16-bit floats in i32 words."""
    return (layout is not None and layout.num_regs % 2 == 0 and tt.is_float(value.type)
            and tt.element_type(value.type).bitwidth == 16)


def _boundary_types(values: Sequence[SSAValue], layouts: Sequence[Layout | None]) -> list[Attribute]:
    """The types of the block arguments `values` cross a boundary as."""
    types: list[Attribute] = []
    for v, layout in zip(values, layouts):
        count = layout.num_regs if layout is not None else 1
        types += [i32] * (count // 2) if _packs(v, layout) else [llvm_type(v.type)] * count
    return types


def _flatten(ctx: KernelContext, values: Sequence[SSAValue], layouts: Sequence[Layout | None]) -> list[SSAValue]:
    out = []
    for v, layout in zip(values, layouts):
        regs = ctx.get(v, layout)
        if not _packs(v, layout):
            out += regs
            continue
        for low, high in zip(regs[0::2], regs[1::2]):
            low, high = (ctx.value(llvm.ZExtOp(ctx.value(llvm.BitcastOp(h, I16)), i32)) for h in (low, high))
            out.append(ctx.int_op("or", low, ctx.int_op("shl", high, ctx.const(16))))
    return out


def _bind(
    ctx: KernelContext, values: Sequence[SSAValue], layouts: Sequence[Layout | None], regs: Sequence[SSAValue]
) -> None:
    """Give `values` their registers, taken in order from `regs` (a 16-bit float tile's two to a word)."""
    at = 0
    for v, layout in zip(values, layouts):
        count = layout.num_regs if layout is not None else 1
        if not _packs(v, layout):
            ctx.set(v, layout, regs[at : at + count])
            at += count
            continue
        half = llvm_type(tt.element_type(v.type))
        unpacked = []
        for word in regs[at : at + count // 2]:
            for shift in (0, 16):
                bits = ctx.value(llvm.TruncOp(ctx.int_op("lshr", word, ctx.const(shift)) if shift else word, I16))
                unpacked.append(ctx.value(llvm.BitcastOp(bits, half)))
        ctx.set(v, layout, unpacked)
        at += count // 2


DOT_OPS = (tt.DotOp, tt.DotWaitOp, tt.PromotedDotOp)


def dots_outlive_their_wait(op: Operation) -> bool:
    """Whether a dot in `op`'s regions (a loop's body, a kernel's) may still run past the wait the lowering unpins
    its staged operands at (`KernelContext.barrier`): a wait that leaves its own dot in flight (`tt.dot_wait d, N`
    with `d` among the N youngest dots, as a pipelined accumulation does), a wait for a dot of an earlier iteration
    or from outside, a dot not waited for within the region, a promoted float8 dot (its second chain runs into the
    next iteration), or a dot in flight across a nested region; dots and waits in a nested region other than a loop
    count too (a branch may skip them; a loop is judged by itself)."""
    issued: set[SSAValue] = set()
    in_flight: list[SSAValue] = []
    for block in (region.block for region in op.regions):
        for inner in block.ops:
            if inner.regions and any(isinstance(nested, DOT_OPS) for nested in inner.walk()):
                if in_flight or not isinstance(inner, (scf.ForOp, scf.WhileOp)):
                    return True
            elif isinstance(inner, tt.PromotedDotOp):
                return True
            elif isinstance(inner, tt.DotOp) and tt.ASYNC_DOT_ATTR in inner.attributes:
                issued.add(inner.result)
                in_flight.append(inner.result)
            elif isinstance(inner, tt.DotWaitOp):
                left = inner.pending.value.data
                younger = in_flight[len(in_flight) - left:] if left else []
                if inner.acc not in issued or inner.acc in younger:
                    return True
                in_flight = younger
    return bool(in_flight)


@lowers(scf.ForOp)
def lower_for(ctx: KernelContext, op: scf.ForOp) -> None:
    body = op.body.block
    layouts = _layouts(ctx, op.res)
    outer = ctx.dots_outlive_waits

    def iteration(iv: SSAValue, carried: list[SSAValue]) -> list[SSAValue]:
        ctx.set(body.args[0], None, [iv])
        _bind(ctx, body.args[1:], layouts, carried)
        ctx.dots_outlive_waits = outer or dots_outlive_their_wait(op)
        ctx.lower_block(body)
        ctx.dots_outlive_waits = outer
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
    types = _boundary_types(op.res, layouts)
    inits = _flatten(ctx, op.arguments, layouts)
    header = ctx.new_block(types)
    ctx.insert(llvm.BrOp(header, *inits))
    ctx.move_to(header)
    ctx.smem_pending = SMEM_ANYWHERE  # an iteration may read shared memory that the next one overwrites
    outer = ctx.dots_outlive_waits
    ctx.dots_outlive_waits = outer or dots_outlive_their_wait(op)
    _bind(ctx, before.args, layouts, header.args)
    ctx.lower_block(before)
    condition = before.last_op
    forwarded = _flatten(ctx, condition.args, layouts)
    body, exit_block = ctx.new_block(types), Block(arg_types=types)
    ctx.insert(llvm.CondBrOp(ctx.scalar(condition.condition), body, forwarded, exit_block, forwarded))
    ctx.move_to(body)
    _bind(ctx, after.args, layouts, body.args)
    ctx.lower_block(after)
    ctx.dots_outlive_waits = outer
    ctx.insert(llvm.BrOp(header, *_flatten(ctx, after.last_op.operands, layouts)))
    ctx.func.body.add_block(exit_block)
    ctx.move_to(exit_block)
    ctx.smem_pending = SMEM_ANYWHERE
    _bind(ctx, op.res, layouts, exit_block.args)


@lowers(scf.IfOp)
def lower_if(ctx: KernelContext, op: scf.IfOp) -> None:
    layouts = _layouts(ctx, op.output)
    merge = Block(arg_types=_boundary_types(op.output, layouts))
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
