"""RMSNorm as an array program: square, mean, add, rsqrt and two scalings fused into one kernel."""

import numpy as np

import tinyton as tt


@tt.jit
def rmsnorm(x, w):
    return x * tt.rsqrt(tt.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w


def reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    return x64 / np.sqrt((x64 * x64).mean(axis=-1, keepdims=True) + 1e-6) * w


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    # Two rows of 65536 would leave the GPU idle: each is split over 32 programs, which publish their partial
    # sums, wait for each other at a grid barrier and combine them before writing the output (one launch).
    for rows, cols, launches in [(64, 1000, 1), (5, 1, 1), (2, 65536, 1)]:
        x = rng.standard_normal((rows, cols), dtype=np.float32)
        w = rng.standard_normal(cols, dtype=np.float32)
        prog = rmsnorm.compile(x, w)
        assert prog.num_launches == launches, prog.asm["fused"]
        np.testing.assert_allclose(rmsnorm(x, w), reference(x, w), rtol=1e-5, atol=1e-6)
    print("launches fused:", prog.num_launches, "unfused:", rmsnorm.compile(x, w, fuse=False).num_launches)
    print("OK")
