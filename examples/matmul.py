"""Matrix multiply C = A @ B with 2-D tiles: each program computes a BLOCK_M x BLOCK_N tile of C,
looping over K (a runtime bound: an `scf.for` carrying the accumulator) with `tt.dot`. Masks handle the
edges, so any M, N, K work.

Variants, each checked against NumPy with float32 accumulation: fp16 and bf16 operands (tensor cores on
the GPU) accumulating in fp32, fp32 operands exact (`input_precision="ieee"`) and on TF32 tensor cores
(`"tf32"`, 10-bit mantissas: checked loosely), and the array program `a @ b`.
"""

import sys

import ml_dtypes
import numpy as np

import tinyton as tt
from tinyton.runtime import driver


@tt.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    BLOCK_M: tt.constexpr, BLOCK_N: tt.constexpr, BLOCK_K: tt.constexpr, PRECISION: tt.constexpr = "ieee",
):
    rows = tt.program_id(0) * BLOCK_M + tt.arange(0, BLOCK_M)
    cols = tt.program_id(1) * BLOCK_N + tt.arange(0, BLOCK_N)
    ks = tt.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rows[:, None] * K + ks[None, :]
    b_ptrs = b_ptr + ks[:, None] * N + cols[None, :]
    acc = tt.zeros((BLOCK_M, BLOCK_N), tt.float32)
    for k in range(0, K, BLOCK_K):
        a = tt.load(a_ptrs, mask=(rows[:, None] < M) & (k + ks[None, :] < K), other=0.0)
        b = tt.load(b_ptrs, mask=(k + ks[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc += tt.dot(a, b, input_precision=PRECISION)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * N
    tt.store(c_ptr + rows[:, None] * N + cols[None, :], acc, mask=(rows[:, None] < M) & (cols[None, :] < N))


def matmul(a: np.ndarray, b: np.ndarray, block: tuple[int, int, int] = (32, 32, 32), precision: str = "ieee") -> np.ndarray:
    (m, k), (_, n) = a.shape, b.shape
    c = np.empty((m, n), dtype=np.float32)
    bm, bn, bk = block
    grid = (tt.cdiv(m, bm), tt.cdiv(n, bn))
    matmul_kernel[grid](a, b, c, m, n, k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, PRECISION=precision)
    return c


@tt.jit
def matmul_program(a, b):
    return a @ b


VARIANTS = {
    # name: (operand dtype, input_precision, rtol/atol against the float32-accumulated reference)
    "fp16": (np.float16, "ieee", 1e-4),
    "bf16": (ml_dtypes.bfloat16, "ieee", 1e-4),
    "fp32": (np.float32, "ieee", 1e-4),
    "tf32": (np.float32, "tf32", 3e-2),
}


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    shapes = [(16, 16, 16), (50, 40, 70), (64, 96, 33)]
    blocks = [(32, 32, 32)]
    if driver.is_available():
        blocks += [(64, 64, 32), (128, 128, 64)]  # fast on tensor cores (wgmma on Hopper)
        if "--small" not in sys.argv:  # --small: the simulator's sizes (bench/sanitize.py)
            shapes += [(512, 512, 512), (1000, 777, 300)]
    for name, (dtype, precision, tol) in VARIANTS.items():
        for m, n, k in shapes:
            a = rng.standard_normal((m, k), dtype=np.float32).astype(dtype)
            b = rng.standard_normal((k, n), dtype=np.float32).astype(dtype)
            expected = a.astype(np.float64) @ b.astype(np.float64)
            scale = tol * np.sqrt(k)  # TF32 errors grow with the length of the sums
            for block in [b for b in blocks if b[0] <= m and b[1] <= n] or blocks[:1]:  # tiles the shape fills
                np.testing.assert_allclose(matmul(a, b, block, precision), expected, rtol=tol, atol=scale, err_msg=name)
            if precision == "ieee":
                out = matmul_program(a, b).astype(np.float64)
                np.testing.assert_allclose(out, expected, rtol=1e-2, atol=1e-2 * np.sqrt(k), err_msg=f"{name} a @ b")
        print(f"{name}: OK")
    print("OK")
