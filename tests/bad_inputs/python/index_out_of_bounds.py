"""A constant index past the end of its axis: NumPy's IndexError, at compile time."""

import numpy as np

import tinyton as tt
from tinyton.errors import CompilationError

ERROR = CompilationError
ADVICE = "index 5 is out of bounds for axis 0 with size 3"


@tt.jit
def program(x):
    return x[5]  # error


def trigger() -> None:
    program(np.ones((3, 4), np.float32))
