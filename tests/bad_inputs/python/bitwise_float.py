"""A bitwise ufunc of floats: NumPy refuses it; the message names the ufunc, the types and the fix."""

import numpy as np

import tinyton as tt
from tinyton.errors import CompilationError

ERROR = CompilationError
ADVICE = "ufunc 'bitwise_and' not supported for the input types (float32, float32); it takes integer and bool"


@tt.jit
def program(x):
    return tt.bitwise_and(x, x)  # error


def trigger() -> None:
    program(np.ones((4, 8), np.float32))
