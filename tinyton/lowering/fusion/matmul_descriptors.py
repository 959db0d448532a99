"""Matmul operands read as blocks of the matrix as stored (`tt.descriptor_load`: TMA on sm_90, masked loads
elsewhere): which operands qualify, and the load of one block. Used by the K loop of matmul.py. And a
warp-specialised matmul's output tile stored as a block of the output (`tt.descriptor_store`: TMA from its
consumers on sm_90, a masked store elsewhere; region.py)."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from math import prod

from xdsl.ir import SSAValue

from tinyton.analysis.views import View
from tinyton.dialects import tt
from tinyton.lowering.fusion.emitter import Emitter


@dataclass
class Descriptor:
    """A matmul operand read as blocks of the matrix as stored: `sizes`/`strides`/`outer` (the scalar index
    of each batch dimension it has) outermost first; `transposed` when the stored matrix is the operand's
    transpose (`w` of `x @ w.T`: its `[BN, BK]` blocks are read and fed to the dot through `tt.trans`)."""

    base: SSAValue
    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    outer: tuple[SSAValue, ...]
    transposed: bool


def descriptor(rg, view: View, right: bool) -> Descriptor | None:
    """The descriptor of a matmul operand whose tiles are then `tt.descriptor_load`s (TMA on sm_90): a
    row-major matrix, or a column-major one (B, `right`, or a 16-bit A), under batch dimensions that each have their
    own program index (broadcast ones, stride 0, drop out); None otherwise (plain masked loads). A's rows
    are the M source's, batch axes folded into M included (`row_axes`) when they are one run of strides."""
    geom, n = rg.geom, len(rg.geom.domain)
    if geom.source_of(n - 1).axes != (n - 1,):
        return None
    (r, c), (sr, sc) = view.shape[-2:], view.strides[-2:]
    if not right:
        rows = _rows(view, geom.source_of(n - 2).axes, geom.domain)
        if rows is None:
            return None
        r, sr = rows
    if sc == 1 and sr >= c:
        sizes, strides, transposed = (r, c), (sr, 1), False
    elif (right or _sixteen_bit(view)) and sr == 1 and sc >= r:
        sizes, strides, transposed = (c, r), (sc, 1), True
    else:
        return None
    outer = []
    for source in reversed([s for s in geom.sources if s.axes and s.axes[-1] < n - 2]):
        if source.dim is not None or source.index is None:
            return None
        read = _read(view, source.axes, n)
        if not read:  # broadcast over this batch index
            continue
        if len(read) != len(source.axes) or not _one_stride(read):
            return None  # broadcast over part of a merged batch index, or not one stride
        sizes, strides = (source.extent, *sizes), (read[-1][1], *strides)
        outer.insert(0, source.index)
    return Descriptor(rg.ptrs[view.base], sizes, strides, tuple(outer), transposed)


def _sixteen_bit(view: View) -> bool:
    """Whether A stored transposed (`a.T @ b`: a weight gradient's `x.T @ dy`) may be read as stored: wgmma reads a
    16-bit A M-major from shared memory (`mma_layout.m_major_a`), not a float8 or tf32 one."""
    return tt.element_type(view.base.type).bitwidth == 16


def _read(view: View, axes: tuple[int, ...], n: int) -> list[tuple[int, int]]:
    """The dims of `view` along `axes` that it reads (not of size 1, not broadcast)."""
    return [(d, st) for d, st in view.dims(axes, n) if d != 1 and st != 0]


def _one_stride(dims: list[tuple[int, int]]) -> bool:
    return all(st == d * inner for (_, st), (d, inner) in pairwise(dims))


def _rows(view: View, axes: tuple[int, ...], domain: tuple[int, ...]) -> tuple[int, int] | None:
    """Rows and row stride of A's stored matrix over the M source's `axes` (M, and the batch axes folded into
    it); None when they are not one run of strides, or A is broadcast along one of them (`a @ broadcast_to(b,
    (3, K, N))`: its rows repeat)."""
    dims = view.dims(axes, len(domain))
    if any(d != domain[a] or (d != 1 and st == 0) for a, (d, st) in zip(axes, dims)):
        return None
    read = [(d, st) for d, st in dims if d != 1]
    if not read:
        return 1, view.strides[-2]
    return (prod(d for d, _ in read), read[-1][1]) if _one_stride(read) else None


def _stored_block(em: Emitter, desc: Descriptor, starts: tuple[SSAValue, SSAValue], block: tuple[int, int]):
    """Pointers and mask of the block at `starts` of the stored matrix (one batch element of it)."""
    rows = em.binary(tt.AddOp, em.to_shape(starts[0], (block[0], 1)), em.arange(block[0], 2, 0))
    cols = em.binary(tt.AddOp, em.to_shape(starts[1], (1, block[1])), em.arange(block[1], 2, 1))
    offset = em.binary(tt.AddOp, em.mul_int(rows, desc.strides[-2]), cols)
    for index, stride in zip(desc.outer, desc.strides[:-2]):
        offset = em.binary(tt.AddOp, offset, em.to_shape(em.mul_int(index, stride), block))
    ptrs = em.emit(tt.AddPtrOp(em.to_shape(desc.base, block), em.to_shape(offset, block)))
    row_ok = em.cmp("lt", rows, em.i32(desc.sizes[-2])) if desc.sizes[-2] % block[0] else None
    col_ok = em.cmp("lt", cols, em.i32(desc.sizes[-1])) if desc.sizes[-1] % block[1] else None
    mask = em.and_(row_ok, col_ok)
    return ptrs, None if mask is None else em.to_shape(mask, block)


def descriptor_load(em: Emitter, desc: Descriptor, starts: tuple[SSAValue, SSAValue], block: tuple[int, int]) -> SSAValue:
    """The operand's `block` at `starts`: a descriptor load of the stored block (transposed back when the
    operand is the stored matrix's transpose)."""
    if desc.transposed:
        starts, block = starts[::-1], block[::-1]
    ptrs, mask = _stored_block(em, desc, starts, block)
    el = tt.element_type(ptrs.type).pointee
    load = em.emit(tt.DescriptorLoadOp(
        ptrs, mask, em.const(0.0, el, block) if mask else None, desc.base, [em.i32(d) for d in desc.sizes],
        [em.i32(st) for st in desc.strides], [*desc.outer, *starts], "zero",
    ))
    return em.emit(tt.TransOp(load, (1, 0))) if desc.transposed else load


def descriptor_store(rg, value: SSAValue, ptr: SSAValue, tile: SSAValue) -> bool:
    """Store the region's output `value`, whose register tile is `tile`, as a block of its row-major output at
    `ptr` (rows: every axis but the last, as the M source enumerates them); False, storing nothing, when the
    tile is not such a block (a broadcast or rotated output, other tile shapes)."""
    em, geom, dom = rg.em, rg.geom, rg.dom
    n = len(dom.shape)
    m_src, n_src = geom.source_of(n - 2), geom.source_of(n - 1)
    whole = dom.map_of(value) == tuple(range(n)) and tuple(tt.shape_of(value.type)) == tuple(dom.shape)
    if not (whole and m_src.axes == tuple(range(n - 1)) and n_src.axes == (n - 1,) and n_src.contiguous):
        return False
    block = (m_src.block, n_src.block)
    if tuple(tt.shape_of(tile.type)) != block:
        return False
    desc = Descriptor(ptr, (prod(dom.shape[:-1]), dom.shape[-1]), (dom.shape[-1], 1), (), False)
    starts = tuple(s.start if s.start is not None else em.i32(0) for s in (m_src, n_src))
    ptrs, mask = _stored_block(em, desc, starts, block)
    em.emit(tt.DescriptorStoreOp(ptrs, tile, mask, ptr, [em.i32(d) for d in desc.sizes],
                                 [em.i32(st) for st in desc.strides], list(starts)))
    return True
