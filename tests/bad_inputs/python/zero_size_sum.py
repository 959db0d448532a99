"""Reductions over zero elements follow NumPy: sum gives 0, mean NaN; reducing a zero-size array
along a non-empty axis gives an empty result."""

import numpy as np

import tinyton as tt

ERROR = None
ADVICE = ""


@tt.jit
def program(x):
    return x.sum(axis=-1), x.sum(axis=0), tt.exp(x)


def trigger() -> None:
    for shape in [(4, 0), (0, 4), (0, 0)]:
        x = np.ones(shape, np.float32)
        for got, want in zip(program(x), (x.sum(axis=-1), x.sum(axis=0), np.exp(x))):
            assert got.shape == want.shape and np.array_equal(got, want), (shape, got, want)
