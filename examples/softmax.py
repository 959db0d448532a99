"""Row softmax as one kernel: one program per row holds the whole row (up to 8192 columns) in registers.

Rows of any length work: the block is the next power of two and the lanes past the row's end are masked
(they load -inf, so they add nothing to the max or the sum, and they store nothing).
"""

import sys

import numpy as np

import tinyton as tt
from tinyton.runtime import driver


@tt.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, row_stride, BLOCK: tt.constexpr):
    row = tt.program_id(0)
    cols = tt.arange(0, BLOCK)
    mask = cols < n_cols
    x = tt.load(x_ptr + row * row_stride + cols, mask=mask, other=-float("inf"))
    e = tt.exp(x - tt.max(x, axis=0))
    tt.store(y_ptr + row * row_stride + cols, e / tt.sum(e, axis=0), mask=mask)


def softmax(x: np.ndarray) -> np.ndarray:
    n_rows, n_cols = x.shape
    block = tt.next_power_of_2(n_cols)
    y = np.empty_like(x)
    num_warps = 4 if block <= 2048 else 8 if block <= 4096 else 16
    softmax_kernel[(n_rows,)](x, y, n_cols, x.shape[1], BLOCK=block, num_warps=num_warps)
    return y


def reference(x: np.ndarray) -> np.ndarray:
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    shapes = [(4, 1), (7, 100), (5, 1000), (3, 8192)]
    if driver.is_available() and "--small" not in sys.argv:  # --small: the simulator's sizes (bench/sanitize.py)
        shapes += [(1024, 781), (4096, 4096), (256, 8192)]
    for shape in shapes:
        x = rng.standard_normal(shape, dtype=np.float32) * 4
        np.testing.assert_allclose(softmax(x), reference(x), rtol=1e-5, atol=1e-6)
    print("OK")
