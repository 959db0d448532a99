"""tinyton/dtypes.py: a dtype's kind and width are written by hand (so that `import tinyton` needs no NumPy)
and must agree with its NumPy dtype, which loads on first use (tinyton/numpy_dtypes.py)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tinyton as tt
from tinyton import dtypes
from tinyton.dtypes import DTYPES, dtype_of, is_float_dtype


@pytest.mark.parametrize("d", DTYPES, ids=lambda d: d.name)
def test_kind_and_width_agree_with_numpy(d: dtypes.dtype) -> None:
    float_like = is_float_dtype(d.np)
    assert d.is_floating() == float_like and d.is_int() == (not float_like)
    assert d.is_bool() == (d.np == np.bool_)
    assert d.is_int_signed() == (d.np.kind in "ib") and d.is_int_unsigned() == (d.np.kind == "u")
    assert d.primitive_bitwidth == (1 if d.is_bool() else d.np.itemsize * 8)


def test_numpy_views() -> None:
    assert tt.bfloat16.np == np.dtype(ml_dtypes.bfloat16) and dtypes.BF16 == tt.bfloat16.np
    assert tt.float8e4nv.np == np.dtype(ml_dtypes.float8_e4m3fn) and tt.float8e5.np == np.dtype(ml_dtypes.float8_e5m2)
    assert tt.int1.np == np.bool_ and tt.uint16.np == np.uint16 and tt.float64.np == np.float64


@pytest.mark.parametrize(
    "key, expected",
    [
        (np.dtype(np.float32), tt.float32), (np.float16, tt.float16), ("int64", tt.int64), ("bf16", tt.bfloat16),
        (ml_dtypes.bfloat16, tt.bfloat16), (np.dtype(ml_dtypes.float8_e5m2), tt.float8e5), (bool, tt.int1),
        ("torch.uint8", tt.uint8), (tt.uint32, tt.uint32),
    ],
)  # fmt: skip
def test_dtype_of(key: object, expected: dtypes.dtype) -> None:
    assert dtype_of(key) is expected


def test_dtype_of_refuses_what_tinyton_lacks() -> None:
    with pytest.raises(tt.CompilationError, match="unsupported dtype complex64"):
        dtype_of(np.complex64)
