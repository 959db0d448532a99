"""np.cbrt on a traced array: a NumPy ufunc array programs do not have (NumPy never sees the values)."""

import numpy as np

import tinyton as tt
from tinyton.errors import CompilationError

ERROR = CompilationError
ADVICE = "use the tt.* builtins"


@tt.jit
def program(x):
    return np.cbrt(x) * 2  # error


def trigger() -> None:
    program(np.ones((4, 8), np.float32))
