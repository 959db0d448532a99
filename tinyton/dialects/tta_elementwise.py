"""Elementwise ops of the `tta` dialect: arithmetic, comparisons, math, `where`, casts, constants and index checks.

Unlike `tt`, operands broadcast implicitly (NumPy's rule) and the result has the broadcast shape; operands
still share one element type (the tracer inserts `tta.cast`). Each op class says which element kinds
(int, float) it accepts, and errors read like NumPy's ufunc errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import I32, FloatAttr, IntegerAttr, IntegerType, StringAttr, TensorType, i1, i32
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from tinyton.dialects.tt_elementwise import CMP_PREDICATES, CastOpBase, UnaryOpBase
from tinyton.dialects.tt_types import FLOAT, INT, element_kind, element_type, require, shape_of
from tinyton.dialects.tta_shapes import (
    array_type,
    broadcast_shapes,
    checked,
    dtype_name,
    expect_result,
    type_str,
    verify_value,
)


class _ElementwiseOp(IRDLOperation):
    """Checks the element kind (ints include bool) and that all operands share one element type."""

    KINDS: ClassVar[tuple[str, ...]] = (INT, FLOAT)
    MOVES: ClassVar[bool] = False
    """Whether the op only moves its operands' values (a select): float8 ones are then allowed."""

    def _verify_operands(self, values: Sequence[SSAValue]) -> None:
        for i, v in enumerate(values):
            verify_value(f"operand {i}", v.type, self.MOVES)
        first = element_type(values[0].type)
        if not all(element_type(v.type) == first for v in values):
            types = ", ".join(dtype_name(v.type) for v in values)
            raise VerifyException(f"{self.name} operands must have one element type, got {types} (insert tta.cast)")
        if element_kind(first) not in self.KINDS:
            name = self.name.removeprefix("tta.")
            raise VerifyException(f"ufunc '{name}' not supported for the input types ({dtype_name(first)})")


class BinaryOp(_ElementwiseOp):
    """`lhs <op> rhs` with NumPy broadcasting; the result has the broadcast shape."""

    lhs = operand_def()
    rhs = operand_def()
    result = result_def()
    traits = traits_def(Pure())
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"

    def __init__(self, lhs: SSAValue | Operation, rhs: SSAValue | Operation):
        lt, rt = SSAValue.get(lhs).type, SSAValue.get(rhs).type
        shape = broadcast_shapes(shape_of(lt), shape_of(rt))
        super().__init__(operands=[lhs, rhs], result_types=[array_type(element_type(lt), shape)])

    def verify_(self) -> None:
        self._verify_operands([self.lhs, self.rhs])
        checked(_verify_broadcast_result, self, element_type(self.lhs.type), self.lhs, self.rhs)


def _verify_broadcast_result(op: IRDLOperation, element: Attribute, *operands: SSAValue) -> None:
    """The result of an implicitly broadcasting op has the operands' broadcast shape."""
    shape = broadcast_shapes(*(shape_of(v.type) for v in operands))
    got = op.results[0].type
    if element_type(got) != element or shape_of(got) != shape or isinstance(got, TensorType) != bool(shape):
        expect_result(op, array_type(element, shape))  # raises, naming both types (built on failure only)


@irdl_op_definition
class AddOp(BinaryOp):
    name = "tta.add"


@irdl_op_definition
class SubOp(BinaryOp):
    name = "tta.sub"


@irdl_op_definition
class MulOp(BinaryOp):
    name = "tta.mul"


@irdl_op_definition
class DivOp(BinaryOp):
    """True division; the tracer casts integer operands to float first, as NumPy does."""

    name = "tta.div"
    KINDS: ClassVar[tuple[str, ...]] = (FLOAT,)


@irdl_op_definition
class FloorDivOp(BinaryOp):
    """Division rounding toward minus infinity (`//`)."""

    name = "tta.floordiv"


@irdl_op_definition
class ModOp(BinaryOp):
    """Remainder with the sign of the divisor (`%`)."""

    name = "tta.mod"


@irdl_op_definition
class FmodOp(BinaryOp):
    """Remainder with the sign of the dividend (NumPy's `fmod`, C's `%`), exact for floats; an int remainder by zero
    is 0, as NumPy's."""

    name = "tta.fmod"


@irdl_op_definition
class MaximumOp(BinaryOp):
    name = "tta.maximum"


@irdl_op_definition
class MinimumOp(BinaryOp):
    name = "tta.minimum"


@irdl_op_definition
class AndOp(BinaryOp):
    name = "tta.and"
    KINDS: ClassVar[tuple[str, ...]] = (INT,)


@irdl_op_definition
class OrOp(BinaryOp):
    name = "tta.or"
    KINDS: ClassVar[tuple[str, ...]] = (INT,)


@irdl_op_definition
class XorOp(BinaryOp):
    name = "tta.xor"
    KINDS: ClassVar[tuple[str, ...]] = (INT,)


@irdl_op_definition
class ShlOp(BinaryOp):
    name = "tta.shl"
    KINDS: ClassVar[tuple[str, ...]] = (INT,)


@irdl_op_definition
class ShrOp(BinaryOp):
    """Arithmetic shift right."""

    name = "tta.shr"
    KINDS: ClassVar[tuple[str, ...]] = (INT,)


@irdl_op_definition
class PowOp(BinaryOp):
    """`lhs ** rhs` (the tracer turns integer scalar exponents into multiplications)."""

    name = "tta.pow"


@irdl_op_definition
class CmpOp(_ElementwiseOp):
    """Broadcasting comparison giving bools: `tta.cmp "lt", %a, %b : tensor<4xf32>, f32 -> tensor<4xi1>`."""

    name = "tta.cmp"
    predicate = prop_def(StringAttr)
    lhs = operand_def()
    rhs = operand_def()
    result = result_def()
    traits = traits_def(Pure())
    assembly_format = "$predicate `,` $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"

    def __init__(self, predicate: str, lhs: SSAValue | Operation, rhs: SSAValue | Operation):
        shape = broadcast_shapes(shape_of(SSAValue.get(lhs).type), shape_of(SSAValue.get(rhs).type))
        super().__init__(
            operands=[lhs, rhs],
            properties={"predicate": StringAttr(predicate)},
            result_types=[array_type(i1, shape)],
        )

    def verify_(self) -> None:
        require(self.predicate.data in CMP_PREDICATES, f"predicate must be one of {', '.join(CMP_PREDICATES)}")
        self._verify_operands([self.lhs, self.rhs])
        checked(_verify_broadcast_result, self, i1, self.lhs, self.rhs)


class UnaryOp(_ElementwiseOp, UnaryOpBase):
    """`op(x)` elementwise, keeping the type; floats only unless a subclass says otherwise."""

    KINDS: ClassVar[tuple[str, ...]] = (FLOAT,)

    def verify_(self) -> None:
        self._verify_operands([self.input])


@irdl_op_definition
class NegOp(UnaryOp):
    name = "tta.neg"
    KINDS: ClassVar[tuple[str, ...]] = (INT, FLOAT)


@irdl_op_definition
class AbsOp(UnaryOp):
    name = "tta.abs"
    KINDS: ClassVar[tuple[str, ...]] = (INT, FLOAT)


@irdl_op_definition
class ExpOp(UnaryOp):
    name = "tta.exp"


@irdl_op_definition
class LogOp(UnaryOp):
    name = "tta.log"


@irdl_op_definition
class SqrtOp(UnaryOp):
    name = "tta.sqrt"


@irdl_op_definition
class RsqrtOp(UnaryOp):
    name = "tta.rsqrt"


@irdl_op_definition
class WhereOp(_ElementwiseOp):
    """`np.where(cond, a, b)`, all three broadcast together."""

    name = "tta.where"
    MOVES: ClassVar[bool] = True
    condition = operand_def()
    true_value = operand_def()
    false_value = operand_def()
    result = result_def()
    traits = traits_def(Pure())
    assembly_format = (
        "$condition `,` $true_value `,` $false_value attr-dict `:` "
        "type($condition) `,` type($true_value) `,` type($false_value) `->` type($result)"
    )

    def __init__(self, condition: SSAValue | Operation, a: SSAValue | Operation, b: SSAValue | Operation):
        types = [SSAValue.get(v).type for v in (condition, a, b)]
        shape = broadcast_shapes(*(shape_of(t) for t in types))
        super().__init__(operands=[condition, a, b], result_types=[array_type(element_type(types[1]), shape)])

    def verify_(self) -> None:
        cond = self.condition.type
        if element_type(cond) != i1:
            raise VerifyException(f"where condition must be bool, got {type_str(cond)}")
        self._verify_operands([self.true_value, self.false_value])
        element = element_type(self.true_value.type)
        checked(_verify_broadcast_result, self, element, self.condition, self.true_value, self.false_value)


@irdl_op_definition
class CastOp(CastOpBase):
    """`x.astype(dtype)` among the array dtypes and float8 (e4m3fn, e5m2: the dtypes of matmul operands, which
    casts make and read); floats to ints truncate."""

    name = "tta.cast"

    def verify_(self) -> None:
        for what, t in (("cast input", self.input.type), ("cast result", self.result.type)):
            verify_value(what, t, moved=True)
        require(shape_of(self.input.type) == shape_of(self.result.type), "cast keeps the shape")


@irdl_op_definition
class ConstantOp(IRDLOperation):
    """A scalar constant: `tta.constant 1.0e-06 : f32 -> f32` (arrays of it come from `tta.broadcast_to`)."""

    name = "tta.constant"
    value = prop_def(IntegerAttr | FloatAttr)
    result = result_def()
    traits = traits_def(Pure())
    assembly_format = "$value attr-dict `->` type($result)"

    def __init__(self, value: IntegerAttr | FloatAttr):
        super().__init__(properties={"value": value}, result_types=[value.type])

    def verify_(self) -> None:
        verify_value("constant", self.result.type)
        if self.result.type != self.value.type:
            raise VerifyException(f"constant result must be {type_str(self.value.type)}, a scalar")


@irdl_op_definition
class CheckIndexOp(IRDLOperation):
    """`np.arange(size)[indices]` computed from the indices, what `tta.take` of such an arange becomes
    (`tinyton-check-indices`): each index as int32, a negative one counted from the end, one outside `[-size, size)`
    stopping the program (NumPy's IndexError). Elementwise, it fuses into its readers, where the gather needed the
    arange in memory (a kernel to write it, one to gather): torch's scatters check their indices with it."""

    name = "tta.check_index"
    input = operand_def()
    size = prop_def(IntegerAttr[I32])
    result = result_def()
    traits = traits_def(Pure())
    assembly_format = "$input `size` `=` $size attr-dict `:` type($input) `->` type($result)"

    def __init__(self, indices: SSAValue | Operation, size: int):
        shape = shape_of(SSAValue.get(indices).type)
        super().__init__(operands=[indices], properties={"size": IntegerAttr(size, 32)},
                         result_types=[array_type(i32, shape)])

    def verify_(self) -> None:
        index = element_type(self.input.type)
        require(isinstance(index, IntegerType) and index.bitwidth > 1,
                f"check_index indices must be integers, got {dtype_name(self.input.type)}")
        require(self.size.value.data >= 0, f"check_index size must be non-negative, got {self.size.value.data}")
        expect_result(self, array_type(i32, shape_of(self.input.type)))
