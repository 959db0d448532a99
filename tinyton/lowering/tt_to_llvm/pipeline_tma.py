"""The TMA variant of `tinyton-pipeline` on sm_90: a stage's tiles arrive by `cp.async.bulk.tensor`,
completing on one mbarrier per slot, as in Triton's Hopper pipeline.

A loop qualifies when every load the pipeliner would copy is a `tt.descriptor_load` whose descriptor TMA
can read (tinyton/lowering/tt_to_llvm/tma.py `tensor_map_spec`); then only the blocks' offsets are
computed ahead (no pointer tiles), and

    prologue:  tt.barrier_init; iterations 0 .. S-2: tt.tma_copy per load into slot s, tt.tma_arrive
    loop i:    tt.tma_wait slot i % S, phase (i // S) % 2   (then one barrier for all threads)
               copy iteration i+S-1 into the slot iteration i-1 read; tt.tma_arrive
    after:     nothing to wait for (a copy past the loop's end is never issued)

The phase is carried beside the slots and flips each time the read slot wraps around.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import func
from xdsl.ir import Operation, SSAValue

from tinyton.dialects import tt
from tinyton.lowering.tt_to_llvm.tma import tensor_map_spec

Load = tt.LoadOp | tt.DescriptorLoadOp


def _kernel_of(op: Operation) -> func.FuncOp | None:
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, func.FuncOp):
        parent = parent.parent_op()
    return parent


def uses_tma(loads: Sequence[Load], arch: str) -> bool:
    """Whether the loop's pipelined loads all go through TMA on `arch`."""
    if not arch.startswith("sm_90") or not loads:
        return False
    for load in loads:
        kernel = _kernel_of(load)
        if not isinstance(load, tt.DescriptorLoadOp) or kernel is None:
            return False
        block = tuple(tt.shape_of(load.result.type))
        if tensor_map_spec(load.base, load.shape, load.strides, block, load.padding.data, kernel) is None:
            return False
    return True


def issue_tma(
    add, loads: Sequence[tt.DescriptorLoadOp], mapping: dict[SSAValue, SSAValue],
    buffers: Sequence[tuple[SSAValue, int]], barriers: SSAValue, slot: SSAValue, valid: SSAValue,
) -> None:
    """Copy the blocks of one iteration (whose sizes, strides and offsets `mapping` renames: they may be computed
    in the loop) into `slot` (each into its buffer's part), then arrive."""
    for load, (buffer, part) in zip(loads, buffers):
        shape, strides, offsets = ([mapping.get(v, v) for v in values] for values in (load.shape, load.strides, load.offsets))
        add(tt.TmaCopyOp(load.base, shape, strides, offsets, buffer, barriers, slot, valid, load.padding.data, part))
    add(tt.TmaArriveOp(barriers, slot, valid))
