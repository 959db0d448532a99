"""Dots of one loop step left in flight while the step runs on (FlashAttention-3's intra-warpgroup overlap).

A wgmma dot returns at once: only `wgmma.wait_group` makes its accumulator readable. Lowered one by one, each
`tt.dot` waits for itself, so in a step that issues two independent dots and then computes on their results
(attention's scores of this key block and the previous block's `p @ v`: tinyton/lowering/fusion/attention.py
`_overlapped_block`) the second dot and the code after the first wait idle the tensor cores. Here every wgmma dot
of such a step is issued asynchronously (`tt.async_dot`) and waited for (`tt.dot_wait`) just before the first op
that reads it, told how many dots issued after it may still run: the softmax of the scores then runs while
`p @ v` is on the tensor cores.

    s = tt.dot q, kt (async)            s = tt.dot q, kt (async)
    acc = tt.dot p, v, acc      ->      acc = tt.dot p, v, acc (async)
    m = max(s) ...                      s' = tt.dot_wait s, 1        (p @ v runs on)
    acc * alpha                         m = max(s') ...
                                        acc' = tt.dot_wait acc, 0;  acc' * alpha

Every dot is waited for within the step, before a warp-specialised consumer releases the step's slot, so the
pipeliner's slots (which the next steps overwrite) and the operands staged in shared memory (pinned until the wait:
`KernelContext.pin_smem`) are read by no dot still running past it.
Only top-level dots of the step, none promoting float8 partials, and only when all of them run on wgmma: a
synchronous one would wait for every group before it (`wait_group 0`).
"""

from __future__ import annotations

from xdsl.dialects.builtin import UnitAttr
from xdsl.ir import Block, Operation

from tinyton.dialects import tt
from tinyton.lowering.tt_to_llvm.float8_dot import promotion_steps
from tinyton.lowering.tt_to_llvm.wgmma_layout import uses_wgmma


def overlap_dots(block: Block, num_warps: int, arch: str) -> bool:
    """Leave the wgmma dots of `block` (a loop's body) in flight until their first readers, when a dot's first
    reader comes after another dot's issue; whether it did."""
    dots = [op for op in block.walk() if isinstance(op, tt.DotOp)]
    if len(dots) < 2 or any(op.parent_block() is not block for op in dots):
        return False
    if any(tt.ASYNC_DOT_ATTR in d.attributes or promotion_steps(d) is not None or not uses_wgmma(d, num_warps, arch)
           for d in dots):  # fmt: skip
        return False
    order = {op: i for i, op in enumerate(block.ops)}
    readers = {dot: _first_reader(dot, block) for dot in dots}
    issued_after = {dot: sum(order[dot] < order[other] < order[readers[dot]] for other in dots) for dot in dots}
    if not any(issued_after.values()):
        return False
    for dot in dots:
        dot.attributes[tt.ASYNC_DOT_ATTR] = UnitAttr()
        wait = tt.DotWaitOp(dot.result, issued_after[dot])
        block.insert_op_before(wait, readers[dot])
        dot.result.replace_all_uses_with(wait.result)
        wait.operands[0] = dot.result
    return True


def _first_reader(dot: tt.DotOp, block: Block) -> Operation:
    """The first op of `block` after `dot` that reads its result (itself or through an op nested in it), or that
    releases the shared-memory slots its operands may be in (a warp-specialised consumer's arrival on `empty`)."""
    users = [use.operation for use in dot.result.uses]
    op = dot.next_op
    while op is not None:
        if isinstance(op, tt.BarrierArriveOp) or any(op.is_ancestor(user) for user in users):
            return op
        op = op.next_op
    raise AssertionError(f"{dot.name} in a loop body is read by nothing (its yield reads it at least)")
