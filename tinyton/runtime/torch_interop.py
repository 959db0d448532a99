"""torch tensors <-> NumPy arrays without copies, bfloat16 included.

torch has no `numpy()` for bfloat16 and NumPy no bfloat16 of its own: a bf16 tensor is viewed as int16,
and those bits as `ml_dtypes.bfloat16` (tinyton's NumPy bf16), and back. torch is imported only when a
torch value is actually handled, so tinyton never needs it installed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tinyton.dtypes import BF16


def is_torch(value: Any) -> bool:
    return type(value).__module__.partition(".")[0] == "torch"


def is_bf16_tensor(tensor: Any) -> bool:
    return str(tensor.dtype) == "torch.bfloat16"


def numpy_dtype(torch_dtype: Any) -> np.dtype:
    """The NumPy dtype of a torch dtype (`torch.bfloat16` -> ml_dtypes.bfloat16); TypeError if none."""
    return np.dtype(str(torch_dtype).removeprefix("torch."))


def torch_dtype(dtype: np.dtype) -> Any:
    """The torch dtype of a NumPy dtype (`bool`, `float32`, ..., bfloat16)."""
    import torch

    return getattr(torch, np.dtype(dtype).name)


def host_view(tensor: Any) -> np.ndarray:
    """A CPU tensor's memory as a NumPy array (a view, not a copy)."""
    if is_bf16_tensor(tensor):
        import torch

        return tensor.view(torch.int16).numpy().view(BF16)
    return tensor.numpy()


def from_host(array: np.ndarray) -> Any:
    """A NumPy array as a CPU tensor sharing its memory."""
    import torch

    if array.dtype == BF16:
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(array)
