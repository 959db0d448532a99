"""ATen's indexing ops as array-program builtins, one short rule per op: takes and gathers, and scatters of a few
elements per row as `tt.where`s against index rows (one-hot), their gradients as one-hot sums (a matmul a dim).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

import tinyton.language as tt
from tinyton.frontend.traced import Traced
from tinyton.torch.common import Unsupported, has_builtin
from tinyton.torch.shape_rules import along_axis, dim_axis, moved_take

aten = torch.ops.aten


def index_select(x: Traced, dim: int, index: Traced) -> Traced:
    return moved_take(x, index, dim_axis(dim, x.ndim))


def embedding(weight: Traced, indices: Traced, *args: Any) -> Traced:
    return tt.take(weight, indices, axis=0)


def index(x: Traced, indices: Sequence[Traced | None]) -> Traced:
    """`x[idx]` with one index array (possibly after full slices: `x[:, idx]`): a take along its axis; with several
    (nearest interpolation's `x[:, :, rows, cols]`), the array programs' indexing, which broadcasts them together and
    places their dims as torch does (NumPy's rules)."""
    arrays = [(i, a) for i, a in enumerate(indices) if a is not None]
    if len(arrays) > 1:
        return x[tuple(slice(None) if a is None else a for a in indices)]
    axis, idx = arrays[0]
    return tt.take(x, idx, axis=axis)


def _one_hot_row(x: Traced, axis: int, index: Traced) -> Traced:
    """Where the index array (one entry along `axis`) equals each position along `axis`."""
    return along_axis(tt.arange(0, x.shape[axis]), axis, x.ndim) == index


def _same_other_dims(x: Traced, index: Traced, axis: int) -> bool:
    return index.ndim == x.ndim and all(index.shape[d] == x.shape[d] for d in range(x.ndim) if d != axis)


def gather(x: Traced, dim: int, index: Traced, sparse_grad: bool = False) -> Traced:
    axis = dim_axis(dim, x.ndim)
    if not _same_other_dims(x, index, axis):
        raise Unsupported("gather with an index smaller than the input outside `dim`")
    if has_builtin("take_along_axis"):
        return tt.take_along_axis(x, index, axis=axis)
    if index.shape[axis] != 1:
        raise Unsupported("gather of several elements per row needs tt.take_along_axis")
    return tt.sum(tt.where(_one_hot_row(x, axis, index), x, 0), axis=axis, keepdims=True)


SCATTER_SELECTS = 16
"""Most elements a row a scatter writes (one select each, in one elementwise kernel); top-k's backward writes k."""


def scatter(base: Traced, dim: int, index: Traced, src: Any) -> Traced:
    """Elements written at their indices along `dim` (cross_entropy's backward writes one a row, top-k's k): one select
    against each index column, in order, so where a row's indices repeat the last write wins (torch leaves it open)."""
    axis = dim_axis(dim, base.ndim)
    if not _same_other_dims(base, index, axis) or index.shape[axis] > SCATTER_SELECTS:
        raise Unsupported(f"scatter of other than at most {SCATTER_SELECTS} elements per row")
    if isinstance(src, Traced) and src.shape != index.shape:
        raise Unsupported("scatter with a source larger than its index")
    out = base
    for i in range(index.shape[axis]):
        column = (slice(None),) * axis + (slice(i, i + 1),)
        out = tt.where(_one_hot_row(base, axis, index[column]), src[column] if isinstance(src, Traced) else src, out)
    return out


def scatter_add(base: Traced, dim: int, index: Traced, src: Traced) -> Traced:
    """`base.scatter_add(dim, index, src)`: each `src` element (over the index's extent) added at its index along
    `dim`: a sum over the index's axis of `src` where the index equals each position (a one-hot reduction, as
    embedding's backward sums: no atomics, the same order every run)."""
    axis = dim_axis(dim, base.ndim)
    if index.ndim != base.ndim or any(index.shape[d] != base.shape[d] for d in range(base.ndim) if d != axis):
        raise Unsupported("scatter_add with an index smaller than the input outside `dim`")
    src = src[tuple(slice(0, n) for n in index.shape)] if src.shape != index.shape else src
    positions = tt.reshape(tt.arange(0, base.shape[axis]), (1,) * index.ndim + (-1,))
    hot = tt.reshape(index, (*index.shape, 1)) == positions  # [..., I, ..., J]
    summed = tt.sum(tt.where(hot, tt.reshape(src, (*src.shape, 1)), 0), axis=axis)  # [..., ..., J]
    order = (*range(axis), base.ndim - 1, *range(axis, base.ndim - 1))  # J back in the place of `dim`
    return base + tt.transpose(summed, order).astype(base.dtype)


def _one_hot(rows: int, index: Traced, dtype: Any) -> Traced:
    """`[rows, n]`: 1 where entry j of the (flattened) index is row i. A negative index counts from the end, as torch's
    indexing (`x[:, -1]`) reads it: the gradient of `x[idx]` puts it back there (the one-hot of the index itself
    matched no row, and the gradient was lost)."""
    flat = tt.reshape(index, (1, -1))
    flat = tt.where(flat < 0, flat + rows, flat)
    return (tt.reshape(tt.arange(0, rows), (rows, 1)) == flat).astype(dtype)


def _one_hot_sum(rows: int, indices: Traced, values: Traced) -> Traced:
    """sum over i of values[i] into row indices[i]: (one-hot of the indices)ᵀ @ values, a matmul."""
    hot = _one_hot(rows, indices, values.dtype)
    return hot @ tt.reshape(values, (hot.shape[1], -1))


def _summed_into(values: Traced, axis: int, index: Traced, rows: int) -> Traced:
    """`values` with its dim `axis` (one entry of the 1-D `index` each) summed into `rows` rows, entry i into row
    `index[i]`: a matmul by the index's one-hot on that dim, batched over the dims before it (the last dim multiplied
    from the right: no transpose)."""
    hot = _one_hot(rows, index, values.dtype)
    if axis == values.ndim - 1:
        return values @ tt.transpose(hot)
    return tt.swapaxes(hot @ tt.swapaxes(values, axis, -2), axis, -2)


def _outer_lines(arrays: Sequence[Traced]) -> list[Traced] | None:
    """Each index array as a 1-D index where they make an outer product: array k varying only along dim k of their
    broadcast shape (nearest interpolation's rows `[Ho, 1]` and columns `[Wo]`, or one 1-D array); else None."""
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    if len(shape) != len(arrays):
        return None
    lines = []
    for k, a in enumerate(arrays):
        aligned = (1,) * (len(shape) - a.ndim) + a.shape
        if any(n != 1 for d, n in enumerate(aligned) if d != k):
            return None
        lines.append(tt.broadcast_to(tt.reshape(a, (aligned[k],)), (shape[k],)))
    return lines


def index_put(base: Traced, indices: Sequence[Traced | None], values: Traced, accumulate: bool = False) -> Traced:
    """`base.index_put_(indices, values, accumulate=True)` with adjacent index arrays after whole axes: one before any
    other axis (embedding's backward) a one-hot matmul; a 1-D one (`index_select`'s backward), or several that make an
    outer product (nearest interpolation's backward), one one-hot matmul along each indexed axis in turn (the sums
    over each output row and column, instead of one over their product)."""
    at = [i for i, index in enumerate(indices) if index is not None]
    if not accumulate or not at or at != list(range(at[0], at[0] + len(at))) or values.dtype.kind != "f":
        raise Unsupported("index_put other than an accumulation by adjacent index arrays after whole axes")
    arrays = [indices[i] for i in at]
    axis, shape = at[0], tuple(np.broadcast_shapes(*(a.shape for a in arrays)))
    values = tt.broadcast_to(values, base.shape[:axis] + shape + base.shape[axis + len(at) :])
    if axis == 0 and len(arrays) == 1:  # rows by an index array of any shape
        return base + tt.reshape(_one_hot_sum(base.shape[0], arrays[0], values), base.shape)
    lines = _outer_lines(arrays)
    if lines is None:
        raise Unsupported("index_put by index arrays other than a 1-D one or an outer product of them")
    for k, line in enumerate(lines):
        values = _summed_into(values, axis + k, line, base.shape[axis + k])
    return base + values


def embedding_dense_backward(grad: Traced, indices: Traced, num_weights: int, padding_idx: int,
                             scale_grad_by_freq: bool) -> Traced:
    if scale_grad_by_freq:
        raise Unsupported("embedding backward with scale_grad_by_freq")
    summed = _one_hot_sum(num_weights, indices, grad)
    if padding_idx < 0:
        return summed
    return tt.where(along_axis(tt.arange(0, num_weights), 0, 2) == padding_idx, 0, summed)


RULES = {
    aten.index_select.default: index_select,
    aten.embedding.default: embedding,
    aten.embedding_dense_backward.default: embedding_dense_backward,
    aten.index.Tensor: index,
    aten.gather.default: gather,
    **{op: scatter for op in (aten.scatter.value, aten.scatter.src)},
    aten.scatter_add.default: scatter_add,
    aten.index_put.default: index_put,
}  # fmt: skip
"""ATen overload -> rule, for the indexing ops."""
