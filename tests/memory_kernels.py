"""More differential cases in the form of language_kernels.py (one program, inputs then the output array):
tensor descriptors made in the kernel and on the host (out-of-range blocks, NaN padding), integer atomics
(whose results do not depend on the order lanes run in), random numbers (bit for bit) and float8 dots.
Shared by test_language.py (against NumPy) and test_language_gpu.py (simulator against GPU)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from language_kernels import RNG, Case, f32
from test_random import reference_philox, reference_uniform

import tinyton as triton
import tinyton.language as tl
from tinyton.dtypes import float8e4nv
from tinyton.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def descriptor_kernel(x, M, N, o_ptr, BM: tl.constexpr, BN: tl.constexpr):
    """Four blocks of x around its corner (M - BM/2, N - BN/2), half of each outside, into o."""
    if isinstance(x, tl.tensor_descriptor):
        d = x
    else:
        d = tl.make_tensor_descriptor(x, [M, N], [N, 1], [BM, BN])
    out = tl.make_tensor_descriptor(o_ptr, [2 * BM, 2 * BN], [2 * BN, 1], [BM, BN])
    for i in tl.static_range(2):
        for j in tl.static_range(2):
            out.store([i * BM, j * BN], d.load([M - BM // 2 + (i - 1) * BM + BM // 2, N - BN // 2 + (j - 1) * BN + BN // 2]))


def descriptor_reference(x, m: int, n: int, bm: int, bn: int, fill: float) -> np.ndarray:
    x = x.base if isinstance(x, TensorDescriptor) else x
    padded = np.full((m + bm, n + bn), fill, np.float32)
    padded[:m, :n] = x
    return padded[m - bm : m + bm, n - bn : n + bn]


def descriptor_case(host: bool, padding: str = "zero") -> Case:
    x = f32(24, 40)
    arg = TensorDescriptor(x, [24, 40], [40, 1], [8, 16], padding) if host else x
    fill = 0.0 if padding == "zero" else np.nan
    ref = lambda x, *_: descriptor_reference(x, 24, 40, 8, 16, fill)
    return Case(descriptor_kernel, [arg, 24, 40], ref, np.zeros((16, 32), np.float32), {"BM": 8, "BN": 16})


@triton.jit
def atomics_kernel(x_ptr, o_ptr, N: tl.constexpr, BINS: tl.constexpr):
    """o[:BINS] histogram of x % BINS, o[BINS:2BINS] max per bin, o[2BINS:3BINS] xor per bin, o[3BINS]
    a compare-and-swap, o[3BINS + 1] the old value it saw plus an atomic_or."""
    x = tl.load(x_ptr + tl.arange(0, N))
    bins = x % BINS
    tl.atomic_add(o_ptr + bins, 1)
    tl.atomic_max(o_ptr + BINS + bins, x)
    tl.atomic_xor(o_ptr + 2 * BINS + bins, x, sem="relaxed")
    old = tl.atomic_cas(o_ptr + 3 * BINS, 0, 7)
    tl.atomic_or(o_ptr + 3 * BINS + 1, old + 8, scope="cta")


def atomics_case() -> Case:
    x = RNG.integers(0, 1 << 20, 256, dtype=np.int32)

    def ref(x: np.ndarray) -> np.ndarray:
        o = np.zeros(3 * 16 + 2, np.int32)
        np.add.at(o, x % 16, 1)
        np.maximum.at(o, 16 + x % 16, x)
        np.bitwise_xor.at(o, 32 + x % 16, x)
        o[48], o[49] = 7, 8
        return o

    return Case(atomics_kernel, [x], ref, np.zeros(3 * 16 + 2, np.int32), {"N": 256, "BINS": 16}, 0, 0)


@triton.jit
def random_kernel(offsets_ptr, seed, o_ptr, N: tl.constexpr):
    offs = tl.load(offsets_ptr + tl.arange(0, N))
    tl.store(o_ptr + tl.arange(0, N), tl.randint(seed, offs).to(tl.float32, bitcast=True))
    tl.store(o_ptr + N + tl.arange(0, N), tl.rand(seed, offs))


def random_case() -> Case:
    offsets, seed = RNG.integers(0, 1 << 30, 128, dtype=np.int32), 1234567

    def ref(offsets: np.ndarray, seed: int) -> np.ndarray:
        bits = reference_philox((seed, 0), [offsets, 0, 0, 0])[0]
        return np.concatenate([bits.view(np.float32), reference_uniform(bits)])

    return Case(random_kernel, [offsets, seed], ref, np.zeros(256, np.float32), {"N": 128}, 0, 0)


@triton.jit
def float8_dot_kernel(a_ptr, b_ptr, o_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    m, n, k = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + m[:, None] * K + k[None, :])
    b = tl.load(b_ptr + k[:, None] * N + n[None, :])
    tl.store(o_ptr + m[:, None] * N + n[None, :], tl.dot(a, b))


def float8_dot_case() -> Case:
    a, b = f32(32, 32).astype(float8e4nv.np), f32(32, 16).astype(float8e4nv.np)
    ref = lambda a, b: a.astype(np.float32) @ b.astype(np.float32)
    return Case(float8_dot_kernel, [a, b], ref, np.zeros((32, 16), np.float32), {"M": 32, "N": 16, "K": 32}, 1e-5, 1e-5)


MEMORY_CASES: dict[str, Callable[[], Case]] = {
    "descriptor-made": lambda: descriptor_case(host=False),
    "descriptor-host": lambda: descriptor_case(host=True),
    "descriptor-host-nan": lambda: descriptor_case(host=True, padding="nan"),
    "atomics-int": atomics_case,
    "random": random_case,
    "dot-float8": float8_dot_case,
}
