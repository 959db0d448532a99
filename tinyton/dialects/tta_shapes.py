"""NumPy's shape and dtype rules for the `tta` dialect, and the helpers its verifiers build on.

The shape helpers (`broadcast_shapes`, `reduced_shape`, ...) raise `ShapeError` with NumPy's wording and
are shared by the verifiers, the tracer and the fusion passes; `checked` turns that error into a
`VerifyException` inside a verifier.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    Signedness,
    TensorType,
    i1,
    i32,
    i64,
)
from xdsl.ir import Attribute
from xdsl.irdl import IRDLOperation
from xdsl.utils.exceptions import VerifyException

from tinyton.dialects.tt_types import FLOAT8_TYPES, element_type, require, tile_type, type_name

R = TypeVar("R")

array_type = tile_type
"""`array_type(f32, (4, 8))` is `tensor<4x8xf32>`; `array_type(f32, ())` is `f32`."""

_DTYPE_NAMES = {
    Float64Type(): "float64", Float32Type(): "float32", Float16Type(): "float16", BFloat16Type(): "bfloat16",
    i64: "int64", i32: "int32", IntegerType(16): "int16", IntegerType(8): "int8",
    IntegerType(64, Signedness.UNSIGNED): "uint64", IntegerType(8, Signedness.UNSIGNED): "uint8", i1: "bool",
}
ELEMENT_TYPES: tuple[Attribute, ...] = tuple(_DTYPE_NAMES)
"""The element types of array programs (NumPy's dtypes of `tinyton.frontend.promotion.ARRAY_DTYPES`)."""


FLOAT8_ARITHMETIC = (
    "float8 arrays are matmul operands (`a @ b`, tt.scaled_matmul) and data to cast or move (reshape, slice, repeat, "
    "concatenate, where, ...) in array programs, not arithmetic operands (NumPy computes that in float32 and rounds); "
    "convert them first with x.astype(np.float32)"
)
"""Why arithmetic on float8 arrays is refused, and the fix (the tracer's error and the verifiers')."""


class ShapeError(ValueError):
    """A NumPy-style shape or type error; the verifiers wrap it, the tracer adds the user's file:line."""


def dtype_name(t: Attribute) -> str:
    """NumPy's name of the element type of `t` (`float32`, `int32`, `bool`, ...)."""
    el = element_type(t)
    return _DTYPE_NAMES.get(el, str(el))


def type_str(t: Attribute | Sequence[Attribute]) -> str:
    """Types as the IR prints them (`tensor<4x8xf32>`), for messages; lists comma-separated."""
    if isinstance(t, Attribute):
        return type_name(t)
    return ", ".join(type_name(x) for x in t)


def format_shape(shape: Sequence[int]) -> str:
    """`(64,)`, `(4, 8)`, `()`: shapes as NumPy prints them."""
    return str(tuple(shape))


# ---------------------------------------------------------------------------------------------
# Shape rules
# ---------------------------------------------------------------------------------------------


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
    size = math.prod(src)
    if size != math.prod(dst):
        raise ShapeError(f"cannot reshape array of size {size} into shape {format_shape(dst)}")


def take_shape(table: Sequence[int], indices: Sequence[int], axis: int) -> tuple[int, ...]:
    """`np.take(table, indices, axis)`: the indexed axis is replaced by the shape of `indices`."""
    axis = normalize_axis(axis, len(table))
    return (*table[:axis], *indices, *table[axis + 1 :])


# ---------------------------------------------------------------------------------------------
# Verifier helpers
# ---------------------------------------------------------------------------------------------


def checked(check: Callable[..., R], *args: Any) -> R:
    """Run a shape helper inside a verifier (returning its result), turning ShapeError into VerifyException."""
    try:
        return check(*args)
    except ShapeError as error:
        raise VerifyException(str(error)) from error


def verify_axis(axis: int, ndim: int) -> None:
    """An op's `axis` property is normalised: `0 <= axis < ndim` (NumPy's AxisError message otherwise)."""
    require(0 <= axis < ndim, f"axis {axis} is out of bounds for array of dimension {ndim}")


def expect_result(op: IRDLOperation, expected: Attribute) -> None:
    got = op.results[0].type
    if got != expected:  # the message prints types: only build it on failure (verifiers run per traced op)
        raise VerifyException(f"{op.name} result must be {type_str(expected)}, got {type_str(got)}")


def verify_value(what: str, t: Attribute, moved: bool = False) -> None:
    """Values are scalars or static tensors of the `ELEMENT_TYPES`; float8 ones only where an op moves or casts
    them (`moved`: reshapes, slices, gathers, joins, selects and assignments keep their bits): NumPy computes
    anything else of float8 in float32 and rounds, which array programs ask the user to spell as a cast."""
    element = element_type(t)
    if isinstance(element, FLOAT8_TYPES) and not moved:
        raise VerifyException(f"{what} is float8 ({type_str(t)}): {FLOAT8_ARITHMETIC}")
    if element not in ELEMENT_TYPES and not isinstance(element, FLOAT8_TYPES):  # message built on failure only
        raise VerifyException(f"{what} has unsupported type {type_str(t)}; use {', '.join(_DTYPE_NAMES.values())}")
    if isinstance(t, TensorType):
        require(all(d >= 0 for d in t.get_shape()), f"{what} must have a static shape")
