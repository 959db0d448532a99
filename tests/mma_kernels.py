"""fp16 matmul kernels in Triton's style, shared by the tensor-core tests and `bench/bench_matmul.py`."""

from __future__ import annotations

import numpy as np

import tinyton as tt


@tt.jit
def matmul_f16(
    a_ptr, b_ptr, c_ptr, M, N, K,
    BLOCK_M: tt.constexpr, BLOCK_N: tt.constexpr, BLOCK_K: tt.constexpr, ACC_F16: tt.constexpr,
):
    """C = A @ B for fp16 A (MxK), B (KxN), row-major; accumulates in f32 (or f16), stores C's dtype."""
    rows = tt.program_id(0) * BLOCK_M + tt.arange(0, BLOCK_M)
    cols = tt.program_id(1) * BLOCK_N + tt.arange(0, BLOCK_N)
    ks = tt.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rows[:, None] * K + ks[None, :]
    b_ptrs = b_ptr + ks[:, None] * N + cols[None, :]
    if ACC_F16:
        acc = tt.zeros((BLOCK_M, BLOCK_N), tt.float16)
    else:
        acc = tt.zeros((BLOCK_M, BLOCK_N), tt.float32)
    for k in range(0, K, BLOCK_K):
        a = tt.load(a_ptrs, mask=(rows[:, None] < M) & (k + ks[None, :] < K), other=0.0)
        b = tt.load(b_ptrs, mask=(k + ks[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc = tt.dot(a, b, acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * N
    c_ptrs = c_ptr + rows[:, None] * N + cols[None, :]
    tt.store(c_ptrs, acc, mask=(rows[:, None] < M) & (cols[None, :] < N))


def matmul(
    a, b, c, block: tuple[int, int, int] = (64, 64, 32), num_warps: int = 4, acc_f16: bool = False,
    num_stages: int | None = None,
):
    """Launch `matmul_f16` over C (NumPy arrays or torch tensors); `num_stages` pipelines the K loop."""
    (m, k), (_, n) = a.shape, b.shape
    bm, bn, bk = block
    grid = (tt.cdiv(m, bm), tt.cdiv(n, bn))
    matmul_f16[grid](a, b, c, m, n, k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, ACC_F16=acc_f16, num_warps=num_warps,
                        num_stages=num_stages)
    return c


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """NumPy's product with f32 accumulation (what the tensor cores compute)."""
    return a.astype(np.float32) @ b.astype(np.float32)


@tt.jit
def dot_tile(a_ptr, b_ptr, c_ptr, M: tt.constexpr, N: tt.constexpr, K: tt.constexpr, ACC_F16: tt.constexpr):
    """One M x N x K `tt.dot` of whole row-major tiles, no loop."""
    rows, cols, ks = tt.arange(0, M), tt.arange(0, N), tt.arange(0, K)
    a = tt.load(a_ptr + rows[:, None] * K + ks[None, :])
    b = tt.load(b_ptr + ks[:, None] * N + cols[None, :])
    if ACC_F16:
        acc = tt.zeros((M, N), tt.float16)
    else:
        acc = tt.zeros((M, N), tt.float32)
    tt.store(c_ptr + rows[:, None] * N + cols[None, :], tt.dot(a, b, acc))
