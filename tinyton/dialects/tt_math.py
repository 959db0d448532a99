"""Math ops of the `tt` dialect beyond arithmetic: Triton's `tl.math` functions.

Unary float functions keep their operand's type (f16 computes in f32 and rounds back, on the GPU and
in the simulator alike); `tt.fma` is a fused multiply-add of three operands of one type; `tt.div_rn` and
`tt.sqrt_rn` are the correctly rounded division and square root (IEEE round-to-nearest), whatever the
default of `/`. `tt.sin`, `tt.cos` and `tt.umulhi` live in `tt_random` (Philox and Box-Muller use them).
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.ir import Operation, SSAValue
from xdsl.irdl import (
    AnyAttr,
    VarConstraint,
    irdl_op_definition,
    operand_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure

from tinyton.dialects.tt_elementwise import BinaryOp, UnaryOp, _ElementwiseOp
from tinyton.dialects.tt_types import FLOAT


@irdl_op_definition
class Exp2Op(UnaryOp):
    """2**x."""

    name = "tt.exp2"


@irdl_op_definition
class Log2Op(UnaryOp):
    """Base-2 logarithm."""

    name = "tt.log2"


@irdl_op_definition
class FloorOp(UnaryOp):
    """Round toward minus infinity."""

    name = "tt.floor"


@irdl_op_definition
class CeilOp(UnaryOp):
    """Round toward plus infinity."""

    name = "tt.ceil"


@irdl_op_definition
class ErfOp(UnaryOp):
    """The error function."""

    name = "tt.erf"


@irdl_op_definition
class SqrtRnOp(UnaryOp):
    """Square root, correctly rounded."""

    name = "tt.sqrt_rn"


@irdl_op_definition
class DivRnOp(BinaryOp):
    """Float division, correctly rounded."""

    name = "tt.div_rn"
    KINDS: ClassVar[tuple[str, ...]] = (FLOAT,)


@irdl_op_definition
class FmaOp(_ElementwiseOp):
    """`a * b + c` with one rounding."""

    name = "tt.fma"
    KINDS: ClassVar[tuple[str, ...]] = (FLOAT,)
    T: ClassVar = VarConstraint("T", AnyAttr())
    a = operand_def(T)
    b = operand_def(T)
    c = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$a `,` $b `,` $c attr-dict `:` type($result)"

    def __init__(self, a: SSAValue | Operation, b: SSAValue | Operation, c: SSAValue | Operation):
        super().__init__(operands=[a, b, c], result_types=[SSAValue.get(a).type])

    def verify_(self) -> None:
        self._verify_kind(self.result.type)


MATH_OPS = (Exp2Op, Log2Op, FloorOp, CeilOp, ErfOp, SqrtRnOp, DivRnOp, FmaOp)
