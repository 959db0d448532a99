"""A float64 array passed to an array program."""

import numpy as np

import tinyton as tt
from tinyton.errors import CallError, CompilationError  # noqa: F401

ERROR = CompilationError
ADVICE = "convert with x.astype(np.float32)"


@tt.jit
def program(x):
    return x * 2


def trigger() -> None:
    program(np.ones((4, 8)))  # error
