"""ATen's views, copies and creation ops as array-program builtins, one short rule per op.

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
    prefer,
    supports_slicing,
)

aten = torch.ops.aten


def dim_axis(dim: int, ndim: int) -> int:
    """torch's `dim` (negative: from the end) as an axis."""
    return dim + ndim if dim < 0 else dim


def along_axis(index: Traced, axis: int, ndim: int) -> Traced:
    """A 1-D index array shaped to broadcast along `axis` of an `ndim`-dimensional array."""
    return tt.reshape(index, tuple(-1 if d == axis else 1 for d in range(ndim)))


# ---- views and copies ---------------------------------------------------------------------------


def view(x: Traced, shape: Sequence[int]) -> Traced:
    return tt.reshape(x, tuple(int(d) for d in shape))


def permute(x: Traced, dims: Sequence[int]) -> Traced:
    return tt.transpose(x, tuple(dim_axis(d, x.ndim) for d in dims))


def t(x: Traced) -> Traced:
    return x if x.ndim < 2 else tt.transpose(x, (1, 0))


def transpose(x: Traced, a: int, b: int) -> Traced:
    return tt.swapaxes(x, a, b) if x.ndim > 1 else x


def expand(x: Traced, shape: Sequence[int], implicit: bool = False) -> Traced:
    lead = len(shape) - x.ndim
    return tt.broadcast_to(x, tuple(x.shape[i - lead] if d == -1 else int(d) for i, d in enumerate(shape)))


def unsqueeze(x: Traced, dim: int) -> Traced:
    dim = dim_axis(dim, x.ndim + 1)
    return tt.reshape(x, (*x.shape[:dim], 1, *x.shape[dim:]))


def squeeze(x: Traced, dims: int | Sequence[int] | None = None) -> Traced:
    listed = (dims,) if isinstance(dims, int) else dims
    axes = range(x.ndim) if listed is None else [dim_axis(d, x.ndim) for d in listed]
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


def moved_take(x: Traced, index: Traced, axis: int) -> Traced:
    """`tt.take(x, index, axis)` for a 1-D index, moved before the unary op or the gather along `axis` that
    computed `x`: the gather then reads its source where it is stored, instead of ending the kernel (a gather
    of a computed value needs memory), so RoPE's `cat([-x2, x1])` of slices is one elementwise kernel."""
    op = x.value.op if isinstance(x.value, OpResult) else None
    if isinstance(op, tta.UnaryOp):
        return x.tracer.emit(type(op), moved_take(Traced(x.tracer, op.input), index, axis).value)
    if isinstance(op, tta.TakeOp) and op.axis.value.data == axis and len(shape_of(op.indices.type)) == 1:
        return moved_take(Traced(x.tracer, op.table), _composed(Traced(x.tracer, op.indices), index), axis)
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
    return moved_take(x, index, axis)


def slice_(x: Traced, dim: int = 0, start: int | None = None, end: int | None = None, step: int = 1) -> Traced:
    axis = dim_axis(dim, x.ndim)
    start, end, step = slice(start, end, step).indices(x.shape[axis])
    if (start, end, step) == (0, x.shape[axis], 1):
        return x
    if supports_slicing():
        return x[(slice(None),) * axis + (slice(start, end, step),)]
    return _gather_range(x, axis, start, len(range(start, end, step)), step)


def select(x: Traced, dim: int, index: int) -> Traced:
    """`x[..., index, ...]`: a window of one along `dim`, reshaped away (a view a reader reads in place:
    `nn.MultiheadAttention`'s q, k and v selected from its packed projection)."""
    axis = dim_axis(dim, x.ndim)
    index = index + x.shape[axis] if index < 0 else index
    return tt.reshape(slice_(x, axis, index, index + 1), x.shape[:axis] + x.shape[axis + 1 :])


def split_with_sizes(x: Traced, sizes: Sequence[int], dim: int = 0) -> list[Traced]:
    offsets = np.cumsum([0, *sizes])
    return [slice_(x, dim, int(a), int(b)) for a, b in itertools.pairwise(offsets)]


def split(x: Traced, size: int, dim: int = 0) -> list[Traced]:
    n = x.shape[dim_axis(dim, x.ndim)]
    return split_with_sizes(x, [min(size, n - a) for a in range(0, n, size)] or [0], dim)


def _concatenate(arrays: Sequence[Traced], axis: int = 0) -> Traced:
    """Each output index takes its piece's element: one gather per piece, selected by the index's range."""
    axis = dim_axis(axis, arrays[0].ndim)
    total = sum(a.shape[axis] for a in arrays)
    index = along_axis(tt.arange(0, total), axis, arrays[0].ndim)
    result, offset = None, 0
    for a in arrays:
        n = a.shape[axis]
        if n:
            part = moved_take(a, tt.minimum(tt.maximum(tt.arange(0, total) - offset, 0), n - 1), axis)
            result = part if result is None else tt.where(index >= offset, part, result)
        offset += n
    return result


concatenate = prefer("concatenate", _concatenate)


def cat(arrays: Sequence[Traced], dim: int = 0) -> Traced:
    arrays = [a for a in arrays if not (a.ndim == 1 and a.shape[0] == 0)]  # torch skips legacy empty 1-D tensors
    return arrays[0] if len(arrays) == 1 else concatenate(arrays, axis=dim_axis(dim, arrays[0].ndim))


def flip(x: Traced, dims: Sequence[int]) -> Traced:
    return tt.flip(x, tuple(dim_axis(d, x.ndim) for d in dims))


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
        position = along_axis(tt.arange(0, n), axis, x.ndim)
        inner = slice_(dy, axis, before, before + n)
        for edge, start, count in ((0, 0, before), (n - 1, before + n, after)):
            if count:
                copies = tt.sum(slice_(dy, axis, start, start + count), axis=axis, keepdims=True)
                inner = inner + tt.where(position == edge, copies, 0)
        dy = inner
    return dy


def slice_scatter(base: Traced, src: Traced, dim: int = 0, start: int | None = None, end: int | None = None,
                  step: int = 1) -> Traced:
    """`base` with `base[..., start:end:step, ...] = src` along `dim`: src padded to base's extent where the index
    is in the slice (a window of src, which fuses as a view: the backward of RoPE's `cat` of two halves is one
    elementwise kernel), or, for a step over 1, a gather of src there."""
    axis = dim_axis(dim, base.ndim)
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
        part = moved_take(src, tt.minimum(tt.maximum((i - start) // step, 0), count - 1), axis)
    return tt.where(along_axis(inside, axis, base.ndim), part, base)


def _diagonal_window(x: Traced, offset: int, dim1: int, dim2: int) -> tuple[Traced, tuple[int, ...], slice]:
    """`x` with `dim1` and `dim2` moved last and merged (`[..., n * m]`), the order that moves them, and the strided
    window of the merged dim that is the diagonal at `offset` (step m + 1 from its first element)."""
    d1, d2 = dim_axis(dim1, x.ndim), dim_axis(dim2, x.ndim)
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


def new_empty_strided(x: Traced, shape: Sequence[int], stride: Sequence[int], dtype: torch.dtype | None = None,
                      **_: Any) -> Traced:
    """A new tensor (a clone's under dynamic shapes, before its `copy`): zeros, array programs having no strides."""
    return tt.full(tuple(int(d) for d in shape), 0, x.dtype if dtype is None else array_dtype(dtype))


def copy(x: Traced, src: Traced, non_blocking: bool = False) -> Traced:
    """`src`'s values in `x`'s shape and dtype."""
    return tt.broadcast_to(src, x.shape).astype(x.dtype)


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
    aten.full.default: full,
    aten.full_like.default: full_like,
    aten.scalar_tensor.default: scalar_tensor,
    aten.empty.memory_format: empty,
    aten.new_empty_strided.default: new_empty_strided,
    aten.copy.default: copy,
    **{op: arange for op in (aten.arange.default, aten.arange.start, aten.arange.start_step)},
}  # fmt: skip
"""ATen overload -> rule, for the shape and creation ops (the indexing ops: index_rules.py)."""
