"""A ufunc method (np.maximum.reduce) on a traced array."""

import numpy as np

import tinyton as tt
from tinyton.errors import CompilationError

ERROR = CompilationError
ADVICE = "np.maximum.reduce cannot run on a traced array: an array program is compiled, and NumPy never sees its values; use tt.max(...) instead"


@tt.jit
def program(x):
    return np.maximum.reduce(x, axis=-1)  # error


def trigger() -> None:
    program(np.ones((4, 8), np.float32))
