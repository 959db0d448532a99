"""np.exp on a traced array: NumPy never sees its values."""

import numpy as np

import tinyton as tt
from tinyton.errors import CallError, CompilationError  # noqa: F401

ERROR = CompilationError
ADVICE = "use tt.exp(...) instead"


@tt.jit
def program(x):
    return np.exp(x) * 2  # error


def trigger() -> None:
    program(np.ones((4, 8), np.float32))
