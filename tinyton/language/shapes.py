"""Shape builtins: `trans`/`permute`, `reshape`/`view`, `expand_dims`, `broadcast_to`, `broadcast`,
`join`/`split`. In array programs `reshape`, `transpose` and `broadcast_to` follow NumPy.
"""

from __future__ import annotations

from typing import Any

from tinyton.language.core import builtin, kernel


@builtin
def trans(input: Any, *dims: Any) -> Any:
    """Permute the dimensions (`dims`, or a swap of the two of a 2-D tile); also `x.T`."""
    return kernel().permute(input, dims, "tl.trans")


@builtin
def permute(input: Any, *dims: Any) -> Any:
    """Dimension `i` of the result is dimension `dims[i]` of `input`."""
    return kernel().permute(input, dims, "tl.permute")


@builtin
def transpose(input: Any, *dims: Any) -> Any:
    """NumPy's transpose in array programs; `tl.permute` in kernels."""
    return kernel().permute(input, dims, "transpose")


@builtin
def reshape(input: Any, *shape: Any, can_reorder: bool = False) -> Any:
    """The same elements (row-major order) in another shape; one dimension may be -1."""
    return kernel().reshape(input, shape)


@builtin
def view(input: Any, *shape: Any) -> Any:
    """`reshape` (tinyton keeps the element order)."""
    return kernel().reshape(input, shape, "tl.view")


@builtin
def expand_dims(input: Any, axis: int | tuple[int, ...]) -> Any:
    """Insert size-1 dimensions at `axis` (an int or a tuple)."""
    return kernel().expand_dims(input, axis)


@builtin
def broadcast_to(input: Any, *shape: Any) -> Any:
    """`input` broadcast to `shape` (NumPy's rules)."""
    return kernel().broadcast_to(input, shape)


@builtin
def broadcast(input: Any, other: Any) -> Any:
    """Both tiles broadcast to their common shape."""
    return kernel().broadcast_pair(input, other)


@builtin
def join(a: Any, b: Any) -> Any:
    """`a` and `b` stacked along a new last dimension of size 2."""
    return kernel().join(a, b)


@builtin
def split(a: Any) -> Any:
    """The two halves `(a[..., 0], a[..., 1])` of a tile whose last dimension is 2."""
    return kernel().split(a)
