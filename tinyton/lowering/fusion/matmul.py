"""The main loop of a matmul kernel: `[BM, BK] x [BK, BN]` tiles accumulated with `tt.dot` over K.

Operands are read through their views, so `x @ w.T` or a broadcast batch costs no copy. The f32
accumulator then feeds the region's elementwise epilogue (bias, activation, residual) in registers.
Row reductions of the left operand (RMSNorm's `mean(x * x)`, tinyton/rewrites/row_scale.py) accumulate
in the same loop from the `[BM, BK]` tiles the dot reads, so the norm costs no extra pass over `x`.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Operation, SSAValue

from tinyton.analysis.domain import View
from tinyton.dialects import tt, tta
from tinyton.dialects.tt import element_type
from tinyton.lowering.fusion.emitter import Emitter, f32, identity
from tinyton.lowering.fusion.region import BINARY, COMBINE, UNARY, accumulator_element, reduction_kind

RowReduction = tuple[tta.ReduceOp, Sequence[Operation]]
"""A reduction over the last axis of an elementwise chain of the left operand (the chain in program order)."""


def _strides(view: View, batch: int, row_axis: int, row_dim: int) -> tuple[dict[int, int], int]:
    """Per-domain-axis strides of a matmul operand (batch dims right-aligned) and its K stride."""
    strides = {}
    rank = len(view.shape)
    for j in range(rank - 2):
        if view.shape[j] != 1 and view.strides[j]:
            strides[batch - (rank - 2) + j] = view.strides[j]
    if view.shape[row_dim] != 1:
        strides[row_axis] = view.strides[row_dim]
    k_dim = rank - 1 if row_dim == rank - 2 else rank - 2
    return strides, view.strides[k_dim]


def _chain(em: Emitter, tile: SSAValue, source: SSAValue, chain: Sequence[Operation]) -> SSAValue:
    """The elementwise chain on a loaded tile of `source` (its other operands are scalar constants)."""
    env = {source: tile}
    for op in chain:
        args = [env[v] if v in env else em.const(v.op.value.value.data, v.type) for v in op.operands]
        if isinstance(op, tta.CastOp):
            env[op.results[0]] = em.cast(args[0], element_type(op.results[0].type))
        elif type(op) in UNARY:
            env[op.results[0]] = em.emit(UNARY[type(op)](args[0]))
        else:
            env[op.results[0]] = em.binary(BINARY[type(op)], *args)
    return tile if not chain else env[chain[-1].results[0]]


def _finish_row(rg, red: tta.ReduceOp, acc: SSAValue, K: int) -> SSAValue:
    """`[BM, BK]` partials -> the reduction's `[BM, 1]` tile (`[1, 1]` when it has no row axis: M is 1
    and the masked rows hold the identity)."""
    em, kind = rg.em, reduction_kind(red)
    row = em.reduce(kind, acc, 1)
    if isinstance(red, tta.ReduceMeanOp):
        row = em.binary(tt.MulOp, row, em.const(1.0 / K, f32))
    if len(rg.dom.shape) - 2 not in rg.dom.map_of(red.result):
        row = em.reduce(kind, row, 0)
    return em.cast(row, element_type(red.result.type))


def emit_matmul(rg, op: tta.MatmulOp, stats: Sequence[RowReduction] = ()) -> SSAValue:
    """Emit the K loop at program scope; returns the result tile `[BM, BN]` in the result type. The
    reductions `stats` of `op.lhs` are computed in the same loop, into the program scope's memo."""
    em, dom = rg.em, rg.dom
    n = len(dom.shape)
    a_view, b_view = dom.view(op.lhs), dom.view(op.rhs)
    a_strides, a_k = _strides(a_view, n - 2, n - 2, len(a_view.shape) - 2)
    b_strides, b_k = _strides(b_view, n - 2, n - 1, len(b_view.shape) - 1)
    K = a_view.shape[-1]
    bk = rg.geom.notes["BK"]
    m_src, n_src = rg.geom.source_of(n - 2), rg.geom.source_of(n - 1)
    bm, bn = m_src.block, n_src.block
    el = element_type(op.lhs.type)
    a_off, b_off = (rg.offsets(st, rg.root) for st in (a_strides, b_strides))
    a_off = em.to_shape(a_off if a_off is not None else em.i32(0), (bm, bk))
    b_off = em.to_shape(b_off if b_off is not None else em.i32(0), (bk, bn))
    a_base = em.to_shape(rg.ptrs[a_view.base], (bm, bk))
    b_base = em.to_shape(rg.ptrs[b_view.base], (bk, bn))
    ka, kb = em.arange(bk, 2, 1), em.arange(bk, 2, 0)
    zero_a, zero_b = em.const(0.0, el, (bm, bk)), em.const(0.0, el, (bk, bn))
    acc0 = em.const(0.0, f32, (bm, bn))
    row0 = [em.const(identity(reduction_kind(red), _acc(red)), _acc(red), (bm, bk)) for red, _ in stats]
    plain = n != 2 or m_src.axes != (0,) or n_src.axes != (1,)
    a_desc = None if plain or stats else _descriptor(rg, a_view)  # a tile the stats read stays in registers
    b_desc = None if plain else _descriptor(rg, b_view)

    def body(k0: SSAValue, carried: list[SSAValue]) -> list[SSAValue]:
        kka, kkb = em.add(k0, ka), em.add(k0, kb)
        masks = []
        for kk, rows, shape in ((kka, m_src, (bm, bk)), (kkb, n_src, (bk, bn))):
            m = em.cmp("lt", kk, em.i32(K)) if K % bk else None
            masks.append(em.to_shape(em.and_(m, rows.mask), shape) if (m or rows.mask) else None)
        pa = em.emit(tt.AddPtrOp(a_base, em.binary(tt.AddOp, a_off, em.mul_int(kka, a_k))))
        pb = em.emit(tt.AddPtrOp(b_base, em.binary(tt.AddOp, b_off, em.mul_int(kkb, b_k))))
        a = _load(em, pa, masks[0], zero_a, a_desc, [_start(em, m_src), k0])
        b = _load(em, pb, masks[1], zero_b, b_desc, [k0, _start(em, n_src)])
        out = [em.emit(tt.DotOp(a, b, carried[0]))]
        for (red, chain), part in zip(stats, carried[1:]):
            kind, el = reduction_kind(red), _acc(red)
            v = em.cast(_chain(em, a, op.lhs, chain), el)
            if masks[0] is not None:
                v = em.select(masks[0], v, em.const(identity(kind, el), el))
            out.append(em.binary(COMBINE[kind], part, v))
        return out

    acc, *partials = em.for_loop(0, K, bk, [acc0, *row0], body)
    for (red, _), part in zip(stats, partials):
        rg.root.memo[red.result] = _finish_row(rg, red, part, K)
    return em.cast(acc, element_type(op.result.type))


Descriptor = tuple[SSAValue, list[SSAValue], list[SSAValue]]


def _descriptor(rg, view: View) -> Descriptor | None:
    """(base, sizes, strides) of a 2-D row-major operand, whose tiles are then `tt.descriptor_load`s (TMA
    on sm_90); None for a batched, transposed or broadcast view (those keep plain masked loads)."""
    if len(view.shape) != 2 or view.strides[1] != 1 or view.strides[0] < view.shape[1]:
        return None
    em = rg.em
    return rg.ptrs[view.base], [em.i32(d) for d in view.shape], [em.i32(st) for st in view.strides]


def _start(em: Emitter, source) -> SSAValue:
    return source.start if source.start is not None else em.i32(0)


def _load(
    em: Emitter, ptrs: SSAValue, mask: SSAValue | None, zero: SSAValue, desc: Descriptor | None,
    offsets: list[SSAValue],
) -> SSAValue:
    """The operand tile: a masked load, named by its block when the operand has a descriptor."""
    other = zero if mask else None
    if desc is None:
        return em.emit(tt.LoadOp(ptrs, mask, other))
    base, sizes, strides = desc
    return em.emit(tt.DescriptorLoadOp(ptrs, mask, other, base, sizes, strides, offsets, "zero"))


def _acc(red: tta.ReduceOp):
    return accumulator_element(element_type(red.input.type))
