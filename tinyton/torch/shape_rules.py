"""ATen's views, copies, indexing and creation ops as array-program builtins, one short rule per op.

Slices, concatenation and gathers are written with NumPy's spellings (`x[a:b]`, `tt.concatenate`,
`tt.take_along_axis`) where array programs have them, else composed of `tt.take` with index arrays from
`tt.arange` (a gather), and scatters of a few elements per row as `tt.where`s against index rows (one-hot),
so that the models' ops run in tinyton today and take the direct builtins as they land.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from xdsl.ir import OpResult

import tinyton.language as tt
from tinyton.dialects import tta
from tinyton.dialects.tt_types import shape_of
from tinyton.frontend.traced import Traced
from tinyton.torch.common import (
    Unsupported,
    array_dtype,
    has_builtin,
    prefer,
    supports_slicing,
)

aten = torch.ops.aten


def _axis(dim: int, ndim: int) -> int:
    return dim + ndim if dim < 0 else dim


def _along(index: Traced, axis: int, ndim: int) -> Traced:
    """A 1-D index array shaped to broadcast along `axis` of an `ndim`-dimensional array."""
    return tt.reshape(index, tuple(-1 if d == axis else 1 for d in range(ndim)))


# ---- views and copies ---------------------------------------------------------------------------


def view(x: Traced, shape: Sequence[int]) -> Traced:
    return tt.reshape(x, tuple(int(d) for d in shape))


def permute(x: Traced, dims: Sequence[int]) -> Traced:
    return tt.transpose(x, tuple(_axis(d, x.ndim) for d in dims))


def t(x: Traced) -> Traced:
    return x if x.ndim < 2 else tt.transpose(x, (1, 0))


def transpose(x: Traced, a: int, b: int) -> Traced:
    return tt.swapaxes(x, a, b) if x.ndim > 1 else x


def expand(x: Traced, shape: Sequence[int], implicit: bool = False) -> Traced:
    lead = len(shape) - x.ndim
    return tt.broadcast_to(x, tuple(x.shape[i - lead] if d == -1 else int(d) for i, d in enumerate(shape)))


def unsqueeze(x: Traced, dim: int) -> Traced:
    dim = _axis(dim, x.ndim + 1)
    return tt.reshape(x, (*x.shape[:dim], 1, *x.shape[dim:]))


def squeeze(x: Traced, dims: int | Sequence[int] | None = None) -> Traced:
    axes = range(x.ndim) if dims is None else [_axis(d, x.ndim) for d in ((dims,) if isinstance(dims, int) else dims)]
    return tt.reshape(x, tuple(n for i, n in enumerate(x.shape) if not (i in axes and n == 1)))


def identity(x: Traced, *args: Any, **kwargs: Any) -> Traced:
    """clone, alias, detach: values are immutable in array programs."""
    return x


def repeat(x: Traced, repeats: Sequence[int]) -> Traced:
    """`x.repeat(*repeats)` (NumPy's tile): each dim as (r, n) broadcast, then merged."""
    x = tt.reshape(x, (1,) * (len(repeats) - x.ndim) + x.shape)
    paired = tt.reshape(x, tuple(v for n in x.shape for v in (1, n)))
    tiled = tt.broadcast_to(paired, tuple(v for r, n in zip(repeats, x.shape) for v in (int(r), n)))
    return tt.reshape(tiled, tuple(int(r) * n for r, n in zip(repeats, x.shape)))


# ---- slices and concatenation --------------------------------------------------------------------


def _take(x: Traced, index: Traced, axis: int) -> Traced:
    """`tt.take(x, index, axis)` for a 1-D index, moved before the unary op or the gather along `axis` that
    computed `x`: the gather then reads its source where it is stored, instead of ending the kernel (a gather
    of a computed value needs memory), so RoPE's `cat([-x2, x1])` of slices is one elementwise kernel."""
    op = x.value.op if isinstance(x.value, OpResult) else None
    if isinstance(op, tta.UnaryOp):
        return x.tracer.emit(type(op), _take(Traced(x.tracer, op.input), index, axis).value)
    if isinstance(op, tta.TakeOp) and op.axis.value.data == axis and len(shape_of(op.indices.type)) == 1:
        return _take(Traced(x.tracer, op.table), _composed(Traced(x.tracer, op.indices), index), axis)
    return tt.take(x, index, axis=axis)


def _composed(inner: Traced, index: Traced) -> Traced:
    """`inner[index]` for 1-D index arrays: index arithmetic where `inner` is an arange (a slice's), which
    stays inside the kernel, else a gather."""
    op = inner.value.op if isinstance(inner.value, OpResult) else None
    if isinstance(op, tta.ArangeOp):
        return index + op.start.value.data
    return tt.take(inner, index)


def _gather_range(x: Traced, axis: int, start: int, count: int, step: int) -> Traced:
    """`x` at indices start, start + step, ... along `axis` (count of them), as a gather."""
    index = tt.arange(start, start + count) if step == 1 else tt.arange(0, count) * step + start
    return _take(x, index, axis)


def slice_(x: Traced, dim: int = 0, start: int | None = None, end: int | None = None, step: int = 1) -> Traced:
    axis = _axis(dim, x.ndim)
    start, end, step = slice(start, end, step).indices(x.shape[axis])
    if (start, end, step) == (0, x.shape[axis], 1):
        return x
    if supports_slicing():
        return x[(slice(None),) * axis + (slice(start, end, step),)]
    return _gather_range(x, axis, start, len(range(start, end, step)), step)


def select(x: Traced, dim: int, index: int) -> Traced:
    """`x[..., index, ...]`: a window of one along `dim`, reshaped away (a view a reader reads in place:
    `nn.MultiheadAttention`'s q, k and v selected from its packed projection)."""
    axis = _axis(dim, x.ndim)
    index = index + x.shape[axis] if index < 0 else index
    return tt.reshape(slice_(x, axis, index, index + 1), x.shape[:axis] + x.shape[axis + 1 :])


def split_with_sizes(x: Traced, sizes: Sequence[int], dim: int = 0) -> list[Traced]:
    offsets = np.cumsum([0, *sizes])
    return [slice_(x, dim, int(a), int(b)) for a, b in itertools.pairwise(offsets)]


def split(x: Traced, size: int, dim: int = 0) -> list[Traced]:
    n = x.shape[_axis(dim, x.ndim)]
    return split_with_sizes(x, [min(size, n - a) for a in range(0, n, size)] or [0], dim)


def _concatenate(arrays: Sequence[Traced], axis: int = 0) -> Traced:
    """Each output index takes its piece's element: one gather per piece, selected by the index's range."""
    axis = _axis(axis, arrays[0].ndim)
    total = sum(a.shape[axis] for a in arrays)
    index = _along(tt.arange(0, total), axis, arrays[0].ndim)
    result, offset = None, 0
    for a in arrays:
        n = a.shape[axis]
        if n:
            part = _take(a, tt.minimum(tt.maximum(tt.arange(0, total) - offset, 0), n - 1), axis)
            result = part if result is None else tt.where(index >= offset, part, result)
        offset += n
    return result


concatenate = prefer("concatenate", _concatenate)


def cat(arrays: Sequence[Traced], dim: int = 0) -> Traced:
    arrays = [a for a in arrays if not (a.ndim == 1 and a.shape[0] == 0)]  # torch skips legacy empty 1-D tensors
    return arrays[0] if len(arrays) == 1 else concatenate(arrays, axis=_axis(dim, arrays[0].ndim))


def flip(x: Traced, dims: Sequence[int]) -> Traced:
    return tt.flip(x, tuple(_axis(d, x.ndim) for d in dims))


def constant_pad_nd(x: Traced, pad: Sequence[int], value: Any = 0) -> Traced:
    """`F.pad`'s constant mode: (before, after) pairs from the last dim backwards; negative amounts crop."""
    widths = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        widths[x.ndim - 1 - i] = (int(pad[2 * i]), int(pad[2 * i + 1]))
    for axis, (before, after) in enumerate(widths):
        if before < 0 or after < 0:
            x = slice_(x, axis, max(0, -before), x.shape[axis] - max(0, -after))
    widths = [(max(0, before), max(0, after)) for before, after in widths]
    return tt.pad(x, widths, constant_values=value) if any(b or a for b, a in widths) else x


def replication_pad_backward(dy: Traced, x: Traced, padding: Sequence[int]) -> Traced:
    """The gradient of replicate padding (`F.pad(mode="replicate")`, `padding_mode="replicate"`), a dim at a time from
    the last: the unpadded window of `dy`, each edge element plus the sum of its copies padded on."""
    for i in range(len(padding) // 2):
        axis, before, after = x.ndim - 1 - i, int(padding[2 * i]), int(padding[2 * i + 1])
        if before < 0 or after < 0:
            raise Unsupported("replicate padding's gradient with a negative padding")
        n = x.shape[axis]
        position = _along(tt.arange(0, n), axis, x.ndim)
        inner = slice_(dy, axis, before, before + n)
        for edge, start, count in ((0, 0, before), (n - 1, before + n, after)):
            if count:
                copies = tt.sum(slice_(dy, axis, start, start + count), axis=axis, keepdims=True)
                inner = inner + tt.where(position == edge, copies, 0)
        dy = inner
    return dy


def index_select(x: Traced, dim: int, index: Traced) -> Traced:
    return _take(x, index, _axis(dim, x.ndim))


def slice_scatter(base: Traced, src: Traced, dim: int = 0, start: int | None = None, end: int | None = None,
                  step: int = 1) -> Traced:
    """`base` with `base[..., start:end:step, ...] = src` along `dim`: src padded to base's extent where the index
    is in the slice (a window of src, which fuses as a view: the backward of RoPE's `cat` of two halves is one
    elementwise kernel), or, for a step over 1, a gather of src there."""
    axis = _axis(dim, base.ndim)
    start, end, step = slice(start, end, step).indices(base.shape[axis])
    count = len(range(start, end, step))
    if count == 0:
        return base
    i = tt.arange(0, base.shape[axis])
    inside = (i >= start) & (i < end)
    if step == 1:
        widths = [(0, 0)] * base.ndim
        widths[axis] = (start, base.shape[axis] - end)
        part = tt.pad(src, widths)
    else:
        inside = inside & ((i - start) % step == 0)
        part = _take(src, tt.minimum(tt.maximum((i - start) // step, 0), count - 1), axis)
    return tt.where(_along(inside, axis, base.ndim), part, base)


def _diagonal_window(x: Traced, offset: int, dim1: int, dim2: int) -> tuple[Traced, tuple[int, ...], slice]:
    """`x` with `dim1` and `dim2` moved last and merged (`[..., n * m]`), the order that moves them, and the strided
    window of the merged dim that is the diagonal at `offset` (step m + 1 from its first element)."""
    d1, d2 = _axis(dim1, x.ndim), _axis(dim2, x.ndim)
    order = (*(d for d in range(x.ndim) if d not in (d1, d2)), d1, d2)
    n, m = x.shape[d1], x.shape[d2]
    count = min(n, m - offset) if offset >= 0 else min(n + offset, m)
    if count <= 0:
        raise Unsupported("an empty diagonal")
    start = offset if offset >= 0 else -offset * m
    merged = tt.reshape(tt.transpose(x, order), (*(x.shape[d] for d in order[:-2]), n * m))
    return merged, order, slice(start, start + (count - 1) * (m + 1) + 1, m + 1)


def diagonal(x: Traced, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Traced:
    """`x.diagonal(offset, dim1, dim2)` (einsum's `ii->i`): a strided window of the two dims merged, the diagonal
    last, as torch puts it."""
    merged, _, window = _diagonal_window(x, offset, dim1, dim2)
    return slice_(merged, merged.ndim - 1, window.start, window.stop, window.step)


def diagonal_scatter(x: Traced, src: Traced, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Traced:
    """`x` with its diagonal replaced by `src` (the diagonal's gradient): `slice_scatter` into the window `diagonal`
    reads, the dims put back."""
    merged, order, window = _diagonal_window(x, offset, dim1, dim2)
    merged = slice_scatter(merged, src, merged.ndim - 1, window.start, window.stop, window.step)
    moved = tt.reshape(merged, tuple(x.shape[d] for d in order))
    return tt.transpose(moved, tuple(int(a) for a in np.argsort(order)))


# ---- gathers and scatters -------------------------------------------------------------------------


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
    return _along(tt.arange(0, x.shape[axis]), axis, x.ndim) == index


def _same_other_dims(x: Traced, index: Traced, axis: int) -> bool:
    return index.ndim == x.ndim and all(index.shape[d] == x.shape[d] for d in range(x.ndim) if d != axis)


def gather(x: Traced, dim: int, index: Traced, sparse_grad: bool = False) -> Traced:
    axis = _axis(dim, x.ndim)
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
    axis = _axis(dim, base.ndim)
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
    axis = _axis(dim, base.ndim)
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
    return summed if padding_idx < 0 else tt.where(_along(tt.arange(0, num_weights), 0, 2) == padding_idx, 0, summed)


# ---- creation -------------------------------------------------------------------------------------


def _fill_dtype(value: Any, dtype: torch.dtype | None) -> Any:
    if dtype is not None:
        return array_dtype(dtype)
    return np.bool_ if isinstance(value, bool) else np.int32 if isinstance(value, int) else np.float32


def full(shape: Sequence[int], value: Any, dtype: torch.dtype | None = None, **_: Any) -> Traced:
    return tt.full(tuple(int(d) for d in shape), value, _fill_dtype(value, dtype))


def full_like(x: Traced, value: Any, dtype: torch.dtype | None = None, **_: Any) -> Traced:
    return tt.full(x.shape, value, x.dtype if dtype is None else array_dtype(dtype))


def scalar_tensor(value: Any, dtype: torch.dtype | None = None, **_: Any) -> Traced:
    return full((), value, dtype)


def empty(shape: Sequence[int], dtype: torch.dtype | None = None, **_: Any) -> Traced:
    return full(shape, 0, dtype or torch.float32)


def arange(start: Any, end: Any = None, step: Any = 1, dtype: torch.dtype | None = None, **_: Any) -> Traced:
    start, end = (0, start) if end is None else (start, end)
    if not all(isinstance(v, int) for v in (start, end, step)):
        raise Unsupported("arange with float bounds")
    count = len(range(start, end, step))
    values = tt.arange(start, end) if step == 1 else tt.arange(0, count) * step + start
    return values if dtype is None else values.astype(array_dtype(dtype))


RULES = {
    **{op: view for op in (aten.view.default, aten._unsafe_view.default, aten.reshape.default)},
    aten.permute.default: permute,
    aten.t.default: t,
    aten.transpose.int: transpose,
    aten.expand.default: expand,
    aten.unsqueeze.default: unsqueeze,
    **{op: squeeze for op in (aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims)},
    **{op: identity for op in (aten.clone.default, aten.alias.default, aten.detach.default,
                               aten.lift_fresh_copy.default)},
    aten.repeat.default: repeat,
    aten.slice.Tensor: slice_,
    aten.select.int: select,
    aten.split_with_sizes.default: split_with_sizes,
    aten.split.Tensor: split,
    aten.cat.default: cat,
    aten.slice_scatter.default: slice_scatter,
    aten.diagonal.default: diagonal,
    aten.diagonal_scatter.default: diagonal_scatter,
    aten.flip.default: flip,
    aten.constant_pad_nd.default: constant_pad_nd,
    **{getattr(aten, f"replication_pad{n}d_backward").default: replication_pad_backward for n in (1, 2, 3)},
    aten.index_select.default: index_select,
    aten.embedding.default: embedding,
    aten.embedding_dense_backward.default: embedding_dense_backward,
    aten.index.Tensor: index,
    aten.gather.default: gather,
    **{op: scatter for op in (aten.scatter.value, aten.scatter.src)},
    aten.scatter_add.default: scatter_add,
    aten.index_put.default: index_put,
    aten.full.default: full,
    aten.full_like.default: full_like,
    aten.scalar_tensor.default: scalar_tensor,
    aten.empty.memory_format: empty,
    **{op: arange for op in (aten.arange.default, aten.arange.start, aten.arange.start_step)},
}  # fmt: skip
"""ATen overload -> rule, for the shape, indexing and creation ops."""
