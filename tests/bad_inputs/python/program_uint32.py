"""A uint32 array passed to an array program (of the unsigned ints, only uint8 and uint64 are supported)."""

import numpy as np

import tinyton as tt
from tinyton.errors import CompilationError

ERROR = CompilationError
ADVICE = "convert with x.astype(np.float32)"


@tt.jit
def program(x):
    return x * 2


def trigger() -> None:
    program(np.arange(8, dtype=np.uint32))  # error
