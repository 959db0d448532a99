"""None passed where the program computes with an array."""

import numpy as np

import tinyton as tt
from tinyton.errors import CompilationError

ERROR = CompilationError
ADVICE = "cannot mix a NoneType with traced arrays"


@tt.jit
def program(x, y):
    return x + y  # error


def trigger() -> None:
    program(np.ones(4, np.float32), None)
