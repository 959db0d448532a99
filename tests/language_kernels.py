"""Kernels written as a Triton user would (`import tinyton.language as tl`), with NumPy references:
shared by the simulator tests (test_language.py) and the GPU differential test (test_language_gpu.py).

Each case is (kernel, inputs, reference, launch kwargs): the kernel takes the input arrays then an
output array, runs on one program, and writes `reference(*inputs)` into the output.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import tinyton as triton
import tinyton.language as tl

RNG = np.random.default_rng(7)


@dataclass
class Case:
    kernel: Any
    inputs: list[np.ndarray]
    reference: Callable[..., np.ndarray]
    out: np.ndarray
    constexprs: dict[str, Any] = field(default_factory=dict)
    rtol: float = 1e-5
    atol: float = 1e-6


def f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


# ---- math ----------------------------------------------------------------------------------------


@triton.jit
def unary_kernel(x_ptr, o_ptr, N: tl.constexpr, OP: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    if OP == "exp2":
        y = tl.exp2(x)
    elif OP == "log2":
        y = tl.log2(tl.abs(x) + 0.5)
    elif OP == "sin":
        y = tl.sin(x)
    elif OP == "cos":
        y = tl.math.cos(x)
    elif OP == "floor":
        y = tl.floor(x * 3.0)
    elif OP == "ceil":
        y = tl.math.ceil(x * 3.0)
    elif OP == "erf":
        y = tl.erf(x)
    elif OP == "sigmoid":
        y = tl.sigmoid(x)
    elif OP == "sqrt_rn":
        y = tl.sqrt_rn(tl.abs(x))
    elif OP == "clamp":
        y = tl.clamp(x, -0.5, 0.5)
    elif OP == "div_rn":
        y = tl.div_rn(x, 3.0)
    elif OP == "fma":
        y = tl.fma(x, x, 1.0)
    else:
        y = tl.math.exp(x)
    tl.store(o_ptr + offs, y)


UNARY_REFERENCES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "exp2": np.exp2,
    "log2": lambda x: np.log2(np.abs(x) + np.float32(0.5)),
    "sin": np.sin,
    "cos": np.cos,
    "floor": lambda x: np.floor(x * np.float32(3)),
    "ceil": lambda x: np.ceil(x * np.float32(3)),
    "erf": np.vectorize(math.erf, otypes=[np.float32]),
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "sqrt_rn": lambda x: np.sqrt(np.abs(x)),
    "clamp": lambda x: np.clip(x, -0.5, 0.5),
    "div_rn": lambda x: x / np.float32(3),
    "fma": lambda x: x * x + np.float32(1),
    "exp": np.exp,
}


def unary_case(op: str) -> Case:
    x = f32(256)
    return Case(unary_kernel, [x], UNARY_REFERENCES[op], np.zeros(256, np.float32), {"N": 256, "OP": op}, 2e-6, 2e-6)


@triton.jit
def umulhi_kernel(a_ptr, b_ptr, o_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(o_ptr + offs, tl.umulhi(tl.load(a_ptr + offs), tl.load(b_ptr + offs)))


def umulhi_case() -> Case:
    a, b = (RNG.integers(-(2**31), 2**31, 128, dtype=np.int64).astype(np.int32) for _ in range(2))

    def ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        wide = a.astype(np.uint32).astype(np.uint64) * b.astype(np.uint32).astype(np.uint64)
        return (wide >> np.uint64(32)).astype(np.uint32).astype(np.int32)

    return Case(umulhi_kernel, [a, b], ref, np.zeros(128, np.int32), {"N": 128})


@triton.jit
def scalar_minmax_kernel(x_ptr, o_ptr, n, N: tl.constexpr):
    offs = tl.arange(0, N)
    hi = min(n, N // 2)  # builtin min on a runtime scalar
    lo = max(n - 100, 3)
    mask = (offs < hi) & (offs >= lo)
    tl.store(o_ptr + offs, tl.load(x_ptr + offs) + tl.cdiv(n, 16), mask=mask)


# ---- reductions and scans ------------------------------------------------------------------------


@triton.jit
def _add(a, b):
    return a + b


@triton.jit
def _max_and_count(v1, c1, v2, c2):
    return tl.maximum(v1, v2), c1 + c2


@triton.jit
def reduce_kernel(x_ptr, o_ptr, M: tl.constexpr, N: tl.constexpr, OP: tl.constexpr):
    rows = tl.arange(0, M)[:, None]
    cols = tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + rows * N + cols)
    out = tl.arange(0, M)
    if OP == "argmax":
        y = tl.argmax(x, axis=1)
    elif OP == "argmin":
        y = tl.argmin(x, 1, tie_break_left=True)
    elif OP == "reduce":
        y = tl.reduce(x, 1, _add)
    elif OP == "keep_dims":
        y = tl.reshape(tl.max(x, axis=1, keep_dims=True), M)
    elif OP == "max_indices":
        v, i = tl.max(x, axis=1, return_indices=True)
        y = v + i
    elif OP == "tuple":
        v, c = tl.reduce((x, tl.full((M, N), 1, tl.int32)), 1, _max_and_count)
        y = v * c
    elif OP == "xor_sum":
        y = tl.xor_sum(x, axis=1)
    else:
        y = tl.sum(x, axis=1)
    tl.store(o_ptr + out, y)


REDUCE_REFERENCES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "argmax": lambda x: np.argmax(x, axis=1).astype(np.int32),
    "argmin": lambda x: np.argmin(x, axis=1).astype(np.int32),
    "reduce": lambda x: x.sum(axis=1),
    "keep_dims": lambda x: x.max(axis=1),
    "max_indices": lambda x: x.max(axis=1) + np.argmax(x, axis=1),
    "tuple": lambda x: x.max(axis=1) * x.shape[1],
    "xor_sum": lambda x: np.bitwise_xor.reduce(x, axis=1),
}


def reduce_case(op: str, dtype: type = np.int32, m: int = 16, n: int = 64) -> Case:
    x = RNG.integers(-50, 50, (m, n)).astype(dtype)  # small ints: ties, and exact float sums
    out_dtype = np.int32 if op in ("argmax", "argmin") else dtype
    return Case(reduce_kernel, [x], REDUCE_REFERENCES[op], np.zeros(m, out_dtype), {"M": m, "N": n, "OP": op})


@triton.jit
def scan_kernel(x_ptr, o_ptr, M: tl.constexpr, N: tl.constexpr, OP: tl.constexpr):
    rows = tl.arange(0, M)[:, None]
    cols = tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + rows * N + cols)
    if OP == "cumsum":
        y = tl.cumsum(x, axis=1)
    elif OP == "cumsum0":
        y = tl.cumsum(x, 0)
    elif OP == "reverse":
        y = tl.cumsum(x, axis=1, reverse=True)
    elif OP == "cumprod":
        y = tl.cumprod(x % 3 - 1, axis=1)
    else:
        y = tl.associative_scan(x, 1, _add)
    tl.store(o_ptr + rows * N + cols, y)


SCAN_REFERENCES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "cumsum": lambda x: np.cumsum(x, axis=1, dtype=x.dtype),
    "cumsum0": lambda x: np.cumsum(x, axis=0, dtype=x.dtype),
    "reverse": lambda x: np.cumsum(x[:, ::-1], axis=1, dtype=x.dtype)[:, ::-1],
    "cumprod": lambda x: np.cumprod(np.fmod(x, 3) - 1, axis=1, dtype=x.dtype),
    "scan": lambda x: np.cumsum(x, axis=1, dtype=x.dtype),
}


def scan_case(op: str, m: int = 8, n: int = 64) -> Case:
    x = RNG.integers(0, 9, (m, n)).astype(np.int32)
    return Case(scan_kernel, [x], SCAN_REFERENCES[op], np.zeros((m, n), np.int32), {"M": m, "N": n, "OP": op})


# ---- shapes --------------------------------------------------------------------------------------


@triton.jit
def shape_kernel(x_ptr, o_ptr, M: tl.constexpr, N: tl.constexpr, OP: tl.constexpr):
    rows = tl.arange(0, M)[:, None]
    cols = tl.arange(0, N)[None, :]
    x = tl.load(x_ptr + rows * N + cols)
    t_rows = tl.arange(0, N)[:, None]
    t_cols = tl.arange(0, M)[None, :]
    if OP == "T":
        tl.store(o_ptr + t_rows * M + t_cols, x.T)
    elif OP == "trans":
        tl.store(o_ptr + t_rows * M + t_cols, tl.trans(x))
    elif OP == "permute":
        tl.store(o_ptr + t_rows * M + t_cols, tl.permute(x, (1, 0)))
    elif OP == "reshape":
        flat = tl.reshape(x, (M * N,))
        tl.store(o_ptr + tl.arange(0, M * N), flat * 2)
    elif OP == "view":
        y = tl.view(x, N, M)
        tl.store(o_ptr + t_rows * M + t_cols, y + 1)
    elif OP == "join_split":
        a, b = tl.split(tl.join(x, x * 2))
        tl.store(o_ptr + rows * N + cols, a + b)
    elif OP == "join":
        j = tl.join(x, -x)  # (M, N, 2) in row-major order: x and -x interleaved
        tl.store(o_ptr + tl.arange(0, 2 * M * N), tl.reshape(j, 2 * M * N))
    elif OP == "row_groups":  # rows in groups of 4, each group summed: a reshape that splits the row dimension
        g = tl.arange(0, M // 4)[:, None]
        tl.store(o_ptr + g * N + cols, tl.sum(tl.reshape(x, (M // 4, 4, N)), axis=1))
    elif OP == "regroup":  # each row cut in halves, every half a row: [2M, N/2]
        halves = tl.reshape(x, (2 * M, N // 2)) + tl.arange(0, 2 * M)[:, None]
        tl.store(o_ptr + tl.arange(0, 2 * M)[:, None] * (N // 2) + tl.arange(0, N // 2)[None, :], halves)
    elif OP == "rank3":
        k = tl.arange(0, 2)[None, None, :]
        x3 = tl.broadcast_to(tl.expand_dims(x, 2), (M, N, 2)) + k
        y = tl.sum(x3, axis=2)
        tl.store(o_ptr + rows * N + cols, y)
    else:
        tl.store(o_ptr + rows * N + cols, x)


SHAPE_REFERENCES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "T": lambda x: x.T.copy(),
    "trans": lambda x: x.T.copy(),
    "permute": lambda x: x.T.copy(),
    "reshape": lambda x: x.reshape(-1) * 2,
    "view": lambda x: x.reshape(x.shape[1], x.shape[0]) + 1,
    "join_split": lambda x: x * 3,
    "join": lambda x: np.stack([x, -x], axis=-1).reshape(-1),
    "rank3": lambda x: 2 * x + 1,
    "row_groups": lambda x: x.reshape(x.shape[0] // 4, 4, x.shape[1]).sum(1),
    "regroup": lambda x: x.reshape(2 * x.shape[0], x.shape[1] // 2) + np.arange(2 * x.shape[0])[:, None],
}


def shape_case(op: str, m: int = 16, n: int = 32) -> Case:
    x = RNG.integers(-100, 100, (m, n)).astype(np.int32)
    size = {"join": 2 * m * n, "row_groups": m * n // 4}.get(op, m * n)
    return Case(shape_kernel, [x], SHAPE_REFERENCES[op], np.zeros(size, np.int32), {"M": m, "N": n, "OP": op})


# ---- casts and hints -----------------------------------------------------------------------------


@triton.jit
def bitcast_kernel(x_ptr, o_ptr, N: tl.constexpr):
    offs = tl.multiple_of(tl.arange(0, N), 16)
    offs = tl.max_contiguous(offs, 16)
    x = tl.load(x_ptr + offs, cache_modifier=".cg", eviction_policy="evict_last")
    bits = x.to(tl.int32, bitcast=True)
    y = tl.cast(bits ^ -0x80000000, tl.float32, bitcast=True)  # flips the sign bit
    tl.store(o_ptr + offs, y.cast(tl.float32), cache_modifier=".cs")


ALL_CASES: dict[str, Callable[[], Case]] = {
    **{f"unary-{op}": (lambda op=op: unary_case(op)) for op in UNARY_REFERENCES},
    "umulhi": umulhi_case,
    **{f"reduce-{op}": (lambda op=op: reduce_case(op)) for op in REDUCE_REFERENCES},
    "reduce-argmax-f32": lambda: reduce_case("argmax", np.float32),
    "reduce-argmin-wide": lambda: reduce_case("argmin", np.float32, 4, 1024),
    **{f"scan-{op}": (lambda op=op: scan_case(op)) for op in SCAN_REFERENCES},
    "scan-wide": lambda: scan_case("cumsum", 2, 512),
    **{f"shape-{op}": (lambda op=op: shape_case(op)) for op in SHAPE_REFERENCES},
    "bitcast": lambda: Case(bitcast_kernel, [f32(64)], lambda x: -x, np.zeros(64, np.float32), {"N": 64}),
}
"""Every differential case by name."""


def run(case: Case, **launch: Any) -> np.ndarray:
    """Launch the case's kernel on one program; its output array."""
    case.kernel[(1,)](*case.inputs, case.out, **case.constexprs, **launch)
    return case.out


# ---- dtypes --------------------------------------------------------------------------------------


@triton.jit
def int_dtype_kernel(x_ptr, y_ptr, o_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    z = x * 3 + y
    z = tl.maximum(z, y) ^ (x >> 1)
    z = z + x // (y | 1) + tl.where(x < y, 1, 0).to(x.dtype)
    tl.store(o_ptr + offs, z.to(o_ptr.dtype.element_ty))


def int_dtype_case(dtype: type) -> Case:
    info = np.iinfo(dtype)
    lo = 0 if info.min == 0 else info.min // 4
    x, y = (RNG.integers(max(lo, 0) if dtype != np.int64 else 0, info.max // 8, 256, dtype=dtype) for _ in range(2))
    x = x if info.min == 0 else (x - info.max // 16).astype(dtype)  # some negatives for signed shifts

    def ref(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            z = (x * dtype(3) + y).astype(dtype)
            z = np.maximum(z, y) ^ (x >> dtype(1))
            d = y | dtype(1)  # Triton's // truncates toward zero
            q = np.floor_divide(x, d) + ((np.remainder(x, d) != 0) & ((x < 0) != (d < 0))).astype(dtype)
            return (z + q + (x < y).astype(dtype)).astype(dtype)

    return Case(int_dtype_kernel, [x, y], ref, np.zeros(256, dtype), {"N": 256})


@triton.jit
def float64_kernel(x_ptr, y_ptr, o_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    y = tl.load(y_ptr + offs)
    s = tl.sum(x * y, axis=0)
    tl.store(o_ptr + offs, tl.fma(x, y, tl.sqrt(tl.abs(x))) + s / 1e10 + tl.maximum(x, y) * 0.5)


@triton.jit
def cast_kernel(x_ptr, o_ptr, N: tl.constexpr, TO: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    tl.store(o_ptr + offs, x.to(TO).to(tl.float32))


def cast_case(to: Any) -> Case:
    x = (RNG.standard_normal(256) * 100).astype(np.float32)
    x[:4] = [1e6, -1e6, 0.5, -0.5]

    def ref(x: np.ndarray) -> np.ndarray:
        np_to = to.np
        if np_to.kind in "iu":
            info = np.iinfo(np_to)
            return np.clip(np.trunc(x.astype(np.float64)), info.min, info.max).astype(np_to).astype(np.float32)
        limit = {"float8e4nv": 448.0, "float8e5": 57344.0}.get(to.name)
        y = np.clip(x, -limit, limit) if limit else x
        with np.errstate(over="ignore"):  # 1e6 is inf in float16, on the GPU too
            return y.astype(np_to).astype(np.float32)

    return Case(cast_kernel, [x], ref, np.zeros(256, np.float32), {"N": 256, "TO": to})


@triton.jit
def int64_offsets_kernel(x_ptr, o_ptr, n, N: tl.constexpr):
    offs = tl.arange(0, N).to(tl.int64) + (n - n)  # n is an int64 argument (beyond int32)
    big = tl.cast(offs, tl.int64) * 4294967296
    tl.store(o_ptr + offs, (tl.load(x_ptr + offs) + (big >> 32)).to(tl.int32) + tl.sum(tl.full((N,), 1, tl.int8), 0))


ALL_CASES.update(
    {
        **{
            f"dtype-{np.dtype(d).name}": (lambda d=d: int_dtype_case(d))
            for d in (np.int8, np.int16, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)
        },
        "dtype-float64": lambda: Case(
            float64_kernel,
            [RNG.standard_normal(128), RNG.standard_normal(128)],
            lambda x, y: x * y + np.sqrt(np.abs(x)) + (x * y).sum() / 1e10 + np.maximum(x, y) * 0.5,
            np.zeros(128),
            {"N": 128},
            1e-12,
            1e-12,
        ),
        **{
            f"cast-{d.name}": (lambda d=d: cast_case(d))
            for d in (
                tl.int8,
                tl.int16,
                tl.int64,
                tl.uint8,
                tl.uint32,
                tl.float16,
                tl.float64,
                tl.float8e4nv,
                tl.float8e5,
            )
        },
    }
)
