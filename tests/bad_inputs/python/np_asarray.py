"""np.asarray on a traced array (NumPy's __array__ protocol)."""

import numpy as np

import tinyton as tt
from tinyton.errors import CompilationError

ERROR = CompilationError
ADVICE = "converting to a NumPy array (np.asarray, np.array) needs the value of a traced array"


@tt.jit
def program(x):
    return np.asarray(x) + 1  # error


def trigger() -> None:
    program(np.ones((4, 8), np.float32))
