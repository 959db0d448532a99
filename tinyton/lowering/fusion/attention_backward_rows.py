"""The attention backward's row kernels (attention_backward.py): delta, `rowsum(do * o)` per query row, and dq, from
the f32 sum the dk/dv kernel added it to, or (`BackwardBlocks.dq`) walking the key blocks itself."""

from __future__ import annotations

from math import prod

from xdsl.ir import SSAValue

from tinyton.analysis.attention_backward import AttentionBackward
from tinyton.dialects import tt
from tinyton.dialects.tt import element_type
from tinyton.intmath import cdiv
from tinyton.lowering.fusion.attention_backward import BackwardBlocks, BackwardBuffers, BackwardProgram
from tinyton.lowering.fusion.emitter import Emitter, f32


class _Delta(BackwardProgram):
    """`delta = rowsum(do * o)` per query row, and the rows' dq sums zeroed: grid (query blocks, batch)."""

    def emit(self) -> tuple[int, int, int]:
        em = self.em
        self.coords = self._batch_coords(em.emit(tt.ProgramIdOp(1)))
        rows, row_ok = self._rows(em.mul_int(em.emit(tt.ProgramIdOp(0)), self.bm), self.bm)
        do = em.cast(self._do_block(rows, row_ok), f32)
        flat = self._flat_batch()
        if self.bwd.o_view is not None:
            o = self._rows_of(self.bwd.o, self.bwd.o_view, rows, row_ok)
        else:  # the given o, or the forward kernel's: contiguous
            cols = em.arange(self.dvp, 2, 1)
            o_mask = em.and_(row_ok, self._below(cols, self.dvp, self.d_v))
            offsets = em.binary(tt.AddOp, em.to_shape(em.mul_int(flat, self.s_q * self.d_v), (1, 1)),
                                em.mul_int(rows, self.d_v))
            shape = (self.bm, self.dvp)
            offsets = em.to_shape(em.binary(tt.AddOp, offsets, cols), shape)
            zero = em.const(0, element_type(self.buffers.o.type.pointee), shape)
            o = em.emit(tt.LoadOp(em.emit(tt.AddPtrOp(em.to_shape(self.buffers.o, shape), offsets)),
                                  em.to_shape(o_mask, shape), zero))
        delta = em.reduce("sum", em.binary(tt.MulOp, do, em.cast(o, f32)), 1)
        ptrs = em.emit(tt.AddPtrOp(em.to_shape(self.buffers.delta, (self.bm, 1)),
                                   em.binary(tt.AddOp, em.to_shape(em.mul_int(flat, self.s_q), (self.bm, 1)), rows)))
        em.emit(tt.StoreOp(ptrs, delta, row_ok))
        if self.dq_reduced:
            dq_sums, dq_ok = self._dq_sum_block(flat, rows, row_ok)
            em.emit(tt.StoreOp(dq_sums, em.const(0.0, f32, (self.bm, self.dp)), dq_ok))
        return cdiv(self.s_q, self.bm), max(1, prod(self.batch)), 1


class _QueryGrads(BackwardProgram):
    """dq of one query block: its f32 sum, which the dk/dv kernel's programs added up, scaled, cast and stored where
    the program wants it: grid (query blocks, batch)."""

    def emit(self) -> tuple[int, int, int]:
        em = self.em
        self.coords = self._batch_coords(em.emit(tt.ProgramIdOp(1)))
        flat = self._flat_batch()
        if self.dq_reduced:
            rows, row_ok = self._rows(em.mul_int(em.emit(tt.ProgramIdOp(0)), self.bm), self.bm)
            ptrs, mask = self._dq_sum_block(flat, rows, row_ok)
            dq = em.emit(tt.LoadOp(ptrs, mask, em.const(0.0, f32, (self.bm, self.dp))))
        else:
            start = em.mul_int(self._query_block(cdiv(self.s_q, self.bm)), self.bm)  # causal: the longest first
            rows, row_ok = self._rows(start, self.bm)
            dq = self._walk_keys(rows, row_ok, start)
        c = self.att.causal_offset
        if c is not None and c < 0:  # rows i < -c see no key (no program added to them): NaN, as their p
            blind = em.to_shape(em.cmp("lt", em.add(rows, em.i32(c)), em.i32(0)), (self.bm, self.dp))
            dq = em.select(blind, em.const(float("nan"), f32, (self.bm, self.dp)), dq)
        self._store(self.bwd.dq, flat, rows, row_ok, self.dp, self._finish(self.bwd.dq, dq))
        return cdiv(self.s_q, self.bm), max(1, prod(self.batch)), 1

    def _walk_keys(self, rows: SSAValue, row_ok: SSAValue, start: SSAValue) -> SSAValue:
        """dq of the query block at `start` from the key blocks it sees, the loops as the forward splits them:
        `s` and `dp` recomputed, `ds = p (dp - delta)`, `dq += ds k`."""
        em = self.em
        q, do = self._q_block(rows, row_ok), self._do_block(rows, row_ok)
        self.prepare_scale()
        lse, delta = self._lse(rows, row_ok), self._delta(rows, row_ok)
        dv_cols = em.arange(self.dvp, 2, 1)
        carried = [em.const(0.0, f32, (self.bm, self.dp))]
        first, split, end = self._chunk(self._unmasked_end(start), self._kv_end(start))
        for lb, ub, masked in ((first, split, False), (split, end, True)):
            if ub == 0 or lb == ub:
                continue

            def body(j: SSAValue, values: list[SSAValue], masked: bool = masked) -> list[SSAValue]:
                cols, col_ok = self._columns(j, masked)
                kt, k = self._key_pair(j, self._ragged_bound(col_ok))
                v = self._value_block(j, self._ragged_bound(col_ok), dv_cols)
                s, dp = self._product(q, kt), self._product(do, em.emit(tt.TransOp(v, (1, 0))))
                p = self._probabilities(s, rows, row_ok, cols, col_ok, masked, lse)
                ds = em.binary(tt.MulOp, p, em.binary(tt.SubOp, dp, delta))
                return [em.emit(tt.DotOp(em.cast(ds, self.element), k, values[0]))]

            stages = self.blocks.masked_stages if masked else self.blocks.stages  # the main loop the deeper one
            carried = em.for_loop(lb, ub, self.bn, carried, body, stages)
        return carried[0]

    def _key_pair(self, j: SSAValue, bound: SSAValue | None) -> tuple[SSAValue, SSAValue]:
        """kᵀ and k of the key block at `j` from one load, one of them its transpose: both products read the
        pipeliner's slot (kᵀ transposed back is no dot operand: the block would be loaded unpipelined every step)."""
        em = self.em
        if self.att.k_transposed:
            k = self._key_block(j, bound, rows=True)
            return em.emit(tt.TransOp(k, (1, 0))), k
        kt = self._key_block(j, bound)
        return kt, em.emit(tt.TransOp(kt, (1, 0)))


def emit_delta(em: Emitter, bwd: AttentionBackward, pointers: dict[SSAValue, SSAValue], buffers: BackwardBuffers,
               blocks: BackwardBlocks) -> tuple[int, int, int]:
    return _Delta(em, bwd, pointers, blocks.row_blocks, buffers).emit()


def emit_query_grads(em: Emitter, bwd: AttentionBackward, pointers: dict[SSAValue, SSAValue],
                     buffers: BackwardBuffers, blocks: BackwardBlocks) -> tuple[int, int, int]:
    return _QueryGrads(em, bwd, pointers, blocks.query_blocks, buffers).emit()
