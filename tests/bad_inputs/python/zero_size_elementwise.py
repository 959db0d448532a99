"""Zero-size arrays in an elementwise array program simply work (they failed in the kernel generator)."""

import numpy as np

import tinyton as tt

ERROR = None
ADVICE = ""


@tt.jit
def program(x, bias):
    return tt.exp(x) * 2 + bias


def trigger() -> None:
    for shape in [(0, 8), (0,), (0, 0)]:
        x, bias = np.ones(shape, np.float32), np.ones(shape[-1:], np.float32)
        out = program(x, bias)
        assert out.shape == shape and out.dtype == np.float32, (out.shape, out.dtype)
