"""A BLOCK that is not a power of two (an error in the kernel source, at its line)."""

import numpy as np

import tinyton as tt
from tinyton.errors import CompilationError

ERROR = CompilationError
ADVICE = "is not a power of two; round it up with tt.next_power_of_2"


@tt.jit
def add(a_ptr, b_ptr, c_ptr, n, BLOCK: tt.constexpr):
    offsets = tt.program_id(0) * BLOCK + tt.arange(0, BLOCK)  # error
    mask = offsets < n
    tt.store(c_ptr + offsets, tt.load(a_ptr + offsets, mask=mask) + tt.load(b_ptr + offsets, mask=mask), mask=mask)


def trigger() -> None:
    x = np.ones(16, np.float32)
    add[(1,)](x, x, x, 16, BLOCK=10)
