"""An array program called with too many arguments."""

import numpy as np

import tinyton as tt
from tinyton.errors import CallError

ERROR = CallError
ADVICE = "program(): too many positional arguments; its parameters are (x)"


@tt.jit
def program(x):
    return x * 2


def trigger() -> None:
    program(np.ones(8, np.float32), np.ones(8, np.float32))  # error
