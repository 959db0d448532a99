"""A kernel's program indices and addresses: which tile of the domain a program computes, and where its lanes read
and write.

`program_id(0)` splits into one index per `geometry.Source` (`setup_programs`; a chunk of a looped row sets the
reduced one, `set_k`); an array read at per-axis strides is at `offsets`, one decomposed term per source, memoised
in the scope where it varies (a *scope* is a block's memo of emitted values: the program scope holds what is the
same for every chunk of a row, hoisted out of loops; a chunk scope what varies along the reduced axis).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xdsl.ir import Block, SSAValue

from tinyton.analysis.domain import Domain
from tinyton.analysis.strided_views import Atoms
from tinyton.analysis.views import Stride
from tinyton.dialects import tt
from tinyton.dialects.tt import shape_of
from tinyton.lowering.fusion.emitter import Emitter, broadcast_shape
from tinyton.lowering.fusion.geometry import Geometry, Source


class Scope:
    """Memo of emitted values for one block; lookups fall back to the enclosing scope."""

    def __init__(self, block: Block, parent: Scope | None = None):
        self.block, self.parent, self.memo = block, parent, {}

    def get(self, key: Any) -> SSAValue | None:
        scope: Scope | None = self
        while scope is not None:
            if key in scope.memo:
                return scope.memo[key]
            scope = scope.parent
        return None


class ProgramIndices:
    """The program and chunk indices of a kernel over `dom` cut by `geom`, and the addresses they give."""

    def __init__(self, dom: Domain, geom: Geometry, em: Emitter):
        self.dom, self.geom, self.em = dom, geom, em
        self.root = Scope(em.block)

    def continue_in_last(self, counter: SSAValue, arrivals: int) -> None:
        """The rest of the kernel only in the last of `arrivals` programs to count in at `counter`
        (`Emitter.continue_in_last`); the program scope emits into its branch."""
        self.em.continue_in_last(counter, arrivals)
        self.root.block = self.em.block

    # ---- programs and chunks -------------------------------------------------------------
    def setup_programs(self, reverse: bool = False) -> None:
        """Split `program_id(0)` into one index per source (the last source varies fastest); `reverse`
        walks the programs from the last one (a kernel re-reading what the previous one read last finds it
        in L2 first)."""
        em, geom = self.em, self.geom
        order = [s for s in geom.sources if s is not geom.k]
        rest = em.emit(tt.ProgramIdOp(0)) if geom.programs > 1 else None
        if reverse and rest is not None:
            rest = em.binary(tt.SubOp, em.i32(geom.programs - 1), rest)
        if geom.group_rows > 1 and len(order) >= 2 and order[-2].programs > 1 and order[-1].programs > 1:
            rest = self._grouped_tiles(rest, order[-2], order[-1], len(order) > 2)
            order = order[:-2]
        for i in reversed(range(len(order))):
            s, n = order[i], order[i].programs
            if n == 1 or rest is None:
                idx = None
            elif i == 0:
                idx = rest
            else:
                idx = em.mod_int(rest, n)
                rest = em.div_int(rest, n)
            self._set_index(s, idx, s.block)

    def _grouped_tiles(self, pid: SSAValue, rows: Source, cols: Source, outer: bool) -> SSAValue | None:
        """Set the row and column tile indices of program `pid` walking `geom.group_rows` row tiles down before
        the next column (the last group may be shorter); gives what is left of `pid` for the outer sources
        (None when there are none)."""
        em, group = self.em, self.geom.group_rows
        tiles = rows.programs * cols.programs
        tile = em.mod_int(pid, tiles) if outer else pid
        per_group = group * cols.programs
        first = em.mul_int(em.div_int(tile, per_group), group)
        height = em.binary(tt.MinimumOp, em.i32(group), em.binary(tt.SubOp, em.i32(rows.programs), first))
        within = em.mod_int(tile, per_group)
        self._set_index(rows, em.add(first, em.binary(tt.ModOp, within, height)), rows.block)
        self._set_index(cols, em.binary(tt.FloorDivOp, within, height), cols.block)
        return em.div_int(pid, tiles) if outer else None

    def set_k(self, start: SSAValue | None) -> None:
        """Index and mask of the reduced axis for the chunk starting at `start` (None: 0)."""
        self._set_index(self.geom.k, start, 1)

    def _set_index(self, s: Source, base: SSAValue | None, scale: int) -> None:
        em = self.em
        if s.dim is None:  # the first of the program's `block` values
            s.index = em.mul_int(base, scale) if base is not None else em.i32(0)
            return
        pair = 0 if s.contiguous else s.pair
        key = ("lanes", s.block, s.dim, pair)
        if key not in self.root.memo:  # loop invariants: lanes and the bound
            with em.inside(self.root.block):
                lanes = em.arange(s.block, self.geom.rank, s.dim)
                if pair:  # two runs of block / 2, `pair` apart
                    run = s.block // 2
                    lanes = em.add(em.mod_int(lanes, run), em.mul_int(em.div_int(lanes, run), pair))
                self.root.memo[key] = lanes
                self.root.memo[(*key, s.extent)] = em.to_shape(em.i32(s.extent), shape_of(lanes.type))
        lanes = self.root.memo[key]
        if pair:  # a block's first index steps by one run
            scale //= 2
        s.start = None if base is None else em.mul_int(base, scale)
        s.index = lanes if s.start is None else em.add(s.start, lanes)
        s.mask = em.cmp("lt", s.index, self.root.memo[(*key, s.extent)]) if s.needs_mask else None

    # ---- addresses ---------------------------------------------------------------------------
    def offsets(self, strides: dict[int, Stride], scope: Scope) -> SSAValue | None:
        """`sum(index[a] * strides[a])` over the domain axes, one decomposed term per source (an axis walking
        memory in pieces, a merged dim of a view: the sum over its pieces, its index decomposed over them)."""
        target = scope if self.kvar(a for a, st in strides.items() if st) else self.root
        key = ("offsets", tuple(sorted(strides.items())))
        if key not in target.memo:
            with self.em.inside(target.block):
                target.memo[key] = self._offsets(strides, target)
        return target.memo[key]

    def _offsets(self, strides: dict[int, Stride], scope: Scope) -> SSAValue | None:
        total = None
        for s in self.geom.sources:
            pairs = tuple(piece for a in s.axes for piece in _pieces(self.dom.shape[a], strides.get(a, 0)))
            if not any(st for _, st in pairs):
                continue
            target = scope if s is self.geom.k else self.root
            key = ("term", id(s), pairs)
            term = target.get(key)
            if term is None:
                with self.em.inside(target.block):
                    term = target.memo[key] = self._decompose(s.index, pairs)
            total = self.em.add(total, term)
        return total

    def _decompose(self, index: SSAValue, pairs: Sequence[tuple[int, int]]) -> SSAValue | None:
        """Offset of a row-major index over (extent, stride) pairs; contiguous runs are merged first."""
        groups: list[tuple[int, int]] = []
        for ext, st in pairs:
            if ext == 1:
                continue
            if groups and groups[-1][1] == st * ext:
                groups[-1] = (groups[-1][0] * ext, st)
            else:
                groups.append((ext, st))
        em, inner, out = self.em, 1, None
        for i in reversed(range(len(groups))):
            ext, st = groups[i]
            if st:
                t = em.div_int(index, inner)
                t = em.mod_int(t, ext) if i > 0 else t
                out = em.add(out, em.mul_int(t, st))
            inner *= ext
        return out

    def first_tiles(self, axes: set[int]) -> SSAValue | None:
        """Whether this program is at the first tile of every source its program id cuts that is along none of
        `axes`, the axes a stored value varies along (None: always). Programs that differ along such a source
        compute the same elements, so only the first stores them (a matmul's sums of its left operand's rows, the
        same for every column tile); the reduced axis and a split K loop's ranges are not such sources."""
        first = None
        for s in self.geom.sources:
            if s.programs > 1 and s.axes and not set(s.axes) & axes and self.dom.red not in s.axes:
                index = s.index if s.dim is None else s.start
                first = self.em.and_(first, self.em.cmp("eq", index, self.em.i32(0)))
        return first

    def mask(self, shape: tuple[int, ...], scope: Scope) -> SSAValue | None:
        """Lanes of a `shape` tile that lie inside the domain (None: all of them)."""
        if not shape:
            return None
        parts = [s for s in self.geom.sources if s.dim is not None and shape[s.dim] > 1 and s.mask is not None]
        if not parts:
            return None
        target = scope if any(s is self.geom.k for s in parts) else self.root
        key = ("mask", shape)
        if target.get(key) is None:
            with self.em.inside(target.block):
                m = None
                for s in parts:
                    m = self.em.and_(m, s.mask)
                target.memo[key] = self.em.to_shape(m, shape)
        return target.get(key)

    def pointers(self, ptr: SSAValue, strides: dict[int, Stride], scope: Scope, extra: SSAValue | None = None):
        """(pointer tile or scalar, tile shape) for kernel pointer `ptr` at per-axis strides plus `extra`."""
        em = self.em
        shape = broadcast_shape(self.geom.tile_shape(set(strides)), shape_of(extra.type) if extra else ())
        off = em.add(self.offsets(strides, scope), extra)
        if not shape:
            return (ptr if off is None else em.emit(tt.AddPtrOp(ptr, off))), shape
        key = ("splat", ptr, shape)
        if key not in self.root.memo:  # loop invariant
            with em.inside(self.root.block):
                self.root.memo[key] = em.to_shape(ptr, shape)
        return em.emit(tt.AddPtrOp(self.root.memo[key], em.to_shape(off, shape))), shape

    def kvar(self, axes: Any) -> bool:
        return self.geom.k is not None and self.dom.red in set(axes)


def _pieces(extent: int, stride: Stride) -> Atoms:
    """An axis of `extent` walked at `stride` as (extent, stride) pieces, outermost first."""
    return stride if isinstance(stride, tuple) else ((extent, stride),)
