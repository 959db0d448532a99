"""Split-K: a matmul region's K cut into ranges, a program each, in one launch.

A skinny product (a decode batch's few rows against a weight matrix) has few output tiles: Llama-3.2-1B's
key/value projection at batch 8 is 16 `[16, 32]` tiles, 16 SMs streaming 4 MiB of weights. With `split_k`
ranges (`MatmulTiles.split_k`, measured against the unsplit tiles by the tuner) each tile has that many
programs, the outermost program index choosing the range (`geometry.plan_matmul`). Each program runs its
range of the K loop, stores its f32 partial products to a scratch buffer (`[tile, dot, range]` blocks of the
tile's shape) and counts itself in at its tile's counter (`Emitter.continue_in_last`); the program that counts
last adds the ranges' partials and runs the region's epilogue and stores alone, in a branch that holds the rest
of the kernel (`RegionEmitter.continue_in_last`). No second kernel, no atomics on the output: the sums are in
range order whichever program finishes last, so a result does not depend on timing.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from xdsl.ir import SSAValue

from tinyton.dialects import tt
from tinyton.dialects.tt import shape_of
from tinyton.intmath import cdiv


def range_bounds(rg, K: int, bk: int) -> tuple[SSAValue, SSAValue]:
    """This program's K range `[lb, ub)`: whole K steps of `bk`, the last range ending at K (empty ranges when
    the steps do not fill them all)."""
    em, ranges = rg.em, rg.geom.split_k
    length = cdiv(cdiv(K, ranges.extent), bk) * bk
    lb = em.mul_int(ranges.index, length)
    return lb, em.binary(tt.MinimumOp, em.add(lb, em.i32(length)), em.i32(K))


def sum_ranges(rg, accs: Sequence[SSAValue]) -> list[SSAValue]:
    """Store this program's f32 partial products `accs` (one per dot), count in, and continue only in the last
    program of the tile, with the products summed over the ranges in range order."""
    em, geom = rg.em, rg.geom
    partials, counters = rg.split_buffers
    ranges = geom.split_k.extent
    tiles = geom.programs // ranges
    tile = em.mod_int(em.emit(tt.ProgramIdOp(0)), tiles) if tiles > 1 else em.i32(0)
    shape = shape_of(accs[0].type)
    lanes = em.binary(tt.AddOp, em.mul_int(em.arange(shape[0], 2, 0), shape[1]), em.arange(shape[1], 2, 1))
    base = em.to_shape(partials, shape)

    def block(dot: int, index: SSAValue) -> SSAValue:
        """Pointers to the partial product of `dot` over range `index` of this tile."""
        start = em.mul_int(em.add(em.mul_int(em.add(em.mul_int(tile, len(accs)), em.i32(dot)), ranges), index),
                           prod(shape))
        return em.emit(tt.AddPtrOp(base, em.binary(tt.AddOp, lanes, em.to_shape(start, shape))))

    for dot, acc in enumerate(accs):
        em.emit(tt.StoreOp(block(dot, geom.split_k.index), acc))
    rg.continue_in_last(em.emit(tt.AddPtrOp(counters, tile)), ranges)
    sums = []
    for dot in range(len(accs)):
        parts = [em.emit(tt.LoadOp(block(dot, em.i32(r)), cache=".cg")) for r in range(ranges)]
        total = parts[0]
        for part in parts[1:]:
            total = em.binary(tt.AddOp, total, part)
        sums.append(total)
    return sums
