"""`tl.sort`, `tl.flip`, `tl.gather`, `tl.histogram` and `tl.cumsum`'s dtypes on the simulator: random shapes
and dtypes against NumPy, and the edge cases (NaN in a sort, an index out of range, masked histograms, bad
arguments). The fixed cases of indexing_kernels.py also run through ptxas and on the GPU (test_language*.py)."""

from __future__ import annotations

import numpy as np
import pytest
from indexing_kernels import bitonic_sort

import tinyton as triton
import tinyton.language as tl
from tinyton.runtime.simulator import SimulatorError

DTYPES = [np.float32, np.float16, np.int32, np.int8, np.uint16, np.int64]


@triton.jit
def sort_flip_kernel(x_ptr, s_ptr, f_ptr, M: tl.constexpr, N: tl.constexpr, DESC: tl.constexpr, DIM: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + offs)
    tl.store(s_ptr + offs, tl.sort(x, descending=DESC))
    tl.store(f_ptr + offs, tl.flip(x, DIM))


@pytest.mark.parametrize("seed", range(6))
def test_sort_and_flip_random_shapes_and_dtypes(seed):
    rng = np.random.default_rng(seed)
    m, n = 1 << int(rng.integers(0, 4)), 1 << int(rng.integers(1, 9))
    dtype = DTYPES[seed]
    x = (rng.standard_normal((m, n)) * 50).astype(dtype) if np.dtype(dtype).kind == "f" else rng.integers(
        np.iinfo(dtype).min // 2 if np.iinfo(dtype).min else 0, np.iinfo(dtype).max // 2, (m, n)).astype(dtype)
    descending, dim = bool(seed % 2), seed % 2
    s, f = np.zeros_like(x), np.zeros_like(x)
    sort_flip_kernel[(1,)](x, s, f, M=m, N=n, DESC=descending, DIM=dim)
    want = np.sort(x, axis=1)
    np.testing.assert_array_equal(s, want[:, ::-1] if descending else want)
    np.testing.assert_array_equal(f, np.flip(x, dim))


def test_sort_with_nans_gives_tritons_network_result():
    x = np.array([[3.0, np.nan, 1.0, 2.0, np.nan, -1.0, 0.5, 7.0]], np.float32)
    s, f = np.zeros_like(x), np.zeros_like(x)
    sort_flip_kernel[(1,)](x, s, f, M=1, N=8, DESC=False, DIM=1)
    np.testing.assert_array_equal(s, bitonic_sort(x))  # NaN positions included (assert_array_equal: NaN == NaN)
    np.testing.assert_array_equal(f, x[:, ::-1])


@triton.jit
def gather_kernel(x_ptr, i_ptr, o_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :])
    offs = tl.arange(0, M)[:, None] * K + tl.arange(0, K)[None, :]
    tl.store(o_ptr + offs, tl.gather(x, tl.load(i_ptr + offs), -1))


@pytest.mark.parametrize("seed", range(4))
def test_gather_random_shapes_and_index_dtypes(seed):
    rng = np.random.default_rng(seed)
    m, n, k = (1 << int(rng.integers(0, 5)) for _ in range(3))
    n = max(n, 2)
    x = rng.standard_normal((m, n)).astype(np.float32)
    index = rng.integers(0, n, (m, k)).astype([np.int32, np.int64, np.int16, np.uint8][seed])
    out = np.zeros((m, k), np.float32)
    gather_kernel[(1,)](x, index, out, M=m, N=n, K=k)
    np.testing.assert_array_equal(out, np.take_along_axis(x, index.astype(np.int64), 1))


def test_gather_index_out_of_range_is_an_error_on_the_simulator():
    x = np.zeros((2, 8), np.float32)
    index = np.zeros((2, 4), np.int32)
    index[1, 2] = 8
    with pytest.raises(SimulatorError, match=r"tt.gather index 8 out of range \[0, 8\).*lane \(1, 2\)"):
        gather_kernel[(1,)](x, index, np.zeros((2, 4), np.float32), M=2, N=8, K=4)


@triton.jit
def histogram_kernel(x_ptr, m_ptr, o_ptr, N: tl.constexpr, BINS: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(o_ptr + tl.arange(0, BINS), tl.histogram(tl.load(x_ptr + offs), BINS, mask=tl.load(m_ptr + offs) != 0))


@pytest.mark.parametrize("seed", range(4))
def test_histogram_random_sizes_with_a_mask(seed):
    rng = np.random.default_rng(seed)
    n, bins = 1 << int(rng.integers(4, 12)), 1 << int(rng.integers(1, 9))
    x = rng.integers(-3, bins + 3, n).astype([np.int32, np.int64, np.int16, np.int8][seed])
    mask = rng.integers(0, 2, n).astype(np.int32)
    out = np.zeros(bins, np.int32)
    histogram_kernel[(1,)](x, mask, out, N=n, BINS=bins)
    keep = (mask != 0) & (x >= 0) & (x < bins)
    np.testing.assert_array_equal(out, np.bincount(x[keep].astype(np.int64), minlength=bins))


@triton.jit
def bad_call_kernel(x_ptr, o_ptr, OP: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, 16))
    if OP == "histogram-float":
        y = tl.histogram(x, 16)
    elif OP == "histogram-bins":
        y = tl.histogram(x.to(tl.int32), 12)
    elif OP == "topk":
        y = tl.topk(x, 3)
    elif OP == "gather-rank":
        y = tl.gather(x, tl.arange(0, 4)[:, None], 0)
    else:
        y = tl.sort(x, dim=2)
    tl.store(o_ptr + tl.arange(0, 16), y)


@pytest.mark.parametrize(
    "op, message",
    [
        ("histogram-float", "tl.histogram counts a tile of integers"),
        ("histogram-bins", "power of two"),
        ("topk", "k must be a constexpr power of two up to 16"),
        ("gather-rank", "the index shape \\[4, 1\\] must have the source's rank"),
        ("sort-dim", "dim must be a constexpr int in \\[-1, 1\\)"),
    ],
)
def test_bad_arguments_are_compilation_errors(op, message):
    x = np.zeros(16, np.float32)
    with pytest.raises(triton.CompilationError, match=message):
        bad_call_kernel.compile(x, x, OP=op)


@triton.jit
def cumsum_kernel(x_ptr, o_ptr, N: tl.constexpr, AS_F32: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    y = tl.cumsum(x, 0, dtype=tl.float32) if AS_F32 else tl.cumsum(x, 0)
    tl.store(o_ptr + offs, y)


def test_cumsum_of_narrow_ints_runs_in_int32_and_takes_a_dtype():
    x = np.full(256, 100, np.int8)
    out = np.zeros(256, np.int32)
    cumsum_kernel[(1,)](x, out, N=256, AS_F32=False)
    np.testing.assert_array_equal(out, np.arange(1, 257) * 100)
    out = np.zeros(256, np.float32)
    cumsum_kernel[(1,)](x, out, N=256, AS_F32=True)
    np.testing.assert_array_equal(out, np.arange(1, 257) * 100.0)
