"""The main loop of a matmul kernel: `[BM, BK] x [BK, BN]` tiles accumulated with `tt.dot` over K.

Operands are read through their views, so `x @ w.T` or a broadcast batch costs no copy. The f32
accumulator then feeds the region's elementwise epilogue (bias, activation, residual) in registers.
"""

from __future__ import annotations

from xdsl.ir import SSAValue

from tinyton.analysis.domain import View
from tinyton.dialects import tt, tta
from tinyton.dialects.tt import element_type
from tinyton.lowering.fusion.emitter import f32


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


def emit_matmul(rg, op: tta.MatmulOp) -> SSAValue:
    """Emit the K loop at program scope; returns the result tile `[BM, BN]` in the result type."""
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

    def body(k0: SSAValue, carried: list[SSAValue]) -> list[SSAValue]:
        kka, kkb = em.add(k0, ka), em.add(k0, kb)
        masks = []
        for kk, rows, shape in ((kka, m_src, (bm, bk)), (kkb, n_src, (bk, bn))):
            m = em.cmp("lt", kk, em.i32(K)) if K % bk else None
            masks.append(em.to_shape(em.and_(m, rows.mask), shape) if (m or rows.mask) else None)
        pa = em.emit(tt.AddPtrOp(a_base, em.binary(tt.AddOp, a_off, em.mul_int(kka, a_k))))
        pb = em.emit(tt.AddPtrOp(b_base, em.binary(tt.AddOp, b_off, em.mul_int(kkb, b_k))))
        a = em.emit(tt.LoadOp(pa, masks[0], zero_a if masks[0] else None))
        b = em.emit(tt.LoadOp(pb, masks[1], zero_b if masks[1] else None))
        return [em.emit(tt.DotOp(a, b, carried[0]))]

    (acc,) = em.for_loop(0, K, bk, [acc0], body)
    return em.cast(acc, element_type(op.result.type))
