"""max over zero elements raises NumPy's error at the user's line."""

import numpy as np

import tinyton as tt
from tinyton.errors import CompilationError

ERROR = CompilationError
ADVICE = "zero-size array to reduction operation maximum which has no identity"


@tt.jit
def program(x):
    return x.max(axis=-1)  # error


def trigger() -> None:
    program(np.ones((4, 0), np.float32))
