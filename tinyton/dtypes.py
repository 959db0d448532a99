"""The element types tinyton knows, and how they map between the language, xDSL and NumPy.

`tt.float32` and friends are `dtype` objects: the name users write, the xDSL element type the dialects
use, and the NumPy dtype the runtime allocates. Everything above the dialects converts through here.
NumPy has no bfloat16: `tt.bfloat16` is `ml_dtypes.bfloat16` (the type JAX uses), whose NumPy kind is
"V", not "f"; code that asks "is this a float array" uses `is_float_dtype`, never `dtype.kind == "f"`.
Unsigned ints are xDSL's unsigned integer types (`ui32`; the LLVM lowering makes them signless and picks
unsigned instructions). NumPy has no float8 either: `tt.float8e4nv` / `tt.float8e5` are `ml_dtypes`'
(storage and casts only, as in Triton). A pointer's `dtype` is a `pointer_type` with `element_ty`.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import (
    AnyFloat,
    BFloat16Type,
    Float8E4M3FNType,
    Float8E5M2Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IntegerType,
    Signedness,
    i1,
    i8,
    i16,
    i32,
    i64,
)
from xdsl.ir import Attribute

from tinyton.errors import CompilationError


class dtype:
    """An element type of tiles and arrays: `tt.float32`, `tt.float16`, `tt.bfloat16`, `tt.int32`, `tt.int1`."""

    __slots__ = ("ir", "name", "np")

    def __init__(self, name: str, ir: Attribute, np_dtype: type):
        self.name, self.ir, self.np = name, ir, np.dtype(np_dtype)

    def __repr__(self) -> str:
        return f"tt.{self.name}"

    @property
    def primitive_bitwidth(self) -> int:
        return 1 if self.np == np.bool_ else self.np.itemsize * 8

    def is_floating(self) -> bool:
        return not isinstance(self.ir, IntegerType)

    def is_int(self) -> bool:
        return isinstance(self.ir, IntegerType)

    def is_int_signed(self) -> bool:
        return self.is_int() and self.ir.signedness.data != Signedness.UNSIGNED

    def is_int_unsigned(self) -> bool:
        return self.is_int() and self.ir.signedness.data == Signedness.UNSIGNED

    def is_bool(self) -> bool:
        return self.ir == i1

    def is_ptr(self) -> bool:
        return False


class pointer_type:
    """The `dtype` of a pointer: `x_ptr.dtype.element_ty` is the element's dtype, as in Triton."""

    __slots__ = ("element_ty",)

    def __init__(self, element_ty: dtype):
        self.element_ty = element_ty

    def __repr__(self) -> str:
        return f"pointer<{self.element_ty!r}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, pointer_type) and other.element_ty is self.element_ty

    def __hash__(self) -> int:
        return hash(("ptr", self.element_ty.name))

    def is_ptr(self) -> bool:
        return True


class block_type:
    """Triton's `x.type` of a tile: `element_ty` (a dtype or `pointer_type`) and `shape`."""

    __slots__ = ("element_ty", "shape")

    def __init__(self, element_ty: dtype | pointer_type, shape: tuple[int, ...]):
        self.element_ty, self.shape = element_ty, shape

    def __repr__(self) -> str:
        return f"<{list(self.shape)}, {self.element_ty!r}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, block_type) and (other.element_ty, other.shape) == (self.element_ty, self.shape)

    def __hash__(self) -> int:
        return hash(("block", self.element_ty, self.shape))

    def is_ptr(self) -> bool:
        return False


def _unsigned(width: int) -> IntegerType:
    return IntegerType(width, Signedness.UNSIGNED)


int1 = dtype("int1", i1, np.bool_)
int8 = dtype("int8", i8, np.int8)
int16 = dtype("int16", i16, np.int16)
int32 = dtype("int32", i32, np.int32)
int64 = dtype("int64", i64, np.int64)
uint8 = dtype("uint8", _unsigned(8), np.uint8)
uint16 = dtype("uint16", _unsigned(16), np.uint16)
uint32 = dtype("uint32", _unsigned(32), np.uint32)
uint64 = dtype("uint64", _unsigned(64), np.uint64)
float8e4nv = dtype("float8e4nv", Float8E4M3FNType(), ml_dtypes.float8_e4m3fn)
float8e5 = dtype("float8e5", Float8E5M2Type(), ml_dtypes.float8_e5m2)
float16 = dtype("float16", Float16Type(), np.float16)
bfloat16 = dtype("bfloat16", BFloat16Type(), ml_dtypes.bfloat16)
float32 = dtype("float32", Float32Type(), np.float32)
float64 = dtype("float64", Float64Type(), np.float64)
DTYPES = (
    int1, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
    float8e4nv, float8e5, float16, bfloat16, float32, float64,
)
BF16 = bfloat16.np
"""NumPy's view of bfloat16 (`ml_dtypes.bfloat16`)."""
FLOAT8 = (float8e4nv, float8e5)
"""Storage-only types: kernels load, store and convert them, arithmetic needs a cast first."""
ALIASES = {
    "bool": int1, "fp8e4nv": float8e4nv, "fp8e5": float8e5, "fp16": float16, "bf16": bfloat16, "fp32": float32,
    "fp64": float64,
}
_BY_KEY: dict[Any, dtype] = {**ALIASES, **{k: d for d in DTYPES for k in (d, d.ir, d.np, d.name)}}

NUMPY_TO_ELEMENT: dict[np.dtype, Attribute] = {d.np: d.ir for d in DTYPES}
ELEMENT_TO_NUMPY: dict[Attribute, np.dtype] = {d.ir: d.np for d in DTYPES}


def dtype_of(x: Any) -> dtype:
    """The tinyton dtype of `x`: a tt dtype, an xDSL type, or a NumPy/torch dtype (or its name)."""
    found = _BY_KEY.get(x)
    candidates = (x, str(getattr(x, "name", x)).rsplit(".", 1)[-1])  # torch.float32 -> float32
    while found is None and candidates:
        candidate, *candidates = candidates
        try:
            found = _BY_KEY.get(np.dtype(candidate))
        except TypeError:
            continue
    if found is None:
        name = getattr(x, "__name__", x)
        names = ", ".join(d.name for d in DTYPES)
        raise CompilationError(f"unsupported dtype {name}; tinyton supports {names}")
    return found


def is_float_dtype(np_dtype: np.dtype) -> bool:
    """True for NumPy float dtypes, bfloat16 and float8 included (their NumPy kind is "V")."""
    return np_dtype.kind == "f" or np_dtype == BF16 or any(np_dtype == d.np for d in FLOAT8)


def constant_key(value: float | int | bool, element: Attribute) -> tuple[object, Attribute]:
    """A dict key for a constant of `element` type: floats by their repr, since -0.0 == 0.0 in Python but
    they are different divisors (x / -0.0 is -inf), and one NaN never equals another."""
    return (repr(float(value)) if isinstance(element, AnyFloat) else value, element)
