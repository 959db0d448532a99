"""The NumPy dtype of each tinyton dtype, by name: loaded with NumPy and ml_dtypes on first use of a dtype's
`np` (tinyton/dtypes.py reaches it through tinyton/lazy.py, so `import tinyton` stays free of NumPy, whose
import alone takes a quarter of a second on the GPU hosts)."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

NUMPY: dict[str, np.dtype] = {
    name: np.dtype(t)
    for name, t in {
        "int1": np.bool_, "int8": np.int8, "int16": np.int16, "int32": np.int32, "int64": np.int64,
        "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64,
        "float8e4nv": ml_dtypes.float8_e4m3fn, "float8e5": ml_dtypes.float8_e5m2, "float16": np.float16,
        "bfloat16": ml_dtypes.bfloat16, "float32": np.float32, "float64": np.float64,
    }.items()
}  # fmt: skip
_NAMES = {d: name for name, d in NUMPY.items()}


def name_of(x: Any) -> str | None:
    """The tinyton name of what NumPy reads as a dtype (a dtype, a scalar type, a name), None otherwise."""
    try:
        return _NAMES.get(np.dtype(x))
    except TypeError:
        return None
