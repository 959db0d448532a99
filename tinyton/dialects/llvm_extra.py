"""
`llvm` dialect ops that the lowering needs and xDSL 0.74 lacks.

The ops have no assembly format on purpose: xDSL then prints them generically
(`%1 = "llvm.fptosi"(%0) : (f32) -> i32`), which upstream MLIR parses, so no custom
syntax has to be kept in sync with upstream. A context cannot hold two dialects named
`llvm`, so `load_llvm_extra` adds the ops one by one next to xDSL's `llvm` dialect.
"""

from __future__ import annotations

from enum import IntEnum

from xdsl.context import Context
from xdsl.dialects.builtin import I64, IntegerAttr, i64
from xdsl.dialects.llvm import LLVMPointerType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import NoMemoryEffect


class _CastOp(IRDLOperation):
    """A one-operand conversion printed in generic form."""

    arg = operand_def()
    res = result_def()
    traits = traits_def(NoMemoryEffect())

    def __init__(self, arg: SSAValue | Operation, res_type: Attribute):
        super().__init__(operands=[arg], result_types=[res_type])


@irdl_op_definition
class FPToSIOp(_CastOp):
    name = "llvm.fptosi"


@irdl_op_definition
class FPToUIOp(_CastOp):
    name = "llvm.fptoui"


@irdl_op_definition
class UIToFPOp(_CastOp):
    name = "llvm.uitofp"


@irdl_op_definition
class AddrSpaceCastOp(_CastOp):
    """Pointer cast between address spaces, e.g. `!llvm.ptr<3>` to `!llvm.ptr`."""

    name = "llvm.addrspacecast"


class AtomicBinOp(IntEnum):
    """Upstream `LLVM::AtomicBinOp` numbering (the generic form stores the integer)."""

    XCHG = 0
    ADD = 1
    SUB = 2
    AND = 3
    NAND = 4
    OR = 5
    XOR = 6
    MAX = 7
    MIN = 8
    UMAX = 9
    UMIN = 10
    FADD = 11
    FSUB = 12
    FMAX = 13
    FMIN = 14


class AtomicOrdering(IntEnum):
    """Upstream `LLVM::AtomicOrdering` numbering."""

    MONOTONIC = 2
    ACQUIRE = 4
    RELEASE = 5
    ACQ_REL = 6
    SEQ_CST = 7


@irdl_op_definition
class AtomicRMWOp(IRDLOperation):
    """`%old = "llvm.atomicrmw"(%ptr, %val) <{bin_op = 11 : i64, ordering = 2 : i64}>`."""

    name = "llvm.atomicrmw"

    ptr = operand_def(LLVMPointerType)
    val = operand_def()
    res = result_def()
    bin_op = prop_def(IntegerAttr[I64])
    ordering = prop_def(IntegerAttr[I64])
    alignment = opt_prop_def(IntegerAttr[I64])

    def __init__(
        self,
        bin_op: AtomicBinOp,
        ptr: SSAValue | Operation,
        val: SSAValue | Operation,
        ordering: AtomicOrdering = AtomicOrdering.MONOTONIC,
        alignment: int | None = None,
    ):
        val = SSAValue.get(val)
        super().__init__(
            operands=[ptr, val],
            result_types=[val.type],
            properties={
                "bin_op": IntegerAttr(bin_op, i64),
                "ordering": IntegerAttr(ordering, i64),
                "alignment": None if alignment is None else IntegerAttr(alignment, i64),
            },
        )


LLVM_EXTRA_OPS: tuple[type[IRDLOperation], ...] = (
    FPToSIOp,
    FPToUIOp,
    UIToFPOp,
    AddrSpaceCastOp,
    AtomicRMWOp,
)


def load_llvm_extra(ctx: Context) -> None:
    """Make `ctx` parse the extra ops; a no-op for ops it already knows."""
    loaded = {op.name for op in ctx.loaded_ops}
    for op in LLVM_EXTRA_OPS:
        if op.name not in loaded:
            ctx.load_op(op)
