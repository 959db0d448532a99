"""The `tt` ops of software pipelining: multi-buffered shared memory filled by asynchronous copies.

`tinyton-pipeline` (tinyton/lowering/tt_to_llvm/pipeline.py) rewrites a loop whose body loads the operands of a
`tt.dot` into these ops, as Triton's `ttg.local_alloc` / `async_copy_global_to_local` / `async_commit_group`
/ `async_wait` / `local_load`. A buffer is a `memref<S x R x C x T, 3>`: `S` slots of one `R x C` tile,
in shared memory (address space 3), or a `memref<S x P x R x C x T, 3>` whose slots hold `P` such tiles side
by side, `part` 0 to P - 1 (the right operands of dots that one wgmma issues, pipeline_plan.py). Only the
lowering sees these ops (the simulator runs the loop as written), and they lower to `cp.async` + commit/wait
groups and to `ldmatrix` reads of the slot; a wgmma dot reading the slots may stay in flight across iterations
(`tt.async_dot`, `tt.dot_wait`).
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import I32, IntegerAttr, MemRefType, StringAttr, TensorType, i32
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
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


def buffer_type(stages: int, shape: tuple[int, ...], elem: Attribute, parts: int = 1) -> MemRefType:
    dims = [stages, parts, *shape] if parts > 1 else [stages, *shape]
    return MemRefType(elem, dims, memory_space=IntegerAttr(SHARED_SPACE, 32))


def buffer_parts(buffer: Attribute) -> int:
    """How many tiles one slot of a buffer holds side by side."""
    assert isinstance(buffer, MemRefType)
    shape = buffer.get_shape()
    return shape[1] if len(shape) == 4 else 1


def slot_type(buffer: Attribute) -> TensorType:
    """The tile type one slot of a buffer holds."""
    assert isinstance(buffer, MemRefType)
    shape = buffer.get_shape()
    return tile_type(buffer.element_type, shape[-2:] if buffer_parts(buffer) > 1 else shape[1:])


@irdl_op_definition
class LocalAllocOp(IRDLOperation):
    """Shared memory for `stages` slots of `parts` tiles each, live for the whole kernel."""

    name = "tt.local_alloc"
    result = result_def(MemRefType)
    assembly_format = "attr-dict `:` type($result)"

    def __init__(self, stages: int, shape: tuple[int, ...], elem: Attribute, parts: int = 1):
        super().__init__(result_types=[buffer_type(stages, shape, elem, parts)])


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
    """The tile in slot `slot` of `buffer`, its `part` (0 if absent) when the slot holds several (a `tt.dot`
    reads it straight from shared memory)."""

    name = "tt.local_load"
    buffer = operand_def(MemRefType)
    slot = operand_def(i32)
    part = opt_prop_def(IntegerAttr[I32])
    result = result_def(TensorType)
    traits = traits_def(MemoryReadEffect())
    assembly_format = "$buffer `[` $slot (`part` $part^)? `]` attr-dict `:` type($buffer) `->` type($result)"

    def __init__(self, buffer: SSAValue | Operation, slot: SSAValue | Operation, part: int = 0):
        super().__init__(
            operands=[buffer, slot], result_types=[slot_type(SSAValue.get(buffer).type)],
            properties={"part": IntegerAttr(part, 32)} if part else {},
        )

    @property
    def part_index(self) -> int:
        return part_index(self.part)

    def verify_(self) -> None:
        require(self.result.type == slot_type(self.buffer.type), "local_load gives the buffer's tile type")
        require(self.part_index < buffer_parts(self.buffer.type), "local_load of a part the buffer's slots do not have")


def part_index(part: IntegerAttr | None) -> int:
    """The value of an optional `part` property (0 when absent)."""
    return 0 if part is None else part.value.data


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


@irdl_op_definition
class PromotedDotOp(IRDLOperation):
    """A float8 `tt.dot` of one K tile left in flight while its partial sums are promoted (the pipeliner's form of
    a `max_num_imprecise_acc` dot, tinyton/lowering/tt_to_llvm/float8_dot.py): its K steps go in chains of
    wgmmas, each into a fresh partial; `result` is `acc` plus `pending` (the previous iteration's last chain,
    waited for before this tile's first chain is issued, added while it runs) plus every chain but the last,
    added in f32; the last chain is `pending_out`, still running (read it through `tt.dot_wait`). `result + pending_out` is
    `acc + pending + a @ b`. Carrying the running chain's registers to the next iteration, where the same
    registers are read, spares the tensor cores the drain a promoted `tt.dot` ends with."""

    name = "tt.promoted_dot"
    T: ClassVar = VarConstraint("T", base(TensorType))
    a = operand_def(TensorType)
    b = operand_def(TensorType)
    acc = operand_def(T)
    pending = operand_def(T)
    max_num_imprecise_acc = prop_def(IntegerAttr[I32])
    result = result_def(T)
    pending_out = result_def(T)
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    assembly_format = (
        "$a `,` $b `,` $acc `,` $pending `max_num_imprecise_acc` `=` $max_num_imprecise_acc attr-dict "
        "`:` type($a) `,` type($b) `->` type($result)"
    )

    def __init__(self, a: SSAValue, b: SSAValue, acc: SSAValue, pending: SSAValue, max_num_imprecise_acc: int):
        super().__init__(
            operands=[a, b, acc, pending], properties={"max_num_imprecise_acc": IntegerAttr(max_num_imprecise_acc, 32)},
            result_types=[acc.type, acc.type],
        )

    @property
    def input_precision(self) -> StringAttr:
        return StringAttr("ieee")

    def verify_(self) -> None:
        (m, k), (k_b, n) = shape_of(self.a.type), shape_of(self.b.type)
        require(k == k_b, f"promoted dot inner dimensions differ: {[m, k]} @ {[k_b, n]}")
        require(shape_of(self.acc.type) == (m, n), f"promoted dot accumulator must have shape {[m, n]}")
        require(all(t.bitwidth == 8 for t in (element_type(self.a.type), element_type(self.b.type))),
                "a promoted dot takes float8 operands")
        require(0 <= self.max_num_imprecise_acc.value.data <= k, f"max_num_imprecise_acc must be between 0 and K ({k})")


SHARED_OPS = (LocalAllocOp, AsyncCopyOp, AsyncCommitOp, AsyncWaitOp, LocalLoadOp, DotWaitOp, PromotedDotOp)
