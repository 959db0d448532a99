"""torch tensors <-> NumPy arrays without copies, bfloat16 and float8 included.

torch has no `numpy()` for bfloat16 and float8 and NumPy none of its own: a bf16 tensor is viewed as int16
(a float8 one as uint8), and those bits as `ml_dtypes.bfloat16` (tinyton's NumPy bf16, `ml_dtypes`'
float8), and back. torch is imported only when a
torch value is actually handled, so tinyton never needs it installed.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from tinyton.dtypes import BF16, float8e4nv, float8e5


def is_torch(value: Any) -> bool:
    return type(value).__module__.partition(".")[0] == "torch"


def numpy_dtype(torch_dtype: Any) -> np.dtype:
    """The NumPy dtype of a torch dtype (`torch.bfloat16` -> ml_dtypes.bfloat16); TypeError if none."""
    return np.dtype(str(torch_dtype).removeprefix("torch."))


@functools.cache
def torch_dtype(dtype: np.dtype) -> Any:
    """The torch dtype of a NumPy dtype (`bool`, `float32`, ..., bfloat16); cached: every array-program
    call with torch inputs asks once per buffer it allocates (uncached ~1.7 µs of a ~20 µs call)."""
    import torch

    return getattr(torch, np.dtype(dtype).name)


BIT_VIEWS = {"bfloat16": (np.int16, BF16), "float8_e5m2": (np.uint8, float8e5.np), "float8_e4m3fn": (np.uint8, float8e4nv.np)}
"""torch dtypes that `Tensor.numpy()` refuses -> (the integer type their bits are viewed through, NumPy's)."""


def host_view(tensor: Any) -> np.ndarray:
    """A CPU tensor's memory as a NumPy array (a view, not a copy)."""
    name = str(tensor.dtype).removeprefix("torch.")
    if name in BIT_VIEWS:
        bits, dtype = BIT_VIEWS[name]
        return tensor.view(torch_dtype(bits)).numpy().view(dtype)
    return tensor.numpy()


def from_host(array: np.ndarray) -> Any:
    """A NumPy array as a CPU tensor sharing its memory."""
    import torch

    if array.dtype.name in BIT_VIEWS:
        return torch.from_numpy(array.view(BIT_VIEWS[array.dtype.name][0])).view(torch_dtype(array.dtype))
    return torch.from_numpy(array)
