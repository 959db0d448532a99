"""Host tensor descriptors: Triton's `TensorDescriptor` (`triton.tools.tensor_descriptor`), an argument
that describes a strided array and the block shape a kernel moves through it.

A kernel parameter given a `TensorDescriptor` becomes, in the kernel, a descriptor whose `.load(offsets)` /
`.store(offsets, value)` move `block_shape` blocks with every dimension bounds-checked (out-of-range
elements read as the padding value and are not written), as TMA does. tinyton passes it as its base
pointer, shape and strides (tinyton/frontend/arguments.py); the block shape is compiled in, so the
autotuner's `pre_hook` may set it per config, as Triton's tutorials do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

PADDINGS = ("zero", "nan")


@dataclass
class TensorDescriptor:
    """`base` (an array or tensor, passed by its address) seen as a `shape`/`strides` array (elements,
    the last stride 1) read and written in `block_shape` blocks."""

    base: Any
    shape: list[int]
    strides: list[int]
    block_shape: list[int]
    padding: str = "zero"

    def __post_init__(self) -> None:
        self.shape, self.strides, self.block_shape = list(self.shape), list(self.strides), list(self.block_shape)
        rank = len(self.shape)
        if not 1 <= rank <= 5 or len(self.strides) != rank or len(self.block_shape) != rank:
            raise ValueError(
                f"TensorDescriptor: shape, strides and block_shape need one entry per dimension (1 to 5), got "
                f"{self.shape}, {self.strides}, {self.block_shape}"
            )
        if self.strides[-1] != 1:
            raise ValueError(f"TensorDescriptor: the last dimension must be contiguous (stride 1), got strides {self.strides}")
        if self.padding not in PADDINGS:
            raise ValueError(f"TensorDescriptor: padding must be 'zero' or 'nan', got {self.padding!r}")

    @staticmethod
    def from_tensor(tensor: Any, block_shape: Sequence[int], padding: str = "zero") -> TensorDescriptor:
        """The descriptor of a whole array or tensor (its shape and element strides)."""
        return TensorDescriptor(tensor, list(tensor.shape), element_strides(tensor), list(block_shape), padding)


def element_strides(array: Any) -> list[int]:
    """Strides in elements: torch's `stride()`, NumPy's byte strides divided by the item size."""
    if callable(getattr(array, "stride", None)):
        return list(array.stride())
    return [s // np.dtype(array.dtype).itemsize for s in array.strides]


def set_allocator(allocator: Callable[[int, int, Any], Any]) -> None:
    """Triton's `triton.set_allocator`: the allocator of the global scratch memory that descriptors made
    inside a kernel need on Triton's TMA path. tinyton's descriptors are addresses and masks, which need
    no scratch memory, so the allocator is accepted and never called."""
