"""A float step in a kernel's runtime `range` (Python's range takes no floats; it was silently truncated)."""

import numpy as np

import tinyton as tt
from tinyton.errors import CompilationError

ERROR = CompilationError
ADVICE = "range bounds must be integers, got float 0.5; use an int"


@tt.jit
def fill(out_ptr, n):
    for i in range(0, n, 0.5):  # error
        tt.store(out_ptr + i, 1.0)


def trigger() -> None:
    fill[(1,)](np.zeros(16, np.float32), 16)
