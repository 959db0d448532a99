"""axis=1.0 (NumPy refuses float axes too)."""

import numpy as np

import tinyton as tt
from tinyton.errors import CompilationError

ERROR = CompilationError
ADVICE = "axis must be an int (or for reductions a tuple of ints, or None), got float 1.0"


@tt.jit
def program(x):
    return x.max(axis=1.0)  # error


def trigger() -> None:
    program(np.ones((4, 8), np.float32))
