"""A grid function that returns a float."""

import numpy as np

import tinyton as tt
from tinyton.errors import CallError

ERROR = CallError
ADVICE = "a grid is a tuple of 1 to 3 non-negative ints"


@tt.jit
def add(a_ptr, b_ptr, c_ptr, n, BLOCK: tt.constexpr):
    offsets = tt.program_id(0) * BLOCK + tt.arange(0, BLOCK)
    mask = offsets < n
    tt.store(c_ptr + offsets, tt.load(a_ptr + offsets, mask=mask) + tt.load(b_ptr + offsets, mask=mask), mask=mask)


def trigger() -> None:
    x = np.ones(16, np.float32)
    add[lambda meta: (16 / meta["BLOCK"],)](x, x, x, 16, BLOCK=16)  # error
