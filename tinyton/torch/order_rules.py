"""ATen's sorts and order statistics (`sort`, `topk`, `kthvalue`, `median`, `nanmedian`) on the array programs'
sort: rows of any length (a long one sorted in chunks and merged), NaN as the largest value, equal values in index
order (tinyton/frontend/array_sorting.py). Values are eager's; indices are eager's where the row has no ties
(torch's CPU kernels order ties, NaNs included, their own way: every index given gathers its value). `searchsorted`
and `bucketize` are eager's binary search, step by step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

import tinyton.language as tt
from tinyton.frontend.traced import Traced
from tinyton.torch.common import Unsupported, array_dtype

aten = torch.ops.aten


def sort(x: Traced, dim: int = -1, descending: bool = False) -> tuple[Traced, Traced]:
    """torch's sort: NaN as the largest value; equal values in index order (`stable=True`'s order, which torch's
    CPU sort without it need not give: the values match eager, the indices of ties may differ)."""
    if x.ndim == 0:  # torch sorts a 0-d tensor as one element
        values, indices = sort(x.reshape(1), 0, descending)
        return values.reshape(()), indices.reshape(())
    return tt.sort(x, dim, descending=descending), tt.argsort(x, dim, descending=descending)


def sort_stable(x: Traced, *, stable: bool | None = None, dim: int = -1,
                descending: bool = False) -> tuple[Traced, Traced]:
    return sort(x, dim, descending)


def topk(x: Traced, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> tuple[Traced, Traced]:
    """torch's topk: the first `k` of the sorted row (NaN the largest), always in sorted order; ties in index order
    (torch's CPU topk orders them otherwise: the values match eager, the indices of ties may differ)."""
    values, indices = sort(x, dim, largest)
    if x.ndim == 0:
        return values, indices
    window = (slice(None),) * (dim % x.ndim) + (slice(0, k),)
    return values[window], indices[window]


def _select(x: Traced, dim: int, keepdim: bool, position: Callable[[Traced], int | Traced]) -> tuple[Traced, Traced]:
    """The element at `position` of each row (along `dim`) sorted (NaN largest, ties by index), and its index:
    `position` is given the sorted rows and returns an int, or a per-row position (keepdim's shape)."""
    values, indices = sort(x, dim)
    if x.ndim == 0:  # torch's 0-d tensor is one row, its own dim 0
        return values, indices
    dim %= x.ndim
    at = position(values)
    if isinstance(at, int):
        picked = [t[(slice(None),) * dim + (slice(at, at + 1),)] for t in (values, indices)]
    else:
        picked = [tt.take_along_axis(t, at, dim) for t in (values, indices)]
    values, indices = (p if keepdim else tt.squeeze(p, dim) for p in picked)
    return values, indices


def _counted(values: Traced, dim: int) -> Traced:
    """Each sorted row's count of non-NaN elements (they sort first), keepdim's shape."""
    return tt.sum(values == values, axis=dim % values.ndim, keepdims=True).astype("int64")


def kthvalue(x: Traced, k: int, dim: int = -1, keepdim: bool = False) -> tuple[Traced, Traced]:
    """torch's kthvalue: the k-th smallest (k from 1) of each row and its index; NaN the largest."""
    n = x.shape[dim] if x.ndim else 1
    if not 1 <= k <= n:
        raise Unsupported(f"kthvalue: k={k} out of range for rows of {n} (torch's error)")
    return _select(x, dim, keepdim, lambda values: k - 1)


def median_dim(x: Traced, dim: int = -1, keepdim: bool = False) -> tuple[Traced, Traced]:
    """torch's median along `dim`: the lower median ((n - 1) // 2 of the sorted row) and its index; a row holding a
    NaN gives NaN at the index of its first NaN, as eager."""
    n = x.shape[dim] if x.ndim else 1

    def position(values: Traced) -> int | Traced:
        if not values.dtype.kind == "f":
            return (n - 1) // 2
        count = _counted(values, dim)
        return tt.where(count < n, count, (n - 1) // 2)

    return _select(x, dim, keepdim, position)


def nanmedian_dim(x: Traced, dim: int = -1, keepdim: bool = False) -> tuple[Traced, Traced]:
    """torch's nanmedian along `dim`: the lower median of each row's non-NaN elements and its index; an all-NaN row
    gives NaN (its index: the row's first NaN; eager's is any of them)."""
    if x.dtype.kind != "f":
        return median_dim(x, dim, keepdim)
    return _select(x, dim, keepdim, lambda values: tt.maximum((_counted(values, dim) - 1) // 2, 0))


def median_all(x: Traced) -> Traced:
    """torch's median of the whole tensor: the lower median, NaN if any element is NaN."""
    if x.size == 0:
        raise Unsupported("median of an empty tensor")
    return median_dim(x.reshape(-1), 0)[0]


def nanmedian_all(x: Traced) -> Traced:
    """torch's nanmedian of the whole tensor: the lower median of the non-NaN elements, NaN if there are none."""
    if x.size == 0:
        raise Unsupported("nanmedian of an empty tensor")
    return nanmedian_dim(x.reshape(-1), 0)[0]


def _binary_search(seq: Traced, values: Traced, right: bool) -> Traced:
    """Eager's search of each value in `seq` (1-D, or one row for each row of `values`): its loop, `start` and `end`
    halving to where `seq[mid] >= value` (`right`: `>`) first holds, run for every value at once (the length's bit
    count of steps), so that its results on NaNs and on unsorted rows are eager's too (a NaN value: the length)."""
    n = seq.shape[-1]
    start, end = tt.full(values.shape, 0, np.int32), tt.full(values.shape, n, np.int32)
    for _ in range(n.bit_length()):
        mid = start + (end - start) // 2
        at = tt.minimum(mid, n - 1)
        found = tt.take(seq, at) if seq.ndim == 1 else tt.take_along_axis(seq, at, axis=-1)
        after = found > values if right else found >= values
        searching = start < end
        start, end = tt.where(searching & ~after, mid + 1, start), tt.where(searching & after, mid, end)
    return start


def searchsorted(seq: Traced, values: Any, *, out_int32: bool = False, right: bool = False, side: str | None = None,
                 sorter: Traced | None = None) -> Traced:
    """`torch.searchsorted(seq, values, right=, side=, sorter=)`: where each value goes in its (sorted) row of `seq`,
    int64 (`out_int32`: int32); a Python number searched as a 0-d tensor."""
    if sorter is not None:
        seq = tt.take(seq, sorter) if seq.ndim == 1 else tt.take_along_axis(seq, sorter, axis=-1)
    if not isinstance(values, Traced):
        values = tt.full((), values, np.float32 if isinstance(values, float) else seq.dtype)
    found = _binary_search(seq, values, right if side is None else side == "right")
    return found.astype(array_dtype(torch.int32 if out_int32 else torch.int64))


def bucketize(values: Any, boundaries: Traced, *, out_int32: bool = False, right: bool = False) -> Traced:
    """`torch.bucketize(values, boundaries, right=)`: searchsorted with the arguments swapped."""
    return searchsorted(boundaries, values, out_int32=out_int32, right=right)


RULES = {
    aten.sort.default: sort,
    aten.sort.stable: sort_stable,
    aten.topk.default: topk,
    aten.kthvalue.default: kthvalue,
    aten.median.default: median_all,
    aten.median.dim: median_dim,
    aten.nanmedian.default: nanmedian_all,
    aten.nanmedian.dim: nanmedian_dim,
    **{op: searchsorted for op in (aten.searchsorted.Tensor, aten.searchsorted.Scalar)},
    **{op: bucketize for op in (aten.bucketize.Tensor, aten.bucketize.Scalar)},
}
"""ATen overload -> rule, for sorts and order statistics."""
