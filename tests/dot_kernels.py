"""Kernels for the bf16 and tt.dot tests (kernels compile from source, so they live in a file)."""

from __future__ import annotations

import tinyton as tt


@tt.jit
def bf16_math(x_ptr, y_ptr, i_ptr, h_ptr, o_ptr, s_ptr, N, BLOCK: tt.constexpr):
    offs = tt.arange(0, BLOCK)
    m = offs < N
    x = tt.load(x_ptr + offs, mask=m)
    y = tt.load(y_ptr + offs, mask=m, other=1.0)
    i = tt.load(i_ptr + offs, mask=m)
    h = tt.load(h_ptr + offs, mask=m)
    z = x * y + 1.5  # bf16: each op in f32, rounded
    z = tt.where(z > 2.0, z / y, tt.exp(z)) - tt.maximum(x, -x)
    z = z + i.to(tt.bfloat16) + (x > 0).to(tt.bfloat16) + h.to(tt.bfloat16) + x.to(tt.int32)
    tt.store(o_ptr + offs, z, mask=m)
    tt.store(s_ptr, tt.sum(tt.where(m, x, 0.0), axis=0))


@tt.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    BLOCK_M: tt.constexpr, BLOCK_N: tt.constexpr, BLOCK_K: tt.constexpr,
    PRECISION: tt.constexpr, OUT_F16: tt.constexpr,
):
    """C = A @ B over a K loop, masked at every edge (Triton's tutorial kernel, row-major operands)."""
    pid_m, pid_n = tt.program_id(0), tt.program_id(1)
    rm = pid_m * BLOCK_M + tt.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tt.arange(0, BLOCK_N)
    rk = tt.arange(0, BLOCK_K)
    if OUT_F16:
        acc = tt.zeros((BLOCK_M, BLOCK_N), tt.float16)
    else:
        acc = tt.zeros((BLOCK_M, BLOCK_N), tt.float32)
    for k0 in range(0, K, BLOCK_K):
        ka, kb = k0 + rk[None, :], k0 + rk[:, None]
        a = tt.load(a_ptr + rm[:, None] * K + ka, mask=(rm[:, None] < M) & (ka < K), other=0.0)
        b = tt.load(b_ptr + kb * N + rn[None, :], mask=(kb < K) & (rn[None, :] < N), other=0.0)
        acc = tt.dot(a, b, acc, input_precision=PRECISION)
    tt.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@tt.jit
def dot_accumulate(a_ptr, b_ptr, c_ptr, BLOCK: tt.constexpr):
    """`acc += tt.dot(a, b)` with keyword arguments, then a bf16 result through `out_dtype` fallback."""
    r = tt.arange(0, BLOCK)
    a = tt.load(a_ptr + r[:, None] * BLOCK + r[None, :])
    b = tt.load(b_ptr + r[:, None] * BLOCK + r[None, :])
    acc = tt.zeros((BLOCK, BLOCK), tt.float32)
    acc += tt.dot(a, b, input_precision="ieee")
    acc += tt.dot(a, b).to(tt.bfloat16)
    tt.store(c_ptr + r[:, None] * BLOCK + r[None, :], acc)


@tt.jit
def dot_mismatch(a_ptr, BLOCK: tt.constexpr):
    r = tt.arange(0, BLOCK)
    a = tt.load(a_ptr + r[:, None] * BLOCK + r[None, :])
    b = tt.load(a_ptr + r[:, None] * BLOCK + r[None, :] // 2)
    c = tt.dot(a, tt.load(a_ptr + tt.arange(0, 32)[:, None] + r[None, :]))  # K 16 vs 32
    tt.store(a_ptr + r[:, None] * BLOCK + r[None, :], c + b)


@tt.jit
def dot_small(a_ptr, BLOCK: tt.constexpr):
    r = tt.arange(0, BLOCK)
    a = tt.load(a_ptr + r[:, None] * BLOCK + r[None, :])
    tt.store(a_ptr + r[:, None] * BLOCK + r[None, :], tt.dot(a, a))


@tt.jit
def dot_bad_precision(a_ptr, BLOCK: tt.constexpr):
    r = tt.arange(0, BLOCK)
    a = tt.load(a_ptr + r[:, None] * BLOCK + r[None, :])
    tt.store(a_ptr + r[:, None] * BLOCK + r[None, :], tt.dot(a, a, input_precision="tf16"))


@tt.jit
def matmul_nt_kernel(
    a_ptr, w_ptr, c_ptr, M, N, K,
    BLOCK_M: tt.constexpr, BLOCK_N: tt.constexpr, BLOCK_K: tt.constexpr, PRECISION: tt.constexpr,
):
    """C = A @ W.T for a row-major W [N, K] (a linear layer's weight): B is read K-major, W's blocks as stored."""
    pid_m, pid_n = tt.program_id(0), tt.program_id(1)
    rm = pid_m * BLOCK_M + tt.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tt.arange(0, BLOCK_N)
    rk = tt.arange(0, BLOCK_K)
    acc = tt.zeros((BLOCK_M, BLOCK_N), tt.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk[None, :]
        a = tt.load(a_ptr + rm[:, None] * K + kk, mask=(rm[:, None] < M) & (kk < K), other=0.0)
        w = tt.load(w_ptr + rn[:, None] * K + kk, mask=(rn[:, None] < N) & (kk < K), other=0.0)
        acc = tt.dot(a, tt.trans(w), acc, input_precision=PRECISION)
    tt.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))
