"""`astype` to and from float8 in array programs: NumPy's (ml_dtypes') values, on the simulator and a GPU.

`tt.cast` saturates float8 conversions as Triton does (kernels keep that); an array program's cast rounds what
lies past the largest finite value to NaN (e4m3fn) or ±inf (e5m2), signed as the value, as ml_dtypes does
(lowering/fusion/casts.py). Float8 values are otherwise matmul operands and moved data (tests/test_float8_moves.py):
arithmetic on them is refused with the fix in the message.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tinyton as tt
from tinyton.errors import CompilationError

E4M3, E5M2 = ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2
BACKENDS = ["sim", pytest.param("cuda", marks=pytest.mark.gpu)]
EDGES = [0.0, -0.0, 1.0, -1.5, 0.1, 1e-9, 2e-3, 240.0, 447.0, 448.0, 455.0, 464.0, 465.0, 480.0, 1000.0, -1000.0,
         57344.0, 61439.0, 61440.0, -61440.0, 1e6, np.inf, -np.inf, np.nan]


def _values(dtype) -> np.ndarray:
    rng = np.random.default_rng(0)
    spread = rng.standard_normal(200) * np.logspace(-6, 6, 200)
    values = np.concatenate([EDGES, spread])
    if np.issubdtype(np.dtype(dtype), np.integer):
        values = np.nan_to_num(values, nan=0, posinf=70000, neginf=-70000).clip(-70000, 70000)
    with np.errstate(over="ignore"):  # float16 has no 1e6: inf, as NumPy makes it
        return values.astype(dtype)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("target", [E4M3, E5M2], ids=["e4m3fn", "e5m2"])
@pytest.mark.parametrize("source", [np.float32, np.float16, ml_dtypes.bfloat16, np.float64, np.int32],
                         ids=["f32", "f16", "bf16", "f64", "i32"])
def test_cast_to_float8_is_numpys(monkeypatch, backend, source, target):
    """Bit for bit: a negative value past e4m3fn's range is its negative NaN (0xFF), as NumPy's."""
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    x = _values(source)
    got = np.asarray(tt.jit(lambda x: x.astype(target))(x))
    want = x.astype(target)
    assert got.dtype == np.dtype(target)
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("source", [E4M3, E5M2], ids=["e4m3fn", "e5m2"])
@pytest.mark.parametrize("target", [np.float32, np.float16, ml_dtypes.bfloat16], ids=["f32", "f16", "bf16"])
def test_cast_from_float8_is_exact(monkeypatch, backend, source, target):
    """Every float8 value (all 256 codes, NaNs included) widens exactly."""
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    x = np.arange(256, dtype=np.uint8).view(source)
    got = np.asarray(tt.jit(lambda x: x.astype(target) * 1)(x))
    np.testing.assert_array_equal(got, x.astype(target))


def test_arithmetic_on_float8_names_the_fix():
    x = np.ones(4, E4M3)
    with pytest.raises(CompilationError, match=r"astype\(np.float32\)"):
        tt.jit(lambda x: x + 1)(x)
    np.testing.assert_array_equal(np.asarray(tt.jit(lambda x: x.astype(np.float32) + 1)(x)), np.full(4, 2, np.float32))
