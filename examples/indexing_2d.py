"""Transpose on a 2-D grid, indexing with integer // and %.

Program (i, j) moves the BLOCK_R x BLOCK_C tile of x that starts at row i*BLOCK_R, column j*BLOCK_C.
Its lanes are numbered 0..BLOCK_R*BLOCK_C-1 (one flat `tt.arange`); `lane // BLOCK_C` and
`lane % BLOCK_C` turn a lane number into the row and column it handles.
"""

import sys

import numpy as np

import tinyton as tt
from tinyton.runtime import driver


@tt.jit
def transpose_kernel(x_ptr, y_ptr, n_rows, n_cols, BLOCK_R: tt.constexpr, BLOCK_C: tt.constexpr):
    lane = tt.arange(0, BLOCK_R * BLOCK_C)
    row = tt.program_id(0) * BLOCK_R + lane // BLOCK_C
    col = tt.program_id(1) * BLOCK_C + lane % BLOCK_C
    mask = (row < n_rows) & (col < n_cols)
    value = tt.load(x_ptr + row * n_cols + col, mask=mask)
    tt.store(y_ptr + col * n_rows + row, value, mask=mask)


def transpose(x: np.ndarray, block: tuple[int, int] = (16, 32)) -> np.ndarray:
    n_rows, n_cols = x.shape
    y = np.empty((n_cols, n_rows), dtype=x.dtype)
    grid = (tt.cdiv(n_rows, block[0]), tt.cdiv(n_cols, block[1]))
    transpose_kernel[grid](x, y, n_rows, n_cols, BLOCK_R=block[0], BLOCK_C=block[1])
    return y


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    shapes = [(1, 1), (17, 45), (64, 96)]
    if driver.is_available() and "--small" not in sys.argv:  # --small: the simulator's sizes (bench/sanitize.py)
        shapes += [(1000, 3000), (4096, 4096)]
    for shape in shapes:
        x = rng.integers(-1000, 1000, shape, dtype=np.int32)
        np.testing.assert_array_equal(transpose(x), x.T)
    print("OK")
