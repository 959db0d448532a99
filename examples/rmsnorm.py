"""RMSNorm as one kernel, one program per row: y = x * rsqrt(mean(x**2) + eps) * w.

The row is loaded once; the reduction, the scale and the weight multiply stay in registers.
"""

import sys

import numpy as np

import tinyton as tt
from tinyton.runtime import driver


@tt.jit
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, n_cols, eps, BLOCK: tt.constexpr):
    row = tt.program_id(0)
    cols = tt.arange(0, BLOCK)
    mask = cols < n_cols
    x = tt.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    w = tt.load(w_ptr + cols, mask=mask, other=0.0)
    scale = tt.rsqrt(tt.sum(x * x, axis=0) / n_cols + eps)
    tt.store(y_ptr + row * n_cols + cols, x * scale * w, mask=mask)


def rmsnorm(x: np.ndarray, w: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    n_rows, n_cols = x.shape
    y = np.empty_like(x)
    block = tt.next_power_of_2(n_cols)
    rmsnorm_kernel[(n_rows,)](x, w, y, n_cols, eps, BLOCK=block, num_warps=4 if block <= 2048 else 8)
    return y


def reference(x: np.ndarray, w: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    x64 = x.astype(np.float64)
    return x64 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + eps) * w


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    shapes = [(3, 16), (6, 100), (4, 2048)]
    if driver.is_available() and "--small" not in sys.argv:  # --small: the simulator's sizes (bench/sanitize.py)
        shapes += [(4096, 4096), (8192, 1024), (32, 2048)]
    for shape in shapes:
        x = rng.standard_normal(shape, dtype=np.float32)
        w = rng.standard_normal(shape[1], dtype=np.float32)
        np.testing.assert_allclose(rmsnorm(x, w), reference(x, w), rtol=1e-4, atol=1e-5)
    print("OK")
