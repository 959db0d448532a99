"""The `tta` dialect: whole-array programs with NumPy semantics, the input of fusion.

`@tt.jit` functions called with arrays are traced (tinyton/frontend/tracing.py) into one `func.func` of
`tta` ops on builtin ranked tensors of any rank with static shapes (`tensor<4096x1000xf32>`) and
scalars (`f32`, `f16`, `i32`, `i1`; a rank-0 value is always a scalar type, as in `tt`).

Design rules:
- ops follow NumPy: elementwise ops broadcast implicitly, reductions take `axis` (normalised to be
  non-negative) and `keepdims`; verifiers report shape errors in NumPy's words;
- there is no type promotion inside the IR: operands share one element type and the tracer inserts
  `tta.cast` where NumPy would promote;
- `tta.fusion` groups a subgraph that becomes exactly one kernel; it is isolated from above (its
  body sees its inputs only as block arguments), so codegen can treat it as a function.

The shape helpers (`broadcast_shapes`, `reduced_shape`, ...) raise `ShapeError` and are shared by the
verifiers, the tracer and the fusion passes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar

from xdsl.dialects.builtin import (
    I32,
    I64,
    DenseArrayBase,
    Float16Type,
    Float32Type,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    TensorType,
    UnitAttr,
    i1,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Dialect, Operation, Region, SSAValue
from xdsl.irdl import (
    AnyAttr,
    IRDLOperation,
    VarConstraint,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import HasParent, IsolatedFromAbove, IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException

from tinyton.dialects.tt import element_type, is_float, is_int, shape_of, tile_type
from tinyton.dialects.tt import type_name as _type_name

__all__ = ["ShapeError", "array_type", "broadcast_shapes", "reduced_shape", "normalize_axis", "dtype_name"]

R = TypeVar("R")

array_type = tile_type
"""`array_type(f32, (4, 8))` is `tensor<4x8xf32>`; `array_type(f32, ())` is `f32`."""

ELEMENT_TYPES: tuple[Attribute, ...] = (Float32Type(), Float16Type(), i32, i1)
_DTYPE_NAMES = {Float32Type(): "float32", Float16Type(): "float16", i32: "int32", i1: "bool"}


class ShapeError(ValueError):
    """A NumPy-style shape or type error; the verifiers wrap it, the tracer adds the user's file:line."""


def dtype_name(t: Attribute) -> str:
    """NumPy's name of the element type of `t` (`float32`, `int32`, `bool`, ...)."""
    el = element_type(t)
    return _DTYPE_NAMES.get(el, str(el))


def type_str(t: Attribute | Sequence[Attribute]) -> str:
    """Types as the IR prints them (`tensor<4x8xf32>`), for messages; lists comma-separated."""
    if isinstance(t, Attribute):
        return _type_name(t)
    return ", ".join(_type_name(x) for x in t)


def format_shape(shape: Sequence[int]) -> str:
    """`(64,)`, `(4, 8)`, `()`: shapes as NumPy prints them."""
    return str(tuple(shape))


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """NumPy's broadcasting rule: align trailing dimensions; each pair must be equal or contain a 1."""
    rank = max((len(s) for s in shapes), default=0)
    result = [1] * rank
    for shape in shapes:
        for i, dim in enumerate(shape, start=rank - len(shape)):
            if result[i] == 1:
                result[i] = dim
            elif dim not in (1, result[i]):
                raise ShapeError(
                    "operands could not be broadcast together with shapes "
                    + " ".join(format_shape(s) for s in shapes)
                )
    return tuple(result)


def check_broadcast_to(src: Sequence[int], dst: Sequence[int]) -> None:
    """`np.broadcast_to(x, dst)` is valid iff broadcasting `src` with `dst` gives `dst`."""
    ok = len(src) <= len(dst) and all(s in (1, d) for s, d in zip(reversed(src), reversed(dst)))
    if not ok:
        raise ShapeError(f"cannot broadcast an array of shape {format_shape(src)} to shape {format_shape(dst)}")


def normalize_axis(axis: int, ndim: int) -> int:
    """A non-negative axis; NumPy's AxisError message when out of range."""
    if not -ndim <= axis < ndim:
        raise ShapeError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim


def reduced_shape(shape: Sequence[int], axis: int, keepdims: bool) -> tuple[int, ...]:
    """Shape after reducing `axis` (normalised): dropped, or kept as 1 with `keepdims`."""
    axis = normalize_axis(axis, len(shape))
    return tuple(1 if i == axis else d for i, d in enumerate(shape) if keepdims or i != axis)


def matmul_shape(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    """`a @ b` for rank >= 2 operands, batch dimensions broadcast (NumPy's matmul)."""
    if len(a) < 2 or len(b) < 2:
        raise ShapeError(f"matmul operands must have rank >= 2, got shapes {format_shape(a)} {format_shape(b)}")
    if a[-1] != b[-2]:
        raise ShapeError(
            "matmul: Input operand 1 has a mismatch in its core dimension 0, with gufunc signature "
            f"(n?,k),(k,m?)->(n?,m?) (size {b[-2]} is different from {a[-1]})"
        )
    return (*broadcast_shapes(a[:-2], b[:-2]), a[-2], b[-1])


def transposed_shape(shape: Sequence[int], permutation: Sequence[int]) -> tuple[int, ...]:
    if sorted(permutation) != list(range(len(shape))):
        raise ShapeError(f"axes don't match array: permutation {tuple(permutation)} for shape {format_shape(shape)}")
    return tuple(shape[p] for p in permutation)


def check_reshape(src: Sequence[int], dst: Sequence[int]) -> None:
    size = 1
    for d in src:
        size *= d
    count = 1
    for d in dst:
        count *= d
    if size != count:
        raise ShapeError(f"cannot reshape array of size {size} into shape {format_shape(dst)}")


def take_shape(table: Sequence[int], indices: Sequence[int], axis: int) -> tuple[int, ...]:
    """`np.take(table, indices, axis)`: the indexed axis is replaced by the shape of `indices`."""
    axis = normalize_axis(axis, len(table))
    return (*table[:axis], *indices, *table[axis + 1 :])


def _check(check: Callable[..., R], *args: Any) -> R:
    """Run a shape helper inside a verifier (returning its result), turning ShapeError into VerifyException."""
    try:
        return check(*args)
    except ShapeError as error:
        raise VerifyException(str(error)) from error


def _require(cond: bool, message: str) -> None:
    if not cond:
        raise VerifyException(message)


def _expect_result(op: IRDLOperation, expected: Attribute) -> None:
    got = op.results[0].type
    _require(got == expected, f"{op.name} result must be {type_str(expected)}, got {type_str(got)}")


def _verify_value(what: str, t: Attribute) -> None:
    """Values are scalars or static tensors of f32/f16/i32/i1."""
    _require(
        element_type(t) in ELEMENT_TYPES,
        f"{what} has unsupported type {type_str(t)}; use float32, float16, int32 or bool",
    )
    if isinstance(t, TensorType):
        _require(all(d >= 0 for d in t.get_shape()), f"{what} must have a static shape")


# ---------------------------------------------------------------------------------------------
# Elementwise ops
# ---------------------------------------------------------------------------------------------

INT, FLOAT = "int", "float"


class _ElementwiseOp(IRDLOperation):
    """Checks the element kind (ints include bool) and that all operands share one element type."""

    KINDS: ClassVar[tuple[str, ...]] = (INT, FLOAT)

    def _verify_operands(self, values: Sequence[SSAValue]) -> None:
        for i, v in enumerate(values):
            _verify_value(f"operand {i}", v.type)
        first = element_type(values[0].type)
        _require(
            all(element_type(v.type) == first for v in values),
            f"{self.name} operands must have one element type, got "
            + ", ".join(dtype_name(v.type) for v in values)
            + " (insert tta.cast)",
        )
        kind = FLOAT if is_float(first) else INT if is_int(first) else None
        _require(
            kind in self.KINDS,
            f"ufunc '{self.name.removeprefix('tta.')}' not supported for the input types ({dtype_name(first)})",
        )


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
        _check(_verify_broadcast_result, self, element_type(self.lhs.type), self.lhs, self.rhs)


def _verify_broadcast_result(op: IRDLOperation, element: Attribute, *operands: SSAValue) -> None:
    """The result of an implicitly broadcasting op has the operands' broadcast shape."""
    shape = broadcast_shapes(*(shape_of(v.type) for v in operands))
    _expect_result(op, array_type(element, shape))


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
    """Integer division rounding toward minus infinity (`//`)."""

    name = "tta.floordiv"
    KINDS: ClassVar[tuple[str, ...]] = (INT,)


@irdl_op_definition
class ModOp(BinaryOp):
    """Remainder with the sign of the divisor (`%`)."""

    name = "tta.mod"


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
    """`lhs ** rhs` on floats (the tracer turns small integer powers into multiplications)."""

    name = "tta.pow"
    KINDS: ClassVar[tuple[str, ...]] = (FLOAT,)


CMP_PREDICATES = ("eq", "ne", "lt", "le", "gt", "ge")


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
        _require(self.predicate.data in CMP_PREDICATES, f"predicate must be one of {', '.join(CMP_PREDICATES)}")
        self._verify_operands([self.lhs, self.rhs])
        _check(_verify_broadcast_result, self, i1, self.lhs, self.rhs)


class UnaryOp(_ElementwiseOp):
    """`op(x)` elementwise, keeping the type; floats only unless a subclass says otherwise."""

    KINDS: ClassVar[tuple[str, ...]] = (FLOAT,)
    T: ClassVar = VarConstraint("T", AnyAttr())
    input = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($result)"

    def __init__(self, input: SSAValue | Operation):
        super().__init__(operands=[input], result_types=[SSAValue.get(input).type])

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
        _require(element_type(cond) == i1, f"where condition must be bool, got {type_str(cond)}")
        self._verify_operands([self.true_value, self.false_value])
        element = element_type(self.true_value.type)
        _check(_verify_broadcast_result, self, element, self.condition, self.true_value, self.false_value)


@irdl_op_definition
class CastOp(IRDLOperation):
    """`x.astype(dtype)` among bool, int32, float32, float16; floats to ints truncate."""

    name = "tta.cast"
    input = operand_def()
    result = result_def()
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, element: Attribute):
        t = SSAValue.get(input).type
        super().__init__(operands=[input], result_types=[array_type(element, shape_of(t))])

    def verify_(self) -> None:
        _verify_value("cast input", self.input.type)
        _verify_value("cast result", self.result.type)
        _require(shape_of(self.input.type) == shape_of(self.result.type), "cast keeps the shape")


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
        _verify_value("constant", self.result.type)
        _require(self.result.type == self.value.type, f"constant result must be {type_str(self.value.type)}, a scalar")


# ---------------------------------------------------------------------------------------------
# Reductions and matmul
# ---------------------------------------------------------------------------------------------


class ReduceOp(IRDLOperation):
    """Reduce `axis` (non-negative); `keepdims` keeps it with size 1. Rank 0 results are scalars."""

    KINDS: ClassVar[tuple[str, ...]] = (INT, FLOAT)
    input = operand_def(TensorType)
    axis = prop_def(IntegerAttr[I32])
    keepdims = opt_prop_def(UnitAttr)
    result = result_def()
    traits = traits_def(Pure())
    assembly_format = "$input `axis` `=` $axis (`keepdims` $keepdims^)? attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, axis: int, keepdims: bool = False):
        t = SSAValue.get(input).type
        props: dict[str, Attribute] = {"axis": IntegerAttr(axis, 32)}
        if keepdims:
            props["keepdims"] = UnitAttr()
        super().__init__(
            operands=[input],
            properties=props,
            result_types=[array_type(t.element_type, reduced_shape(shape_of(t), axis, keepdims))],
        )

    @property
    def keeps_dims(self) -> bool:
        return self.keepdims is not None

    def verify_(self) -> None:
        _verify_value("reduction input", self.input.type)
        shape, axis = shape_of(self.input.type), self.axis.value.data
        _require(0 <= axis < len(shape), f"axis {axis} is out of bounds for array of dimension {len(shape)}")
        expected = array_type(element_type(self.input.type), reduced_shape(shape, axis, self.keeps_dims))
        _expect_result(self, expected)
        kind = FLOAT if is_float(self.input.type) else INT
        _require(kind in self.KINDS, f"{self.name} needs float input, got {dtype_name(self.input.type)}")


@irdl_op_definition
class ReduceSumOp(ReduceOp):
    name = "tta.reduce_sum"


@irdl_op_definition
class ReduceMaxOp(ReduceOp):
    name = "tta.reduce_max"


@irdl_op_definition
class ReduceMinOp(ReduceOp):
    name = "tta.reduce_min"


@irdl_op_definition
class ReduceMeanOp(ReduceOp):
    """Arithmetic mean (the tracer casts integer inputs to float32)."""

    name = "tta.reduce_mean"
    KINDS: ClassVar[tuple[str, ...]] = (FLOAT,)


@irdl_op_definition
class MatmulOp(IRDLOperation):
    """`a @ b` for rank >= 2 float arrays; leading (batch) dimensions broadcast."""

    name = "tta.matmul"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)"

    def __init__(self, lhs: SSAValue | Operation, rhs: SSAValue | Operation):
        lt, rt = SSAValue.get(lhs).type, SSAValue.get(rhs).type
        shape = matmul_shape(shape_of(lt), shape_of(rt))
        super().__init__(operands=[lhs, rhs], result_types=[array_type(lt.element_type, shape)])

    def verify_(self) -> None:
        lt, rt = self.lhs.type, self.rhs.type
        same = element_type(lt) == element_type(rt)
        _require(same, f"matmul operands differ: {dtype_name(lt)} and {dtype_name(rt)}")
        _require(is_float(lt), f"matmul needs float arrays, got {dtype_name(lt)}")
        _expect_result(self, array_type(element_type(lt), _check(matmul_shape, shape_of(lt), shape_of(rt))))


# ---------------------------------------------------------------------------------------------
# Data movement
# ---------------------------------------------------------------------------------------------


@irdl_op_definition
class TransposeOp(IRDLOperation):
    """`np.transpose(x, permutation)`: result dim i is input dim permutation[i]."""

    name = "tta.transpose"
    input = operand_def(TensorType)
    permutation = prop_def(DenseArrayBase[I64])
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$input `permutation` `=` $permutation attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, permutation: Sequence[int]):
        t = SSAValue.get(input).type
        super().__init__(
            operands=[input],
            properties={"permutation": DenseArrayBase.from_list(i64, list(permutation))},
            result_types=[array_type(t.element_type, transposed_shape(shape_of(t), permutation))],
        )

    @property
    def perm(self) -> tuple[int, ...]:
        return tuple(self.permutation.get_values())

    def verify_(self) -> None:
        shape = _check(transposed_shape, shape_of(self.input.type), self.perm)
        _expect_result(self, array_type(element_type(self.input.type), shape))


class _ShapeOp(IRDLOperation):
    """Same elements, new shape: `$input : type -> type`."""

    input = operand_def()
    result = result_def()
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, shape: Sequence[int]):
        t = SSAValue.get(input).type
        super().__init__(operands=[input], result_types=[array_type(element_type(t), shape)])

    def verify_(self) -> None:
        _verify_value("input", self.input.type)
        _require(
            element_type(self.input.type) == element_type(self.result.type),
            f"{self.name} keeps the element type ({dtype_name(self.input.type)})",
        )


@irdl_op_definition
class ReshapeOp(_ShapeOp):
    """`x.reshape(shape)` in row-major order."""

    name = "tta.reshape"

    def verify_(self) -> None:
        super().verify_()
        _check(check_reshape, shape_of(self.input.type), shape_of(self.result.type))


@irdl_op_definition
class BroadcastToOp(_ShapeOp):
    """`np.broadcast_to(x, shape)`: materialises implicit broadcasting (and fills arrays with scalars)."""

    name = "tta.broadcast_to"

    def verify_(self) -> None:
        super().verify_()
        _check(check_broadcast_to, shape_of(self.input.type), shape_of(self.result.type))


@irdl_op_definition
class TakeOp(IRDLOperation):
    """`np.take(table, indices, axis)`: gather rows (an embedding lookup for axis 0); indices are int32."""

    name = "tta.take"
    table = operand_def(TensorType)
    indices = operand_def()
    axis = prop_def(IntegerAttr[I32])
    result = result_def()
    traits = traits_def(Pure())
    assembly_format = (
        "$table `,` $indices `axis` `=` $axis attr-dict `:` type($table) `,` type($indices) `->` type($result)"
    )

    def __init__(self, table: SSAValue | Operation, indices: SSAValue | Operation, axis: int = 0):
        tt_, it = SSAValue.get(table).type, SSAValue.get(indices).type
        shape = take_shape(shape_of(tt_), shape_of(it), axis)
        super().__init__(
            operands=[table, indices],
            properties={"axis": IntegerAttr(axis, 32)},
            result_types=[array_type(tt_.element_type, shape)],
        )

    def verify_(self) -> None:
        _verify_value("table", self.table.type)
        indices = self.indices.type
        _require(element_type(indices) == i32, f"take indices must be int32, got {dtype_name(indices)}")
        table, axis = shape_of(self.table.type), self.axis.value.data
        _require(0 <= axis < len(table), f"axis {axis} is out of bounds for array of dimension {len(table)}")
        expected = array_type(element_type(self.table.type), take_shape(table, shape_of(self.indices.type), axis))
        _expect_result(self, expected)


# ---------------------------------------------------------------------------------------------
# Fusion regions
# ---------------------------------------------------------------------------------------------


@irdl_op_definition
class FusionOp(IRDLOperation):
    """A fused subgraph that becomes exactly one kernel.

    Operands are the subgraph's external inputs; the single block has one argument per operand and
    ends with `tta.yield` of the results. `kind` ("elementwise", "row_reduction", "softmax", ...)
    names the codegen template.
    """

    name = "tta.fusion"
    kind = prop_def(StringAttr)
    inputs = var_operand_def()
    outputs = var_result_def()
    body = region_def("single_block")
    traits = traits_def(IsolatedFromAbove())
    assembly_format = "$kind `(` $inputs `)` attr-dict `:` functional-type($inputs, $outputs) $body"

    def __init__(
        self,
        kind: str,
        inputs: Sequence[SSAValue | Operation],
        result_types: Sequence[Attribute],
        body: Region | Block | None = None,
    ):
        """Without `body`, the block gets one argument per input and stays empty for the caller to fill."""
        if body is None:
            body = Block(arg_types=[SSAValue.get(v).type for v in inputs])
        if isinstance(body, Block):
            body = Region(body)
        super().__init__(
            operands=[list(inputs)],
            result_types=[list(result_types)],
            properties={"kind": StringAttr(kind)},
            regions=[body],
        )

    @property
    def block(self) -> Block:
        return self.body.block

    @property
    def yield_op(self) -> YieldOp:
        last = self.body.block.last_op
        assert isinstance(last, YieldOp)
        return last

    def verify_(self) -> None:
        block = self.body.block
        arg_types = [a.type for a in block.args]
        in_types = [v.type for v in self.inputs]
        _require(
            arg_types == in_types,
            f"fusion block arguments ({type_str(arg_types)}) must match its inputs ({type_str(in_types)})",
        )
        last = block.last_op
        _require(isinstance(last, YieldOp), "fusion body must end with tta.yield")
        yielded = [v.type for v in last.values]
        out = [r.type for r in self.outputs]
        _require(yielded == out, f"fusion yields ({type_str(yielded)}) but its results are ({type_str(out)})")


@irdl_op_definition
class YieldOp(IRDLOperation):
    """Terminator of `tta.fusion`: the values the fused kernel writes out."""

    name = "tta.yield"
    values = var_operand_def()
    traits = traits_def(IsTerminator(), HasParent(FusionOp))
    assembly_format = "($values^ `:` type($values))? attr-dict"

    def __init__(self, *values: SSAValue | Operation):
        super().__init__(operands=[list(values)])


Tta = Dialect(
    "tta",
    [
        AddOp,
        SubOp,
        MulOp,
        DivOp,
        FloorDivOp,
        ModOp,
        MaximumOp,
        MinimumOp,
        AndOp,
        OrOp,
        XorOp,
        ShlOp,
        ShrOp,
        PowOp,
        CmpOp,
        NegOp,
        AbsOp,
        ExpOp,
        LogOp,
        SqrtOp,
        RsqrtOp,
        WhereOp,
        CastOp,
        ConstantOp,
        ReduceSumOp,
        ReduceMaxOp,
        ReduceMinOp,
        ReduceMeanOp,
        MatmulOp,
        TransposeOp,
        ReshapeOp,
        BroadcastToOp,
        TakeOp,
        FusionOp,
        YieldOp,
    ],
    [],
)
