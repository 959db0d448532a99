"""The `tt` ops of software pipelining: multi-buffered shared memory filled by asynchronous copies.

`tinyton-pipeline` (tinyton/lowering/tt_to_llvm/pipeline.py) rewrites a loop whose body loads the operands of a
`tt.dot` into these ops, as Triton's `ttg.local_alloc` / `async_copy_global_to_local` / `async_commit_group`
/ `async_wait` / `local_load`. A buffer is a `memref<S x R x C x T, 3>`: `S` slots of one `R x C` tile,
in shared memory (address space 3). Only the lowering sees these ops (the simulator runs the loop as
written), and they lower to `cp.async` + commit/wait groups and to `ldmatrix` reads of the slot; a wgmma dot
reading the slots may stay in flight across iterations (`tt.async_dot`, `tt.dot_wait`).
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import I32, IntegerAttr, MemRefType, TensorType, i32
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import MemoryReadEffect, MemoryWriteEffect

from tinyton.dialects.tt_types import (
    element_type,
    is_pointer,
    require,
    shape_of,
    tile_type,
    type_name,
)

SHARED_SPACE = 3
NUM_STAGES_ATTR = "tt.num_stages"
"""Attribute of an `scf.for` (or of the module) asking `tinyton-pipeline` for that many stages."""


def buffer_type(stages: int, shape: tuple[int, ...], elem: Attribute) -> MemRefType:
    return MemRefType(elem, [stages, *shape], memory_space=IntegerAttr(SHARED_SPACE, 32))


def slot_type(buffer: Attribute) -> TensorType:
    """The tile type one slot of a buffer holds."""
    assert isinstance(buffer, MemRefType)
    return tile_type(buffer.element_type, buffer.get_shape()[1:])


@irdl_op_definition
class LocalAllocOp(IRDLOperation):
    """Shared memory for `stages` tiles, live for the whole kernel."""

    name = "tt.local_alloc"
    result = result_def(MemRefType)
    assembly_format = "attr-dict `:` type($result)"

    def __init__(self, stages: int, shape: tuple[int, ...], elem: Attribute):
        super().__init__(result_types=[buffer_type(stages, shape, elem)])


@irdl_op_definition
class AsyncCopyOp(IRDLOperation):
    """Start copying the tile at `ptr` into slot `slot` of `buffer`; masked-off lanes write zeros."""

    name = "tt.async_copy"
    ptr = operand_def(TensorType)
    buffer = operand_def(MemRefType)
    slot = operand_def(i32)
    mask = opt_operand_def()
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    assembly_format = (
        "$ptr `,` $buffer `[` $slot `]` (`mask` $mask^)? attr-dict `:` type($ptr) `,` type($buffer) (`,` type($mask)^)?"
    )

    def __init__(
        self, ptr: SSAValue | Operation, buffer: SSAValue | Operation, slot: SSAValue | Operation,
        mask: SSAValue | Operation | None = None,
    ):
        super().__init__(operands=[ptr, buffer, slot, [mask] if mask else []])

    def verify_(self) -> None:
        require(is_pointer(self.ptr.type), f"async_copy needs pointers, got {type_name(self.ptr.type)}")
        expected = tile_type(element_type(self.ptr.type).pointee, shape_of(self.ptr.type))
        require(slot_type(self.buffer.type) == expected, f"async_copy of {type_name(expected)} into a wrong buffer")


@irdl_op_definition
class AsyncCommitOp(IRDLOperation):
    """Close the group of this thread's copies started since the last commit."""

    name = "tt.async_commit"
    traits = traits_def(MemoryWriteEffect())
    assembly_format = "attr-dict"

    def __init__(self):
        super().__init__()


@irdl_op_definition
class AsyncWaitOp(IRDLOperation):
    """Wait until at most `pending` committed groups are in flight, then synchronise the program
    (the copies of every thread become visible to all, and every earlier read of the slots is over)."""

    name = "tt.async_wait"
    pending = prop_def(IntegerAttr[I32])
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    assembly_format = "$pending attr-dict"

    def __init__(self, pending: int):
        super().__init__(properties={"pending": IntegerAttr(pending, 32)})


@irdl_op_definition
class LocalLoadOp(IRDLOperation):
    """The tile in slot `slot` of `buffer` (a `tt.dot` reads it straight from shared memory)."""

    name = "tt.local_load"
    buffer = operand_def(MemRefType)
    slot = operand_def(i32)
    result = result_def(TensorType)
    traits = traits_def(MemoryReadEffect())
    assembly_format = "$buffer `[` $slot `]` attr-dict `:` type($buffer) `->` type($result)"

    def __init__(self, buffer: SSAValue | Operation, slot: SSAValue | Operation):
        super().__init__(operands=[buffer, slot], result_types=[slot_type(SSAValue.get(buffer).type)])

    def verify_(self) -> None:
        require(self.result.type == slot_type(self.buffer.type), "local_load gives the buffer's tile type")


ASYNC_DOT_ATTR = "tt.async_dot"
"""Unit attribute of a `tt.dot` left in flight: its result is only valid through a `tt.dot_wait`."""


@irdl_op_definition
class DotWaitOp(IRDLOperation):
    """Wait until at most `pending` asynchronous dots (`tt.async_dot`) of this thread are in flight; gives
    `acc`, the result of one of them, as a value that may be read (Triton's `warp_group_dot_wait`).
    With `pending` > 0 the value may still be written by the hardware and may only feed the next dot."""

    name = "tt.dot_wait"
    T: ClassVar = VarConstraint("T", base(TensorType))
    acc = operand_def(T)
    pending = prop_def(IntegerAttr[I32])
    result = result_def(T)
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    assembly_format = "$acc `,` $pending attr-dict `:` type($result)"

    def __init__(self, acc: SSAValue | Operation, pending: int):
        super().__init__(
            operands=[acc], properties={"pending": IntegerAttr(pending, 32)}, result_types=[SSAValue.get(acc).type]
        )


SHARED_OPS = (LocalAllocOp, AsyncCopyOp, AsyncCommitOp, AsyncWaitOp, LocalLoadOp, DotWaitOp)
