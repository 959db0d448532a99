"""A linear layer as an array program: matmul whose bias, ReLU and scaling epilogue fuse into the matmul kernel."""

import numpy as np

import tinyton as tt


@tt.jit
def linear_relu(x, w, b):
    return tt.relu(x @ w + b) * 0.5


def reference(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.maximum(x.astype(np.float64) @ w + b, 0) * 0.5


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    x = rng.standard_normal((96, 80), dtype=np.float32)
    w = rng.standard_normal((80, 72), dtype=np.float32)
    b = rng.standard_normal(72, dtype=np.float32)
    prog = linear_relu.compile(x, w, b)
    print("launches fused:", prog.num_launches, "unfused:", linear_relu.compile(x, w, b, fuse=False).num_launches)
    assert prog.num_launches == 1, prog.asm["fused"]
    np.testing.assert_allclose(linear_relu(x, w, b), reference(x, w, b), rtol=1e-4, atol=1e-4)
    print("OK")
