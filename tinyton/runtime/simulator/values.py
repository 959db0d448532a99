"""How the simulator represents tt values with NumPy.

- A scalar is a NumPy scalar (`np.int32`, `np.float32`, `np.float16`, `np.bool_`, ...), a tile an
  `np.ndarray` of the tile's shape and dtype (i1→bool, iN→intN, uiN→uintN, fN→floatN, bf16→ml_dtypes.bfloat16,
  f8E4M3FN and f8E5M2 → ml_dtypes' float8_e4m3fn and float8_e5m2).
- A pointer (or tile of pointers) is a `Pointer`: the number of the argument array it points into and
  int64 element offsets, so `tt.addptr` is integer addition and loads/stores gather/scatter.
- When several programs run at once (the batched path) a value that differs between programs has one
  extra *leading* dimension, the program; a value that is the same for all programs keeps its plain shape
  and NumPy broadcasting (which aligns trailing dimensions) combines both kinds. Impls therefore address
  tile dimensions from the end (negative axes) and never assume a leading dimension is there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float8E4M3FNType,
    Float8E5M2Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerType,
    Signedness,
)
from xdsl.ir import Attribute

from tinyton.dialects import tt
from tinyton.dtypes import BF16, is_float_dtype

from .errors import SimulatorError


@dataclass(frozen=True, slots=True)
class Pointer:
    """A pointer value: `offsets` (int64 elements, any shape) from the start of argument array `buffer`."""

    buffer: int
    offsets: Any

    def moved(self, offsets: Any) -> Pointer:
        return Pointer(self.buffer, offsets)


Value: TypeAlias = "np.ndarray | np.generic | Pointer"
"""A scalar, tile or pointer value, possibly with a leading program dimension."""


def np_dtype(t: Attribute) -> np.dtype:
    """NumPy dtype of an element (or tile) type."""
    e = tt.element_type(t)
    if isinstance(e, IntegerType):
        width = e.width.data
        if width == 1:
            return np.dtype(np.bool_)
        if width in (8, 16, 32, 64):
            return np.dtype(f"{'u' if e.signedness.data == Signedness.UNSIGNED else ''}int{width}")
    elif isinstance(e, IndexType):
        return np.dtype(np.int64)
    elif isinstance(e, Float16Type):
        return np.dtype(np.float16)
    elif isinstance(e, BFloat16Type):
        return BF16
    elif isinstance(e, Float32Type):
        return np.dtype(np.float32)
    elif isinstance(e, Float64Type):
        return np.dtype(np.float64)
    elif isinstance(e, Float8E4M3FNType):
        return np.dtype(ml_dtypes.float8_e4m3fn)
    elif isinstance(e, Float8E5M2Type):
        return np.dtype(ml_dtypes.float8_e5m2)
    raise SimulatorError(f"the simulator has no NumPy type for elements of type {e}")


def kind(x: Any) -> str:
    """NumPy's kind letter of a value's dtype, "f" for bfloat16 too (whose NumPy kind is "V")."""
    return "f" if is_float_dtype(x.dtype) else x.dtype.kind


def rank(t: Attribute) -> int:
    """Rank of a tile type (0 for a scalar)."""
    return len(tt.shape_of(t))


def scalar(x: Any) -> Any:
    """A 0-d array as a NumPy scalar; anything else unchanged."""
    return x[()] if isinstance(x, np.ndarray) and x.ndim == 0 else x


def per_program(mask: np.ndarray, r: int) -> np.ndarray:
    """A `(P,)` per-program mask shaped `(P, 1, ..., 1)` to broadcast against values of tile rank `r`."""
    return mask.reshape(mask.shape + (1,) * r)


def choose(cond: Any, a: Value, b: Value) -> Value:
    """`cond ? a : b` elementwise, for numbers and pointers (which must share one argument array)."""
    if isinstance(a, Pointer) or isinstance(b, Pointer):
        if not (isinstance(a, Pointer) and isinstance(b, Pointer)) or a.buffer != b.buffer:
            raise SimulatorError("the simulator cannot choose between pointers into different arguments")
        return a.moved(scalar(np.where(cond, a.offsets, b.offsets)))
    return scalar(np.where(cond, a, b))


def choose_programs(programs: np.ndarray, a: Value, b: Value, r: int) -> Value:
    """Per program: `a` where `programs` (shape `(P,)`) is true, else `b`; values have tile rank `r`."""
    return choose(per_program(programs, r), a, b)


def splat(x: Any, shape: tuple[int, ...]) -> Any:
    """Fill a tile of `shape` with scalar `x` (which may carry a program dimension)."""
    if isinstance(x, Pointer):
        return x.moved(splat(x.offsets, shape))
    lead = np.shape(x)
    if not lead:
        return np.full(shape, x)
    return np.broadcast_to(np.reshape(x, lead + (1,) * len(shape)), lead + shape)


def map_offsets(x: Value, fn: Any) -> Value:
    """Apply a shape-only transformation to a value, or to the offsets of a pointer value."""
    return x.moved(fn(x.offsets)) if isinstance(x, Pointer) else fn(x)
