"""argmax over an empty axis raises NumPy's error at the user's line, naming the shape and the fix."""

import numpy as np

import tinyton as tt
from tinyton.errors import CompilationError

ERROR = CompilationError
ADVICE = "argmax: attempt to get argmax of an empty sequence (float32 array of shape (4, 0), axis -1); reduce an axis of nonzero length"


@tt.jit
def program(x):
    return x.argmax(axis=-1)  # error


def trigger() -> None:
    program(np.ones((4, 0), np.float32))
