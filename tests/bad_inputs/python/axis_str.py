"""`axis="x"` in an array program's reduction."""

import numpy as np

import tinyton as tt
from tinyton.errors import CompilationError

ERROR = CompilationError
ADVICE = "axis must be an int (or for reductions a tuple of ints, or None), got str 'x'"


@tt.jit
def program(x):
    return tt.sum(x, axis="x")  # error


def trigger() -> None:
    program(np.ones((4, 8), np.float32))
