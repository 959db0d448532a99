"""Kernel semantics of the plain reductions `tl.sum`, `tl.max`, `tl.min` and `tl.mean`, as a mixin of
`TileBuilder` (reductions with a combine function are in combine_ops.py).

As Triton: `sum` widens small ints and bools to int32 and 16-bit floats to float32 first; `axis=None` reduces
every axis; `keep_dims` puts size-1 axes back in place of the reduced ones.
"""

from __future__ import annotations

import math
from typing import Any

from xdsl.dialects.builtin import i32

from tinyton.dialects import tt
from tinyton.errors import CompilationError
from tinyton.frontend.values import Tile, describe, f32

REDUCE = {"sum": tt.ReduceSumOp, "max": tt.ReduceMaxOp, "min": tt.ReduceMinOp}


class ReduceOps:
    """Plain reductions of `TileBuilder`, whose `emit`, `cast`, `broadcast` and `binary` they use."""

    def _reduce_input(self, x: Any, what: str) -> Tile:
        if not isinstance(x, Tile) or not x.shape or x.is_pointer:
            raise CompilationError(f"{what} reduces a tile of numbers, got {describe(x)}")
        return x

    def _axes(self, x: Tile, axis: Any, what: str) -> list[int]:
        if axis is None:
            return list(range(len(x.shape)))
        rank = len(x.shape)
        if not isinstance(axis, int) or not -rank <= axis < rank:
            raise CompilationError(f"{what}: axis must be a constexpr int in [{-rank}, {rank}), got {describe(axis)}")
        return [axis % rank]

    def reduce(self, kind: str, x: Any, axis: Any, keepdims: bool) -> Tile:
        x = self._reduce_input(x, f"tt.{kind}")
        if kind == "sum" and x.element.bitwidth < 32:  # as Triton: small ints and bools in int32, f16 in f32
            x = self.cast(x, f32 if tt.is_float(x.type) else i32)
        axes, rank, result = self._axes(x, axis, f"tt.{kind}"), len(x.shape), x
        for ax in sorted(axes, reverse=True):
            result = self.emit(REDUCE[kind](result.value, ax))
        if keepdims:
            if not result.shape:
                return self.broadcast(result, (1,) * rank)
            for ax in sorted(axes):
                result = self.emit(tt.ExpandDimsOp(result.value, ax))
        return result

    def mean(self, x: Any, axis: Any, keepdims: bool) -> Tile:
        x = self._reduce_input(x, "tt.mean")
        count = math.prod(x.shape[ax] for ax in self._axes(x, axis, "tt.mean"))
        x = x if tt.is_float(x.type) else self.cast(x, f32)
        return self.binary("/", self.reduce("sum", x, axis, keepdims), count)
