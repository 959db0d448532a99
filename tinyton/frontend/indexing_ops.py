"""Kernel semantics of `tl.gather`, `tl.histogram` and `tl.inline_asm_elementwise`, as a mixin of
`TileBuilder` (the ops are in tinyton/dialects/tt_indexing.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xdsl.dialects.builtin import IntegerType

from tinyton.dialects import tt
from tinyton.dtypes import dtype_of
from tinyton.errors import CompilationError
from tinyton.frontend.values import Tile, broadcast_shapes, check_block_shape, describe


class IndexingOps:
    """Gather, histogram and inline asm builtins of `TileBuilder`; `location` is the user's `file:line`."""

    location: str

    def gather(self, src: Any, index: Any, axis: Any) -> Tile:
        """`src` read along `axis` at `index` (same rank, same sizes off `axis`)."""
        if not isinstance(src, Tile) or not src.shape or src.is_pointer:
            raise CompilationError(f"tl.gather takes a tile of numbers as src, got {describe(src)}")
        if not isinstance(index, Tile) or not isinstance(index.element, IntegerType) or index.element.bitwidth == 1:
            raise CompilationError(f"tl.gather takes a tile of integer indices, got {describe(index)}")
        rank = len(src.shape)
        if not isinstance(axis, int) or isinstance(axis, bool) or not -rank <= axis < rank:
            raise CompilationError(f"tl.gather: axis must be a constexpr int in [{-rank}, {rank}), got {describe(axis)}")
        axis %= rank
        if len(index.shape) != rank or any(s != i for d, (s, i) in enumerate(zip(src.shape, index.shape)) if d != axis):
            raise CompilationError(
                f"tl.gather: the index shape {list(index.shape)} must have the source's rank and sizes "
                f"{list(src.shape)} except along axis {axis}"
            )
        return self.emit(tt.GatherOp(src.value, index.value, axis))

    def histogram(self, x: Any, num_bins: Any, mask: Any) -> Tile:
        """Counts of the values 0 ... num_bins - 1 among the elements of `x` (where `mask` is true)."""
        if not isinstance(x, Tile) or not x.shape or not isinstance(x.element, IntegerType) or x.element.bitwidth == 1:
            raise CompilationError(f"tl.histogram counts a tile of integers, got {describe(x)}")
        if not isinstance(num_bins, int) or isinstance(num_bins, bool):
            raise CompilationError(f"tl.histogram: num_bins must be a constexpr int, got {describe(num_bins)}")
        check_block_shape([num_bins], "tl.histogram num_bins")
        mask_value = None
        if mask is not None:
            mask_value = self.broadcast(self.truth(mask, "tl.histogram mask"), x.shape).value
        return self.emit(tt.HistogramOp(x.value, num_bins, mask_value))

    def inline_asm(self, asm: Any, constraints: Any, args: Any, dtype: Any, is_pure: Any, pack: Any) -> Any:
        """PTX `asm` on every element of `args` (broadcast to one shape), `pack` elements per instance;
        one result per dtype (a tuple of dtypes gives a tuple)."""
        what = "tl.inline_asm_elementwise"
        if not isinstance(asm, str) or not isinstance(constraints, str):
            raise CompilationError(f"{what} takes the asm and the constraints as constexpr strings")
        if not isinstance(pack, int) or isinstance(pack, bool) or pack < 1:
            raise CompilationError(f"{what}: pack must be a constexpr int of at least 1, got {describe(pack)}")
        values = list(args) if isinstance(args, Sequence) else [args]
        tiles = [self.tile(a, what) for a in values]
        if any(t.is_pointer for t in tiles):
            raise CompilationError(f"{what} takes numbers, not pointers")
        to = broadcast_shapes([t.shape for t in tiles], what)
        tiles = [self.broadcast(t, to) for t in tiles]
        dtypes = tuple(dtype) if isinstance(dtype, (tuple, list)) else (dtype,)
        types = [tt.tile_type(dtype_of(d).ir, to) for d in dtypes]
        op = tt.InlineAsmOp(asm, constraints, [t.value for t in tiles], types, bool(is_pure), pack, self.location)
        results = [Tile(r) for r in self.insert(op).results]
        return tuple(results) if isinstance(dtype, (tuple, list)) else results[0]
