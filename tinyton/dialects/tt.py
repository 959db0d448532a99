"""The `tt` dialect: tinyton's tile-level kernel IR.

A kernel is a `func.func` whose body computes on *tiles*: builtin ranked tensors of rank 1 or 2
(`tensor<64xf32>`, `tensor<32x64x!tt.ptr<f16>>`) held by one program (one CUDA block), plus scalars
(`i32`, `f32`, `f16`, `i1`, `!tt.ptr<f32>`). Loops and branches are `scf.for` / `scf.if`.

Design rules, so that every consumer (simulator, lowering, fusion codegen) stays simple:
- elementwise ops take operands of one identical type; the frontend inserts `tt.splat` /
  `tt.broadcast` / `tt.expand_dims` explicitly, so no op broadcasts implicitly;
- every tile dimension is a power of two (the lowering spreads tiles over threads by bit tricks);
- reductions, `tt.dot` and layout changes are the only ops that move data between threads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    I32,
    AnyFloat,
    Float16Type,
    Float32Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
    i1,
    i32,
)
from xdsl.ir import Attribute, Dialect, Operation, ParametrizedAttribute, SSAValue, TypeAttribute
from xdsl.irdl import (
    AnyAttr,
    AttrSizedOperandSegments,
    base,
    IRDLOperation,
    VarConstraint,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.traits import MemoryReadEffect, MemoryWriteEffect, Pure
from xdsl.utils.exceptions import VerifyException

MAX_TILE_ELEMENTS = 1 << 16
"""Largest tile one program may hold (elements); larger blocks are rejected by the verifier."""


@irdl_attr_definition
class PointerType(ParametrizedAttribute, TypeAttribute):
    """`!tt.ptr<f32>`: a pointer to global memory holding elements of `pointee`."""

    name = "tt.ptr"
    pointee: Attribute

    def __init__(self, pointee: Attribute):
        super().__init__(pointee)


# ---------------------------------------------------------------------------------------------
# Type helpers shared by the verifiers, the frontend, the simulator and the lowering.
# ---------------------------------------------------------------------------------------------


def shape_of(t: Attribute) -> tuple[int, ...]:
    """Shape of a tile type; `()` for a scalar."""
    return tuple(t.get_shape()) if isinstance(t, TensorType) else ()


def element_type(t: Attribute) -> Attribute:
    """Element type of a tile type; the type itself for a scalar."""
    return t.element_type if isinstance(t, TensorType) else t


def tile_type(element: Attribute, shape: Sequence[int]) -> Attribute:
    """The tile type of `shape` (a scalar type when `shape` is empty)."""
    return TensorType(element, list(shape)) if shape else element


def is_float(t: Attribute) -> bool:
    return isinstance(element_type(t), AnyFloat)


def is_int(t: Attribute) -> bool:
    return isinstance(element_type(t), IntegerType)


def is_pointer(t: Attribute) -> bool:
    return isinstance(element_type(t), PointerType)


def _type_name(t: Attribute) -> str:
    from xdsl.printer import Printer
    import io

    out = io.StringIO()
    Printer(stream=out).print_attribute(t)
    return out.getvalue()


def verify_tile_shape(t: Attribute, what: str) -> None:
    """Tiles are rank 1 or 2 with power-of-two dimensions and at most MAX_TILE_ELEMENTS elements."""
    shape = shape_of(t)
    if len(shape) > 2:
        raise VerifyException(f"{what} has rank {len(shape)}; tiles have rank 1 or 2")
    size = 1
    for dim in shape:
        if dim < 1 or dim & (dim - 1):
            raise VerifyException(f"{what} has dimension {dim}; tile dimensions must be powers of two")
        size *= dim
    if size > MAX_TILE_ELEMENTS:
        raise VerifyException(f"{what} has {size} elements; a tile holds at most {MAX_TILE_ELEMENTS}")


def _require(cond: bool, message: str) -> None:
    if not cond:
        raise VerifyException(message)


# ---------------------------------------------------------------------------------------------
# Program geometry and tile construction
# ---------------------------------------------------------------------------------------------


class _GridQueryOp(IRDLOperation):
    axis = prop_def(IntegerAttr[I32])
    result = result_def(i32)
    traits = traits_def(Pure())
    assembly_format = "$axis attr-dict `:` type($result)"

    def __init__(self, axis: int):
        super().__init__(properties={"axis": IntegerAttr(axis, 32)}, result_types=[i32])

    def verify_(self) -> None:
        _require(self.axis.value.data in (0, 1, 2), f"axis must be 0, 1 or 2, got {self.axis.value.data}")


@irdl_op_definition
class ProgramIdOp(_GridQueryOp):
    """Index of this program along a grid axis (CUDA's blockIdx)."""

    name = "tt.program_id"


@irdl_op_definition
class NumProgramsOp(_GridQueryOp):
    """Number of programs along a grid axis (CUDA's gridDim)."""

    name = "tt.num_programs"


@irdl_op_definition
class ConstantOp(IRDLOperation):
    """A scalar constant, or a tile filled with it: `tt.constant 1.0 : f32 -> tensor<64xf32>`."""

    name = "tt.constant"
    value = prop_def(IntegerAttr | FloatAttr)
    result = result_def()
    traits = traits_def(Pure())
    assembly_format = "$value attr-dict `->` type($result)"

    def __init__(self, value: IntegerAttr | FloatAttr, result_type: Attribute):
        super().__init__(properties={"value": value}, result_types=[result_type])

    def verify_(self) -> None:
        verify_tile_shape(self.result.type, "constant")
        _require(
            self.value.type == element_type(self.result.type),
            f"value of type {_type_name(self.value.type)} cannot fill {_type_name(self.result.type)}",
        )


@irdl_op_definition
class ArangeOp(IRDLOperation):
    """`[start, start+1, ..., end-1]` as an i32 tile; `end - start` must be a power of two."""

    name = "tt.arange"
    start = prop_def(IntegerAttr[I32])
    end = prop_def(IntegerAttr[I32])
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$start `to` $end attr-dict `:` type($result)"

    def __init__(self, start: int, end: int):
        super().__init__(
            properties={"start": IntegerAttr(start, 32), "end": IntegerAttr(end, 32)},
            result_types=[TensorType(i32, [end - start])],
        )

    def verify_(self) -> None:
        n = self.end.value.data - self.start.value.data
        _require(shape_of(self.result.type) == (n,), f"arange of {n} elements must have type tensor<{n}xi32>")
        _require(self.result.type.element_type == i32, "arange produces i32 elements")
        verify_tile_shape(self.result.type, "arange")


@irdl_op_definition
class SplatOp(IRDLOperation):
    """Fill a tile with a scalar."""

    name = "tt.splat"
    input = operand_def()
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, shape: Sequence[int]):
        scalar = SSAValue.get(input).type
        super().__init__(operands=[input], result_types=[TensorType(scalar, list(shape))])

    def verify_(self) -> None:
        _require(not isinstance(self.input.type, TensorType), "splat takes a scalar")
        _require(self.result.type.element_type == self.input.type, "splat must keep the element type")
        verify_tile_shape(self.result.type, "splat result")


@irdl_op_definition
class BroadcastOp(IRDLOperation):
    """Repeat a tile along its size-1 dimensions: `tensor<64x1xf32> -> tensor<64x32xf32>`."""

    name = "tt.broadcast"
    input = operand_def(TensorType)
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, shape: Sequence[int]):
        t = SSAValue.get(input).type
        super().__init__(operands=[input], result_types=[TensorType(t.element_type, list(shape))])

    def verify_(self) -> None:
        src, dst = shape_of(self.input.type), shape_of(self.result.type)
        _require(len(src) == len(dst), f"broadcast cannot change the rank ({len(src)} to {len(dst)})")
        for s, d in zip(src, dst):
            _require(s in (1, d), f"cannot broadcast shape {list(src)} to {list(dst)}")
        _require(element_type(self.input.type) == element_type(self.result.type), "broadcast keeps the element type")
        verify_tile_shape(self.result.type, "broadcast result")


@irdl_op_definition
class ExpandDimsOp(IRDLOperation):
    """Insert a size-1 dimension at `axis`: `x[:, None]` is axis 1, `x[None, :]` axis 0."""

    name = "tt.expand_dims"
    input = operand_def(TensorType)
    axis = prop_def(IntegerAttr[I32])
    result = result_def(TensorType)
    traits = traits_def(Pure())
    assembly_format = "$input `axis` `=` $axis attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, axis: int):
        t = SSAValue.get(input).type
        shape = list(shape_of(t))
        shape.insert(axis, 1)
        super().__init__(
            operands=[input],
            properties={"axis": IntegerAttr(axis, 32)},
            result_types=[TensorType(t.element_type, shape)],
        )

    def verify_(self) -> None:
        shape = list(shape_of(self.input.type))
        axis = self.axis.value.data
        _require(0 <= axis <= len(shape), f"axis {axis} out of range for rank {len(shape)}")
        shape.insert(axis, 1)
        _require(shape_of(self.result.type) == tuple(shape), f"expand_dims result must have shape {shape}")
        verify_tile_shape(self.result.type, "expand_dims result")


# ---------------------------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------------------------


@irdl_op_definition
class AddPtrOp(IRDLOperation):
    """Offset pointers by element counts (not bytes): `ptr + offsets`."""

    name = "tt.addptr"
    T: ClassVar = VarConstraint("T", AnyAttr())
    ptr = operand_def(T)
    offset = operand_def()
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$ptr `,` $offset attr-dict `:` type($ptr) `,` type($offset)"

    def __init__(self, ptr: SSAValue | Operation, offset: SSAValue | Operation):
        super().__init__(operands=[ptr, offset], result_types=[SSAValue.get(ptr).type])

    def verify_(self) -> None:
        _require(is_pointer(self.ptr.type), "addptr needs pointers as its first operand")
        _require(element_type(self.offset.type) == i32, "addptr offsets must be i32")
        _require(
            shape_of(self.ptr.type) == shape_of(self.offset.type),
            "addptr pointer and offset shapes must match (splat or broadcast first)",
        )


def _verify_mask(op: Operation, ptr: SSAValue, mask: SSAValue | None) -> None:
    if mask is not None:
        _require(
            mask.type == tile_type(i1, shape_of(ptr.type)),
            f"mask must be {_type_name(tile_type(i1, shape_of(ptr.type)))}, got {_type_name(mask.type)}",
        )


@irdl_op_definition
class LoadOp(IRDLOperation):
    """Read a tile through a tile of pointers; lanes where `mask` is false read nothing and give `other`."""

    name = "tt.load"
    ptr = operand_def()
    mask = opt_operand_def()
    other = opt_operand_def()
    result = result_def()
    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(MemoryReadEffect())
    assembly_format = (
        "$ptr (`mask` $mask^)? (`other` $other^)? attr-dict `:` type($ptr) (`,` type($mask)^)? "
        "(`,` type($other)^)? `->` type($result)"
    )

    def __init__(
        self,
        ptr: SSAValue | Operation,
        mask: SSAValue | Operation | None = None,
        other: SSAValue | Operation | None = None,
    ):
        pt = SSAValue.get(ptr).type
        result = tile_type(element_type(pt).pointee, shape_of(pt)) if is_pointer(pt) else pt
        super().__init__(
            operands=[ptr, [mask] if mask else [], [other] if other else []], result_types=[result]
        )

    def verify_(self) -> None:
        _require(is_pointer(self.ptr.type), f"load needs pointers, got {_type_name(self.ptr.type)}")
        expected = tile_type(element_type(self.ptr.type).pointee, shape_of(self.ptr.type))
        _require(self.result.type == expected, f"load result must be {_type_name(expected)}")
        _verify_mask(self, self.ptr, self.mask)
        if self.other is not None:
            _require(self.other.type == expected, f"other must be {_type_name(expected)}")


@irdl_op_definition
class StoreOp(IRDLOperation):
    """Write a tile through a tile of pointers; lanes where `mask` is false write nothing."""

    name = "tt.store"
    ptr = operand_def()
    value = operand_def()
    mask = opt_operand_def()
    traits = traits_def(MemoryWriteEffect())
    assembly_format = "$ptr `,` $value (`mask` $mask^)? attr-dict `:` type($ptr) `,` type($value) (`,` type($mask)^)?"

    def __init__(
        self, ptr: SSAValue | Operation, value: SSAValue | Operation, mask: SSAValue | Operation | None = None
    ):
        super().__init__(operands=[ptr, value, [mask] if mask else []])

    def verify_(self) -> None:
        _require(is_pointer(self.ptr.type), f"store needs pointers, got {_type_name(self.ptr.type)}")
        expected = tile_type(element_type(self.ptr.type).pointee, shape_of(self.ptr.type))
        _require(
            self.value.type == expected,
            f"stored value must be {_type_name(expected)}, got {_type_name(self.value.type)}",
        )
        _verify_mask(self, self.ptr, self.mask)


# ---------------------------------------------------------------------------------------------
# Elementwise arithmetic. Each class says which element kinds it accepts.
# ---------------------------------------------------------------------------------------------

INT, FLOAT = "int", "float"


class _ElementwiseOp(IRDLOperation):
    KINDS: ClassVar[tuple[str, ...]] = (INT, FLOAT)

    def _verify_kind(self, t: Attribute) -> None:
        kind = FLOAT if is_float(t) else INT if is_int(t) else None
        _require(
            kind in self.KINDS,
            f"{self.name} accepts {' or '.join(self.KINDS)} elements, got {_type_name(element_type(t))}",
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
    """Division: IEEE for floats, truncating for ints (as in C and Triton)."""

    name = "tt.div"


@irdl_op_definition
class FloorDivOp(BinaryOp):
    """Integer division rounding toward minus infinity (Python's `//`)."""

    name = "tt.floordiv"
    KINDS: ClassVar[tuple[str, ...]] = (INT,)


@irdl_op_definition
class ModOp(BinaryOp):
    """Remainder with the sign of the divisor (Python's `%`)."""

    name = "tt.mod"


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
        _require(self.predicate.data in CMP_PREDICATES, f"predicate must be one of {', '.join(CMP_PREDICATES)}")
        _require(
            self.result.type == tile_type(i1, shape_of(self.lhs.type)), "cmp result must be i1 of the operand shape"
        )
        self._verify_kind(self.lhs.type)


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
        _require(self.condition.type == expected, f"select condition must be {_type_name(expected)}")


CASTABLE = (i1, i32, Float32Type(), Float16Type())


@irdl_op_definition
class CastOp(IRDLOperation):
    """Convert element types among i1, i32, f32 and f16 (`x.to(tt.float16)`); floats to ints truncate."""

    name = "tt.cast"
    input = operand_def()
    result = result_def()
    traits = traits_def(Pure())
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, element: Attribute):
        t = SSAValue.get(input).type
        super().__init__(operands=[input], result_types=[tile_type(element, shape_of(t))])

    def verify_(self) -> None:
        _require(shape_of(self.input.type) == shape_of(self.result.type), "cast keeps the shape")
        for t in (self.input.type, self.result.type):
            _require(element_type(t) in CASTABLE, f"cannot cast {_type_name(element_type(t))}; use i1, i32, f32 or f16")


# ---------------------------------------------------------------------------------------------
# Reductions and dot
# ---------------------------------------------------------------------------------------------


class ReduceOp(IRDLOperation):
    """Reduce a tile along `axis`; a rank-1 tile reduces to a scalar."""

    KIND: ClassVar[str]
    input = operand_def(TensorType)
    axis = prop_def(IntegerAttr[I32])
    result = result_def()
    traits = traits_def(Pure())
    assembly_format = "$input `axis` `=` $axis attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue | Operation, axis: int):
        t = SSAValue.get(input).type
        shape = [d for i, d in enumerate(shape_of(t)) if i != axis]
        super().__init__(
            operands=[input],
            properties={"axis": IntegerAttr(axis, 32)},
            result_types=[tile_type(t.element_type, shape)],
        )

    def verify_(self) -> None:
        shape = shape_of(self.input.type)
        axis = self.axis.value.data
        _require(0 <= axis < len(shape), f"axis {axis} out of range for a rank-{len(shape)} tile")
        expected = tile_type(element_type(self.input.type), [d for i, d in enumerate(shape) if i != axis])
        _require(self.result.type == expected, f"{self.name} result must be {_type_name(expected)}")
        _require(is_float(self.input.type) or is_int(self.input.type), f"{self.name} needs numbers")


@irdl_op_definition
class ReduceSumOp(ReduceOp):
    name = "tt.reduce_sum"
    KIND: ClassVar[str] = "sum"


@irdl_op_definition
class ReduceMaxOp(ReduceOp):
    name = "tt.reduce_max"
    KIND: ClassVar[str] = "max"


@irdl_op_definition
class ReduceMinOp(ReduceOp):
    name = "tt.reduce_min"
    KIND: ClassVar[str] = "min"


@irdl_op_definition
class DotOp(IRDLOperation):
    """`acc + a @ b` for 2-D tiles `a: MxK`, `b: KxN`, `acc: MxN` (f32 accumulation)."""

    name = "tt.dot"
    T: ClassVar = VarConstraint("T", base(TensorType))
    a = operand_def(TensorType)
    b = operand_def(TensorType)
    acc = operand_def(T)
    result = result_def(T)
    traits = traits_def(Pure())
    assembly_format = "$a `,` $b `,` $acc attr-dict `:` type($a) `,` type($b) `->` type($result)"

    def __init__(self, a: SSAValue | Operation, b: SSAValue | Operation, acc: SSAValue | Operation):
        super().__init__(operands=[a, b, acc], result_types=[SSAValue.get(acc).type])

    def verify_(self) -> None:
        sa, sb, sc = shape_of(self.a.type), shape_of(self.b.type), shape_of(self.acc.type)
        _require(len(sa) == 2 and len(sb) == 2, "dot takes 2-D tiles")
        _require(sa[1] == sb[0], f"dot inner dimensions differ: {list(sa)} @ {list(sb)}")
        _require(sc == (sa[0], sb[1]), f"dot accumulator must have shape {[sa[0], sb[1]]}, got {list(sc)}")
        _require(self.result.type == self.acc.type, "dot result has the accumulator's type")
        _require(element_type(self.a.type) == element_type(self.b.type), "dot operands must have one element type")
        _require(is_float(self.a.type) and is_float(self.acc.type), "dot takes float tiles")
        for d in (*sa, *sb):
            _require(d >= 16, "dot tiles must be at least 16 in every dimension")


Tt = Dialect(
    "tt",
    [
        ProgramIdOp,
        NumProgramsOp,
        ConstantOp,
        ArangeOp,
        SplatOp,
        BroadcastOp,
        ExpandDimsOp,
        AddPtrOp,
        LoadOp,
        StoreOp,
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
        CmpOp,
        NegOp,
        AbsOp,
        ExpOp,
        LogOp,
        SqrtOp,
        RsqrtOp,
        SelectOp,
        CastOp,
        ReduceSumOp,
        ReduceMaxOp,
        ReduceMinOp,
        DotOp,
    ],
    [PointerType],
)
