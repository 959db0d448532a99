"""The element types of array programs and NumPy's promotion rules between them.

Array programs support float32, float16, bfloat16, int32 and bool, and float8 (e4m3fn, e5m2) matmul operands. Python scalars are "weak" (`x * 2` keeps
`x`'s dtype, `i32 * 0.5` is float32); two array dtypes promote to the wider one. bfloat16 follows
ml_dtypes/JAX: with bool it stays bfloat16, with float16 or float32 it is float32, and with int32 float32
(NumPy and ml_dtypes give float64 there, as for float16, and tinyton has no float64).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.dialects.builtin import BFloat16Type, Float8E4M3FNType, Float8E5M2Type, Float16Type, Float32Type, i1, i32
from xdsl.ir import Attribute

from tinyton.dtypes import NUMPY_TO_ELEMENT
from tinyton.errors import CompilationError

_PROMOTION_RANK = {i1: 0, i32: 1, Float16Type(): 2, BFloat16Type(): 2, Float32Type(): 3}
_KIND = {i1: 0, i32: 1, Float16Type(): 2, BFloat16Type(): 2, Float32Type(): 2}
"""bool < int < float: a weak Python scalar only changes the type when it is of a higher kind."""
_HALVES = {Float16Type(), BFloat16Type()}
FLOAT8 = {Float8E4M3FNType(), Float8E5M2Type()}
"""float8 arrays (e4m3fn, e5m2) are matmul operands (`a @ b` gives float32, as ml_dtypes' NumPy does;
`tt.scaled_matmul`) and can be converted (`astype`); no other op takes them."""
_ELEMENTS = {*_PROMOTION_RANK, *FLOAT8}


def element_of(dtype: Any) -> Attribute:
    """The tta element type of a NumPy/torch dtype, a `tt.float32`-like object, a name or an xDSL type."""
    dtype = getattr(dtype, "ir", dtype)  # tt.float32 and friends carry their xDSL type
    if dtype in _ELEMENTS:
        return dtype
    for candidate in (dtype, getattr(dtype, "name", None), str(dtype).rsplit(".", 1)[-1]):
        try:
            np_dtype = np.dtype(candidate)
        except TypeError:
            continue
        if NUMPY_TO_ELEMENT.get(np_dtype) in _ELEMENTS:  # kernels know more dtypes than array programs
            return NUMPY_TO_ELEMENT[np_dtype]
    raise TypeError(
        f"unsupported dtype {dtype}; array programs use float32, float16, bfloat16, int32 or bool (and float8 "
        "matmul operands)"
    )


def _weak_element(value: Any) -> Attribute:
    """The element type a Python scalar would have on its own."""
    if isinstance(value, (bool, np.bool_)):
        return i1
    if isinstance(value, (int, np.integer)):
        return i32
    return Float32Type()


def promote(a: Attribute, b: Attribute) -> Attribute:
    """NumPy's promotion restricted to bool < int32 < float16, bfloat16 < float32 (int32 with a 16-bit float
    and float16 with bfloat16 give float32)."""
    if a == b:
        return a
    if {a, b} == _HALVES or (i32 in (a, b) and {a, b} & _HALVES):
        return Float32Type()
    return a if _PROMOTION_RANK[a] >= _PROMOTION_RANK[b] else b


def is_scalar(value: Any) -> bool:
    return isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating))


def result_element(arrays: Sequence[Attribute], scalars: Sequence[Any]) -> Attribute:
    """The common element type of arrays and Python scalars mixed in one operation (NumPy's rules).

    Arrays decide the type; Python scalars are "weak" and only widen it by kind (an int array times
    0.5 becomes float32, a float16 array plus 1.0 stays float16)."""
    if FLOAT8.intersection(arrays):
        raise CompilationError(
            "float8 arrays are matmul operands only (`a @ b`, tt.scaled_matmul) in array programs; convert them "
            "first with x.astype(np.float32)"
        )
    element = None
    for a in arrays:
        element = a if element is None else promote(element, a)
    for v in scalars:
        weak = _weak_element(v)
        if element is None or _KIND[weak] > _KIND[element]:
            element = weak if element is None else promote(element, weak)
    assert element is not None
    return element
