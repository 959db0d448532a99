"""A NumPy array created inside the program, mixed with a traced one."""

import numpy as np

import tinyton as tt
from tinyton.errors import CompilationError

ERROR = CompilationError
ADVICE = "cannot mix a ndarray with traced arrays; pass arrays as arguments of the program"


@tt.jit
def program(x):
    return np.ones(8, np.float32) + x  # error


def trigger() -> None:
    program(np.ones((4, 8), np.float32))
