"""NumPy functions array programs refuse, each with the reason and what to write instead.

They sit in the registry (`ARRAY_IMPLS`) like the supported ones, so `np.nonzero(x)` on a traced array
raises this module's error at the user's line, and the README's table (scripts/numpy_table.py) lists them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from tinyton.errors import error
from tinyton.frontend.traced import ARRAY_IMPLS, NUMPY_FUNCTIONS

DATA_DEPENDENT = "the result's shape depends on the values, and array programs have static shapes"


def refuse(name: str, why: str) -> Callable[..., NoReturn]:
    """Register `name` as refused: calling it raises a CompilationError saying `why`."""

    def impl(*args: Any, **kwargs: Any) -> NoReturn:
        raise error(f"np.{name} is not supported in array programs: {why}")

    impl.__name__ = name
    impl.refused = why  # type: ignore[attr-defined]
    ARRAY_IMPLS[name] = impl
    NUMPY_FUNCTIONS.add(name)  # `np.nonzero(x)` on a traced array reaches it
    return impl


REFUSED = {
    "nonzero": f"{DATA_DEPENDENT}; select with tt.where(mask, x, 0) or count with mask.sum()",
    "argwhere": f"{DATA_DEPENDENT}; select with tt.where(mask, x, 0)",
    "flatnonzero": f"{DATA_DEPENDENT}; select with tt.where(mask, x, 0)",
    "unique": f"{DATA_DEPENDENT}",
    "compress": f"{DATA_DEPENDENT}; use tt.where(condition, x, 0)",
    "extract": f"{DATA_DEPENDENT}; use tt.where(condition, x, 0)",
    "bincount": f"{DATA_DEPENDENT} (its length is the largest value + 1); in a kernel use tl.histogram",
    "trim_zeros": DATA_DEPENDENT,
    "einsum": "not available; write it with matmul (@), transposes and sums, which fuse",
    "histogram": "not available in array programs; in a @tt.jit kernel use tl.histogram",
}

for _name, _why in REFUSED.items():
    refuse(_name, _why)
