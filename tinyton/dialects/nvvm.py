"""
A subset of MLIR's `nvvm` dialect, in upstream syntax.

Only the ops that tinyton's lowering emits are defined. Both the custom and the generic
printed forms match upstream MLIR (LLVM 22), so `mlir-translate --mlir-to-llvmir` accepts
xDSL's output directly, and the llvmlite backend maps each op to its `llvm.nvvm.*`
intrinsic.

See external [documentation](https://mlir.llvm.org/docs/Dialects/NVVMDialect/).
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import f32, i32
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import Dialect, Operation, SpacedOpaqueSyntaxAttribute, SSAValue
from xdsl.irdl import (
    EqAttrConstraint,
    IRDLOperation,
    VarConstraint,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure
from xdsl.utils.str_enum import StrEnum


class SpecialRegisterOp(IRDLOperation):
    """
    Base of the `nvvm.read.ptx.sreg.*` ops: `%r = nvvm.read.ptx.sreg.tid.x : i32`.

    Subclasses are generated in `SPECIAL_REGISTERS`, one per register; each maps to
    the intrinsic named `llvm.<op name>`.
    """

    res = result_def(i32)
    traits = traits_def(Pure())
    assembly_format = "attr-dict `:` type($res)"

    def __init__(self):
        super().__init__(result_types=[i32])


def _special_register_op(register: str) -> type[SpecialRegisterOp]:
    class_name = "".join(p.capitalize() for p in register.split(".")) + "Op"
    op = type(
        class_name,
        (SpecialRegisterOp,),
        {
            "name": f"nvvm.read.ptx.sreg.{register}",
            "__module__": __name__,
        },
    )
    return irdl_op_definition(op)


SPECIAL_REGISTERS: dict[str, type[SpecialRegisterOp]] = {
    reg: _special_register_op(reg)
    for reg in (
        *(f"{r}.{d}" for r in ("tid", "ntid", "ctaid", "nctaid") for d in "xyz"),
        "laneid",
    )
}
"""`nvvm.read.ptx.sreg.<register>` op classes, keyed by register (`"tid.x"`, `"laneid"`)."""


def read_special_register(register: str) -> SpecialRegisterOp:
    """Build `%r = nvvm.read.ptx.sreg.<register> : i32`."""
    return SPECIAL_REGISTERS[register]()


class ShflKind(StrEnum):
    BFLY = "bfly"
    UP = "up"
    DOWN = "down"
    IDX = "idx"


@irdl_attr_definition
class ShflKindAttr(EnumAttribute[ShflKind], SpacedOpaqueSyntaxAttribute):
    """Prints as `#nvvm<shfl_kind bfly>` in generic form, like upstream."""

    name = "nvvm.shfl_kind"


@irdl_op_definition
class ShflOp(IRDLOperation):
    """
    Warp shuffle: `nvvm.shfl.sync bfly %mask, %val, %offset, %clamp : f32 -> f32`.

    `mask_and_clamp` is PTX's `c` operand: 0x1f for a full-warp butterfly or down
    shuffle, 0 for an up shuffle.
    """

    name = "nvvm.shfl.sync"

    T: ClassVar = VarConstraint("T", EqAttrConstraint(i32) | EqAttrConstraint(f32))

    kind = prop_def(ShflKindAttr)
    thread_mask = operand_def(i32)
    val = operand_def(T)
    offset = operand_def(i32)
    mask_and_clamp = operand_def(i32)
    res = result_def(T)

    assembly_format = (
        "$kind $thread_mask `,` $val `,` $offset `,` $mask_and_clamp attr-dict "
        "`:` type($val) `->` type($res)"
    )

    def __init__(
        self,
        kind: ShflKind,
        thread_mask: SSAValue | Operation,
        val: SSAValue | Operation,
        offset: SSAValue | Operation,
        mask_and_clamp: SSAValue | Operation,
    ):
        val = SSAValue.get(val)
        super().__init__(
            operands=[thread_mask, val, offset, mask_and_clamp],
            result_types=[val.type],
            properties={"kind": ShflKindAttr(kind)},
        )


@irdl_op_definition
class Barrier0Op(IRDLOperation):
    """
    `nvvm.barrier0`: block-wide barrier (`bar.sync 0`).

    LLVM 22 removed the `llvm.nvvm.barrier0` intrinsic, but MLIR still lowers this op
    (to `llvm.nvvm.barrier.cta.sync.aligned.all(0)`).
    """

    name = "nvvm.barrier0"
    assembly_format = "attr-dict"

    def __init__(self):
        super().__init__()


class _FenceOp(IRDLOperation):
    """An operand-less synchronisation op (`nvvm.<name>`); `INTRINSIC` is the `llvm.nvvm.*` intrinsic that
    mlir-translate (and the llvmlite path) make of it."""

    INTRINSIC: ClassVar[str]
    assembly_format = "attr-dict"

    def __init__(self):
        super().__init__()


@irdl_op_definition
class WgmmaFenceOp(_FenceOp):
    """`nvvm.wgmma.fence.aligned`: order register and shared-memory accesses before the next `wgmma`."""

    name = "nvvm.wgmma.fence.aligned"
    INTRINSIC: ClassVar[str] = "llvm.nvvm.wgmma.fence.sync.aligned"


@irdl_op_definition
class WgmmaCommitGroupOp(_FenceOp):
    """`nvvm.wgmma.commit.group.sync.aligned`: close the group of `wgmma` ops issued since the last one."""

    name = "nvvm.wgmma.commit.group.sync.aligned"
    INTRINSIC: ClassVar[str] = "llvm.nvvm.wgmma.commit_group.sync.aligned"


@irdl_op_definition
class FenceMbarrierInitOp(_FenceOp):
    """`nvvm.fence.mbarrier.init`: make `mbarrier.init` visible to the async proxy (TMA) and the cluster."""

    name = "nvvm.fence.mbarrier.init"
    INTRINSIC: ClassVar[str] = "llvm.nvvm.fence.mbarrier_init.release.cluster"


FENCES = (WgmmaFenceOp, WgmmaCommitGroupOp, FenceMbarrierInitOp)

NVVM = Dialect(
    "nvvm",
    [*SPECIAL_REGISTERS.values(), ShflOp, Barrier0Op, *FENCES],
    [ShflKindAttr],
)
