"""Kernel semantics of `tl.sort`, `tl.topk` and `tl.flip`, as a mixin of `TileBuilder`: Triton's own
networks (python/triton/language/standard.py), built from tiles so that both backends run them.

The tile is viewed as a hypercube of shape `[2] * log2(numel)` (a reshape); dimension `j` of the cube is
bit `n - 1 - j` of an element's row-major index. An element's partner across a dimension is
`x ^ xor_sum(x, dim, keep_dims=True)` (the pair's xor, xor-ed with itself): a reduction over two elements,
which the GPU does in registers or with one `shfl.sync.bfly` when the layout holds the dimension there.

`sort` is the bitonic sorting network: `log2(n)` merge stages, stage `s` comparing and swapping across
the cube dimensions of bits `s - 1 ... 0`. A comparison with NaN is false, so with NaNs the network gives
Triton's result, not NumPy's (NaNs are not moved to the end, and a pair holding one may lose the other
value). `flip` xors each element with its partner across every dimension of the flipped axis. Array programs'
`np.sort`/`np.argsort` run the same network on (value, index) pairs in NumPy's order (tinyton/lowering/fusion/
sorting.py).
"""

from __future__ import annotations

from math import prod
from typing import Any

from xdsl.dialects.builtin import IntegerType

from tinyton.dtypes import dtype_of
from tinyton.errors import CompilationError
from tinyton.frontend.values import Tile, describe


def _log2(n: int) -> int:
    return n.bit_length() - 1


class SortOps:
    """`sort`, `topk` and `flip` of `TileBuilder`."""

    def _sorted_input(self, x: Any, dim: Any, what: str) -> tuple[Tile, int]:
        """The tile and its non-negative `dim` (None: the last one), whose size must be a power of two."""
        if not isinstance(x, Tile) or not x.shape or x.is_pointer:
            raise CompilationError(f"{what} takes a tile of numbers, got {describe(x)}")
        rank = len(x.shape)
        dim = rank - 1 if dim is None else dim
        if not isinstance(dim, int) or not -rank <= dim < rank:
            raise CompilationError(f"{what}: dim must be a constexpr int in [{-rank}, {rank}), got {describe(dim)}")
        return x, dim % rank

    def _as_bits(self, x: Tile) -> Tile:
        """`x` as a signed integer tile of its width (its bits: xor-able)."""
        if isinstance(x.element, IntegerType):
            return x
        return self.cast(x, dtype_of(f"int{x.element.bitwidth}"), bitcast=True)

    def _partner(self, bits: Tile, axis: int) -> Tile:
        """Each element's partner across the size-2 `axis`."""
        return self.binary("^", bits, self.xor_sum(bits, axis, True))

    def _indicator(self, n_dims: int, j: int) -> Tile:
        """0/1 along cube dimension `n_dims - 1 - j` (bit `j`), shaped to broadcast against the cube."""
        return self.reshape(self.arange(0, 2), [1] * (n_dims - j - 1) + [2] + [1] * j)

    def _compare_and_swap(self, x: Tile, flip: Any, i: int) -> Tile:
        n_dims = len(x.shape)
        bits = self._as_bits(x)
        y = self._partner(bits, n_dims - 1 - i)
        y = y if y.element == x.element else self.cast(y, dtype_of(x.element), bitcast=True)
        is_right = self._indicator(n_dims, i)
        swap = self.binary("!=", self.binary(">", x, y), self.binary("^", flip, is_right))
        return self.where(swap, y, x)

    def _merge(self, cube: Tile, stage: int, order: int) -> Tile:
        """Bitonic merge over bits `stage - 1 ... 0`; `order` 0 ascending, 1 descending, 2 alternating
        (by bit `stage`)."""
        flip: Any = self._indicator(len(cube.shape), stage) if order == 2 else order
        for i in range(stage):
            cube = self._compare_and_swap(cube, flip, stage - 1 - i)
        return cube

    def sort(self, x: Any, dim: Any, descending: Any, k: Any = None, what: str = "tl.sort") -> Tile:
        """Sort along `dim` (Triton: the last one only; here any, moved last and back, which is free);
        with `k`, the first `k` of the sorted order (`topk`)."""
        x, dim = self._sorted_input(x, dim, what)
        last = len(x.shape) - 1
        if dim != last:
            order = [d for d in range(last + 1) if d != dim] + [dim]
            inverse = [order.index(d) for d in range(last + 1)]
            return self.permute(self.sort(self.permute(x, order), None, descending, k, what), inverse)
        n = x.shape[-1]
        log_n = _log2(n)
        if k is not None and not (isinstance(k, int) and 0 < k <= n and k & (k - 1) == 0):
            raise CompilationError(f"{what}: k must be a constexpr power of two up to {n}, got {describe(k)}")
        log_k = log_n if k is None else _log2(k)
        if n == 1:
            return x
        if not isinstance(descending, (bool, int)):
            raise CompilationError(f"{what}: descending must be a constexpr bool, got {describe(descending)}")
        descending = int(bool(descending))
        cube = self.reshape(x, [2] * _log2(prod(x.shape)))
        for i in range(1, log_k + 1):
            cube = self._merge(cube, i, 2 if i < log_n else descending)
        for i in range(log_k + 1, log_n + 1):
            cube = self.reduce("max" if descending else "min", cube, len(cube.shape) - 1 - log_k, False)
            cube = self._merge(cube, log_k, 2 if i < log_n else descending)
        return self.reshape(cube, (*x.shape[:-1], 1 << log_k))

    def flip(self, x: Any, dim: Any) -> Tile:
        """`x` reversed along `dim` (None: the last one)."""
        x, dim = self._sorted_input(x, dim, "tl.flip")
        steps = _log2(x.shape[dim])
        if steps == 0:
            return x
        bits = self._as_bits(x)
        cube = self.reshape(bits, (*x.shape[:dim], *[2] * steps, *x.shape[dim + 1 :]))
        for i in range(steps):
            cube = self._partner(cube, dim + i)
        out = self.reshape(cube, x.shape)
        return out if out.element == x.element else self.cast(out, dtype_of(x.element), bitcast=True)
