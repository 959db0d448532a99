"""Elementwise ops of the `tt` dialect: arithmetic, comparisons, math, select and casts.

Operands of an elementwise op have one identical type (scalar or tile); the frontend inserts the splats and
broadcasts. Each op class says which element kinds (int, float) it accepts. The unary and cast ops share
their operands and syntax with `tta`'s (`UnaryOpBase`, `CastOpBase`); each dialect adds its own verifier.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import IntegerType, StringAttr, i1
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    AnyAttr,
    IRDLOperation,
    VarConstraint,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure

from tinyton.dialects.tt_types import (
    FLOAT,
    INT,
    element_kind,
    element_type,
    require,
    shape_of,
    tile_type,
    type_name,
)


class _ElementwiseOp(IRDLOperation):
    KINDS: ClassVar[tuple[str, ...]] = (INT, FLOAT)

    def _verify_kind(self, t: Attribute) -> None:
        kind = element_kind(t)
        require(
            kind in self.KINDS,
            lambda: f"{self.name} accepts {' or '.join(self.KINDS)} elements, got {type_name(element_type(t))}",
        )


class BinaryOp(_ElementwiseOp):
    """`lhs <op> rhs` on operands of one type (scalars or tiles)."""

    T: ClassVar = VarConstraint("T", AnyAttr())
    lhs = operand_def(T)
    rhs = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($result)"

    def __init__(self, lhs: SSAValue | Operation, rhs: SSAValue | Operation):
        super().__init__(operands=[lhs, rhs], result_types=[SSAValue.get(lhs).type])

    def verify_(self) -> None:
        self._verify_kind(self.result.type)


@irdl_op_definition
class AddOp(BinaryOp):
    """Addition."""

    name = "tt.add"


@irdl_op_definition
class SubOp(BinaryOp):
    """Subtraction."""

    name = "tt.sub"


@irdl_op_definition
class MulOp(BinaryOp):
    """Multiplication."""

    name = "tt.mul"


@irdl_op_definition
class DivOp(BinaryOp):
    """Division: IEEE for floats; for ints C's and Triton's (toward zero), which is a kernel's `//`.

    An int divided by zero gives -1 (all bits set) on every backend; LLVM leaves it undefined, so the
    lowering guards the divisor."""

    name = "tt.div"


@irdl_op_definition
class FloorDivOp(BinaryOp):
    """Division rounding toward minus infinity: NumPy's `//` of array programs (a kernel's `//` is
    `tt.div`). An int division by zero gives 0, as NumPy's; floats follow NumPy's `divmod`."""

    name = "tt.floordiv"


@irdl_op_definition
class ModOp(BinaryOp):
    """Remainder with the sign of the divisor: NumPy's `%` of array programs (a kernel's `%` is `tt.rem`).
    An int remainder by zero gives 0, as NumPy's."""

    name = "tt.mod"


@irdl_op_definition
class RemOp(BinaryOp):
    """Remainder of `tt.div`, with the sign of the dividend (`fmod` for floats): C's and Triton's `%`, a
    kernel's `%`. An int remainder by zero gives the dividend (so a == (a / b) * b + a % b still holds)."""

    name = "tt.rem"


@irdl_op_definition
class MaximumOp(BinaryOp):
    """Elementwise maximum (NaN-propagating for floats)."""

    name = "tt.maximum"


@irdl_op_definition
class MinimumOp(BinaryOp):
    """Elementwise minimum (NaN-propagating for floats)."""

    name = "tt.minimum"


@irdl_op_definition
class AndOp(BinaryOp):
    """Bitwise and (logical and on i1)."""

    name = "tt.and"
    KINDS: ClassVar[tuple[str, ...]] = (INT,)


@irdl_op_definition
class OrOp(BinaryOp):
    """Bitwise or (logical or on i1)."""

    name = "tt.or"
    KINDS: ClassVar[tuple[str, ...]] = (INT,)


@irdl_op_definition
class XorOp(BinaryOp):
    """Bitwise xor."""

    name = "tt.xor"
    KINDS: ClassVar[tuple[str, ...]] = (INT,)


@irdl_op_definition
class ShlOp(BinaryOp):
    """Shift left."""

    name = "tt.shl"
    KINDS: ClassVar[tuple[str, ...]] = (INT,)


@irdl_op_definition
class ShrOp(BinaryOp):
    """Arithmetic shift right."""

    name = "tt.shr"
    KINDS: ClassVar[tuple[str, ...]] = (INT,)


CMP_PREDICATES = ("eq", "ne", "lt", "le", "gt", "ge")


@irdl_op_definition
class CmpOp(_ElementwiseOp):
    """Comparison giving i1: `tt.cmp "lt", %a, %b : tensor<64xi32> -> tensor<64xi1>`.

    Ints compare signed; floats compare ordered (false on NaN) except `ne`, which is true on NaN as in
    Python, NumPy and Triton.
    """

    name = "tt.cmp"
    T: ClassVar = VarConstraint("T", AnyAttr())
    predicate = prop_def(StringAttr)
    lhs = operand_def(T)
    rhs = operand_def(T)
    result = result_def()
    traits = traits_def(Pure())
    assembly_format = "$predicate `,` $lhs `,` $rhs attr-dict `:` type($lhs) `->` type($result)"

    def __init__(self, predicate: str, lhs: SSAValue | Operation, rhs: SSAValue | Operation):
        t = SSAValue.get(lhs).type
        super().__init__(
            operands=[lhs, rhs],
            properties={"predicate": StringAttr(predicate)},
            result_types=[tile_type(i1, shape_of(t))],
        )

    def verify_(self) -> None:
        require(self.predicate.data in CMP_PREDICATES, f"predicate must be one of {', '.join(CMP_PREDICATES)}")
        require(
            self.result.type == tile_type(i1, shape_of(self.lhs.type)), "cmp result must be i1 of the operand shape"
        )
        self._verify_kind(self.lhs.type)


class UnaryOpBase(IRDLOperation):
    """`op(x)` elementwise, keeping the type: the operands and syntax of `tt` and `tta` unary ops."""

    T: ClassVar = VarConstraint("T", AnyAttr())
    input = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($result)"

    def __init__(self, input: SSAValue | Operation):
        super().__init__(operands=[input], result_types=[SSAValue.get(input).type])


class UnaryOp(_ElementwiseOp, UnaryOpBase):
    """`op(x)` elementwise, keeping the type; floats only unless a subclass says otherwise."""

    KINDS: ClassVar[tuple[str, ...]] = (FLOAT,)

    def verify_(self) -> None:
        self._verify_kind(self.result.type)


@irdl_op_definition
class NegOp(UnaryOp):
    """Negation."""

    name = "tt.neg"
    KINDS: ClassVar[tuple[str, ...]] = (INT, FLOAT)


@irdl_op_definition
class AbsOp(UnaryOp):
    """Absolute value."""

    name = "tt.abs"
    KINDS: ClassVar[tuple[str, ...]] = (INT, FLOAT)


@irdl_op_definition
class ExpOp(UnaryOp):
    """e**x."""

    name = "tt.exp"


@irdl_op_definition
class LogOp(UnaryOp):
    """Natural logarithm."""

    name = "tt.log"


@irdl_op_definition
class SqrtOp(UnaryOp):
    """Square root."""

    name = "tt.sqrt"


@irdl_op_definition
class RsqrtOp(UnaryOp):
    """1/sqrt(x)."""

    name = "tt.rsqrt"


@irdl_op_definition
class SelectOp(IRDLOperation):
    """`cond ? a : b` elementwise (`tt.where`)."""

    name = "tt.select"
    T: ClassVar = VarConstraint("T", AnyAttr())
    condition = operand_def()
    true_value = operand_def(T)
    false_value = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$condition `,` $true_value `,` $false_value attr-dict `:` type($condition) `,` type($result)"

    def __init__(self, condition: SSAValue | Operation, a: SSAValue | Operation, b: SSAValue | Operation):
        super().__init__(operands=[condition, a, b], result_types=[SSAValue.get(a).type])

    def verify_(self) -> None:
        expected = tile_type(i1, shape_of(self.result.type))
        require(self.condition.type == expected, lambda: f"select condition must be {type_name(expected)}")


def castable(t: Attribute) -> bool:
    """Elements `tt.cast` converts: ints of any width and signedness, and floats."""
    return isinstance(t, IntegerType) or element_kind(t) == FLOAT


class CastOpBase(IRDLOperation):
    """`input` converted to another element type, same shape: the operands and syntax of `tt` and `tta` casts."""

    input = operand_def()
    result = result_def()
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, element: Attribute):
        t = SSAValue.get(input).type
        super().__init__(operands=[input], result_types=[tile_type(element, shape_of(t))])


@irdl_op_definition
class CastOp(CastOpBase):
    """Convert element types (`x.to(tt.float16)`); floats to ints truncate, ints wrap, float8 saturates."""

    name = "tt.cast"

    def verify_(self) -> None:
        require(shape_of(self.input.type) == shape_of(self.result.type), "cast keeps the shape")
        for t in (self.input.type, self.result.type):
            require(castable(element_type(t)), lambda t=t: f"cannot cast {type_name(element_type(t))}; cast ints and floats")


@irdl_op_definition
class BitcastOp(CastOpBase):
    """Reinterpret the bits of each element as another type of the same width (`x.to(t, bitcast=True)`)."""

    name = "tt.bitcast"

    def verify_(self) -> None:
        require(shape_of(self.input.type) == shape_of(self.result.type), "bitcast keeps the shape")
        widths = [getattr(element_type(t), "bitwidth", None) for t in (self.input.type, self.result.type)]
        require(widths[0] == widths[1] and widths[0] not in (None, 1), f"bitcast needs one bit width, got {widths}")
