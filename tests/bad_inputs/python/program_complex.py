"""A complex array passed to an array program (NumPy dtype without an array-program type)."""

import numpy as np

import tinyton as tt
from tinyton.errors import CompilationError

ERROR = CompilationError
ADVICE = "convert with x.astype(np.float32)"


@tt.jit
def program(x):
    return x * 2


def trigger() -> None:
    program(np.ones((4, 8), np.complex64))  # error
