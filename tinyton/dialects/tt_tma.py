"""The `tt` ops of tensor descriptors read through Hopper's Tensor Memory Accelerator (TMA).

`tt.descriptor_load` is what a tensor descriptor's `.load(offsets)` (and an array program's matmul operand)
becomes: a masked `tt.load` (its `ptr`, `mask` and `other` say exactly which elements it reads, so the
simulator and every target without TMA run it as that load) that also names its block by the descriptor's
`base`, `shape` and `strides` and the block's `offsets`, all i32 scalars. On sm_90 the pipeliner
(tinyton/lowering/tt_to_llvm/pipeline.py) turns such loads into the TMA ops below, which only the lowering
sees, as Triton's Hopper pipeline does:

    tt.barrier_alloc S          one mbarrier (8 bytes of shared memory) per slot
    tt.barrier_init             thread 0 initialises them (arrival count 1), fence, barrier
    tt.tma_copy                 thread 0: expect the box's bytes on the slot's mbarrier, copy the box
    tt.tma_arrive               thread 0 arrives on the slot's mbarrier (after all copies of the slot)
    tt.tma_wait                 every thread waits for the slot's phase `phase`, then a barrier

`tt.descriptor_store` is the store counterpart an array program's warp-specialised matmul writes its output tile
with: a masked `tt.store` that names the block the same way, stored by TMA from shared memory on sm_90.
`tt.descriptor_reduce` adds a block into memory the same way (a tensor descriptor's `atomic_add`; the attention
backward's dq): atomics everywhere but on sm_90, where one TMA reduction adds the block from shared memory.

A `tt.tma_copy` names its tensor map by the descriptor's operands: the lowering appends one kernel
parameter per distinct map (a pointer to a 128-byte `CUtensorMap` in global memory) and tells the runtime
how to encode it from the launch's parameter values (`KernelInfo.tensor_maps`).
"""

from __future__ import annotations

from xdsl.dialects.builtin import (
    I32,
    BFloat16Type,
    Float16Type,
    Float32Type,
    IntegerAttr,
    MemRefType,
    StringAttr,
    TensorType,
    i1,
    i32,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import MemoryReadEffect, MemoryWriteEffect

from tinyton.dialects.tt_shared import SHARED_SPACE, buffer_parts, part_index, slot_type
from tinyton.dialects.tt_types import (
    element_type,
    is_pointer,
    require,
    shape_of,
    tile_type,
    type_name,
)

Operand = SSAValue | Operation


@irdl_op_definition
class DescriptorLoadOp(IRDLOperation):
    """`tt.load(ptr, mask, other)` of the block at `offsets` of the descriptor `base`/`shape`/`strides`
    (out-of-range elements are masked off and read `other`, the padding; no mask: the block is inside).
    A descriptor of higher rank than the block (a batch of matrices) reads one index of each leading dimension."""

    name = "tt.descriptor_load"
    ptr = operand_def(TensorType)
    mask = opt_operand_def(TensorType)
    other = opt_operand_def(TensorType)
    base = operand_def()
    shape = var_operand_def(i32)
    strides = var_operand_def(i32)
    offsets = var_operand_def(i32)
    padding = prop_def(StringAttr)
    result = result_def(TensorType)
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(MemoryReadEffect())

    def __init__(
        self, ptr: Operand, mask: Operand | None, other: Operand | None, base: Operand, shape: list[Operand],
        strides: list[Operand], offsets: list[Operand], padding: str,
    ):
        pt = SSAValue.get(ptr).type
        super().__init__(
            operands=[ptr, [mask] if mask else [], [other] if other else [], base, shape, strides, offsets],
            result_types=[tile_type(element_type(pt).pointee, shape_of(pt))],
            properties={"padding": StringAttr(padding)},
        )

    def verify_(self) -> None:
        rank = len(shape_of(self.ptr.type))
        require(is_pointer(self.base.type) and not shape_of(self.base.type), "descriptor_load needs a scalar base pointer")
        require(
            len(self.shape) == len(self.strides) == len(self.offsets) >= rank,
            f"descriptor_load of a rank-{rank} block needs at least {rank} sizes, strides and offsets, as many of each",
        )
        expected = tile_type(element_type(self.ptr.type).pointee, shape_of(self.ptr.type))
        require(self.result.type == expected, f"descriptor_load gives {type_name(expected)}")
        require(self.other is None or self.other.type == expected, f"other must be {type_name(expected)}")


class DescriptorWriteBase(IRDLOperation):
    """A write of the 2-D block `value` at `offsets` of the descriptor `base`/`shape`/`strides` through the pointers
    `ptr`, whose `mask` is exactly the block's part inside `shape` (TMA clips the block to it)."""

    ptr = operand_def(TensorType)
    value = operand_def(TensorType)
    mask = opt_operand_def(TensorType)
    base = operand_def()
    shape = var_operand_def(i32)
    strides = var_operand_def(i32)
    offsets = var_operand_def(i32)
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(MemoryWriteEffect())

    def __init__(
        self, ptr: Operand, value: Operand, mask: Operand | None, base: Operand, shape: list[Operand],
        strides: list[Operand], offsets: list[Operand], properties: dict[str, Attribute] | None = None,
    ):
        super().__init__(operands=[ptr, value, [mask] if mask else [], base, shape, strides, offsets],
                         properties=properties or {})

    def verify_(self) -> None:
        rank = len(shape_of(self.ptr.type))
        scalar_pointer = is_pointer(self.base.type) and not shape_of(self.base.type)
        require(scalar_pointer, f"{self.name} needs a scalar base pointer")
        require(
            len(self.shape) == len(self.strides) == len(self.offsets) >= rank == 2,
            f"{self.name} of a 2-D block needs at least 2 sizes, strides and offsets, as many of each",
        )
        expected = tile_type(element_type(self.ptr.type).pointee, shape_of(self.ptr.type))
        require(self.value.type == expected, f"{self.name} writes {type_name(expected)}")


@irdl_op_definition
class DescriptorStoreOp(DescriptorWriteBase):
    """`tt.store(ptr, value, mask)` of the block. A warp-specialised kernel's consumers store it on sm_90 with TMA
    from shared memory (tinyton/lowering/tt_to_llvm/tma.py); everywhere else, the simulator included, it is that
    store."""

    name = "tt.descriptor_store"


def barrier_type(slots: int) -> MemRefType:
    return MemRefType(i64, [slots], memory_space=IntegerAttr(SHARED_SPACE, 32))


REDUCE_KINDS = ("add",)
REDUCE_ELEMENTS = (Float32Type, Float16Type, BFloat16Type)


@irdl_op_definition
class DescriptorReduceOp(DescriptorWriteBase):
    """`tt.atomic_rmw(kind, ptr, value, mask)` of the block, its old values unread (Triton's `tt.descriptor_reduce`,
    a tensor descriptor's `atomic_add`): on sm_90 one TMA reduction from shared memory
    (`cp.reduce.async.bulk.tensor`) instead of an atomic per element and its address; everywhere else, the
    simulator included, those atomics."""

    name = "tt.descriptor_reduce"
    kind = prop_def(StringAttr)

    def __init__(
        self, kind: str, ptr: Operand, value: Operand, mask: Operand | None, base: Operand, shape: list[Operand],
        strides: list[Operand], offsets: list[Operand],
    ):
        super().__init__(ptr, value, mask, base, shape, strides, offsets, {"kind": StringAttr(kind)})

    def verify_(self) -> None:
        super().verify_()
        require(self.kind.data in REDUCE_KINDS, f"descriptor_reduce kind must be one of {', '.join(REDUCE_KINDS)}")
        elem = element_type(self.value.type)
        require(isinstance(elem, REDUCE_ELEMENTS), f"descriptor_reduce adds f32, f16 or bf16, not {type_name(elem)}")


@irdl_op_definition
class BarrierAllocOp(IRDLOperation):
    """`slots` mbarriers in shared memory, live for the whole kernel."""

    name = "tt.barrier_alloc"
    result = result_def(MemRefType)
    assembly_format = "attr-dict `:` type($result)"

    def __init__(self, slots: int):
        super().__init__(result_types=[barrier_type(slots)])


@irdl_op_definition
class BarrierInitOp(IRDLOperation):
    """Initialise every mbarrier of `barriers` to `arrivals` arrivals per phase (1 if absent), visible to all
    threads after."""

    name = "tt.barrier_init"
    barriers = operand_def(MemRefType)
    arrivals = opt_prop_def(IntegerAttr[I32])
    traits = traits_def(MemoryWriteEffect())
    assembly_format = "$barriers (`arrivals` $arrivals^)? attr-dict `:` type($barriers)"

    def __init__(self, barriers: Operand, arrivals: int = 1):
        properties = {"arrivals": IntegerAttr(arrivals, 32)} if arrivals != 1 else {}
        super().__init__(operands=[barriers], properties=properties)

    @property
    def arrival_count(self) -> int:
        return 1 if self.arrivals is None else self.arrivals.value.data


@irdl_op_definition
class TmaCopyOp(IRDLOperation):
    """Where `valid`: copy the block at `offsets` of the descriptor `base`/`shape`/`strides` into slot
    `slot` of `buffer` (its tile `part` when the slot holds several) with TMA, completing on mbarrier `slot` of
    `barriers` (out-of-range elements are filled with zeros, or NaN with padding "nan")."""

    name = "tt.tma_copy"
    base = operand_def()
    shape = var_operand_def(i32)
    strides = var_operand_def(i32)
    offsets = var_operand_def(i32)
    buffer = operand_def(MemRefType)
    barriers = operand_def(MemRefType)
    slot = operand_def(i32)
    valid = operand_def(i1)
    padding = prop_def(StringAttr)
    part = opt_prop_def(IntegerAttr[I32])
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())

    def __init__(
        self, base: Operand, shape: list[Operand], strides: list[Operand], offsets: list[Operand],
        buffer: Operand, barriers: Operand, slot: Operand, valid: Operand, padding: str, part: int = 0,
    ):
        properties: dict[str, Attribute] = {"padding": StringAttr(padding)}
        if part:
            properties["part"] = IntegerAttr(part, 32)
        super().__init__(operands=[base, shape, strides, offsets, buffer, barriers, slot, valid], properties=properties)

    @property
    def part_index(self) -> int:
        return part_index(self.part)

    def verify_(self) -> None:
        buffer = self.buffer.type
        assert isinstance(buffer, MemRefType)
        require(len(slot_type(buffer).get_shape()) <= len(self.offsets), "tma_copy needs an offset per block dimension")
        require(self.part_index < buffer_parts(buffer), "tma_copy into a part the buffer's slots do not have")
        require(
            element_type(self.base.type).pointee == buffer.element_type,
            f"tma_copy from {type_name(self.base.type)} into a buffer of {type_name(buffer.element_type)}",
        )


class SlotArriveBase(IRDLOperation):
    """An arrival on mbarrier `slot` of `barriers` where `valid` (who arrives: the op's own docstring)."""

    barriers = operand_def(MemRefType)
    slot = operand_def(i32)
    valid = operand_def(i1)
    traits = traits_def(MemoryWriteEffect())
    assembly_format = "$barriers `[` $slot `]` `if` $valid attr-dict `:` type($barriers)"

    def __init__(self, barriers: Operand, slot: Operand, valid: Operand):
        super().__init__(operands=[barriers, slot, valid])


class SlotWaitBase(IRDLOperation):
    """A wait until mbarrier `slot` of `barriers` completes phase `phase` (0 or 1: the slot's use count modulo 2)."""

    barriers = operand_def(MemRefType)
    slot = operand_def(i32)
    phase = operand_def(i32)
    traits = traits_def(MemoryReadEffect(), MemoryWriteEffect())
    assembly_format = "$barriers `[` $slot `]` `phase` $phase attr-dict `:` type($barriers)"

    def __init__(self, barriers: Operand, slot: Operand, phase: Operand):
        super().__init__(operands=[barriers, slot, phase])


@irdl_op_definition
class TmaArriveOp(SlotArriveBase):
    """Where `valid`: thread 0 arrives on mbarrier `slot` (after every `tt.tma_copy` into that slot)."""

    name = "tt.tma_arrive"


@irdl_op_definition
class TmaWaitOp(SlotWaitBase):
    """Wait until mbarrier `slot` completes phase `phase`, then synchronise the program (every earlier read of
    the slots is over)."""

    name = "tt.tma_wait"


TMA_OPS = (
    DescriptorLoadOp, DescriptorStoreOp, DescriptorReduceOp, BarrierAllocOp, BarrierInitOp, TmaCopyOp, TmaArriveOp,
    TmaWaitOp,
)
