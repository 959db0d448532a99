"""Softmax as an array program: five array ops that tinyton fuses into one kernel.

Called directly (no `[grid]`), a `@tt.jit` function that returns a value is traced into `tta` ops, fused
by `tinyton-fuse` and compiled; `softmax.compile(x)` shows every stage and the launch count.
"""

import numpy as np

import tinyton as tt


@tt.jit
def softmax(x):
    e = tt.exp(x - tt.max(x, axis=-1, keepdims=True))
    return e / tt.sum(e, axis=-1, keepdims=True)


def reference(x: np.ndarray) -> np.ndarray:
    e = np.exp(x.astype(np.float64) - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 1000), dtype=np.float32)
    prog = softmax.compile(x)
    print("launches fused:", prog.num_launches, "unfused:", softmax.compile(x, fuse=False).num_launches)
    print(prog.asm["fused"])
    assert prog.num_launches == 1
    for shape in [(64, 1000), (3, 1), (2, 65536)]:
        x = rng.standard_normal(shape, dtype=np.float32) * 3
        np.testing.assert_allclose(softmax(x), reference(x), rtol=1e-5, atol=1e-7)
    print("OK")
