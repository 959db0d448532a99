"""What a pointer argument means for a NumPy view: Triton's meaning, the memory from the view's first element.

A kernel given `x[:, ::2]` or `x.T` and its `x.strides` reaches the elements of the view through that memory,
so both backends hand it every element from the view's first to its last in the base array's layout: the
simulator indexes this span, the GPU stages it (and copies it back when the kernel writes it; arrays whose
spans overlap are staged together, tinyton/runtime/staging.py). Negative strides put elements before the
first one: they are refused.
"""

from __future__ import annotations

import numpy as np


def memory_span(array: np.ndarray) -> np.ndarray:
    """A 1-D view of the memory from `array`'s first element to its last (writable only if `array` is)."""
    if array.flags.c_contiguous:
        return array.reshape(-1)
    if any(s < 0 for s in array.strides):
        raise ValueError(
            f"an array with negative strides {array.strides} cannot be a kernel pointer (a pointer is the memory "
            "from the view's first element up): pass np.ascontiguousarray(x), or the base array and offsets"
        )
    if any(s % array.itemsize for s in array.strides):
        raise ValueError(f"strides {array.strides} are not multiples of the element size {array.itemsize}")
    count = 0 if array.size == 0 else 1 + sum((n - 1) * s // array.itemsize for n, s in zip(array.shape, array.strides))
    bits = array.view(f"u{array.itemsize}")  # as_strided cannot rebuild ml_dtypes' types (bf16, float8)
    span = np.lib.stride_tricks.as_strided(bits, (count,), (array.itemsize,), writeable=array.flags.writeable)
    return span.view(array.dtype)


def span_bounds(span: np.ndarray) -> tuple[int, int]:
    """The byte addresses `[start, end)` of a memory span."""
    start = span.__array_interface__["data"][0]
    return start, start + span.nbytes
