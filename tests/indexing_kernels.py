"""Kernels of `tl.sort`, `tl.topk`, `tl.flip`, `tl.gather`, `tl.histogram` and long scans, with NumPy
references: cases in the form of language_kernels.py, shared by the simulator tests (test_language.py),
`ptxas` and the GPU differential test (test_language_gpu.py).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from language_kernels import Case, scan_case

import tinyton as triton
import tinyton.language as tl

RNG = np.random.default_rng(25)


def bitonic_sort(x: np.ndarray, descending: bool = False) -> np.ndarray:
    """Triton's bitonic network on the last axis (python/triton/language/standard.py), in NumPy: what
    `tl.sort` gives, NaNs included (a comparison with NaN is false)."""
    n = x.shape[-1]
    log_n = n.bit_length() - 1
    index = np.arange(n)
    x = x.copy()
    for stage in range(1, log_n + 1):
        flip = (index >> stage & 1).astype(bool) if stage < log_n else np.full(n, descending)
        for i in reversed(range(stage)):
            partner = x[..., index ^ (1 << i)]
            is_right = (index >> i & 1).astype(bool)
            with np.errstate(invalid="ignore"):
                x = np.where((x > partner) != (flip ^ is_right), partner, x)
    return x


@triton.jit
def sort_kernel(x_ptr, o_ptr, M: tl.constexpr, N: tl.constexpr, OP: tl.constexpr):
    rows = tl.arange(0, M)[:, None]
    cols = tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + rows * N + cols)
    if OP == "sort":
        y = tl.sort(x)
    elif OP == "descending":
        y = tl.sort(x, dim=1, descending=True)
    elif OP == "sort0":
        y = tl.sort(x, 0)
    elif OP == "flip":
        y = tl.flip(x, 1)
    elif OP == "flip0":
        y = tl.flip(x, dim=0)
    else:
        y = tl.cumsum(tl.flip(tl.sort(x), 1), 1)  # a sorted, flipped, scanned row
    tl.store(o_ptr + rows * N + cols, y)


@triton.jit
def topk_kernel(x_ptr, o_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :])
    tl.store(o_ptr + tl.arange(0, M)[:, None] * K + tl.arange(0, K)[None, :], tl.topk(x, K))


SORT_REFERENCES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "sort": lambda x: bitonic_sort(x),
    "descending": lambda x: bitonic_sort(x, descending=True),
    "sort0": lambda x: bitonic_sort(x.T).T,
    "flip": lambda x: x[:, ::-1],
    "flip0": lambda x: x[::-1],
    "chain": lambda x: np.cumsum(np.sort(x, 1)[:, ::-1], 1, dtype=x.dtype),
}


def sort_case(op: str, dtype: type = np.float32, m: int = 4, n: int = 64, nan: bool = False) -> Case:
    if np.dtype(dtype).kind == "f":
        x = (RNG.standard_normal((m, n)) * 100).astype(dtype)
        if nan:
            x[RNG.random((m, n)) < 0.1] = np.nan
    else:
        info = np.iinfo(dtype)
        x = RNG.integers(max(info.min, -1000), min(info.max, 1000), (m, n), endpoint=True).astype(dtype)
    if op == "chain":
        x = RNG.integers(-50, 50, (m, n)).astype(dtype)
    case = Case(sort_kernel, [x], SORT_REFERENCES[op], np.zeros((m, n), dtype), {"M": m, "N": n, "OP": op})
    case.rtol = case.atol = 0
    return case


def topk_case(m: int = 4, n: int = 128, k: int = 8) -> Case:
    x = RNG.permutation(m * n).reshape(m, n).astype(np.float32)  # distinct values: one right answer
    case = Case(topk_kernel, [x], lambda x: -np.sort(-x, 1)[:, :k], np.zeros((m, k), np.float32), {"M": m, "N": n, "K": k})
    case.rtol = case.atol = 0
    return case


@triton.jit
def gather_kernel(x_ptr, i_ptr, o_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, AXIS: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :])
    if AXIS == 1:
        offs = tl.arange(0, M)[:, None] * K + tl.arange(0, K)[None, :]
    else:
        offs = tl.arange(0, K)[:, None] * N + tl.arange(0, N)[None, :]
    index = tl.load(i_ptr + offs)
    tl.store(o_ptr + offs, tl.gather(x, index, AXIS))


def gather_case(axis: int, dtype: type = np.float32, m: int = 16, n: int = 32, k: int = 64, index: type = np.int32) -> Case:
    x = RNG.standard_normal((m, n)).astype(dtype) if np.dtype(dtype).kind == "f" else RNG.integers(-99, 99, (m, n)).astype(dtype)
    shape, size = ((m, k), n) if axis == 1 else ((k, n), m)
    idx = RNG.integers(0, size, shape).astype(index)
    case = Case(
        gather_kernel, [x, idx], lambda x, i: np.take_along_axis(x, i.astype(np.int64), axis), np.zeros(shape, dtype),
        {"M": m, "N": n, "K": k, "AXIS": axis},
    )
    case.rtol = case.atol = 0
    return case


@triton.jit
def histogram_kernel(x_ptr, o_ptr, N: tl.constexpr, BINS: tl.constexpr, MASKED: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, N))
    if MASKED:
        h = tl.histogram(x, BINS, mask=tl.arange(0, N) % 3 != 0)
    else:
        h = tl.histogram(x, BINS)
    tl.store(o_ptr + tl.arange(0, BINS), h)


def histogram_reference(masked: bool, bins: int) -> Callable[[np.ndarray], np.ndarray]:
    def reference(x: np.ndarray) -> np.ndarray:
        keep = (x >= 0) & (x < bins)
        if masked:
            keep &= np.arange(x.size) % 3 != 0
        return np.bincount(x[keep].astype(np.int64), minlength=bins).astype(np.int32)

    return reference


def histogram_case(n: int = 1024, bins: int = 64, masked: bool = False, dtype: type = np.int32) -> Case:
    low = -8 if np.dtype(dtype).kind == "i" else 0
    x = RNG.integers(low, bins + 8, n).astype(dtype)  # some values outside the bins: not counted
    return Case(
        histogram_kernel, [x], histogram_reference(masked, bins), np.zeros(bins, np.int32),
        {"N": n, "BINS": bins, "MASKED": masked},
    )


@triton.jit
def long_scan_kernel(x_ptr, o_ptr, N: tl.constexpr, REVERSE: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(o_ptr + offs, tl.cumsum(tl.load(x_ptr + offs), 0, reverse=REVERSE))


@triton.jit
def _first_nonzero(a_value, a_index, b_value, b_index):
    # Not commutative: the earlier operand must stay on the left.
    take_a = a_value != 0
    return tl.where(take_a, a_value, b_value), tl.where(take_a, a_index, b_index)


@triton.jit
def tuple_scan_kernel(x_ptr, o_ptr, M: tl.constexpr, N: tl.constexpr, REVERSE: tl.constexpr):
    offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + offs)
    index = tl.broadcast_to(tl.arange(0, N)[None, :], (M, N))
    value, where = tl.associative_scan((x, index), 1, _first_nonzero, reverse=REVERSE)
    tl.store(o_ptr + offs, value * 1000 + where)


def first_nonzero(x: np.ndarray, reverse: bool) -> np.ndarray:
    out = np.zeros_like(x)
    for r in range(x.shape[0]):
        cols = range(x.shape[1] - 1, -1, -1) if reverse else range(x.shape[1])
        value = index = None
        for c in cols:
            if value is None or value == 0:
                value, index = x[r, c], c
            out[r, c] = value * 1000 + index
    return out


def long_scan_case(n: int, reverse: bool = False, num_warps: int = 4, dtype: type = np.int32) -> Case:
    x = RNG.integers(-9, 10, n).astype(dtype)  # small ints: exact sums in any order, floats too
    ref = (lambda x: np.cumsum(x[::-1])[::-1].astype(dtype)) if reverse else (lambda x: np.cumsum(x).astype(dtype))
    case = Case(long_scan_kernel, [x], ref, np.zeros(n, dtype), {"N": n, "REVERSE": reverse, "num_warps": num_warps})
    case.rtol = case.atol = 0
    return case


def tuple_scan_case(reverse: bool, m: int = 4, n: int = 256) -> Case:
    x = (RNG.random((m, n)) < 0.05).astype(np.int32) * RNG.integers(1, 9, (m, n)).astype(np.int32)
    case = Case(tuple_scan_kernel, [x], lambda x: first_nonzero(x, reverse), np.zeros((m, n), np.int32),
                {"M": m, "N": n, "REVERSE": reverse, "num_warps": 4})
    case.rtol = case.atol = 0
    return case


INDEXING_CASES: dict[str, Callable[[], Case]] = {
    **{f"sort-{op}": (lambda op=op: sort_case(op)) for op in SORT_REFERENCES},
    "sort-int16": lambda: sort_case("sort", np.int16),
    "sort-uint8-descending": lambda: sort_case("descending", np.uint8, 8, 32),
    "sort-f16": lambda: sort_case("sort", np.float16, 2, 128),
    "sort-nan": lambda: sort_case("sort", np.float32, 4, 64, nan=True),
    "sort-wide": lambda: sort_case("sort", np.float32, 2, 2048),
    "topk": topk_case,
    "gather-axis1": lambda: gather_case(1),
    "gather-axis0": lambda: gather_case(0, np.int32, k=8),
    "gather-int64-index": lambda: gather_case(1, np.float16, 8, 128, 16, np.int64),
    "histogram": histogram_case,
    "histogram-masked": lambda: histogram_case(masked=True),
    "histogram-uint8": lambda: histogram_case(256, 16, dtype=np.uint8),
    "scan-long-4096": lambda: long_scan_case(4096),
    "scan-long-reverse": lambda: long_scan_case(16384, True, 8),
    "scan-long-one-warp": lambda: long_scan_case(2048, num_warps=1),
    "scan-long-f32": lambda: long_scan_case(8192, True, 16, np.float32),
    "scan-axis0-long": lambda: scan_case("cumsum0", 256, 16),
    "scan-reverse-wide": lambda: scan_case("reverse", 4, 2048),
    "scan-tuple": lambda: tuple_scan_case(False),
    "scan-tuple-reverse": lambda: tuple_scan_case(True),
}
"""Every case by name."""
