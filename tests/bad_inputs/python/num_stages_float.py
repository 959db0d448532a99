"""num_stages=2.5: launch options take ints."""

import numpy as np

import tinyton as tt
from tinyton.errors import CallError

ERROR = CallError
ADVICE = "num_stages must be an int >= 0, got 2.5"


@tt.jit
def add(a_ptr, b_ptr, c_ptr, n, BLOCK: tt.constexpr):
    offsets = tt.program_id(0) * BLOCK + tt.arange(0, BLOCK)
    mask = offsets < n
    tt.store(c_ptr + offsets, tt.load(a_ptr + offsets, mask=mask) + tt.load(b_ptr + offsets, mask=mask), mask=mask)


def trigger() -> None:
    x = np.ones(16, np.float32)
    add[(1,)](x, x, x, 16, BLOCK=16, num_stages=2.5)  # error
