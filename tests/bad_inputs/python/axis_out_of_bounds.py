"""An axis beyond the array's dimensions."""

import numpy as np

import tinyton as tt
from tinyton.errors import CompilationError

ERROR = CompilationError
ADVICE = "axis 2 is out of bounds for array of dimension 2"


@tt.jit
def program(x):
    return x.sum(axis=2)  # error


def trigger() -> None:
    program(np.ones((4, 8), np.float32))
