"""np.median on a traced array (NumPy's array function protocol: no builtin of that name)."""

import numpy as np

import tinyton as tt
from tinyton.errors import CompilationError

ERROR = CompilationError
ADVICE = "np.median cannot run on a traced array: an array program is compiled, and NumPy never sees its values; use the tt.* builtins"


@tt.jit
def program(x):
    return np.median(x, axis=-1)  # error


def trigger() -> None:
    program(np.ones((4, 8), np.float32))
