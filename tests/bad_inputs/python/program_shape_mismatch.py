"""Operands whose shapes do not broadcast."""

import numpy as np

import tinyton as tt
from tinyton.errors import CompilationError

ERROR = CompilationError
ADVICE = "operands could not be broadcast together with shapes (4, 8) (4,)"


@tt.jit
def program(x, y):
    return x + y  # error


def trigger() -> None:
    program(np.ones((4, 8), np.float32), np.ones(4, np.float32))
