"""Values read from memory as views: a transpose, broadcast, reshape or slice of an array a kernel reads costs index
arithmetic (an offset, per-dim strides, masked bounds), never a copy.

A reshape NumPy would copy (one merging dims that do not walk memory as one: the rows of a window flattened for a
reduction over all of them, `x[:, 1:].sum()`) is a view too: each merged dim keeps the (extent, stride) pieces it is
made of, and a load decomposes its index over them as it decomposes a program index (`View.pieces`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from xdsl.ir import Operation, OpResult, SSAValue

from tinyton.analysis.not_fusable import NotFusable
from tinyton.analysis.strided_views import Atoms, regrouped
from tinyton.dialects import tta
from tinyton.dialects.tt import shape_of

VIEWS = (tta.TransposeOp, tta.ReshapeOp, tta.BroadcastToOp, tta.SliceOp)

Stride = int | Atoms
"""How a load walks memory along one dim: an element stride, or a merged dim's pieces (`View.pieces`)."""


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))


@dataclass(frozen=True)
class View:
    """Elements of `base` (a value from outside the group) read at `offset + sum(index[i] * strides[i])`;
    where an index leaves `bounds` (per dim `[lo, hi)`; None: nowhere) the view reads `fill` instead (a
    slice past the input's end: `np.pad`, the parts of a concatenation).

    `pieces`, where a reshape merged dims that do not walk memory as one: per dim its (extent, stride) pieces,
    outermost first (`strides` holds a merged dim's innermost stride). Index `i` of a merged dim is at
    `sum((i // inner) % extent * stride)` over its pieces, `inner` the extents after each; only a load reads
    that (`load_stride`): such a view is no matmul operand or gather table (`is_plain` is False)."""

    base: SSAValue
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0
    bounds: tuple[tuple[int, int], ...] | None = None
    fill: bool | int | float | None = None
    pieces: tuple[Atoms, ...] | None = None

    @staticmethod
    def of(value: SSAValue) -> View:
        shape = shape_of(value.type)
        return View(value, shape, contiguous_strides(shape))

    @property
    def is_contiguous(self) -> bool:
        """Row-major and unmasked (a contiguous reshape is free), maybe at an offset."""
        dense = all(s == c for s, c, d in zip(self.strides, contiguous_strides(self.shape), self.shape) if d != 1)
        return dense and self.bounds is None and self.pieces is None

    @property
    def is_plain(self) -> bool:
        """No offset, bounds or merged dims: what a matmul operand's descriptors and tiles read."""
        return self.offset == 0 and self.bounds is None and self.pieces is None

    def load_stride(self, dim: int) -> Stride:
        """How a load walks memory along `dim`: its stride, or its pieces where a reshape merged it."""
        if self.pieces is not None and len(self.pieces[dim]) > 1:
            return self.pieces[dim]
        return self.strides[dim]

    def dims(self, axes: tuple[int, ...], rank: int) -> list[tuple[int, int]]:
        """(size, stride) along each of `axes` of a domain of `rank` dims that this view broadcasts into
        (right-aligned, as NumPy broadcasts); (1, 0) where the view has no such dim."""
        assert self.pieces is None, "a view of merged dims has no stride per dim"
        own = (a - rank + len(self.shape) for a in axes)
        return [(self.shape[j], self.strides[j]) if j >= 0 else (1, 0) for j in own]

    def apply(self, op: Operation) -> View | None:
        """The view after a transpose / broadcast_to / reshape / slice; None if it needs a copy."""
        out = shape_of(op.results[0].type)
        if self.pieces is not None:
            return self._apply_merged(op, out)
        if isinstance(op, tta.SliceOp):
            return self._slice(op, out)
        bounds = self.bounds
        if isinstance(op, tta.TransposeOp):
            bounds = None if bounds is None else tuple(bounds[p] for p in op.perm)
            return replace(self, shape=out, strides=tuple(self.strides[p] for p in op.perm), bounds=bounds)
        if isinstance(op, tta.BroadcastToOp):
            lead = len(out) - len(self.shape)
            src = [(1, 0)] * lead + list(zip(self.shape, self.strides))
            if bounds is not None:  # a broadcast dim (size 1) read inside its bounds is read whole; others keep theirs
                bounds = tuple((0, n) if d == 1 and b == (0, 1) else b
                               for (d, _), b, n in zip(src, [(0, 1)] * lead + list(bounds), out))
            return replace(self, shape=out, strides=tuple(0 if d == 1 else s for (d, s) in src), bounds=bounds)
        if self.is_contiguous:
            return replace(self, shape=out, strides=contiguous_strides(out))
        kept = [(d, s, b) for d, s, b in zip(self.shape, self.strides, bounds or [None] * len(self.shape)) if d != 1]
        if bounds is not None and any(b != (0, 1) for d, b in zip(self.shape, bounds) if d == 1):
            return None  # a removed size-1 dim that reads the fill
        if [d for d, _, _ in kept] == [d for d in out if d != 1]:  # only size-1 dims added or removed
            it = iter(kept)
            dims = [next(it) if d != 1 else (1, 0, (0, 1)) for d in out]
            return replace(self, shape=out, strides=tuple(s for _, s, _ in dims),
                           bounds=None if bounds is None else tuple(b for _, _, b in dims))
        return self._regrouped(out)

    def _apply_merged(self, op: Operation, out: tuple[int, ...]) -> View | None:
        """A transpose or reshape of a view with merged dims (their pieces move with them); None for the rest."""
        if isinstance(op, tta.TransposeOp):
            assert self.pieces is not None
            return replace(self, shape=out, strides=tuple(self.strides[p] for p in op.perm),
                           pieces=tuple(self.pieces[p] for p in op.perm))
        return self._regrouped(out) if isinstance(op, tta.ReshapeOp) else None

    def _regrouped(self, out: tuple[int, ...]) -> View | None:
        """A reshape to `out` NumPy would copy: the pieces of every dim regrouped into `out`'s dims (a dim merging
        pieces that do not walk memory as one keeps them); None where a dim would end inside a piece or the view
        is bounded."""
        if self.bounds is not None or 0 in self.shape:
            return None
        own = self.pieces or tuple(((n, st),) for n, st in zip(self.shape, self.strides))
        dims = regrouped(own, out)
        if dims is None:
            return None
        strides = tuple(dim[-1][1] if dim else 0 for dim in dims)
        merged = any(len(dim) > 1 for dim in dims)
        return replace(self, shape=out, strides=strides, pieces=tuple(dims) if merged else None)

    def _slice(self, op: tta.SliceOp, out: tuple[int, ...]) -> View | None:
        """A window of this view: the offset moves to the start, strides scale by the steps, and the
        indices inside both the window and the old bounds stay readable."""
        fill = op.fill_value
        if self.bounds is not None and fill is not None and self.fill is not None and fill != self.fill:
            return None  # two paddings with different values
        old = self.bounds or tuple((0, n) for n in self.shape)
        offset = self.offset + sum(st * s for st, s in zip(op.starts, self.strides))
        bounds = tuple(tta.inside_range(st - lo, step, n, hi - lo) for st, step, n, (lo, hi) in
                       zip(op.starts, op.steps, out, old))
        full = all(b == (0, n) for b, n in zip(bounds, out))
        return View(self.base, out, tuple(s * step for s, step in zip(self.strides, op.steps)), offset,
                    None if full else bounds, None if full else (self.fill if fill is None else fill))


def columns_window(view: View) -> bool:
    """A right operand read whole, or at shifted columns (bounds only on its last dim): what a product of
    few rows reads for a window of its columns (tinyton/rewrites/remap.py `_push_into_product`)."""
    if view.pieces is not None:
        return False
    return view.bounds is None or all(b == (0, n) for b, n in zip(view.bounds[:-1], view.shape[:-1]))


def check_strided(values: Iterable[SSAValue], views: Mapping[SSAValue, View], reader: str) -> None:
    """`reader` (a matmul's K loop, a gather) addresses what it reads by per-dim strides: no view of merged dims."""
    if any(v in views and views[v].pieces is not None for v in values):
        raise NotFusable(f"{reader} reads no reshape that merges a view's dims (it needs its own kernel)")


def view_after(op: Operation, views: Mapping[SSAValue, View], inside: Callable[[SSAValue], bool]) -> View | None:
    """The view `op` makes of a value read from memory (its input is outside the group or a view
    itself); None when `op` computes in registers. A scalar constant is never read from memory: every
    region reading it gets its own copy (tinyton/rewrites/outline.py), so the planner, which sees it
    outside the group, must also see its layout ops (`zeros(n)`: a broadcast constant) as computed."""
    if not isinstance(op, VIEWS) or (isinstance(op.input, OpResult) and isinstance(op.input.op, tta.ConstantOp)):
        return None
    if op.input in views or not inside(op.input):
        return (views.get(op.input) or View.of(op.input)).apply(op)
    return None
