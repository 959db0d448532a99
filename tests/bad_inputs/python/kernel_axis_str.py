"""`axis="x"` in a kernel's reduction."""

import numpy as np

import tinyton as tt
from tinyton.errors import CompilationError

ERROR = CompilationError
ADVICE = "axis must be a constexpr int in [-1, 1), got str 'x'"


@tt.jit
def total(x_ptr, out_ptr, BLOCK: tt.constexpr):
    x = tt.load(x_ptr + tt.arange(0, BLOCK))
    tt.store(out_ptr, tt.sum(x, axis="x"))  # error


def trigger() -> None:
    total[(1,)](np.ones(16, np.float32), np.zeros(1, np.float32), BLOCK=16)
