"""NumPy's `sort`, `argsort` and `searchsorted` in array programs, against NumPy: rows of power-of-two and odd
lengths, every axis and `axis=None`, NaN, -0.0 and ties (argsort is NumPy's `kind="stable"` result), the dtypes
array programs have; on the simulator, and marked `gpu` on the GPU; and the kernels' PTX through ptxas."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

import tinyton as tt
from tinyton.errors import CompilationError
from tinyton.frontend.tracing import trace
from tinyton.lowering.fusion import fusion_to_kernels
from tinyton.lowering.ptx import assemble_ptx, compile_llvm_module
from tinyton.lowering.tt_to_llvm import lower_to_llvm
from tinyton.rewrites.pipeline import fuse_module
from toolchains import TOOLCHAINS, needs_ptxas

SHAPES_AXES = [((7,), -1), ((8,), 0), ((1,), -1), ((0,), -1), ((3, 5), -1), ((4, 16), 1), ((6, 3), 0),
               ((2, 3, 33), 1), ((2, 3, 9), None), ((), None), ((5, 0), 1), ((3, 100), -1)]  # fmt: skip
DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16, np.float64, np.int32, np.int8, np.uint8, np.int64, np.bool_]


def values(shape: tuple[int, ...], dtype: Any, seed: int) -> np.ndarray:
    """Few distinct values (ties everywhere); floats with NaN, ±inf and ±0.0 among them."""
    rng = np.random.default_rng(seed)
    if np.dtype(dtype) == np.bool_:
        return np.asarray(rng.random(shape) < 0.5)
    if np.dtype(dtype).kind in "iu":
        low = 0 if np.dtype(dtype).kind == "u" else -4
        return rng.integers(low, low + 9, shape).astype(dtype)
    pool = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.25, 3.0, 0.1], np.float64)
    return np.where(rng.random(shape) < 0.5, rng.choice(pool, shape), rng.standard_normal(shape)).astype(dtype)


def same(got: np.ndarray, expected: np.ndarray) -> None:
    """Equal values, dtypes and shapes; NaN equal to NaN (any payload), -0.0 told from 0.0."""
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)
    if got.dtype.kind not in "iub":
        np.testing.assert_array_equal(np.signbit(got.astype(np.float64)), np.signbit(expected.astype(np.float64)))


def descending(x: np.ndarray, axis: int | None) -> tuple[np.ndarray, np.ndarray]:
    """torch's `sort(descending=True, stable=True)`: the values reversed, NaN first, equal ones in index order."""
    if axis is None:
        x, axis = x.reshape(-1), 0
    n = x.shape[axis]
    order = n - 1 - np.flip(np.argsort(np.flip(x, axis), axis, kind="stable"), axis)
    return np.take_along_axis(x, order, axis), order


def _matches_numpy(backend: str):
    @pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
    @pytest.mark.parametrize("shape, axis", SHAPES_AXES, ids=str)
    def test(shape: tuple[int, ...], axis: int | None, dtype: Any, request) -> None:
        request.getfixturevalue(backend)
        x = values(shape, dtype, len(shape) + (axis or 0))
        program = tt.jit(lambda a: (np.sort(a, axis), tt.argsort(a, axis), a.argsort(axis, kind="quicksort"),
                                    tt.sort(a, axis, descending=True), tt.argsort(a, axis, descending=True)))
        got = program(x)
        same(got[0], np.sort(x, axis, kind="stable"))
        same(got[1], np.argsort(x, axis, kind="stable"))
        same(got[2], np.argsort(x, axis, kind="stable"))
        same(got[3], descending(x, axis)[0])
        same(got[4], descending(x, axis)[1])

    return test


test_matches_numpy = _matches_numpy("simulator")
test_matches_numpy_on_gpu = pytest.mark.gpu(_matches_numpy("gpu"))


@pytest.mark.parametrize("length", [2, 1000, 4097, 8192])
def test_long_rows(simulator, length: int) -> None:
    """A row is sorted whole in registers up to 8192 elements (longer than a scan's looped chunk); longer ones in
    chunks, merged (tests/test_numpy_long_sort.py)."""
    x = values((2, length), np.float32, length)
    got = tt.jit(lambda a: (np.sort(a), np.argsort(a)))(x)
    same(got[0], np.sort(x, kind="stable"))
    same(got[1], np.argsort(x, kind="stable"))


@tt.jit
def top_two_gap(x):
    s = np.sort(x * 2.0 + 1.0)
    return s[..., -1] - s[..., -2], np.argsort(x * 2.0 + 1.0)


def test_sort_fuses_with_its_producer_and_shares_the_network(simulator) -> None:
    """The elementwise producer runs in the sort's kernel, and a sort and an argsort of one row are one network."""
    x = values((5, 40), np.float32, 3)
    assert top_two_gap.compile(x).num_launches == 2  # the sort and argsort, then the slices of the sorted rows
    gap, order = top_two_gap(x)
    s = np.sort(x * 2.0 + 1.0)
    with np.errstate(invalid="ignore"):  # inf - inf
        np.testing.assert_array_equal(gap, s[..., -1] - s[..., -2])
    np.testing.assert_array_equal(order, np.argsort(x * 2.0 + 1.0, kind="stable"))


@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted(simulator, side: str) -> None:
    a = np.sort(values((37,), np.float32, 1))
    v = values((4, 6), np.float32, 2)
    program = tt.jit(lambda a, v: (np.searchsorted(a, v, side), a.searchsorted(0.1, side), tt.searchsorted(a, np.nan)))
    got = program(a, v)
    same(got[0], np.searchsorted(a, v, side))
    same(got[1], np.searchsorted(a, 0.1, side))
    same(got[2], np.searchsorted(a, np.nan))
    unsorted = values((20,), np.int32, 4)
    order = np.argsort(unsorted, kind="stable").astype(np.int32)
    got = tt.jit(lambda a, s, v: np.searchsorted(a, v, side, sorter=s))(unsorted, order, v)
    same(got, np.searchsorted(unsorted, v, side, sorter=order))


@pytest.mark.parametrize(("program", "message"), [
    (lambda x: np.sort(x, kind="bogus"), "sort kind must be one of"),
    (lambda x: np.argsort(x, order="f"), "structured arrays"),
    (lambda x: np.sort(x, axis=2), "out of bounds"),
    (lambda x: np.searchsorted(x, 1.0), "must be 1-d"),
])  # fmt: skip
def test_errors(simulator, program, message: str) -> None:
    with pytest.raises(CompilationError, match=message):
        tt.jit(program)(np.zeros((3, 4), np.float32))


def sorts(x, y):
    return np.sort(x, axis=0), np.argsort(x * y), tt.sort(x, descending=True), np.sort(x.reshape(-1))


@needs_ptxas
@pytest.mark.parametrize("toolchain", TOOLCHAINS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16, np.int32, np.uint8, np.float64],
                         ids=lambda d: np.dtype(d).name)
def test_sort_kernels_lower_to_ptx_that_ptxas_takes(dtype: Any, toolchain: str) -> None:
    x = np.zeros((4, 96), dtype)
    module = trace(sorts, [x, x])
    fuse_module(module, True)
    for spec in fusion_to_kernels(module):
        lower_to_llvm(spec.module, None)
        assemble_ptx(compile_llvm_module(spec.module, arch="sm_90", toolchain=toolchain)["ptx"], "sm_90")
