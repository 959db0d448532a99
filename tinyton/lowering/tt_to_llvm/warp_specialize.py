"""The warp-specialised form of `tinyton-pipeline`: a producer warpgroup loads, the program's warps compute.

A K loop whose loads all go through TMA (its dots in flight, or waiting for themselves), marked
`tt.warp_specialize` (Triton's `tl.range(..., warp_specialize=True)`, an array program's warp-specialised tile)
at the top of its kernel, or directly in the body of a loop over tiles so marked at the top (a persistent
kernel, as Triton's persistent matmul spells it), becomes (dialects/tt_warps.py)

    full, empty = S mbarriers each      full: one arrival (with the copies' bytes); empty: one per consumer warp
    tt.warp_specialize
      producer (a warpgroup of its own, 24 registers a thread):
        (for tile: what the K loop's bounds and offsets need)
        for i: wait empty[i % S] (phase flipped: a fresh barrier's previous phase counts as complete), one
               thread copies iteration i's tiles into slot i % S, completing full[i % S]
      consumers (the program's warps, the registers the producer gave up):
        (for tile: ...)
        for i: wait full[i % S]; the dots on slot i % S, in flight; once the previous iteration's dots are done,
               each warp releases that iteration's slot (an arrival on empty); after the loop, the last one
               (dots that wait for themselves, whose result the loop reads: its own slot at its end)
        the rest of the kernel (of the tile)

The slot and its phase run on across the tiles: the producer fills the next tile's first slots while the
consumers finish the last tile's dots and run its epilogue.

No barrier among all threads follows the split: the consumers wait on mbarriers only, and the lowering names
their barriers for their own threads (`bar.sync 1, N`). The producer runs up to S iterations ahead whatever the
consumers do, instead of one thread issuing each copy between the consumers' barriers (pipeline.py).
Loops this does not fit (elsewhere, an op before the split that writes memory, a tile loop whose offsets need
loop-carried values or loads) are pipelined as usual: like Triton's, the attribute is a request.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from math import prod

from xdsl.dialects import func, scf
from xdsl.dialects.builtin import IntegerAttr, i1, i32
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.traits import MemoryEffectKind, get_effects
from xdsl.transforms.dead_code_elimination import region_dce

from tinyton.dialects import tt
from tinyton.lowering.tt_to_llvm.pipeline_build import (
    Builder,
    advance,
    buffers,
    carry,
    constant,
    drop_dead_carried,
    first_reader,
    flip,
    keep_in_flight,
    sink,
)
from tinyton.lowering.tt_to_llvm.pipeline_plan import Plan, pure_slice, tma_block
from tinyton.lowering.tt_to_llvm.pipeline_tma import issue_tma

MOST_REGISTERS = 248
"""Most registers a thread may hold in `setmaxnreg`'s steps of 8 (255 is the hardware's most)."""
PRODUCER_REGISTERS = 24
"""Registers a producer thread keeps (`setmaxnreg.dec`, its least): its loop's counters, offsets and mbarrier
addresses fit (ptxas -v, sm_90a: no spills in the kernels of tests/test_warp_specialize.py). CUTLASS keeps 40 and
gives two consumer warpgroups 232; a 128 x 256 tile with a GELU-tanh epilogue spills 16 bytes there, none at 240."""


def launch_registers(threads: int, per_sm: int = 1) -> int:
    """Registers per thread a warp-specialised program is launched with (`.maxnreg`): its share of the register
    file, `per_sm` programs an SM. `setmaxnreg` only moves a program's registers between its warpgroups, so
    without it ptxas would launch with what the code needs (59 for a small kernel) and the consumers'
    `setmaxnreg.inc` would wait forever for registers the program never had."""
    return min(MOST_REGISTERS, tt.REGISTER_FILE // per_sm // threads // 8 * 8)


def consumer_registers(num_warps: int, per_sm: int = 1) -> int:
    """Registers a consumer thread grows to (`setmaxnreg.inc`): what the producer warpgroup's 24 leave of the
    program's share, in steps of 8; never fewer than it is launched with (`launch_registers`)."""
    spare = tt.REGISTER_FILE // per_sm - 32 * tt.PRODUCER_WARPS * PRODUCER_REGISTERS
    return min(MOST_REGISTERS, spare // (32 * num_warps) // 8 * 8)


def tile_loop(loop: scf.ForOp) -> scf.ForOp | None:
    """The loop over tiles marked `tt.warp_specialize` at the top of the kernel whose body holds `loop`, if any."""
    outer = loop.parent_op()
    if isinstance(outer, scf.ForOp) and tt.WARP_SPECIALIZE_ATTR in outer.attributes and _at_top(outer):
        return outer
    return None


def _at_top(op: Operation) -> bool:
    block = op.parent_block()
    return block is not None and isinstance(block.parent_op(), func.FuncOp)


def wants_warp_specialization(plan: Plan, num_warps: int, arch: str) -> bool:
    """Whether `plan`'s loop asks for, and fits, the warp-specialised form."""
    loop = plan.loop
    if not plan.tma or arch != "sm_90a" or num_warps % tt.PRODUCER_WARPS:
        return False
    outer = tile_loop(loop)
    if outer is None:
        if tt.WARP_SPECIALIZE_ATTR not in loop.attributes or not _at_top(loop):
            return False
    elif _tile_slice(plan, outer) is None:
        return False
    site = outer or loop
    block = site.parent_block()
    assert block is not None
    return not any(writes_memory(op) for op in block.ops if op.is_before_in_block(site))


def writes_memory(op: Operation) -> bool:
    """Whether `op` may write global memory (the producer warps run what precedes the split too): an invariant
    operand's copy to shared memory (pipeline.py `_hoist`) may come first, every warp copying (the program's warps'
    layouts, the producer's warps repeating theirs) and all waiting for it before the split."""
    if isinstance(op, (tt.LocalAllocOp, tt.AsyncCopyOp, tt.AsyncCommitOp, tt.AsyncWaitOp)):
        return False
    effects = get_effects(op)
    return effects is None or any(e.kind == MemoryEffectKind.WRITE for e in effects)


def _tile_slice(plan: Plan, outer: scf.ForOp, tile_loads: Sequence[tt.DescriptorLoadOp] = ()) -> list[Operation] | None:
    """The pure ops of the tile loop's body that the K loop's bounds and copies need, and those of `tile_loads`
    (body order), or None when they need a value carried by the tile loop or an op that is not pure (a load)."""
    loop = plan.loop
    roots = [loop.lb, loop.ub, loop.step, *(loop.iter_args[i] for i in plan.carried)]
    roots += [v for op in plan.ops for v in op.operands]
    roots += [v for ld in [*plan.loads, *tile_loads] for v in (ld.base, *ld.shape, *ld.strides, *ld.offsets)]  # what TMA reads
    found = pure_slice(roots, outer.body.block)
    if found is None or found[1]:
        return None
    return [op for op in outer.body.block.ops if op in found[0]]


def specialize_loop(plan: Plan, stages: int, num_warps: int, per_sm: int = 1, arch: str = "sm_90a",
                    spare_shared: int = 0) -> None:
    """Rewrite `plan`'s loop (and its tile loop) and the rest of its kernel into a producer and consumers
    (`per_sm` programs sharing an SM's registers; `spare_shared` bytes left beside the ring for the tile loads'
    slots, `_tile_ring`)."""
    loop = plan.loop
    outer = tile_loop(loop)
    site = outer or loop
    kernel = site.parent_block()
    assert kernel is not None
    before = Builder(kernel, site)
    slot_buffers = buffers(before, plan, stages)
    full, empty = (before.value(tt.BarrierAllocOp(stages)) for _ in range(2))
    before.add(tt.BarrierInitOp(full))
    before.add(tt.BarrierInitOp(empty, num_warps))
    ring = _Ring(stages, slot_buffers, full, empty)
    tiles = _tile_ring(before, plan, outer, arch, spare_shared, num_warps)
    producer = Block()
    start = Builder(producer, None)
    zero = start.value(constant(0))
    if outer is None:
        if tiles is not None:  # the kernel's one tile: its blocks copied before the K loop's
            _copy_tile(start, tiles, {}, zero, zero)
        start.add(_produce(plan, ring, {}, zero, zero))
    else:
        start.add(_produce_tiles(plan, outer, ring, zero, tiles))
    consumer = Block()
    rest = [op for op in kernel.ops if site.is_before_in_block(op) and not isinstance(op, func.ReturnOp)]
    for op in [site, *rest]:
        op.detach()
        consumer.add_op(op)
    zero = Builder(consumer, site).value(constant(0))
    if outer is None:
        if tiles is not None:
            _read_tile(Builder(consumer, site), tiles, zero, zero)
        _consume(plan, ring, zero, zero)
    else:
        _consume_tiles(plan, outer, ring, zero, tiles)
    registers = consumer_registers(num_warps, per_sm)
    split = tt.WarpSpecializeOp(Region(producer), Region(consumer), PRODUCER_REGISTERS, registers)
    kernel.insert_op_before(split, kernel.last_op)


@dataclass(frozen=True)
class _Ring:
    """The slots' buffers (per load: buffer, part) and their `full` and `empty` mbarriers; for a tile ring, the
    tile loop's loads it takes (`_tile_ring`)."""

    slots: int
    buffers: list[tuple[SSAValue, int]]
    full: SSAValue
    empty: SSAValue
    loads: tuple[tt.DescriptorLoadOp, ...] = ()


def _tile_loads(plan: Plan, outer: scf.ForOp | None, arch: str) -> list[tt.DescriptorLoadOp]:
    """The 2-D descriptor loads before the K loop in the tile loop's body (or, without one, in the kernel's, read only
    after the split) that TMA can copy and whose operands the producer can compute: an attention's q block, the scores'
    left operand, and the value block of its last product."""
    loop = plan.loop
    block = loop.parent_block() if outer is None else outer.body.block
    assert block is not None
    found = []
    for op in block.ops:
        if op is loop:
            break
        if not tma_block(op, arch):
            continue
        if outer is None:  # what precedes the split both roles run: the producer has the operands
            if all(loop.is_before_in_block(use.operation) for use in op.result.uses):
                found.append(op)
            continue
        sliced = pure_slice([*op.offsets, *op.shape, *op.strides], block)
        if sliced is not None and not sliced[1]:
            found.append(op)
    return found


def _tile_ring(before: Builder, plan: Plan, outer: scf.ForOp | None, arch: str, spare: int,
               num_warps: int) -> _Ring | None:
    """Slots for the tile loads (`_tile_loads`) the producer copies a tile ahead, with their `full` and `empty`
    mbarriers: two for the first of them that fit so in `spare` bytes of shared memory (the next tile's blocks
    arrive while the consumers finish this one), else one for those that fit so (they arrive once the consumers
    released the slot; a kernel without a tile loop has one tile); None for none. The loads left out stay the
    consumers'."""
    found = _tile_loads(plan, outer, arch)
    sizes = list(accumulate(tt.element_type(ld.result.type).bitwidth // 8 * prod(tt.shape_of(ld.result.type))
                            for ld in found))
    slots = 2 if outer is not None and sizes and 2 * sizes[0] <= spare else 1
    loads = [ld for ld, total in zip(found, sizes) if slots * total <= spare]
    for load in found[len(loads):]:  # the consumers' loads: where they are first read, not held across the K loop
        sink(load, first_reader(load))
    if not loads:
        return None
    tile_buffers = [(before.value(tt.LocalAllocOp(slots, tt.shape_of(ld.result.type), tt.element_type(ld.result.type))), 0)
                    for ld in loads]
    full, empty = (before.value(tt.BarrierAllocOp(slots)) for _ in range(2))
    before.add(tt.BarrierInitOp(full))
    before.add(tt.BarrierInitOp(empty, num_warps))
    return _Ring(slots, tile_buffers, full, empty, tuple(loads))


def _produce(
    plan: Plan, ring: _Ring, outside: dict[SSAValue, SSAValue], slot0: SSAValue, phase0: SSAValue
) -> scf.ForOp:
    """A loop over the iterations of `plan`'s loop computing only its tiles' offsets and copying them, its slot
    and phase starting at `slot0`/`phase0` and its last results; `outside` renames the values it reads from
    around the loop (a tile loop's body, cloned)."""
    loop = plan.loop
    old = loop.body.block
    rename = lambda v: outside.get(v, v)  # noqa: E731
    inits = [*(rename(loop.iter_args[i]) for i in plan.carried), slot0, phase0]
    body = Block(arg_types=[i32, *(old.args[1 + i].type for i in plan.carried), i32, i32])
    mapping = dict(outside)
    mapping.update({old.args[0]: body.args[0], **{old.args[1 + i]: arg for i, arg in zip(plan.carried, body.args[1:])}})
    b = Builder(body, None)
    for op in plan.ops:
        b.add(op.clone(value_mapper=mapping))
    slot, phase = body.args[-2:]
    b.add(tt.BarrierWaitOp(ring.empty, slot, b.value(tt.SubOp(b.value(constant(1)), phase))))
    issue_tma(b.add, plan.loads, mapping, ring.buffers, ring.full, slot, b.value(tt.ConstantOp(IntegerAttr(1, 1), i1)))
    yields = old.last_op.operands
    state = [mapping.get(yields[i], yields[i]) for i in plan.carried]
    b.add(scf.YieldOp(*state, advance(b, slot, ring.slots), flip(b, phase, slot, ring.slots)))
    return scf.ForOp(rename(loop.lb), rename(loop.ub), rename(loop.step), inits, Region(body))


def _produce_tiles(plan: Plan, outer: scf.ForOp, ring: _Ring, zero: SSAValue, tiles: _Ring | None) -> scf.ForOp:
    """The tile loop with only what the K loop's copies (and the tile ring's) need, the slot and phase of each ring
    carried across the tiles; each tile's loads are copied before its K loop's."""
    old = outer.body.block
    carried = 4 if tiles is not None else 2
    body = Block(arg_types=[i32] * (1 + carried))
    b = Builder(body, None)
    mapping: dict[SSAValue, SSAValue] = {old.args[0]: body.args[0]}
    for op in _tile_slice(plan, outer, tiles.loads if tiles else ()) or []:
        b.add(op.clone(value_mapper=mapping))
    state: list[SSAValue] = []
    if tiles is not None:
        slot, phase = body.args[3:5]
        _copy_tile(b, tiles, mapping, slot, phase)
        state = [advance(b, slot, tiles.slots), flip(b, phase, slot, tiles.slots)]
    inner = b.add(_produce(plan, ring, mapping, *body.args[1:3]))
    b.add(scf.YieldOp(*inner.results[-2:], *state))
    return scf.ForOp(outer.lb, outer.ub, outer.step, [zero] * carried, Region(body))


def _copy_tile(b: Builder, tiles: _Ring, mapping: dict[SSAValue, SSAValue], slot: SSAValue, phase: SSAValue) -> None:
    """The producer's copy of a tile's blocks into `slot` once the consumers released it."""
    b.add(tt.BarrierWaitOp(tiles.empty, slot, b.value(tt.SubOp(b.value(constant(1)), phase))))
    issue_tma(b.add, tiles.loads, mapping, tiles.buffers, tiles.full, slot, b.value(tt.ConstantOp(IntegerAttr(1, 1), i1)))


def _read_tile(b: Builder, tiles: _Ring, slot: SSAValue, phase: SSAValue) -> None:
    """The consumers' wait for a tile's blocks in `slot`, which their loads then read from there."""
    b.add(tt.BarrierWaitOp(tiles.full, slot, phase))
    for load, (buffer, part) in zip(tiles.loads, tiles.buffers):
        load.result.replace_all_uses_with(b.value(tt.LocalLoadOp(buffer, slot, part)))
    for load in tiles.loads:
        load.detach()
        load.erase()


def _consume(plan: Plan, ring: _Ring, slot0: SSAValue, phase0: SSAValue) -> tuple[SSAValue, SSAValue]:
    """Turn `plan`'s loop into waits on `full`, reads of the slots, its dots and the release of each slot once the
    dots reading it are done: dots in flight release the previous iteration's slot (the last one's after the
    loop), dots that wait for themselves their own iteration's; gives the slot and phase after the loop (`plan.loop`
    is then the consumers' loop)."""
    loop = plan.loop
    in_flight = bool(plan.async_dots)
    if in_flight:
        loop = plan.loop = keep_in_flight(loop, plan.async_dots, plan.dot_groups)
    body = loop.body.block
    slot = body.insert_arg(i32, len(body.args))
    phase = body.insert_arg(i32, len(body.args))
    top = Builder(body, body.first_op)
    top.add(tt.BarrierWaitOp(ring.full, slot, phase))
    for load, (buffer, part) in zip(plan.loads, ring.buffers):
        load.result.replace_all_uses_with(top.value(tt.LocalLoadOp(buffer, slot, part)))
        load.detach()
        load.erase()
    end = Builder(body, body.last_op)
    if in_flight:
        end.add(tt.BarrierArriveOp(ring.empty, _previous(end, slot, ring.slots),
                                   end.value(tt.CmpOp("gt", body.args[0], loop.lb))))
    else:
        end.add(tt.BarrierArriveOp(ring.empty, slot, end.value(tt.ConstantOp(IntegerAttr(1, 1), i1))))
    new_loop = carry(loop, [slot0, phase0], [advance(end, slot, ring.slots), flip(end, phase, slot, ring.slots)])
    if in_flight:
        waits = new_loop
        while isinstance(waits.next_op, tt.DotWaitOp):  # the dots' last waits, which keep_in_flight put after it
            waits = waits.next_op
        after = Builder(new_loop.parent_block(), waits.next_op)
        slot_out = new_loop.results[-2]
        after.add(tt.BarrierArriveOp(ring.empty, _previous(after, slot_out, ring.slots),
                                     after.value(tt.CmpOp("lt", new_loop.lb, new_loop.ub))))
    region_dce(new_loop.body)
    new_loop = plan.loop = drop_dead_carried(new_loop)  # the addresses the loads were carried by
    slot_out, phase_out = new_loop.results[-2:]
    return slot_out, phase_out


def _consume_tiles(plan: Plan, outer: scf.ForOp, ring: _Ring, zero: SSAValue, tiles: _Ring | None) -> None:
    """`_consume` inside the tile loop, the slot and phase carried across the tiles; the tile ring's blocks read
    from their slot once it is full, and the slot released at the tile's end."""
    body = outer.body.block
    slot = body.insert_arg(i32, len(body.args))
    phase = body.insert_arg(i32, len(body.args))
    tile_state: list[SSAValue] = []
    if tiles is not None:
        tile_slot = body.insert_arg(i32, len(body.args))
        tile_phase = body.insert_arg(i32, len(body.args))
        _read_tile(Builder(body, tiles.loads[0]), tiles, tile_slot, tile_phase)
    slot_out, phase_out = _consume(plan, ring, slot, phase)
    if tiles is not None:  # released at the tile's end, every dot reading the slot waited for
        end = Builder(body, body.last_op)
        end.add(tt.BarrierArriveOp(tiles.empty, tile_slot, end.value(tt.ConstantOp(IntegerAttr(1, 1), i1))))
        tile_state = [advance(end, tile_slot, tiles.slots), flip(end, tile_phase, tile_slot, tiles.slots)]
    carry(outer, [zero] * (2 + len(tile_state)), [slot_out, phase_out, *tile_state])


def _previous(b: Builder, slot: SSAValue, slots: int) -> SSAValue:
    """`(slot - 1) mod slots`."""
    at_first = b.value(tt.CmpOp("eq", slot, b.value(constant(0))))
    return b.value(tt.SelectOp(at_first, b.value(constant(slots - 1)), b.value(tt.SubOp(slot, b.value(constant(1))))))
