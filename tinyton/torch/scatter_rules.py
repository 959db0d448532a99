"""ATen's scatters as array-program builtins: each a reduction over the index's axis of the source where the index
equals each position along `dim` (a one-hot, as embedding's backward sums: no atomics, the same order every run), or,
for a few elements a row, selects against the index's columns.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

import tinyton.language as tt
from tinyton.frontend.traced import Traced
from tinyton.torch.common import Unsupported
from tinyton.torch.shape_rules import along_axis, dim_axis

aten = torch.ops.aten


def one_hot_row(x: Traced, axis: int, index: Traced) -> Traced:
    """Where the index array (one entry along `axis`) equals each position along `axis`."""
    return along_axis(tt.arange(0, x.shape[axis]), axis, x.ndim) == index


def checked_index(index: Traced, size: int, wraps: bool = True) -> Traced:
    """`index` into a dim of `size`, read as `arange(size)[index]`: an index outside `[-size, size)` (`[0, size)`
    unless it `wraps`, as a scatter's) stops the kernel with an IndexError (`tt.assert`) as eager raises, where a
    one-hot against it would silently write nothing; negatives counted from the end. The gather of an arange is an
    elementwise check of the index (`tinyton-check-indices`), in the kernel that reads it. Taken by every scatter and
    `index_put` a user calls (forward and inference graphs: `CHECKED_RULES`); in a backward graph only by
    `scatter_reduce` and assigning `index_put`, not by the scatters and accumulations autograd gives gathers' and
    indexing's gradients (and top-k's, cross entropy's), whose indices the forward has checked."""
    if not wraps:
        index = tt.where(index < 0, size, index)
    return tt.take(tt.arange(0, size), index)


def checked(rule: Callable[..., Traced]) -> Callable[..., Traced]:
    """A scatter's `rule` (`base, dim, index, ...`) reading its index through `checked_index`: a negative index is
    out of range, as eager's scatters have it."""

    @functools.wraps(rule)
    def rule_checked(base: Traced, dim: int, index: Traced, *args: Any, **kwargs: Any) -> Traced:
        if index.size:
            index = checked_index(index, base.shape[dim_axis(dim, base.ndim)], wraps=False)
        return rule(base, dim, index, *args, **kwargs)

    return rule_checked


def same_other_dims(x: Traced, index: Traced, axis: int) -> bool:
    return index.ndim == x.ndim and all(index.shape[d] == x.shape[d] for d in range(x.ndim) if d != axis)


SCATTER_SELECTS = 16
"""Most elements a row a scatter writes (one select each, in one elementwise kernel); top-k's backward writes k."""


def scatter(base: Traced, dim: int, index: Traced, src: Any) -> Traced:
    """Elements written at their indices along `dim` (cross_entropy's backward writes one a row, top-k's k): one select
    against each index column, in order, so where a row's indices repeat the last write wins (torch leaves it open)."""
    axis = dim_axis(dim, base.ndim)
    if not same_other_dims(base, index, axis) or index.shape[axis] > SCATTER_SELECTS:
        raise Unsupported(f"scatter of other than at most {SCATTER_SELECTS} elements per row")
    if isinstance(src, Traced) and src.shape != index.shape:
        raise Unsupported("scatter with a source larger than its index")
    out = base
    for i in range(index.shape[axis]):
        column = (slice(None),) * axis + (slice(i, i + 1),)
        out = tt.where(one_hot_row(base, axis, index[column]), src[column] if isinstance(src, Traced) else src, out)
    return out


def _reduced(base: Traced, axis: int, index: Traced, src: Any, reduction: Callable[..., Traced], fill: Any) -> Traced:
    """`reduction` (`tt.sum`, `tt.max`, ...) over the index's axis of `src` (read over the index's extent; a scalar:
    everywhere) where the index equals each position along `axis`, `fill` elsewhere: an array of `base`'s shape."""
    if not same_other_dims(base, index, axis):
        raise Unsupported("a scatter with an index smaller than the input outside `dim`")
    if isinstance(src, Traced):
        src = src[tuple(slice(0, n) for n in index.shape)] if src.shape != index.shape else src
        src = tt.reshape(src, (*src.shape, 1))
    positions = tt.reshape(tt.arange(0, base.shape[axis]), (1,) * index.ndim + (-1,))
    hot = tt.reshape(index, (*index.shape, 1)) == positions  # [..., I, ..., J]
    reduced = reduction(tt.where(hot, src, fill), axis=axis)  # [..., ..., J]
    return tt.transpose(reduced, (*range(axis), base.ndim - 1, *range(axis, base.ndim - 1)))  # J in `dim`'s place


def scatter_add(base: Traced, dim: int, index: Traced, src: Traced) -> Traced:
    """`base.scatter_add(dim, index, src)`: each `src` element (over the index's extent) added at its index along
    `dim`."""
    if index.size == 0:
        return base
    return base + _reduced(base, dim_axis(dim, base.ndim), index, src, tt.sum, 0).astype(base.dtype)


REDUCTIONS: dict[str, tuple[Callable[..., Traced], Callable[[Traced, Traced], Traced]]] = {
    "sum": (tt.sum, tt.add),
    "mean": (tt.sum, tt.add),
    "prod": (tt.prod, tt.multiply),
    "amax": (tt.max, tt.maximum),
    "amin": (tt.min, tt.minimum),
}
"""scatter_reduce's `reduce` -> (the reduction over the elements written to a position, how it takes in `self`)."""


def _identity(reduce: str, dtype: np.dtype) -> Any:
    """The value `reduce` over no element gives (where a position is not written), in `dtype`."""
    if reduce in ("sum", "mean", "prod"):
        return int(reduce == "prod")
    if dtype.kind == "f":
        return -np.inf if reduce == "amax" else np.inf
    info = np.iinfo(dtype)
    return int(info.min if reduce == "amax" else info.max)


def scatter_reduce(base: Traced, dim: int, index: Traced, src: Traced, reduce: str, *,
                   include_self: bool = True) -> Traced:
    """`base.scatter_reduce(dim, index, src, reduce, include_self)`: the `src` elements written to each position
    reduced (sum, prod, mean, amax, amin; NaN propagating through amax and amin, as eager's), with the position's own
    value where `include_self`, a position none writes keeping its value; an integer mean rounded down (eager's
    floor division). Another `reduce` is eager's error when dynamo traces the call."""
    if index.size == 0:
        return base
    axis = dim_axis(dim, base.ndim)
    reduction, take_in = REDUCTIONS[reduce]
    reduced = _reduced(base, axis, index, src, reduction, _identity(reduce, base.dtype)).astype(base.dtype)
    counts = _reduced(base, axis, index, 1, tt.sum, 0)
    out = take_in(base, reduced) if include_self else tt.where(counts > 0, reduced, base)
    if reduce != "mean":
        return out
    counts = counts + 1 if include_self else tt.maximum(counts, 1)
    return (out / counts if base.dtype.kind == "f" else out // counts).astype(base.dtype)


RULES = {
    **{op: scatter for op in (aten.scatter.value, aten.scatter.src)},
    aten.scatter_add.default: scatter_add,
    aten.scatter_reduce.two: checked(scatter_reduce),
}  # fmt: skip
"""ATen overload -> rule, for the scatters (a backward graph's: `scatter` and `scatter_add` unchecked)."""

CHECKED_RULES = {
    **{op: checked(scatter) for op in (aten.scatter.value, aten.scatter.src)},
    aten.scatter_add.default: checked(scatter_add),
}  # fmt: skip
"""The scatters a user calls (forward and inference graphs), their indices checked (`checked_index`)."""
