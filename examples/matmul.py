"""Matrix multiply C = A @ B with 2-D tiles: each program computes a BLOCK_M x BLOCK_N tile of C,
looping over K (a runtime bound: an `scf.for` carrying the accumulator) with `tt.dot`. Masks handle the
edges, so any M, N, K work.
"""

import numpy as np

import tinyton as tt
from tinyton.runtime import driver


@tt.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    BLOCK_M: tt.constexpr, BLOCK_N: tt.constexpr, BLOCK_K: tt.constexpr,
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
        acc += tt.dot(a, b)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * N
    tt.store(c_ptr + rows[:, None] * N + cols[None, :], acc, mask=(rows[:, None] < M) & (cols[None, :] < N))


def matmul(a: np.ndarray, b: np.ndarray, block: tuple[int, int, int] = (32, 32, 32)) -> np.ndarray:
    (m, k), (_, n) = a.shape, b.shape
    c = np.empty((m, n), dtype=np.float32)
    bm, bn, bk = block
    matmul_kernel[(tt.cdiv(m, bm), tt.cdiv(n, bn))](a, b, c, m, n, k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
    return c


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    shapes = [(16, 16, 16), (50, 40, 70), (64, 96, 33)]
    if driver.is_available():
        shapes += [(512, 512, 512), (1000, 777, 300)]
    for m, n, k in shapes:
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        np.testing.assert_allclose(matmul(a, b), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    print("OK")
