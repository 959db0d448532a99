"""`tt.warp_specialize`: the program's warps branch into a producer warpgroup and the consumers.

The warps past the program's own (`ctx.num_warps`, whose layouts every tile keeps) are the producer: they give
registers up (`setmaxnreg.dec`), and their first lane issues the TMA copies and arrivals (`ctx.leader_warp`). The
program's warps take the registers (`setmaxnreg.inc`; the kernel is launched with the whole register file,
`.maxnreg`, pass_.py) and run the consumer region, where every barrier is the
named barrier of their threads (`ctx.barrier_threads`): the producer never reaches one. Both branches then meet
at the kernel's return. What comes before the op ran on every warp (the pipeliner allows no stores there).
"""

from __future__ import annotations

from xdsl.dialects import llvm
from xdsl.ir import Block

from tinyton.dialects import tt
from tinyton.lowering.tt_to_llvm.context import KernelContext, lowers
from tinyton.lowering.tt_to_llvm.memory import _inline_asm
from tinyton.lowering.tt_to_llvm.warp_specialize import launch_registers


def _set_registers(ctx: KernelContext, how: str, count: int) -> None:
    _inline_asm(ctx, [f"setmaxnreg.{how}.sync.aligned.u32 {count};"], [], [], None)


@lowers(tt.WarpSpecializeOp)
def lower_warp_specialize(ctx: KernelContext, op: tt.WarpSpecializeOp) -> None:
    consumers = ctx.num_warps
    producer, consumer, merge = ctx.new_block(), Block(), Block()  # blocks in the order their code runs
    ctx.insert(llvm.CondBrOp(ctx.icmp("uge", ctx.warp, ctx.const(consumers)), producer, [], consumer, []))
    pending = ctx.smem_pending
    ctx.move_to(producer)
    _set_registers(ctx, "dec", op.producer_registers.value.data)
    ctx.leader_warp = consumers
    ctx.lower_block(op.producer.block)
    ctx.leader_warp = 0
    ctx.insert(llvm.BrOp(merge))
    ctx.func.body.add_block(consumer)
    ctx.move_to(consumer)
    ctx.smem_pending = pending
    launched = launch_registers(32 * (consumers + op.producer_warps.value.data), ctx.programs_per_sm)
    if op.consumer_registers.value.data > launched:  # one consumer warpgroup already has the most it may hold
        _set_registers(ctx, "inc", op.consumer_registers.value.data)
    ctx.barrier_threads = 32 * consumers
    ctx.lower_block(op.consumer.block)
    ctx.barrier_threads = None
    ctx.insert(llvm.BrOp(merge))
    ctx.func.body.add_block(merge)
    ctx.move_to(merge)


def launch_warps(kernel, num_warps: int) -> int:
    """The warps a kernel is launched with: the program's, and a warp-specialised kernel's producer warps."""
    return num_warps + sum(op.producer_warps.value.data for op in kernel.walk() if isinstance(op, tt.WarpSpecializeOp))
