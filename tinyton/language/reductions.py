"""Reduction and scan builtins: `sum`/`max`/`min`/`mean`, `argmax`/`argmin`, `reduce` and
`associative_scan` with a `@jit` combine function, `xor_sum`, `cumsum`/`cumprod`.

`axis=None` reduces all axes; `keep_dims=True` (Triton's spelling; `keepdims` also works) keeps the
reduced axes with size 1.
"""

from __future__ import annotations

from typing import Any

from tinyton.dtypes import dtype_of
from tinyton.language.core import builtin, kernel


def _keep(keep_dims: bool, keepdims: bool | None) -> bool:
    return bool(keep_dims if keepdims is None else keepdims)


@builtin
def sum(
    input: Any, axis: int | None = None, keep_dims: bool = False, dtype: Any = None, keepdims: bool | None = None
) -> Any:
    """Sum along `axis`; bool tiles count their true lanes; `dtype` converts the input first."""
    x = input if dtype is None else kernel().cast(input, dtype_of(dtype))
    return kernel().reduce("sum", x, axis, _keep(keep_dims, keepdims))


@builtin
def max(
    input: Any,
    axis: int | None = None,
    return_indices: bool = False,
    return_indices_tie_break_left: bool = True,
    keep_dims: bool = False,
    keepdims: bool | None = None,
) -> Any:
    """Maximum along `axis`; with `return_indices`, `(maximum, its index)` (ties: the lowest index)."""
    if return_indices:
        return kernel().with_indices("max", input, axis, _keep(keep_dims, keepdims), "tl.max")
    return kernel().reduce("max", input, axis, _keep(keep_dims, keepdims))


@builtin
def min(
    input: Any,
    axis: int | None = None,
    return_indices: bool = False,
    return_indices_tie_break_left: bool = True,
    keep_dims: bool = False,
    keepdims: bool | None = None,
) -> Any:
    """Minimum along `axis`; with `return_indices`, `(minimum, its index)` (ties: the lowest index)."""
    if return_indices:
        return kernel().with_indices("min", input, axis, _keep(keep_dims, keepdims), "tl.min")
    return kernel().reduce("min", input, axis, _keep(keep_dims, keepdims))


@builtin
def mean(input: Any, axis: int | None = None, keep_dims: bool = False, keepdims: bool | None = None) -> Any:
    """Arithmetic mean along `axis`, as a float."""
    return kernel().mean(input, axis, _keep(keep_dims, keepdims))


reduce_sum, reduce_max, reduce_min = sum, max, min


@builtin
def argmax(input: Any, axis: int | None, tie_break_left: bool = True, keep_dims: bool = False) -> Any:
    """Index of the maximum along `axis` (int32; ties: the lowest index; NaN counts as the largest)."""
    return kernel().with_indices("max", input, axis, keep_dims, "tl.argmax")[1]


@builtin
def argmin(input: Any, axis: int | None, tie_break_left: bool = True, keep_dims: bool = False) -> Any:
    """Index of the minimum along `axis` (int32; ties: the lowest index; NaN counts as the smallest)."""
    return kernel().with_indices("min", input, axis, keep_dims, "tl.argmin")[1]


@builtin
def reduce(input: Any, axis: int | None, combine_fn: Any, keep_dims: bool = False) -> Any:
    """Reduce a tile (or a tuple of tiles) along `axis` with `combine_fn`, an associative `@jit`
    function of two (or two tuples of) scalars."""
    return kernel().reduce_fn(input, axis, combine_fn, keep_dims)


@builtin
def associative_scan(input: Any, axis: int, combine_fn: Any, reverse: bool = False) -> Any:
    """Inclusive scan of a tile (or tuple of tiles) along `axis` with the associative `combine_fn`."""
    return kernel().scan_fn(input, axis, combine_fn, reverse)


@builtin
def xor_sum(input: Any, axis: int | None = None, keep_dims: bool = False) -> Any:
    """Bitwise xor of the elements along `axis` (ints)."""
    return kernel().xor_sum(input, axis, keep_dims)


@builtin
def cumsum(input: Any, axis: int = 0, reverse: bool = False, dtype: Any = None) -> Any:
    """Inclusive running sum along `axis`, in `dtype` when given; else ints narrower than 32 bits (and
    bools) in int32 (uint32 when unsigned) and bfloat16 in float32, as Triton."""
    return kernel().cumulative("+", input, axis, reverse, "tl.cumsum", None if dtype is None else dtype_of(dtype))


@builtin
def cumprod(input: Any, axis: int = 0, reverse: bool = False) -> Any:
    """Inclusive running product along `axis` (bfloat16 in float32, as Triton)."""
    return kernel().cumulative("*", input, axis, reverse, "tl.cumprod")
