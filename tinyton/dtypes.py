"""The element types tinyton knows, and how they map between the language, xDSL and NumPy.

`tt.float32` and friends are `dtype` objects: the name users write, the xDSL element type the dialects
use, and the NumPy dtype the runtime allocates. Everything above the dialects converts through here.
NumPy has no bfloat16: `tt.bfloat16` is `ml_dtypes.bfloat16` (the type JAX uses), whose NumPy kind is
"V", not "f"; code that asks "is this a float array" uses `is_float_dtype`, never `dtype.kind == "f"`.
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type, i1, i32
from xdsl.ir import Attribute

from tinyton.errors import CompilationError


class dtype:
    """An element type of tiles and arrays: `tt.float32`, `tt.float16`, `tt.bfloat16`, `tt.int32`, `tt.int1`."""

    __slots__ = ("ir", "name", "np")

    def __init__(self, name: str, ir: Attribute, np_dtype: type):
        self.name, self.ir, self.np = name, ir, np.dtype(np_dtype)

    def __repr__(self) -> str:
        return f"tt.{self.name}"


int1 = dtype("int1", i1, np.bool_)
int32 = dtype("int32", i32, np.int32)
float16 = dtype("float16", Float16Type(), np.float16)
bfloat16 = dtype("bfloat16", BFloat16Type(), ml_dtypes.bfloat16)
float32 = dtype("float32", Float32Type(), np.float32)
DTYPES = (int1, int32, float16, bfloat16, float32)
BF16 = bfloat16.np
"""NumPy's view of bfloat16 (`ml_dtypes.bfloat16`)."""
_BY_KEY: dict[Any, dtype] = {k: d for d in DTYPES for k in (d, d.ir, d.np, d.name)}

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
        raise CompilationError(
            f"unsupported dtype {name}; tinyton supports int1 (bool), int32, float16, bfloat16 and float32"
        )
    return found


def is_float_dtype(np_dtype: np.dtype) -> bool:
    """True for NumPy float dtypes, bfloat16 included (its NumPy kind is "V")."""
    return np_dtype.kind == "f" or np_dtype == BF16
