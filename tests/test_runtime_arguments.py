"""Classification of scalar launch arguments (the array cases need a GPU)."""

from __future__ import annotations

import numpy as np
import pytest

from tinyton.runtime.arrays import as_kernel_argument


@pytest.mark.parametrize(
    ("value", "dtype"),
    [
        (7, np.int32),
        (-(2**31), np.int32),
        (2**31, np.int64),
        (2**63, np.uint64),
        (1.5, np.float32),
        (True, np.bool_),
        (np.float16(2), np.float16),
        (np.int64(3), np.int64),
        (np.uint8(3), np.uint8),
        (np.bool_(False), np.bool_),
    ],
)
def test_scalars(value, dtype):
    arg = as_kernel_argument(value)
    assert (arg.value, arg.dtype, arg.is_pointer) == (value, np.dtype(dtype), False)
    assert type(arg.value) in (int, float, bool)


def test_unsupported():
    with pytest.raises(OverflowError):
        as_kernel_argument(2**64)
    with pytest.raises(TypeError, match="unsupported kernel argument type str"):
        as_kernel_argument("x")
