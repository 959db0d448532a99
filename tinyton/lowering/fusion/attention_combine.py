"""Flash-decoding's combine: the partial results of a KV loop split across programs, folded into the rows.

Each chunk of keys left per query row its maximum `m_i` (log2 units), its sum `l_i` of `2^(s - m_i)` and
its unnormalised accumulator `acc_i` (tinyton/lowering/fusion/attention.py, `_store_partials`). With
`m = max m_i`, the row's output is `sum(acc_i 2^(m_i - m)) / sum(l_i 2^(m_i - m))`, folded over the chunks
one at a time as the online softmax folds key blocks (their loads issued as many chunks at a time as
`COMBINE_REGISTERS` holds). A chunk that saw no key (a causal end before it, or every score -inf) has
`m_i = -inf`, `l_i = 0` and adds nothing; a row that no chunk saw gives 0 / 0 = NaN, as the one-kernel path and
NumPy's softmax do.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Attribute, SSAValue

from tinyton.dialects import tt
from tinyton.dialects.tt import shape_of
from tinyton.intmath import cdiv, next_power_of_2
from tinyton.lowering.fusion.attention_output import OutputLayout
from tinyton.lowering.fusion.emitter import Emitter, f32

COMBINE_REGISTERS = 64
"""Most registers a thread holds of the chunks' accumulators the combining program loads at once before folding
them (the fold is unrolled, in chunk order): eight chunks of `[16, 64]` on 4 warps, all 32 of a broadcast form's
`[4, 64]`. Each group of loads is one L2 round trip that the last program waits on: folded one loaded chunk at a
time, a decode step's attention on the H200 (12 chunks, 2026-12-02) waited on twelve; at eight chunks a group, a
32-chunk broadcast form (Llama-3.2-1B at position 512, 2026-12-04) waited on four."""


def combine_in_last_chunk(em: Emitter, partials: tuple[SSAValue, SSAValue, SSAValue], counters: SSAValue,
                          outputs: Sequence[tuple[SSAValue, OutputLayout]], out_element: Attribute,
                          sizes: tuple[int, int, int, int], block_rows: int, num_warps: int) -> None:
    """Flash-decoding in one launch: after a program of the partials kernel (grid: row block, batch, chunk) has
    stored its chunk's partials, it counts itself in at its (row block, batch)'s counter; the one that counts
    last, whose partials are then all stored, combines the block's rows into each output, laid out as its layout
    (`Emitter.continue_in_last`; `sizes`: splits, batch, S_q, D_v; `num_warps`: the program's)."""
    splits, batch = sizes[0], sizes[1]
    block, b = em.emit(tt.ProgramIdOp(0)), em.emit(tt.ProgramIdOp(1))
    em.continue_in_last(em.emit(tt.AddPtrOp(counters, em.add(em.mul_int(block, batch), b))), splits)
    start = em.mul_int(block, block_rows)
    _combine_rows(em, partials, outputs, out_element, sizes, b, start, block_rows, num_warps, ".cg")
    em.close_branches()


def _combine_rows(em: Emitter, partials: tuple[SSAValue, SSAValue, SSAValue],
                  outputs: Sequence[tuple[SSAValue, OutputLayout]], out_element: Attribute,
                  sizes: tuple[int, int, int, int], b: SSAValue, start: SSAValue, rows_per: int, num_warps: int,
                  cache: str | None = None) -> None:
    """Fold the `splits` chunks' partials of rows `[start, start + rows_per)` of batch `b` and store the rows
    (`cache`: the loads' PTX cache operator)."""
    splits, batch, s_q, d_v = sizes
    hints = {"cache": cache} if cache else {}
    dvp = max(16, next_power_of_2(d_v))
    rows = em.binary(tt.AddOp, em.to_shape(start, (rows_per, 1)), em.arange(rows_per, 2, 0))  # [R, 1]
    row_ok = em.cmp("lt", rows, em.i32(s_q))
    cols = em.arange(dvp, 2, 1)  # [1, Dvp]
    shape = (rows_per, dvp)
    tile_ok = em.to_shape(em.and_(row_ok, em.cmp("lt", cols, em.i32(d_v)) if dvp > d_v else None), shape)
    m_ptr, l_ptr, acc_ptr = partials
    batch_rows = em.binary(tt.AddOp, em.to_shape(em.mul_int(b, s_q), (1, 1)), rows)  # chunk 0's rows of batch b

    def load(z: int) -> tuple[SSAValue, SSAValue, SSAValue]:
        """Chunk `z`'s `m`, `l` and accumulator rows."""
        row_index = em.binary(tt.AddOp, em.to_shape(em.i32(z * batch * s_q), (1, 1)), batch_rows)
        m_z, l_z = (em.emit(tt.LoadOp(em.emit(tt.AddPtrOp(em.to_shape(p, (rows_per, 1)), row_index)), row_ok,
                                      em.const(0.0, f32, (rows_per, 1)), **hints)) for p in (m_ptr, l_ptr))
        offsets = em.to_shape(em.binary(tt.AddOp, em.mul_int(row_index, d_v), cols), shape)
        acc_z = em.emit(tt.LoadOp(em.emit(tt.AddPtrOp(em.to_shape(acc_ptr, shape), offsets)), tile_ok,
                                  em.const(0.0, f32, shape), **hints))
        return m_z, l_z, acc_z

    m = em.const(float("-inf"), f32, (rows_per, 1))
    total, acc = em.const(0.0, f32, (rows_per, 1)), em.const(0.0, f32, shape)
    at_once = max(1, COMBINE_REGISTERS // cdiv(rows_per * dvp, 32 * num_warps))
    for first in range(0, splits, at_once):
        for m_z, l_z, acc_z in [load(z) for z in range(first, min(first + at_once, splits))]:
            m_new = em.binary(tt.MaximumOp, m, m_z)
            m_safe = em.finite_max(m_new)
            alpha = em.emit(tt.Exp2Op(em.binary(tt.SubOp, m, m_safe)))
            beta = em.emit(tt.Exp2Op(em.binary(tt.SubOp, m_z, m_safe)))
            total = em.binary(tt.AddOp, em.binary(tt.MulOp, total, alpha), em.binary(tt.MulOp, l_z, beta))
            acc = em.binary(tt.AddOp, em.binary(tt.MulOp, acc, alpha), em.binary(tt.MulOp, acc_z, beta))
            m = m_new
    inverse = em.binary(tt.DivOp, em.const(1.0, f32, shape_of(total.type)), total)  # a division a row
    result = em.cast(em.binary(tt.MulOp, acc, inverse), out_element)
    for out, layout in outputs:
        offsets = em.binary(tt.AddOp, layout.row_offsets(em, b, rows), em.mul_int(cols, layout.column_stride))
        offsets = em.to_shape(offsets, shape)
        em.emit(tt.StoreOp(em.emit(tt.AddPtrOp(em.to_shape(out, shape), offsets)), result, tile_ok))
