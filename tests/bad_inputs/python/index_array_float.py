"""A float index array: NumPy's IndexError, with the cast that fixes it."""

import numpy as np

import tinyton as tt
from tinyton.errors import CompilationError

ERROR = CompilationError
ADVICE = "arrays used as indices must be of integer (or boolean) type, got float32 (shape (2,)); cast the index array with .astype(tt.int32)"


@tt.jit
def program(x, ids):
    return x[ids]  # error


def trigger() -> None:
    program(np.ones((3, 4), np.float32), np.zeros(2, np.float32))
