"""What the ATen rules share: torch dtypes as array-program dtypes, and the choice between an array-program
builtin and a composition of today's builtins.

A rule is written against the NumPy-named `tt.` builtins (tinyton/frontend/array_ops.py). Where a builtin
is missing, calling it raises a CompilationError (or an AttributeError for a name `tt` does not have at
all) and the op runs in torch (tinyton/torch/support.py); a few rules instead compose the builtins that
exist (`tanh` from `exp`) until the builtin lands, which `prefer` decides.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from tinyton.dialects import tta
from tinyton.errors import CompilationError
from tinyton.frontend.promotion import element_of
from tinyton.frontend.traced import ARRAY_IMPLS, Traced, Tracer
from tinyton.runtime.torch_interop import numpy_dtype

try:  # torch >= 2.12
    from torch.fx.experimental.symbolic_shapes import optimization_hint
except ImportError:  # older torch (2.11 on the GPU hosts)

    def optimization_hint(value: Any) -> int:
        """A size's concrete value: a symbolic size's hint, an int itself."""
        node = getattr(value, "node", None)
        return int(node.hint) if node is not None else int(value)


class Unsupported(Exception):
    """A rule's refusal: this use of the op (its arguments, device or dtype) runs in torch; the message says why."""


@functools.cache
def array_dtype(dtype: torch.dtype) -> np.dtype:
    """The array-program dtype holding a torch dtype's values: itself, or int32 for int64 where array
    programs have no int64 (indices, positions and token ids fit); Unsupported if none."""
    try:
        np_dtype = numpy_dtype(dtype)
    except TypeError:
        raise Unsupported(f"dtype {dtype} has no array-program type") from None
    try:
        element_of(np_dtype)
    except TypeError:
        if np_dtype == np.int64:
            return array_dtype(torch.int32)
        raise Unsupported(f"array programs have no {dtype}") from None
    return np_dtype


def has_builtin(name: str) -> bool:
    """Whether array programs implement `tt.<name>` (the branches adding NumPy's op set fill ARRAY_IMPLS)."""
    return name in ARRAY_IMPLS


@functools.cache
def supports_slicing() -> bool:
    """Whether traced arrays take basic slices (`x[:, 1:5:2]`): probed once on a throwaway tracer."""
    tracer = Tracer()
    with tracer.active():
        x = Traced(tracer, tracer.block.insert_arg(tta.array_type(element_of(np.float32), (4,)), 0))
        try:
            x[1:3]
        except CompilationError:
            return False
    return True


def prefer(name: str, composition: Callable[..., Traced]) -> Callable[..., Traced]:
    """`tt.<name>` where array programs have it, else `composition` of the builtins that exist."""

    def rule(*args: Any, **kwargs: Any) -> Traced:
        if has_builtin(name):
            return ARRAY_IMPLS[name](*args, **kwargs)
        return composition(*args, **kwargs)

    rule.__name__ = name
    rule.__doc__ = composition.__doc__
    return rule
