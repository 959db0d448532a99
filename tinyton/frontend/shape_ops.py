"""Kernel semantics of the shape builtins (`tl.trans`, `permute`, `reshape`, `view`, `expand_dims`,
`broadcast_to`, `join`, `split`), as a mixin of `TileBuilder`.

Dimensions are constexpr ints; a shape may be given as a tuple or as separate arguments, as in Triton.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod
from typing import Any

from tinyton.dialects import tt
from tinyton.errors import CompilationError
from tinyton.frontend.values import (
    SELECT,
    Tile,
    broadcast_shapes,
    check_block_shape,
    describe,
    element,
    promote,
    shape,
)


def dims_argument(dims: Sequence[Any], what: str) -> tuple[int, ...]:
    """`f(x, 2, 3)` and `f(x, (2, 3))` alike: the dims as a tuple of ints."""
    if len(dims) == 1 and isinstance(dims[0], tuple):
        dims = dims[0]
    if not all(isinstance(d, int) and not isinstance(d, bool) for d in dims):
        raise CompilationError(f"{what} takes constexpr ints, got {', '.join(map(describe, dims))}")
    return tuple(dims)


class ShapeOps:
    """Shape builtins of `TileBuilder`, whose `emit`, `insert`, `tile`, `broadcast` and `operand` they use."""

    def _shaped(self, x: Any, what: str) -> Tile:
        x = self.tile(x, what)
        if not x.shape:
            raise CompilationError(f"{what} needs a tile, got {describe(x)}")
        return x

    def permute(self, x: Any, dims: Sequence[Any], what: str = "tl.permute") -> Tile:
        x = self._shaped(x, what)
        order = dims_argument(dims, what) if dims else tuple(reversed(range(len(x.shape))))
        if not dims and len(x.shape) != 2:
            raise CompilationError(f"{what} without dims transposes 2-D tiles; give the order for rank {len(x.shape)}")
        rank = len(x.shape)
        order = tuple(d % rank if -rank <= d < rank else d for d in order)
        if sorted(order) != list(range(rank)):
            raise CompilationError(f"{what}: {list(order)} is not a permutation of the {rank} dimensions")
        return x if order == tuple(range(rank)) else self.emit(tt.TransOp(x.value, order))

    def reshape(self, x: Any, dims: Sequence[Any], what: str = "tl.reshape") -> Tile:
        x = self.tile(x, what)
        new = dims_argument(dims, what)
        if -1 in new:
            known = prod(d for d in new if d != -1)
            new = tuple(prod(x.shape) // max(known, 1) if d == -1 else d for d in new)
        check_block_shape(new, what)
        if prod(new) != prod(x.shape):
            raise CompilationError(f"{what}: cannot reshape {list(x.shape)} ({prod(x.shape)} elements) to {list(new)}")
        if not x.shape:
            return self.broadcast(x, new)
        if tuple(d for d in new if d != 1) == tuple(d for d in x.shape if d != 1) and len(new) > len(x.shape):
            return self._unit_dims(x, new)
        return x if new == x.shape else self.emit(tt.ReshapeOp(x.value, new))

    def _unit_dims(self, x: Tile, new: tuple[int, ...]) -> Tile:
        """`x` reshaped to `new`, which only adds size-1 dimensions: expand_dims, free in registers."""
        while x.shape != new:
            axis = next(i for i, d in enumerate(new) if i >= len(x.shape) or x.shape[i] != d)
            if new[axis] != 1:  # x has a 1 here that `new` places later: reshape the general way
                return self.emit(tt.ReshapeOp(x.value, new))
            x = self.emit(tt.ExpandDimsOp(x.value, axis))
        return x

    def expand_dims(self, x: Any, axis: Any) -> Tile:
        x = self.tile(x, "tl.expand_dims")
        axes = dims_argument(axis if isinstance(axis, tuple) else (axis,), "tl.expand_dims")
        rank = len(x.shape) + len(axes)
        for ax in sorted(a % rank if -rank <= a < rank else rank for a in axes):
            if ax >= rank:
                raise CompilationError(f"tl.expand_dims: axis out of range for a result of rank {rank}")
            x = self.emit(tt.ExpandDimsOp(x.value, ax)) if x.shape else self.broadcast(x, (1,))
        return x

    def broadcast_to(self, x: Any, dims: Sequence[Any]) -> Tile:
        to = check_block_shape(dims_argument(dims, "tl.broadcast_to"), "tl.broadcast_to")
        return self.broadcast(self.tile(x, "tl.broadcast_to"), to)

    def broadcast_pair(self, a: Any, b: Any) -> tuple[Tile, Tile]:
        to = broadcast_shapes([shape(a), shape(b)], "tl.broadcast")
        return tuple(self.broadcast(self.tile(x, "tl.broadcast"), to) for x in (a, b))

    def join(self, a: Any, b: Any) -> Tile:
        elem = promote(SELECT, [element(a), element(b)], "tl.join")
        to = broadcast_shapes([shape(a), shape(b)], "tl.join")
        if not to:
            raise CompilationError("tl.join needs tiles; build scalars into tiles with tl.full first")
        lhs, rhs = (self.operand(x, elem, to) for x in (a, b))
        return self.emit(tt.JoinOp(lhs.value, rhs.value))

    def split(self, x: Any) -> tuple[Tile, Tile]:
        x = self._shaped(x, "tl.split")
        if x.shape[-1] != 2:
            raise CompilationError(f"tl.split needs a last dimension of 2, got shape {list(x.shape)}")
        op = self.insert(tt.SplitOp(x.value))
        return Tile(op.results[0]), Tile(op.results[1])
