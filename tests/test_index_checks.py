"""`tinyton-check-indices` (tinyton/rewrites/index_checks.py): `tt.take(tt.arange(0, n), i)` and `tt.arange(n)[i]`
are NumPy's `np.arange(n)[i]` (int32, as `tt.arange`), negative indices counted from the end, one out of range
NumPy's IndexError (the kernel's assertion), computed from the index itself: one kernel with its readers."""

from __future__ import annotations

import numpy as np
import pytest

import tinyton as tt
from tinyton.dialects import tta
from tinyton.frontend.programs import fused_modules
from tinyton.runtime.simulator import DeviceAssertionError

N = 7


@tt.jit
def taken(i):
    return tt.take(tt.arange(0, N), i) * 3 + 1


@tt.jit
def indexed(i):
    return tt.arange(N)[i]


def indices(dtype) -> np.ndarray:
    """In-range indices of `dtype`: negative ones where it is signed, NumPy's -1 (2**64 - 1) for uint64."""
    if dtype == np.uint64:
        return np.array([[0, 6], [2**64 - 1, 3]], dtype)
    if np.dtype(dtype).kind == "u":
        return np.array([[0, 6], [2, 3]], dtype)
    return np.array([[0, -1], [6, -7]], dtype)


@pytest.fixture(autouse=True)
def simulator(monkeypatch) -> None:
    monkeypatch.setenv("TINYTON_BACKEND", "sim")


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint64])
def test_gathers_of_an_arange_are_numpy_s(dtype) -> None:
    i = indices(dtype)
    want = np.arange(N, dtype=np.int32)[i]
    for got, expected in ((taken(i), want * 3 + 1), (indexed(i), want)):
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("bad", [np.array([0, N], np.int32), np.array([-N - 1], np.int64),
                                 np.array([2**32 + 1], np.int64), np.array([N], np.uint8)],
                         ids=["past-end", "below-start", "int64-past-2**32", "uint8-past-end"])
def test_an_index_out_of_range_stops_the_kernel(bad) -> None:
    with pytest.raises(IndexError, match=f"out of bounds for axis 0 with size {N}"):
        np.arange(N)[bad]
    for program in (taken, indexed):
        with pytest.raises(DeviceAssertionError, match=f"index out of bounds for axis 0 with size {N}"):
            program(bad)


def test_the_check_is_one_kernel_with_its_readers() -> None:
    """No arange in memory, no gather: the check and the arithmetic after it are one elementwise kernel."""
    i = indices(np.int64)
    assert taken.compile(i).num_launches == 1
    _, fused = fused_modules(taken.fn, [i])
    ops = [op for op in fused.walk()]
    assert not any(isinstance(op, (tta.TakeOp, tta.ArangeOp)) for op in ops)
    assert sum(isinstance(op, tta.CheckIndexOp) for op in ops) == 1
