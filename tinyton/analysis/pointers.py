"""Which pointer parameters of a tt kernel a pointer value may point into (its provenance).

A pointer is followed back through addptr/splat/broadcast/expand_dims and the values a `scf.for` carries;
anything else (a pointer chosen by tt.select, carried by a `scf.while`) conservatively counts as every pointer
parameter. The compiler driver asks which parameters a kernel writes (host arrays to copy back); the
simulator asks whether a loop reads memory the kernel writes (programs that may wait on each other).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from xdsl.dialects import func, scf
from xdsl.ir import BlockArgument, OpResult, SSAValue

from tinyton.dialects import tt

WRITES = (tt.StoreOp, tt.DescriptorWriteBase, tt.AtomicRMWOp, tt.AtomicCASOp)
"""Ops that write memory through their `ptr` operand."""
READS = (tt.LoadOp, tt.DescriptorLoadOp, tt.AtomicRMWOp, tt.AtomicCASOp)
"""Ops that read memory through their `ptr` operand."""
_POINTER_VIEWS = (tt.AddPtrOp, tt.SplatOp, tt.BroadcastOp, tt.ExpandDimsOp)


def pointer_params(function: func.FuncOp, pointers: Iterable[SSAValue]) -> frozenset[int]:
    """Indices of the pointer parameters of `function` that any of `pointers` may point into."""
    args = function.body.block.args
    all_pointers = frozenset(i for i, a in enumerate(args) if tt.is_pointer(a.type))
    found: set[int] = set()
    seen: set[SSAValue] = set()
    pending = list(pointers)
    while pending:
        value = pending.pop()
        if value in seen:
            continue
        seen.add(value)
        if isinstance(value, BlockArgument) and value.owner is function.body.block:
            found.add(value.index)
        elif isinstance(value, OpResult) and isinstance(value.op, _POINTER_VIEWS):
            pending.append(value.op.operands[0])
        elif isinstance(value, (BlockArgument, OpResult)) and isinstance(_loop_of(value), scf.ForOp):
            loop, index = _loop_of(value), _carried_index(value)
            pending += [loop.iter_args[index], loop.body.block.last_op.operands[index]]
        else:
            return all_pointers
    return frozenset(found)


def written_params(function: func.FuncOp) -> frozenset[int]:
    """Indices of the pointer parameters that some `tt.store` or atomic may write through."""
    return pointer_params(function, [op.ptr for op in function.walk() if isinstance(op, WRITES)])


def _loop_of(value: SSAValue) -> Any:
    if isinstance(value, BlockArgument):
        return value.owner.parent_op() if value.index > 0 else None
    return value.op


def _carried_index(value: SSAValue) -> int:
    return value.index - 1 if isinstance(value, BlockArgument) else value.index
