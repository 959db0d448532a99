"""How a fused region's domain is cut into programs and tiles, and the heuristics choosing the sizes.

A *source* is one index a program iterates over: a set of domain axes enumerated (row-major) either
along a tile dimension (`pid * block + arange(block)`) or as one scalar per program. Strategies:

- rows (reduce the last non-trivial axis): tile `[BLOCK]` per row (one program per row, the Triton
  tutorial's kernel) or `[ROWS, BLOCK]` for short rows; a looped `[CHUNK]` walk when the row does not
  fit in registers; a *split* row when the rows are too few to fill the GPU: each row is cut into
  SPLIT slices of SLICE elements, one program per (row, slice), and the kernels pass partial results
  through scratch buffers (`split.py`);
- cols (reduce an inner axis): tile `[BK, BI]`, contiguous along the inner axes (coalesced), a
  scalar index over the outer axes, looping over the reduced axis when it is long;
- flat (elementwise): a 1-D `[BLOCK]` tile over all elements;
- matmul: `[BM, BN]` output tiles, a scalar index over batch axes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from math import prod

from xdsl.ir import OpResult, SSAValue

from tinyton.analysis.domain import Domain
from tinyton.dialects import tta
from tinyton.dialects.tt_types import element_type
from tinyton.errors import CompilationError
from tinyton.intmath import cdiv, next_power_of_2
from tinyton.limits import max_sorted_row
from tinyton.lowering.fusion.emitter import SCAN_RUN
from tinyton.lowering.fusion.matmul_tiles import MatmulTiles, row_axes
from tinyton.lowering.fusion.rotations import pairable, products, rotation_half
from tinyton.lowering.fusion.row_shapes import (
    LOOP_CHUNK,
    MAX_ROW_BLOCK,
    MIN_PROGRAMS,
    RowProblem,
    RowShape,
    default_row_shape,
    k_block,
    warps_for,
)

SPLIT_MIN_ROW = 8192
"""Shortest row ever split."""
SPLIT_ROWS = 64
"""Fewer rows than this (under half the SMs busy with one program per row) are split; up to MIN_PROGRAMS
rows are split when they are too long for registers (their walk reads them twice anyway). A split costs a
second kernel and a second read of the slice: on an H100 a split 16x262144 softmax ran at ~70 % of a
same-size elementwise kernel, so rows filling more than ~70 % of the SMs are better left whole (to be
confirmed: bench/probes/probe_reductions.py, "threshold" rows)."""
SPLIT_SLICE_MIN = 2048
"""Shortest slice of a split row (elements)."""
SPLIT_PROGRAMS = 1024
"""Programs a split aims at (~8 per SM): enough loads in flight to reach the copy bandwidth."""


@dataclass
class Source:
    """One program-level index over `axes` of the domain."""

    axes: tuple[int, ...]
    extent: int
    block: int = 1
    """Elements of the index per program: a tile dimension's extent, or for a scalar index (`dim` None) the
    consecutive values one program takes in turn (the rows of a grid kernel's program, `grid.py`)."""
    dim: int | None = None
    index: SSAValue | None = None
    mask: SSAValue | None = None
    start: SSAValue | None = None
    """The scalar index of the block's first element (None: 0)."""
    pair: int = 0
    """Nonzero: the block's lanes are two runs of `block // 2` indices `pair` apart, a program's columns
    `[c, c + block/2)` and `[c + pair, c + pair + block/2)` (RoPE's rotated halves of a head in one tile:
    `rotations.py`); one run when the block is `2 * pair`."""

    @property
    def programs(self) -> int:
        return cdiv(self.extent, self.block)

    @property
    def needs_mask(self) -> bool:
        return self.dim is not None and (self.extent % self.block != 0 or self.extent == 0)

    @property
    def contiguous(self) -> bool:
        """The block's lanes are consecutive indices (what a descriptor's box reads)."""
        return not self.pair or self.block == 2 * self.pair


@dataclass
class Geometry:
    """Tile rank, sources in program-id order (outermost first), the reduced source, warps."""

    domain: tuple[int, ...]
    rank: int
    sources: list[Source]
    num_warps: int
    k: Source | None = None
    looped: bool = False
    notes: dict[str, int] = field(default_factory=dict)
    split: Source | None = None
    """The slice index of a split row (extent: slices per row); `k` then walks one slice of `slice`."""
    slice: int = 0
    per_sm: int = 0
    """Programs each SM must hold at once (ptxas caps the registers for it); 0: no cap."""
    split_k: Source | None = None
    """A matmul's K range index (extent: ranges; `split_k.py`), the outermost program index."""
    group_rows: int = 1
    """A matmul's output tiles (its last two sources, rows and columns) are walked this many row tiles down before
    the next column (Triton's GROUP_SIZE_M; `program_indices.setup_programs`): one wave of programs then reads a
    few row panels of A and a few column panels of B, which stay in L2, not every panel of B."""

    @property
    def programs(self) -> int:
        return prod(s.programs for s in self.sources if s is not self.k)

    def tile_shape(self, axes: set[int] | frozenset[int]) -> tuple[int, ...]:
        """Tile shape of a value varying along `axes`; `()` (a scalar) when it varies along no tile dim."""
        dims = [1] * self.rank
        for s in self.sources:
            if s.dim is not None and any(a in axes for a in s.axes):
                dims[s.dim] = s.block
        return tuple(dims) if any(d > 1 for d in dims) else ()

    def source_of(self, axis: int) -> Source:
        return next(s for s in self.sources if axis in s.axes)


def plan(dom: Domain, row_shape: Callable[[int, int], RowShape] | None = None) -> Geometry:
    """The strategy and the block sizes for a reduction or elementwise domain; `row_shape(rows, length)`
    shapes the kernel of rows reduced whole or looped by one program each (not split ones)."""
    shape = dom.shape
    if dom.red is None:
        n = prod(shape)
        block = min(next_power_of_2(n), 2048 if n >= 1 << 20 else 1024)
        src = Source(tuple(range(len(shape))), n, block, 0)
        return Geometry(shape, 1, [src], warps_for(block), notes={"BLOCK": block})
    red = dom.red
    K = shape[red]
    inner = tuple(a for a in range(red + 1, len(shape)))
    if prod(shape[red + 1 :]) == 1:
        rows = tuple(a for a in range(len(shape)) if a != red)
        R = prod(shape[a] for a in rows)
        looped = k_block(K) > MAX_ROW_BLOCK
        if K >= SPLIT_MIN_ROW and (R < SPLIT_ROWS or (looped and R < MIN_PROGRAMS)) and splittable(dom):
            return _split_rows(shape, rows, R, red, K)
        if has_sort(dom) and K > longest_sorted_row(dom):
            raise CompilationError(f"a sort's row of {K} elements is longer than one program sorts whole "
                                   f"({longest_sorted_row(dom)}): tinyton-split-long-sorts (in tinyton-fuse) splits it")
        if has_scan(dom) or has_sort(dom):  # one row per program, chunks `Emitter.scan` cuts into runs of registers
            chunk = LOOP_CHUNK if k_block(K) > LOOP_CHUNK and not has_sort(dom) else 0  # a sort holds its row whole
            choice = RowShape(warps_for(chunk or k_block(K)), 1, chunk)  # fixed: the row tuner is not asked
        else:
            choice = row_shape(R, K) if row_shape is not None else default_row_shape(RowProblem(R, K, ""))
        per, block = choice.rows, choice.chunk or k_block(K)
        rank = 2 if per > 1 else 1
        p = Source(rows, R, per, 0 if rank == 2 else None)
        k = Source((red,), K, block, rank - 1)
        notes = {"ROWS": per, "BLOCK": block}
        return Geometry(shape, rank, [p, k], choice.num_warps, k, choice.chunk > 0, notes,
                        per_sm=choice.per_sm)
    outer = tuple(range(red))
    I = prod(shape[red + 1 :])
    bi = min(next_power_of_2(I), 128)
    bk = min(k_block(K), max(2, 4096 // bi), SCAN_RUN if has_scan(dom) else k_block(K))
    o = Source(outer, prod(shape[:red]))
    k = Source((red,), K, bk, 0)
    i = Source(inner, I, bi, 1)
    return Geometry(shape, 2, [o, i, k], warps_for(bk * bi), k, bk < K, {"BLOCK_K": bk, "BLOCK_I": bi})


def has_scan(dom: Domain) -> bool:
    return any(isinstance(v.op, tta.ScanOp) for v in dom.maps if isinstance(v, OpResult))


def has_sort(dom: Domain) -> bool:
    """Whether the region sorts its rows (`tta.sort`, `tta.argsort`): each is held whole by one program."""
    return any(isinstance(v.op, tta.SortingOp) for v in dom.maps if isinstance(v, OpResult))


def longest_sorted_row(dom: Domain) -> int:
    """The longest row the region's sorts may hold whole: 8192, 4096 where one sorts 64-bit values (an unrolled network
    in registers, `limits.SORTED_ROW_BYTES`)."""
    sorts = (v.op for v in dom.maps if isinstance(v, OpResult) and isinstance(v.op, tta.SortingOp))
    return min(max_sorted_row(element_type(op.input.type).bitwidth) for op in sorts)


def splittable(dom: Domain) -> bool:
    """Whether the region's rows may be split across programs: not with a scan (each slice would need the
    totals of the slices before it), an argmax/argmin (no partials of theirs are combined across slices) or a
    sort; those rows are walked by one program each, in chunks (a sort's whole)."""
    ops = (tta.ScanOp, tta.ArgReduceOp, tta.SortingOp)
    return not any(isinstance(v.op, ops) for v in dom.maps if isinstance(v, OpResult))


def _split_rows(shape: tuple[int, ...], rows: tuple[int, ...], R: int, red: int, K: int) -> Geometry:
    """R rows of K cut into slices (a power of two of at least SPLIT_SLICE_MIN elements) so that R x slices
    is about SPLIT_PROGRAMS; a slice longer than LOOP_CHUNK is walked in chunks."""
    slices = max(1, min(cdiv(K, SPLIT_SLICE_MIN), cdiv(SPLIT_PROGRAMS, R)))
    length = next_power_of_2(cdiv(K, slices))
    block = min(length, LOOP_CHUNK)
    p, sp = Source(rows, R), Source((), cdiv(K, length))
    k = Source((red,), K, block, 0)
    notes = {"SPLIT": sp.extent, "SLICE": length, "BLOCK": block}
    return Geometry(shape, 1, [p, sp, k], warps_for(block), k, True, notes, sp, length)


GROUP_ROWS = 8
"""Row tiles a matmul's programs walk down before the next column of tiles (`Geometry.group_rows`), Triton's and
CUTLASS's usual 8: 8192^3 in 128 x 128 tiles is 64 x 64 tiles, and a wave of 132 programs in row order reads two
row panels of A and all 64 column panels of B (64 MiB of float8, more than the L2), in groups of 8 rows eight
panels of A and 17 of B."""


def plan_matmul(dom: Domain, tiles: MatmulTiles) -> Geometry:
    """Output tiles `[BM, BN]` over the batch axes, K in steps of BK, as `tiles` says; the rows of a tile
    enumerate M and the batch axes no right operand varies along (`row_axes`), the columns both halves of
    a head when the region rotates them (`rotations.py`); with `split_k`, a program per K range of each tile."""
    shape = dom.shape
    n = len(shape)
    rows = row_axes(dom)
    batch_axes = tuple(a for a in range(n - 2) if a not in rows)
    batch = Source(batch_axes, prod(shape[a] for a in batch_axes))
    m = Source(rows, prod(shape[a] for a in rows), tiles.block_m, 0)
    half = rotation_half(dom)
    nn = Source((n - 1,), shape[-1], tiles.block_n, 1, pair=half if pairable(half, tiles.block_n) else 0)
    notes = {"BM": tiles.block_m, "BN": tiles.block_n, "BK": tiles.block_k, "STAGES": tiles.num_stages}
    if tiles.warp_specialize:
        notes["WARP_SPECIALIZE"] = 1
    if tiles.split_k == 1 or len({op.lhs for op in products(dom)}) > 1:  # one K loop splits
        return Geometry(shape, 2, [batch, m, nn], tiles.num_warps, notes=notes, group_rows=GROUP_ROWS)
    ranges = Source((), tiles.split_k)
    notes["SPLIT_K"] = tiles.split_k
    return Geometry(shape, 2, [ranges, batch, m, nn], tiles.num_warps, notes=notes, split_k=ranges,
                    group_rows=GROUP_ROWS)
