"""The element types of array programs and NumPy's promotion rules between them (NEP 50, as NumPy 2).

Array programs support float64, float32, float16, bfloat16, int64, int32, int16, int8, uint64, uint8 and bool, and
float8 (e4m3fn, e5m2) as matmul operands and data that ops move (reshapes, slices, gathers, joins, selects). Python
scalars are "weak": they take the array's type when of the same kind (`x * 2` keeps `x`'s dtype, `f16 + 1.0`
is float16) and the default type of their kind otherwise (`i32 * 0.5` is float64); NumPy scalars
(`np.float32(2)`) are typed. The answers are NumPy's own (`np.result_type`, and each ufunc's loop,
tinyton/frontend/ufuncs.py). bfloat16 is ml_dtypes' as NumPy sees it (with bool, int8 or uint8 it stays
bfloat16, with float32 it is float32), except that Python scalars are weak to it as to float16 (`bf16 + 1.0`
is bfloat16, as in JAX; NumPy with ml_dtypes gives float32); where NumPy finds no common type (bfloat16 with
float16 or a wider int) tinyton takes what ml_dtypes' arithmetic gives: float32 with float16, float64 with
int16 and wider ints.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

import numpy as np
from xdsl.dialects.builtin import Float8E4M3FNType, Float8E5M2Type
from xdsl.ir import Attribute

from tinyton.dialects.tta_shapes import FLOAT8_ARITHMETIC
from tinyton.dtypes import ELEMENT_TO_NUMPY, NUMPY_TO_ELEMENT, bfloat16
from tinyton.errors import CompilationError

ARRAY_DTYPES = (
    "bool", "int8", "uint8", "int16", "int32", "int64", "uint64", "float16", "bfloat16", "float32", "float64",
)  # fmt: skip
"""The dtypes of array programs (names as `tt.<name>` spells them, bool being `tt.int1`)."""
_NAMES = ", ".join(ARRAY_DTYPES)
FLOAT8 = {Float8E4M3FNType(), Float8E5M2Type()}
"""float8 arrays (e4m3fn, e5m2) are matmul operands (`a @ b` gives float32, as ml_dtypes' NumPy does;
`tt.scaled_matmul`), can be converted (`astype`) and moved (reshaped, sliced, gathered, joined, selected: their
bits kept, as NumPy's); no arithmetic takes them (NumPy's computes in float32 and rounds: spelled as a cast)."""


@cache
def _supported() -> dict[np.dtype, Attribute]:
    """NumPy dtype -> element type, for the dtypes of array programs."""
    dtypes = [bfloat16.np if n == "bfloat16" else np.dtype(n) for n in ARRAY_DTYPES]
    float8 = [d for d, e in NUMPY_TO_ELEMENT.items() if e in FLOAT8]
    return {d: NUMPY_TO_ELEMENT[d] for d in (*dtypes, *float8)}


def element_of(dtype: Any) -> Attribute:
    """The tta element type of a NumPy/torch dtype, a `tt.float32`-like object, a name or an xDSL type."""
    supported = _supported()
    dtype = getattr(dtype, "ir", dtype)  # tt.float32 and friends carry their xDSL type
    if dtype in supported.values():
        return dtype
    for candidate in (dtype, getattr(dtype, "name", None), str(dtype).rsplit(".", 1)[-1]):
        if candidate is None:  # np.dtype(None) is float64
            continue
        try:
            np_dtype = np.dtype(candidate)
        except TypeError:
            continue
        if np_dtype in supported:  # kernels know more dtypes than array programs
            return supported[np_dtype]
    raise TypeError(f"unsupported dtype {dtype}; array programs use {_NAMES} (and float8 matmul operands)")


def is_scalar(value: Any) -> bool:
    return isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating))


def numpy_key(value: Any) -> Any:
    """What NumPy's type resolution takes for an operand: a dtype, or for a Python int or float (weak) its
    type; a Python bool is a bool dtype (NumPy has no weak bools)."""
    if isinstance(value, Attribute):
        return ELEMENT_TO_NUMPY[value]
    if isinstance(value, (bool, np.generic)):
        return np.dtype(type(value))
    return int if isinstance(value, int) else float


def _combine_bf16(keys: Sequence[Any]) -> np.dtype:
    """The common type where NumPy finds none (bfloat16 with float16 or wider ints): ml_dtypes' arithmetic's."""
    total: Any = None
    for k in keys:
        value = np.zeros(0, k) if isinstance(k, np.dtype) else k(0)
        total = value if total is None else total + value
    return np.asarray(total).dtype


def common_dtype(keys: Sequence[Any]) -> np.dtype:
    """`np.result_type` of NumPy keys (`numpy_key`), with bfloat16 promoted as NEP 50 promotes float16
    (`bfloat16_keys`)."""
    keys = bfloat16_keys(keys)
    try:
        return np.result_type(*(k(0) if isinstance(k, type) else k for k in keys))  # weak: values, not types
    except TypeError:
        return _combine_bf16(keys)


def bfloat16_keys(keys: Sequence[Any]) -> list[Any]:
    """Keys with the weak Python scalars dropped where a bfloat16 array is among them: ml_dtypes has no
    weak-scalar rule (NumPy makes `bf16 + 1.0` float32), so tinyton applies NEP 50's, as JAX does: a Python
    int or float takes the bfloat16 array's type."""
    bf16 = bfloat16.np
    if bf16 not in keys:
        return list(keys)
    return [k for k in keys if isinstance(k, np.dtype)]


def refuse_float8(elements: Iterable[Attribute]) -> None:
    """float8 arrays take part in matmuls, casts and data movement only: arithmetic is this error."""
    if FLOAT8.intersection(elements):
        raise CompilationError(FLOAT8_ARITHMETIC)


def result_element(arrays: Sequence[Attribute], scalars: Sequence[Any]) -> Attribute:
    """The common element type of arrays and scalars mixed in one operation (NumPy's rules, NEP 50): float8
    arrays keep their type or widen as ml_dtypes' NumPy widens them; a scalar would be a float8 constant, which
    kernels do not make."""
    keys = [numpy_key(a) for a in arrays] + [numpy_key(v) for v in scalars]
    try:
        element = element_of(common_dtype(keys))
    except TypeError as e:
        raise TypeError(f"{e} (the common type of {', '.join(map(str, keys))})") from None
    if scalars and element in FLOAT8:
        raise CompilationError(
            "a Python scalar with float8 arrays (`where(c, x, 0.0)`) would be a float8 constant, which array "
            "programs do not make; convert the arrays first with x.astype(np.float32)"
        )
    return element
