"""Arrays as strided views: how an attention kernel reads q, k and v where they are in memory and stores its
output (or its backward's gradients) in the layout the program reads it in.

A chain of reshapes, transposes and windows (slices inside their input) over an array is a view when each step is
one NumPy would not copy: then the kernel addresses the array through the chain's strides and offset, and no kernel
copies it (`strided_view`, `stored`). The other way round, a chain that lays a computed value out again (heads merged
back, a concatenation of gradients) is a view of the array at its end, and the kernel stores into that array
(`output_views`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from math import prod

from xdsl.ir import Operation, OpResult, SSAValue

from tinyton.dialects import tta
from tinyton.dialects.tt import element_type, is_float, shape_of


@dataclass(frozen=True)
class QView:
    """How the kernel reads q (or k or v): `base` (as stored, contiguous) through `ops` (reshapes, transposes and
    windows, each used once; a float cast among k's or v's), which make it `shape` with element `strides` from
    `offset` over `base`. No ops: the value itself."""

    base: SSAValue
    ops: tuple[Operation, ...]
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0

    @property
    def contiguous(self) -> bool:
        """Whether it reads `base` as a row-major array of its own shape (a reshape of it: the same layout)."""
        return self.offset == 0 and all(s == c for s, c, n in zip(self.strides, _contiguous(self.shape), self.shape)
                                        if n != 1)


def _contiguous(shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(prod(shape[i + 1 :]) for i in range(len(shape)))


def own_layout(value: SSAValue) -> QView:
    """`value` as the row-major array it is stored as: no ops."""
    shape = tuple(shape_of(value.type))
    return QView(value, (), shape, _contiguous(shape))


def _window(op: tta.SliceOp, shape: Sequence[int]) -> bool:
    """Whether the slice reads inside its input everywhere (no padding): a view of it."""
    out = shape_of(op.result.type)
    return all(tta.inside_range(start, step, n, size) == (0, n)
               for start, step, n, size in zip(op.starts, op.steps, out, shape))


Atoms = tuple[tuple[int, int], ...]
"""One dim of a view as (extent, stride) pieces, outermost first: a single piece, or several where a reshape merged
dims that are not contiguous with each other (nanoGPT's and `nn.MultiheadAttention`'s batch x heads), which only a
later reshape splitting them back makes a view again."""


def regrouped(dims: Sequence[Atoms], out: Sequence[int]) -> list[Atoms] | None:
    """`dims` reshaped to `out`: their pieces in order (an extent-1 one dropped, neighbours that walk memory as one
    merged), cut into runs of `out`'s extents (a piece split in two where a run ends inside it); None where a run
    cannot end inside a piece."""
    pending = list(_merged([atom for dim in dims for atom in dim if atom[0] != 1]))
    result: list[Atoms] = []
    for extent in out:
        run: list[tuple[int, int]] = []
        size = 1
        while size < extent:
            if not pending or extent % size:  # a run that cannot end inside a piece ((2, 3) -> (3, 2): a copy)
                return None
            n, stride = pending.pop(0)
            need = extent // size
            if n > need:  # the run ends inside this piece: its outer `need` positions here, the rest next
                if n % need:
                    return None
                pending.insert(0, (n // need, stride))
                n, stride = need, stride * (n // need)
            run.append((n, stride))
            size *= n
        if size != extent:
            return None
        result.append(_merged(run))
    return result if not pending else None


def _merged(run: Sequence[tuple[int, int]]) -> Atoms:
    """A run of pieces with each pair that walks memory as one piece merged."""
    merged: list[tuple[int, int]] = []
    for n, stride in run:
        if merged and merged[-1][1] == n * stride:
            merged[-1] = (merged[-1][0] * n, stride)
        else:
            merged.append((n, stride))
    return tuple(merged)


def _through(base: SSAValue, ops: Sequence[Operation]) -> QView | None:
    """`base` read through `ops` as a strided view, or None where one needs a copy (a reshape NumPy would copy
    that no later reshape undoes, a slice past the input's end, a slice of merged dims); float casts change no
    geometry."""
    shape = shape_of(base.type)
    dims: list[Atoms] = [((n, st),) for n, st in zip(shape, _contiguous(shape))]
    offset = 0
    for op in ops:
        out = shape_of(op.results[0].type)
        if isinstance(op, tta.TransposeOp):
            dims = [dims[p] for p in op.perm]
        elif isinstance(op, tta.SliceOp):
            if not _window(op, shape) or any(len(dim) > 1 for dim in dims):
                return None
            offset += sum(start * _stride(dim) for start, dim in zip(op.starts, dims))
            dims = [((n, _stride(dim) * step),) for n, dim, step in zip(out, dims, op.steps)]
        elif isinstance(op, tta.ReshapeOp):
            if 0 in shape or (grouped := regrouped(dims, out)) is None:
                return None
            dims = grouped
        shape = out
    if any(len(dim) > 1 for dim in dims):
        return None
    return QView(base, tuple(ops), tuple(shape), tuple(map(_stride, dims)), offset)


def _stride(dim: Atoms) -> int:
    """A dim's one stride (0 for an extent-1 dim a reshape made, which has no piece)."""
    return dim[0][1] if dim else 0


def _reshaped(shape: Sequence[int], strides: Sequence[int], out: Sequence[int]) -> tuple[int, ...] | None:
    """The strides of a reshape to `out` of the strided view (`shape`, `strides`), or None when it needs a copy
    (NumPy's rule: each run of dims that merges or splits must be contiguous within itself)."""
    if 0 in shape or (dims := regrouped([((n, st),) for n, st in zip(shape, strides)], out)) is None:
        return None
    return None if any(len(dim) > 1 for dim in dims) else tuple(map(_stride, dims))


def strided_view(value: SSAValue, windows: bool = False, cast: bool = False,
                 readers: Collection[Operation] = ()) -> QView:
    """The longest chain of single-use reshapes and transposes (and with `windows`, slices inside their input;
    with `cast`, one float cast) ending at `value` that is a strided view of the array it starts from (a reshape
    of a transposed view only where NumPy's would be a view, or where a later reshape undoes its merge: the heads
    of `x.transpose(0, 2, 1, 3)` split into groups; nanoGPT's `qkv.split(c, 2)[1].view(b, t, h, d).transpose(1, 2)`;
    `nn.MultiheadAttention`'s `(S, B * H, D)` transposed and reshaped back to `(B, H, S, D)`). `readers`: the ops of one region,
    whose uses of a value count as one (an attention backward reads q in the scores and in dk)."""
    kinds = (tta.ReshapeOp, tta.TransposeOp, *((tta.SliceOp,) if windows else ()))
    chain: list[Operation] = []
    end = value
    inside = set(readers)
    while isinstance(value, OpResult) and (value.has_one_use() or inside and all(
            use.operation in inside for use in value.uses)) and (isinstance(value.op, kinds) or cast and isinstance(
            value.op, tta.CastOp) and is_float(element_type(value.op.input.type)) and is_float(element_type(
            value.type)) and not any(isinstance(op, tta.CastOp) for op in chain)):  # fmt: skip
        chain.insert(0, value.op)
        inside.add(value.op)
        value = value.op.input
    for first in range(len(chain) + 1):  # drop leading ops until the rest is a view
        view = _through(chain[first].input if first < len(chain) else end, chain[first:])
        if view is not None:
            return view
    raise AssertionError("unreachable: a value is a view of itself")


def output_views(value: SSAValue, windows: bool = False) -> tuple[QView, ...]:
    """Where `p @ v` (`value`) is stored: along each path of transposes and reshapes that lays it out again, as far
    as the path's end, stored row-major, holds `value` as a strided view (`QView` of `value`'s shape over that end
    array, `ops` the path) with each output row's last axis contiguous (nanoGPT's and Llama's
    `y.transpose(1, 2).reshape(B, S, H * D)` before the output projection); and `value` itself (no ops) where a use
    reads it as it is (a training step's forward saves it too): the kernel stores each. With `windows`, a path may
    end in a concatenation, `value` then a window of its result (an attention backward's dq, dk and dv side by side,
    as a packed qkv projection's gradient): the caller sees that every input of it is stored too."""
    users = [use.operation for use in value.uses]
    views = [view for user in users for view in _layouts([user], value, windows)]
    if not views or any(not _layouts([user], value, windows) for user in users):
        views.insert(0, own_layout(value))
    return tuple(views)


LAYOUT_OPS = (tta.TransposeOp, tta.ReshapeOp)


def _layouts(path: list[Operation], source: SSAValue, windows: bool) -> list[QView]:
    """The `output_views` of `source` along `path` (layout ops, perhaps a concatenation last) and its continuations;
    [] where the path's end is not a view with rows of D contiguous (its first op's input is then stored instead)."""
    last = path[-1]
    if isinstance(last, tta.ConcatenateOp):
        view = _pulled_back(path, source) if windows else None
        return [view] if view is not None else []
    if not isinstance(last, LAYOUT_OPS):
        return []
    users = [use.operation for use in last.results[0].uses]
    found, stored_here = [], False
    for user in users:
        further = _layouts([*path, user], source, windows)
        found += further
        stored_here |= not further
    view = _pulled_back(path, source)
    if view is None:
        return []
    return [view, *found] if stored_here or not users else found


def _pulled_back(path: Sequence[Operation], source: SSAValue) -> QView | None:
    """`source` as a view of the row-major array at the end of `path` (of which it is a window when the path ends in
    a concatenation), or None (a copy, or rows of D not contiguous)."""
    end = path[-1].results[0]
    shape = shape_of(end.type)
    strides: tuple[int, ...] | None = _contiguous(shape)
    offset = 0
    inputs = [source, *(op.results[0] for op in path[:-1])]
    for op, value in zip(reversed(path), reversed(inputs)):  # pull the end array's strides back to each op's input
        source_shape = shape_of(value.type)
        if isinstance(op, tta.ConcatenateOp):
            if list(op.inputs).count(value) != 1:
                return None
            axis, index = op.axis.value.data, list(op.inputs).index(value)
            offset = sum(shape_of(x.type)[axis] for x in list(op.inputs)[:index]) * strides[axis]
        elif isinstance(op, tta.TransposeOp):
            pulled = [0] * len(source_shape)
            for i, p in enumerate(op.perm):
                pulled[p] = strides[i]
            strides = tuple(pulled)
        elif (strides := _reshaped(shape, strides, source_shape)) is None:
            return None
        shape = source_shape
    if shape[-1] > 1 and strides[-1] != 1:
        return None
    return QView(end, tuple(path), tuple(shape), strides, offset)


@dataclass(frozen=True)
class Stored:
    """k or v read from the array `base` as stored, through `ops`: single-use reshapes, transposes and windows and
    at most one float cast, which the kernel applies after its loads (a bf16 KV cache in float32 attention is read
    as bf16, never copied; nanoGPT's keys, a window of the qkv projection's output with its heads transposed, are
    read in place). `view`: the strides and offset it is read with, None where it is `base`'s own layout."""

    base: SSAValue
    ops: tuple[Operation, ...] = ()
    view: QView | None = None


def stored(value: SSAValue, readers: Collection[Operation] = ()) -> Stored:
    """`value` as a strided view and a float cast of an array (`Stored`); no ops: the array itself. `readers`: as
    `strided_view`'s."""
    view = strided_view(value, windows=True, cast=True, readers=readers)
    return Stored(view.base, view.ops, None if view.contiguous else view)
