"""A misspelt keyword argument."""

import numpy as np

import tinyton as tt
from tinyton.errors import CallError

ERROR = CallError
ADVICE = "unexpected or repeated argument(s) BLOK"


@tt.jit
def add(a_ptr, b_ptr, c_ptr, n, BLOCK: tt.constexpr):
    offsets = tt.program_id(0) * BLOCK + tt.arange(0, BLOCK)
    mask = offsets < n
    tt.store(c_ptr + offsets, tt.load(a_ptr + offsets, mask=mask) + tt.load(b_ptr + offsets, mask=mask), mask=mask)


def trigger() -> None:
    x = np.ones(16, np.float32)
    add[(1,)](x, x, x, 16, BLOK=16)  # error
