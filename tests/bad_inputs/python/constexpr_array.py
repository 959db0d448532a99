"""An array passed to a constexpr parameter."""

import numpy as np

import tinyton as tt
from tinyton.errors import CallError

ERROR = CallError
ADVICE = "pass arrays to runtime (non-constexpr) parameters"


@tt.jit
def add(a_ptr, b_ptr, c_ptr, n, BLOCK: tt.constexpr):
    offsets = tt.program_id(0) * BLOCK + tt.arange(0, BLOCK)
    mask = offsets < n
    tt.store(c_ptr + offsets, tt.load(a_ptr + offsets, mask=mask) + tt.load(b_ptr + offsets, mask=mask), mask=mask)


def trigger() -> None:
    x = np.ones(16, np.float32)
    add[(1,)](x, x, x, 16, BLOCK=x)  # error
