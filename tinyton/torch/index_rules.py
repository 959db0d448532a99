"""ATen's indexing ops as array-program builtins, one short rule per op: takes and gathers, and `index_put`
(assignments as selects against the index, one-hot; accumulations and indexing's gradients as one-hot sums, a
matmul a dim). The scatters are scatter_rules.py's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

import tinyton.language as tt
from tinyton.frontend.traced import Traced
from tinyton.torch.common import Unsupported, has_builtin
from tinyton.torch.scatter_rules import checked_index, one_hot_row, same_other_dims, scatter_add
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


def gather(x: Traced, dim: int, index: Traced, sparse_grad: bool = False) -> Traced:
    axis = dim_axis(dim, x.ndim)
    if not same_other_dims(x, index, axis):
        raise Unsupported("gather with an index smaller than the input outside `dim`")
    if has_builtin("take_along_axis"):
        return tt.take_along_axis(x, index, axis=axis)
    if index.shape[axis] != 1:
        raise Unsupported("gather of several elements per row needs tt.take_along_axis")
    return tt.sum(tt.where(one_hot_row(x, axis, index), x, 0), axis=axis, keepdims=True)


def _hits(rows: int, index: Traced) -> Traced:
    """`[rows, n]`: where entry j of the (flattened, non-negative) index is row i."""
    return tt.reshape(tt.arange(0, rows), (rows, 1)) == tt.reshape(index, (1, -1))


def _one_hot(rows: int, index: Traced, dtype: Any) -> Traced:
    """`[rows, n]`: 1 where entry j of the (flattened) index is row i. A negative index counts from the end, as torch's
    indexing (`x[:, -1]`) reads it: the gradient of `x[idx]` puts it back there (the one-hot of the index itself
    matched no row, and the gradient was lost)."""
    return _hits(rows, tt.where(index < 0, index + rows, index)).astype(dtype)


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


def _flat_index(arrays: Sequence[Traced], sizes: Sequence[int]) -> Traced:
    """The index arrays (broadcast together) as one 1-D index into their dims flattened row-major, each negative
    index counted from the end of its dim (torch's `x[i, -1]`)."""
    flat: Traced | int = 0
    for a, n in zip(arrays, sizes):
        flat = flat * n + tt.where(a < 0, a + n, a)
    return tt.reshape(tt.broadcast_to(flat, tuple(np.broadcast_shapes(*(a.shape for a in arrays)))), (-1,))


def _merged(x: Traced, axis: int, count: int) -> Traced:
    """`x` with its dims `axis` .. `axis + count - 1` flattened into one."""
    return tt.reshape(x, (*x.shape[:axis], -1, *x.shape[axis + count :]))


def _flattened(base: Traced, axis: int, arrays: Sequence[Traced], values: Traced) -> tuple[Traced, Traced, Traced]:
    """The dims the arrays index flattened into one: the arrays as one 1-D index into it, and `base` and `values`
    (broadcast to the indexed shape) with those dims merged."""
    indexed = len(np.broadcast_shapes(*(a.shape for a in arrays)))
    flat = _flat_index(arrays, base.shape[axis : axis + len(arrays)])
    return flat, _merged(base, axis, len(arrays)), _merged(values, axis, indexed)


def _last_writer(flat: Traced, rows: int) -> Traced:
    """`[rows]`: the last position of the 1-D index `flat` holding each row, -1 for a row none holds (an assignment's
    later write wins, as NumPy's does; torch leaves repeated indices' order open)."""
    positions = tt.reshape(tt.arange(0, flat.shape[0]), (1, -1))
    return tt.max(tt.where(_hits(rows, flat), positions, -1), axis=1)


def _assigned(base: Traced, axis: int, arrays: Sequence[Traced], values: Traced) -> Traced:
    """`base[..., *arrays, ...] = values` (values already broadcast to the indexed shape): the indexed dims flattened
    into one, each of its rows taking the value its last writer gives (a one-hot against the index, any dtype)."""
    flat, merged, values = _flattened(base, axis, arrays, values)
    writer = along_axis(_last_writer(flat, merged.shape[axis]), axis, merged.ndim)
    taken = tt.take(values, tt.reshape(tt.maximum(writer, 0), (-1,)), axis=axis)
    return tt.reshape(tt.where(writer >= 0, taken.astype(base.dtype), merged), base.shape)


def _spread(values: Traced, axis: int, index: Traced, rows: int) -> Traced:
    """`values` (dim `axis` one entry of the 1-D `index` each) with a dim of `rows` inserted before `axis`: entry i
    kept in row `index[i]`, zero in the others (a select against the index, one-hot)."""
    hot = _hits(rows, index)
    hot = tt.reshape(hot, (1,) * axis + hot.shape + (1,) * (values.ndim - axis - 1))
    return tt.where(hot, tt.reshape(values, (*values.shape[:axis], 1, *values.shape[axis:])), 0)


def _accumulated(base: Traced, axis: int, arrays: Sequence[Traced], values: Traced) -> Traced:
    """`base[..., *arrays, ...] += values` (values broadcast to the indexed shape, every write counted). Floats by
    one-hot matmuls: one index array before any other axis (embedding's backward) one; a 1-D one (`index_select`'s
    backward), or several that make an outer product (nearest interpolation's backward), one along each indexed axis
    in turn (the sums over each output row and column, instead of one over their product); other arrays (paired ones,
    `x[arange(n), labels]`'s backward) spread each value over the rows the leading arrays index (a select), then sum
    them into the last array's dim by its one-hot (a matmul: `[n, C]`, never the one-hot of all the indexed dims,
    `[n, R·C]`). Integers by `scatter_add`'s one-hot sum on the indexed dims flattened (exact)."""
    floats = values.dtype.kind == "f"
    if floats and axis == 0 and len(arrays) == 1:  # rows by an index array of any shape
        return base + tt.reshape(_one_hot_sum(base.shape[0], arrays[0], values), base.shape)
    lines = _outer_lines(arrays) if floats else None
    if lines is not None:
        for k, line in enumerate(lines):
            values = _summed_into(values, axis + k, line, base.shape[axis + k])
        return base + values
    if not floats:
        flat, merged, values = _flattened(base, axis, arrays, values)
        index = tt.broadcast_to(along_axis(flat, axis, values.ndim), values.shape)
        return tt.reshape(scatter_add(merged, axis, index, values), base.shape)
    shape = tuple(np.broadcast_shapes(*(a.shape for a in arrays)))
    arrays = [tt.broadcast_to(a, shape) for a in arrays]
    rows = base.shape[axis : axis + len(arrays)]
    values = _merged(values, axis, len(shape))
    if len(arrays) > 1:
        values = _spread(values, axis, _flat_index(arrays[:-1], rows[:-1]), int(np.prod(rows[:-1])))
        axis += 1
    summed = _summed_into(values, axis, _flat_index(arrays[-1:], rows[-1:]), rows[-1])
    return base + tt.reshape(summed, base.shape)


def _masked(base: Traced, axis: int, mask: Traced, values: Traced, accumulate: bool) -> Traced:
    """`base[..., mask] = values` (`+=`) with one value for every masked element (`x[x < 0] = 0`, or a row each): a
    select where the mask holds. Values differing between the masked elements (their count is the mask's data) run
    in torch."""
    rest = base.shape[axis + mask.ndim :]
    padded = (1,) * (axis + 1 + len(rest) - values.ndim) + values.shape
    if len(padded) != axis + 1 + len(rest) or padded[axis] != 1:
        raise Unsupported("index_put by a bool mask of values differing between the masked elements")
    value = tt.reshape(values, padded[:axis] + (1,) * mask.ndim + padded[axis + 1 :]).astype(base.dtype)
    hit = tt.reshape(mask, (1,) * axis + mask.shape + (1,) * len(rest))
    return tt.where(hit, base + value if accumulate else value, base)


def _index_put(base: Traced, indices: Sequence[Traced | None], values: Traced, accumulate: bool,
               checked: bool) -> Traced:
    """`base.index_put(indices, values, accumulate)` (`x[i, j] = v`, `x[i] += v` with repeats counted, and the
    gradients of indexing) by integer index arrays; where `checked`, an index out of its dim's range stops the kernel
    with an IndexError (`checked_index`), as eager raises. Arrays apart (`x[i, :, j]`) index the dims they broadcast
    to first, as torch's (NumPy's) rule places them: the indexed dims moved to the front, the arrays put there, and
    moved back. A bool mask (alone) with one value for its elements is a select."""
    at = [i for i, index in enumerate(indices) if index is not None]
    arrays = [indices[i] for i in at]
    if len(arrays) == 1 and arrays[0].dtype.kind == "b":
        return _masked(base, at[0], arrays[0], values, accumulate)
    if not at or any(a.dtype.kind not in "iu" for a in arrays):
        raise Unsupported("index_put other than by integer index arrays or one bool mask")
    if at != list(range(at[0], at[0] + len(at))):
        order = (*at, *(d for d in range(base.ndim) if d not in at))
        moved = _index_put(tt.transpose(base, order), arrays, values, accumulate, checked)
        return tt.transpose(moved, tuple(int(d) for d in np.argsort(order)))
    axis, shape = at[0], tuple(np.broadcast_shapes(*(a.shape for a in arrays)))
    if 0 in shape:
        return base  # no index: nothing written
    if checked:
        arrays = [checked_index(a, base.shape[axis + k]) for k, a in enumerate(arrays)]
    values = tt.broadcast_to(values, base.shape[:axis] + shape + base.shape[axis + len(at) :])
    return (_accumulated if accumulate else _assigned)(base, axis, arrays, values)


def index_put(base: Traced, indices: Sequence[Traced | None], values: Traced, accumulate: bool = False) -> Traced:
    """A backward graph's `index_put`: an assignment's indices checked, not an accumulation's, a gradient of indexing
    whose indices the forward has checked (`checked_index`)."""
    return _index_put(base, indices, values, accumulate, checked=not accumulate)


def checked_index_put(base: Traced, indices: Sequence[Traced | None], values: Traced,
                      accumulate: bool = False) -> Traced:
    """A user's `index_put` (forward and inference graphs): every index checked, an accumulation's too."""
    return _index_put(base, indices, values, accumulate, checked=True)


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
    aten.index_put.default: index_put,
}  # fmt: skip
"""ATen overload -> rule, for the indexing ops (a backward graph's: accumulating `index_put` unchecked)."""

CHECKED_RULES = {aten.index_put.default: checked_index_put}
"""The indexing ops a user calls (forward and inference graphs) whose rules differ: indices checked."""
