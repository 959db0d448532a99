"""An array program launched like a kernel."""

import numpy as np

import tinyton as tt
from tinyton.errors import CallError

ERROR = CallError
ADVICE = "so it is an array program: call it directly, program(...)"


@tt.jit
def program(x):
    return x * 2


def trigger() -> None:
    program[(1,)](np.ones(8, np.float32))  # error
