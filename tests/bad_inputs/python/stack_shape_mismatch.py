"""np.stack of arrays of different shapes."""

import numpy as np

import tinyton as tt
from tinyton.errors import CompilationError

ERROR = CompilationError
ADVICE = "stack: all input arrays must have the same shape, got (2, 3), (2, 4)"


@tt.jit
def program(x, y):
    return np.stack([x, y])  # error


def trigger() -> None:
    program(np.ones((2, 3), np.float32), np.ones((2, 4), np.float32))
