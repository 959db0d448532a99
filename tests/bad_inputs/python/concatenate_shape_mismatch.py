"""np.concatenate of arrays whose other dims differ: NumPy's message, the shapes and the fix."""

import numpy as np

import tinyton as tt
from tinyton.errors import CompilationError

ERROR = CompilationError
ADVICE = ("all the input array dimensions except for the concatenation axis must match exactly, but along "
          "dimension 1, the array at index 0 has size 3 and the array at index 1 has size 4 (shapes (2, 3), (2, 4), "
          "axis 0); only the sizes along the axis may differ")


@tt.jit
def program(x, y):
    return tt.concatenate([x, y], axis=0)  # error


def trigger() -> None:
    program(np.ones((2, 3), np.float32), np.ones((2, 4), np.float32))
