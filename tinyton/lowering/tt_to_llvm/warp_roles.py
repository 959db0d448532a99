"""`tt.warp_specialize`: the program's warps branch into a producer warpgroup and the consumers.

The warps past the program's own (`ctx.num_warps`, whose layouts every tile keeps) are the producer: they give
registers up (`setmaxnreg.dec`), and their first lane issues the TMA copies and arrivals (`ctx.leader_warp`). The
program's warps take the registers (`setmaxnreg.inc`; the kernel is launched with the whole register file,
`.maxnreg`, pass_.py) and run the consumer region, where every barrier is the
named barrier of their threads (`ctx.barrier_threads`): the producer never reaches one. Both branches then meet
at the kernel's return. What comes before the op runs on every warp (the pipeliner allows no stores there); its
copies into shared memory are issued by the program's warps only (`ctx.spare_warps`: the producer's warps would
write the same bytes again, a race for compute-sanitizer's racecheck).

`tt.warpgroup_turn` (warpgroup_turns.py): warpgroup w of the N consumers takes its turn on named barrier
`TURN_BARRIER + w` and passes on `TURN_BARRIER + (w + 1) % N`, each of two warpgroups' threads (one waits, one
arrives).
"""

from __future__ import annotations

from xdsl.dialects import llvm
from xdsl.ir import Block

from tinyton.dialects import tt
from tinyton.lowering.tt_to_llvm.context import NAMED_BARRIER, KernelContext, lowers
from tinyton.lowering.tt_to_llvm.memory import _inline_asm
from tinyton.lowering.tt_to_llvm.warp_specialize import launch_registers


def _set_registers(ctx: KernelContext, how: str, count: int) -> None:
    _inline_asm(ctx, [f"setmaxnreg.{how}.sync.aligned.u32 {count};"], [], [], None)


@lowers(tt.WarpSpecializeOp)
def lower_warp_specialize(ctx: KernelContext, op: tt.WarpSpecializeOp) -> None:
    consumers = ctx.num_warps
    producer, consumer, merge = ctx.new_block(), Block(), Block()  # blocks in the order their code runs
    ctx.insert(llvm.CondBrOp(ctx.icmp("uge", ctx.warp, ctx.const(consumers)), producer, [], consumer, []))
    pending, spare = ctx.smem_pending, ctx.spare_warps
    ctx.spare_warps = False
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
    ctx.spare_warps = spare


def launch_warps(kernel, num_warps: int) -> int:
    """The warps a kernel is launched with: the program's, and a warp-specialised kernel's producer warps."""
    return num_warps + sum(op.producer_warps.value.data for op in kernel.walk() if isinstance(op, tt.WarpSpecializeOp))


TURN_BARRIER = NAMED_BARRIER + 1
"""The first named barrier of the warpgroups' turns (0 is every thread's, NAMED_BARRIER the consumers')."""


def turn_actions(step: str, groups: int) -> list[tuple[int, str, int]]:
    """(warpgroup, `sync` or `arrive`, named barrier) for each warpgroup that acts at a turn `step`: `take` waits on
    its own barrier, `pass` arrives at the next warpgroup's; `open`, the last warpgroup lets the first go; `close`,
    the first takes that last pass."""
    if step == "take":
        return [(g, "sync", TURN_BARRIER + g) for g in range(groups)]
    if step == "pass":
        return [(g, "arrive", TURN_BARRIER + (g + 1) % groups) for g in range(groups)]
    return [(groups - 1, "arrive", TURN_BARRIER)] if step == "open" else [(0, "sync", TURN_BARRIER)]


@lowers(tt.WarpgroupTurnOp)
def lower_warpgroup_turn(ctx: KernelContext, op: tt.WarpgroupTurnOp) -> None:
    """Each warpgroup's `bar.sync` or `bar.arrive` under a predicate on its index: constant barrier ids, so that
    ptxas counts the barriers the kernel uses (a register id would reserve all 16)."""
    step = op.step.data
    threads = 2 * 32 * tt.PRODUCER_WARPS
    lines = ["{", ".reg .pred p;"]
    for group, verb, barrier in turn_actions(step, ctx.num_warps // tt.PRODUCER_WARPS):
        lines += [f"setp.eq.u32 p, $0, {group};", f"@p bar.{verb} {barrier}, {threads};"]
    group_index = ctx.int_op("lshr", ctx.warp, ctx.const(2))
    _inline_asm(ctx, [*lines, "}"], [], [("r", group_index)], None)
    ctx.in_turn = step == "take"
