"""The warp-specialised form of `tinyton-pipeline`: a producer warpgroup loads, the program's warps compute.

A K loop marked `tt.warp_specialize` (Triton's `tl.range(..., warp_specialize=True)`, an array program's
warp-specialised tile) whose loads all go through TMA and whose wgmma dots may stay in flight, at the top of
its kernel, becomes (dialects/tt_warps.py)

    full, empty = S mbarriers each      full: one arrival (with the copies' bytes); empty: one per consumer warp
    tt.warp_specialize
      producer (a warpgroup of its own, 40 registers a thread):
        for i: wait empty[i % S] (phase flipped: a fresh barrier's previous phase counts as complete), one
               thread copies iteration i's tiles into slot i % S, completing full[i % S]
      consumers (the program's warps, the registers the producer gave up):
        for i: wait full[i % S]; the dots on slot i % S, in flight; once the previous iteration's dots are done,
               each warp releases that iteration's slot (an arrival on empty)
        the rest of the kernel

No barrier among all threads follows the split: the consumers wait on mbarriers only, and the lowering names
their barriers for their own threads (`bar.sync 1, N`). The producer runs up to S iterations ahead whatever the
consumers do, instead of one thread issuing each copy between the consumers' barriers (pipeline.py).
Loops this does not fit (not at the kernel's top, an op before them that writes memory, dots that cannot stay in
flight) are pipelined as usual: like Triton's, the attribute is a request.
"""

from __future__ import annotations

from xdsl.dialects import func, scf
from xdsl.dialects.builtin import IntegerAttr, i1, i32
from xdsl.ir import Block, Operation, Region
from xdsl.traits import MemoryEffectKind, get_effects
from xdsl.transforms.dead_code_elimination import region_dce

from tinyton.dialects import tt
from tinyton.lowering.tt_to_llvm.pipeline_build import (
    Builder,
    advance,
    buffers,
    constant,
    drop_dead_carried,
    flip,
    keep_in_flight,
)
from tinyton.lowering.tt_to_llvm.pipeline_plan import Plan
from tinyton.lowering.tt_to_llvm.pipeline_tma import issue_tma

REGISTER_FILE = 65536
"""32-bit registers of an SM, shared by a program's threads."""
MOST_REGISTERS = 248
"""Most registers a thread may hold in `setmaxnreg`'s steps of 8 (255 is the hardware's most)."""
PRODUCER_REGISTERS = 40
"""Registers a producer thread keeps (`setmaxnreg.dec`): addresses and loop counters (CUTLASS gives 40 too)."""


def launch_registers(threads: int) -> int:
    """Registers per thread a warp-specialised program is launched with (`.maxnreg`): the whole register file,
    one program an SM. `setmaxnreg` only moves a program's registers between its warpgroups, so without it
    ptxas would launch with what the code needs (59 for a small kernel) and the consumers' `setmaxnreg.inc`
    would wait forever for registers the program never had."""
    return min(MOST_REGISTERS, REGISTER_FILE // threads // 8 * 8)


def consumer_registers(num_warps: int) -> int:
    """Registers a consumer thread grows to (`setmaxnreg.inc`): what the producer warpgroup's 40 leave, in steps
    of 8; never fewer than it is launched with (`launch_registers`)."""
    spare = REGISTER_FILE - 32 * tt.PRODUCER_WARPS * PRODUCER_REGISTERS
    return min(MOST_REGISTERS, spare // (32 * num_warps) // 8 * 8)


def wants_warp_specialization(plan: Plan, num_warps: int, arch: str) -> bool:
    """Whether `plan`'s loop asks for, and fits, the warp-specialised form."""
    loop = plan.loop
    block = loop.parent_block()
    if tt.WARP_SPECIALIZE_ATTR not in loop.attributes or not plan.tma or not plan.async_dots or arch != "sm_90a":
        return False
    if num_warps % tt.PRODUCER_WARPS or block is None or not isinstance(block.parent_op(), func.FuncOp):
        return False
    return not any(_writes(op) for op in block.ops if op.is_before_in_block(loop))


def _writes(op: Operation) -> bool:
    """Whether `op` may write memory (the producer warps run what precedes the split too)."""
    effects = get_effects(op)
    return effects is None or any(e.kind == MemoryEffectKind.WRITE for e in effects)


def specialize_loop(plan: Plan, stages: int, num_warps: int) -> None:
    """Rewrite `plan`'s loop and the rest of its kernel into a producer and consumers (see the module)."""
    loop = plan.loop
    kernel = loop.parent_block()
    assert kernel is not None
    before = Builder(kernel, loop)
    slot_buffers = buffers(before, plan, stages)
    full, empty = (before.value(tt.BarrierAllocOp(stages)) for _ in range(2))
    before.add(tt.BarrierInitOp(full))
    before.add(tt.BarrierInitOp(empty, num_warps))
    producer = _producer(plan, stages, slot_buffers, full, empty)
    consumer = Block()
    rest = [op for op in kernel.ops if loop.is_before_in_block(op) and not isinstance(op, func.ReturnOp)]
    for op in [loop, *rest]:
        op.detach()
        consumer.add_op(op)
    _consume(plan, stages, slot_buffers, full, empty)
    split = tt.WarpSpecializeOp(Region(producer), Region(consumer), PRODUCER_REGISTERS, consumer_registers(num_warps))
    kernel.insert_op_before(split, kernel.last_op)


def _producer(plan: Plan, slots: int, slot_buffers, full, empty) -> Block:
    """A loop over the iterations of `plan`'s loop computing only its tiles' offsets and copying them."""
    loop = plan.loop
    old = loop.body.block
    block = Block()
    start = Builder(block, None)
    zero = start.value(constant(0))
    inits = [*(loop.iter_args[i] for i in plan.carried), zero, zero]
    body = Block(arg_types=[i32, *(old.args[1 + i].type for i in plan.carried), i32, i32])
    mapping = {old.args[0]: body.args[0], **{old.args[1 + i]: arg for i, arg in zip(plan.carried, body.args[1:])}}
    b = Builder(body, None)
    for op in plan.ops:
        b.add(op.clone(value_mapper=mapping))
    slot, phase = body.args[-2:]
    b.add(tt.BarrierWaitOp(empty, slot, b.value(tt.SubOp(b.value(constant(1)), phase))))
    issue_tma(b.add, plan.loads, mapping, slot_buffers, full, slot, b.value(tt.ConstantOp(IntegerAttr(1, 1), i1)))
    yields = old.last_op.operands
    state = [mapping.get(yields[i], yields[i]) for i in plan.carried]
    b.add(scf.YieldOp(*state, advance(b, slot, slots), flip(b, phase, slot, slots)))
    block.add_op(scf.ForOp(loop.lb, loop.ub, loop.step, inits, Region(body)))
    return block


def _consume(plan: Plan, slots: int, slot_buffers, full, empty) -> None:
    """Turn `plan`'s loop (now in the consumers' block) into waits on `full`, reads of the slots, the dots in
    flight and the release of each slot once the dots reading it are done."""
    loop = plan.loop
    keep_in_flight(loop, plan.async_dots, plan.dot_groups)
    body = loop.body.block
    slot = body.insert_arg(i32, len(body.args))
    phase = body.insert_arg(i32, len(body.args))
    top = Builder(body, body.first_op)
    top.add(tt.BarrierWaitOp(full, slot, phase))
    for load, (buffer, part) in zip(plan.loads, slot_buffers):
        load.result.replace_all_uses_with(top.value(tt.LocalLoadOp(buffer, slot, part)))
        load.detach()
        load.erase()
    yield_op = body.last_op
    end = Builder(body, yield_op)
    at_first = end.value(tt.CmpOp("eq", slot, end.value(constant(0))))
    previous = end.value(tt.SelectOp(at_first, end.value(constant(slots - 1)), end.value(tt.SubOp(slot, end.value(constant(1))))))
    end.add(tt.BarrierArriveOp(empty, previous, end.value(tt.CmpOp("gt", body.args[0], loop.lb))))
    phases = [advance(end, slot, slots), flip(end, phase, slot, slots)]
    yield_op.detach()
    body.add_op(scf.YieldOp(*yield_op.operands, *phases))
    yield_op.erase()
    outer = loop.parent_block()
    assert outer is not None
    zero = Builder(outer, loop).value(constant(0))
    region = loop.detach_region(loop.body)
    new_loop = scf.ForOp(loop.lb, loop.ub, loop.step, [*loop.iter_args, zero, zero], region)
    new_loop.attributes.update(loop.attributes)
    outer.insert_op_before(new_loop, loop)
    for old, new in zip(loop.results, new_loop.results):
        old.replace_all_uses_with(new)
    loop.detach()
    loop.erase()
    region_dce(new_loop.body)
    drop_dead_carried(new_loop)
