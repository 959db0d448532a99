"""np.convolve on a traced array (NumPy's array function protocol: no builtin of that name)."""

import numpy as np

import tinyton as tt
from tinyton.errors import CompilationError

ERROR = CompilationError
ADVICE = "np.convolve cannot run on a traced array: an array program is compiled, and NumPy never sees its values; use the tt.* builtins"


@tt.jit
def program(x):
    return np.convolve(x, x)  # error


def trigger() -> None:
    program(np.ones(8, np.float32))
