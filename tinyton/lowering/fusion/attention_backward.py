"""The kernels of an "attention_backward" region: FlashAttention-2's backward, as Triton's tutorial writes it.

    [forward]  the flash-attention kernel (attention.py), also storing each row's logsumexp: only when the
               program computes the probabilities by a softmax instead of giving `lse`
    delta      per query row, `rowsum(do * o)` (= `rowsum(dp * p)`), f32 scratch; zeroes the rows' dq sum
    dk/dv      one program per key block (and key/value head): k and v loaded once, a loop over the query
               heads of its group (grouped-query attention) and the query blocks that see it (without a causal
               mask from the key block's own index on, then round: a head's programs add to different dq blocks
               at a time), recomputing
               `p = exp2(s - lse)` block by block: `dv += pᵀ do`, `ds = p (do vᵀ - delta)`, `dk += dsᵀ q`,
               and the query block's share of dq, `ds k`, added to its f32 sum in memory (FlashAttention-2 and
               3's atomics: one TMA reduction of the block on sm_90, `tt.descriptor_reduce`)
    dq         one program per query block: the sum scaled and cast, stored where the program wants dq
               (delta's and dq's kernels: attention_backward_rows.py)

With `TINYTON_ATTENTION_DQ=walk` (`BackwardBlocks.dq`) dq is instead its own kernel's again, each program walking
the key blocks its query block sees and recomputing `s` and `dp` (seven products a step; the delta kernel zeroes
nothing, the dk/dv kernel adds nothing), kept to measure the two side by side: on an H100 each was ahead on three of
the backward table's six rows (geomean 78 % of cuDNN walking, 79 % reduced: docs/benchmarks.md).

Scores are recomputed with the forward's own code (the score steps, masks, the scale folded with log2(e),
causal loops stopping at the diagonal), so p matches the forward's. Five products a step, none recomputed
(a dq kernel walking the key blocks recomputed `s` and `dp`: seven). No S x S array is stored: three
launches (four with the forward). dq's sum is added in an order the GPU picks: its rounding may differ
from run to run in the last bits of float32. Everything computes in float32; `p` and `ds` are cast to the operands'
dtype for the products (tensor cores for fp16 and bf16). A row whose scores are all -inf has lse -inf and
gives NaN gradients, as the textbook math in NumPy does: its dq, and every key's dk and dv (its NaN p
reaches them all; a causal mask that leaves the first queries without a key says so before any loop).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from math import prod

from xdsl.ir import SSAValue

from tinyton.analysis.strided_views import QView, own_layout
from tinyton.analysis.attention_backward import AttentionBackward, Gradient
from tinyton.analysis.index_masks import is_constant
from tinyton.dialects import tt, tta
from tinyton.dialects.tt import element_type, shape_of
from tinyton.intmath import cdiv, next_power_of_2
from tinyton.lowering.fusion.attention import _Program
from tinyton.lowering.fusion.attention_blocks import Blocks
from tinyton.lowering.fusion.attention_output import flat_offset
from tinyton.lowering.fusion.attention_scores import LOG2E
from tinyton.lowering.fusion.emitter import Emitter, f32


@dataclass(frozen=True)
class BackwardBlocks:
    """Tilings of the backward kernels: the dk/dv kernel walks query blocks of `dkdv.bm` for a key block of
    `dkdv.bn`; the delta and dq kernels take `rows` query rows a program."""

    dkdv: Blocks
    rows: int = 64
    dq: Blocks | None = None
    """The dq kernel's blocks where it walks the key blocks itself (`dq.bn` keys a step for `dq.bm` queries); None
    where the dk/dv kernel adds each query block's share to a sum the dq kernel then scales."""

    @property
    def row_blocks(self) -> Blocks:
        """The delta kernel's blocks, and the dq kernel's where it scales a sum: `rows` query rows on 4 warps."""
        return Blocks(self.rows, 16, 4)

    @property
    def query_blocks(self) -> Blocks:
        """The dq kernel's blocks."""
        return self.dq or self.row_blocks


DQ_ENV = "TINYTON_ATTENTION_DQ"
"""`walk`: the dq kernel walks the key blocks (`BackwardBlocks.dq`); anything else: the dk/dv kernel adds dq."""


def backward_blocks(bwd: AttentionBackward) -> BackwardBlocks:
    """16-bit operands as FlashAttention-2 and 3 tile them on 8 warps: the dk/dv kernel 64 queries a step for 128
    keys (64 keys for head dims over 128; 128 queries at head dims up to 64, where a 64-query block's share of dq,
    `[64, D]`, would be 32 columns a warpgroup: no whole 128-byte panels of k for wgmma), q and do double-buffered
    (three stages left sm_80 no room for the 128 x 128 scores' layout conversions). dk and dv, each `[BN, D]`
    f32, live in registers for the whole kernel beside a step's scores and its share of dq (sm_90a, ptxas: 230-244
    registers at D = 64 and 128, nothing spilled; 4 bytes spilled at D = 256, whose dq block, 64 registers a
    thread, and its 64 KB staging tile leave q and do one stage, loaded; Triton's tutorial tiling, 128 keys and 32
    queries on 4 warps, spilled 569 registers at D = 128 without dq). f32 operands (FMAs) in 32 x 32 blocks."""
    att = bwd.scores
    d = max(att.q.shape[-1], shape_of(att.v.type)[-1])
    sixteen = element_type(att.q.base.type).bitwidth == 16
    if os.environ.get(DQ_ENV) == "walk":  # FlashAttention-2's tiles for the dq kernel too (the twenty-second session's)
        if not sixteen:
            return BackwardBlocks(Blocks(32, 32, 4), dq=Blocks(32, 32, 4))
        if d > 128:
            return BackwardBlocks(Blocks(64, 64, 8), dq=Blocks(64, 32, 8, stages=2))
        return BackwardBlocks(Blocks(64, 128, 8), dq=Blocks(128, 64, 8))
    if sixteen:
        return BackwardBlocks(Blocks(128 if d <= 64 else 64, 64 if d > 128 else 128, 8, stages=2))
    return BackwardBlocks(Blocks(32, 32, 4))


@dataclass(frozen=True)
class BackwardBuffers:
    """Pointers of one backward kernel: `lse` (given or the forward's scratch, f32 `[batch, S_q]` when
    scratch), `delta` (f32 scratch `[batch, S_q]`), `dq_sum` (f32 scratch `[batch, S_q, D]`, D padded to a
    power of 2; None where the dq kernel walks the key blocks, `BackwardBlocks.dq`) and `o`."""

    lse: SSAValue
    lse_given: bool
    delta: SSAValue
    dq_sum: SSAValue | None
    o: SSAValue


class BackwardProgram(_Program):
    """The forward's addressing and score code, over the backward's problem (no `p @ v` to read shapes from)."""

    transposed_scores = False
    """Whether the kernel computes `sᵀ = k @ qᵀ` (`score_shape` `(BN, BM)`) rather than `q @ kᵀ`."""

    def __init__(self, em: Emitter, bwd: AttentionBackward, pointers: dict[SSAValue, SSAValue], blocks: Blocks,
                 buffers: BackwardBuffers):
        att = bwd.scores
        self.em, self.att, self.bwd, self.pointers, self.buffers = em, att, bwd, pointers, buffers
        self.split = self.partials = self.lse = self.scale = self.runtime_factor = self.masked_score = None
        self.batch = tuple(att.q.shape[:-2])
        self.s_q, self.d = att.q.shape[-2:]
        self.s_kv, self.d_v = shape_of(att.v.type)[-2:]
        self.element = element_type(att.q.base.type)
        self.blocks, self.bm, self.bn = blocks, blocks.bm, blocks.bn
        self.score_shape = (self.bn, self.bm) if self.transposed_scores else (self.bm, self.bn)
        self.dp, self.dvp = max(16, next_power_of_2(self.d)), max(16, next_power_of_2(self.d_v))
        self.group = tuple(bwd.group_axes)
        self.packed = ()
        self.score_tiles = {}
        self.last_values = None
        self.tiles = 0

    @property
    def dq_reduced(self) -> bool:
        """Whether the dk/dv kernel adds dq to a sum, which the dq kernel scales (`BackwardBlocks.dq` None)."""
        return self.buffers.dq_sum is not None

    # ---- addressing -------------------------------------------------------------------------------
    def _coords_of(self, outer: SSAValue, inner: SSAValue | None) -> list[SSAValue]:
        """q's batch coordinates: the axes outside the group from `outer` (row-major), the group's from
        `inner` (None: no group)."""
        coords = [self.em.i32(0)] * len(self.batch)
        self._decompose(outer, [i for i in range(len(self.batch)) if i not in self.group], coords)
        if inner is not None:
            self._decompose(inner, list(self.group), coords)
        return coords

    def _flat_batch(self) -> SSAValue:
        """This program's index among q's batch entries (row-major)."""
        em, flat = self.em, self.em.i32(0)
        for i, n in enumerate(self.batch):
            flat = em.add(em.mul_int(flat, n), self.coords[i]) if i else self.coords[0]
        return flat

    def _row_values(self, ptr: SSAValue, offset: SSAValue, rows: SSAValue, row_ok: SSAValue) -> SSAValue:
        """f32 of a per-row array at `offset + row`, in the shape of `rows` (`[BM, 1]`, `[1, BM]` along the columns
        of transposed scores, or a whole score block); masked rows read 0."""
        em = self.em
        shape = shape_of(rows.type)
        ptrs = em.emit(tt.AddPtrOp(em.to_shape(ptr, shape), em.binary(tt.AddOp, em.to_shape(offset, shape), rows)))
        loaded = em.emit(tt.LoadOp(ptrs, row_ok, em.const(0, element_type(ptr.type.pointee), shape)))
        return em.cast(loaded, f32)

    def _lse(self, rows: SSAValue, row_ok: SSAValue) -> SSAValue:
        """The rows' logsumexp in log2 units."""
        em, buffers = self.em, self.buffers
        if buffers.lse_given:
            offset = self.batch_offset(self.bwd.lse)
        else:
            offset = em.mul_int(self._flat_batch(), self.s_q)
        return em.binary(tt.MulOp, self._row_values(buffers.lse, offset, rows, row_ok), em.const(LOG2E, f32))

    def _delta(self, rows: SSAValue, row_ok: SSAValue) -> SSAValue:
        return self._row_values(self.buffers.delta, self.em.mul_int(self._flat_batch(), self.s_q), rows, row_ok)

    def _rows(self, start: SSAValue, n: int) -> tuple[SSAValue, SSAValue]:
        em = self.em
        rows = em.binary(tt.AddOp, em.to_shape(start, (n, 1)), em.arange(n, 2, 0))
        return rows, em.cmp("lt", rows, em.i32(self.s_q))

    def _q_block(self, rows: SSAValue, row_ok: SSAValue) -> SSAValue:
        em, att = self.em, self.att
        d_cols = em.arange(self.dp, 2, 1)
        mask = em.and_(row_ok, self._below(d_cols, self.dp, self.d))
        return self.load(att.q.base, rows, d_cols, att.q.strides[-2], att.q.strides[-1], mask, att.q)

    def _do_block(self, rows: SSAValue, row_ok: SSAValue) -> SSAValue:
        return self._rows_of(self.bwd.do, self.bwd.do_view, rows, row_ok)

    def _rows_of(self, value: SSAValue, view: QView | None, rows: SSAValue, row_ok: SSAValue) -> SSAValue:
        """Rows of `do` or `o` (`[..., S_q, D_v]`): the array itself, or read through its strided `view`."""
        em = self.em
        cols = em.arange(self.dvp, 2, 1)
        mask = em.and_(row_ok, self._below(cols, self.dvp, self.d_v))
        if view is None:
            return self.load(value, rows, cols, self.d_v, 1, mask)
        return self.load(view.base, rows, cols, view.strides[-2], view.strides[-1], mask, view)

    def _product(self, a: SSAValue, b: SSAValue, start: SSAValue | None = None) -> SSAValue:
        """`a @ b` into a score-shaped f32 block (`q @ kᵀ` or `do @ vᵀ`; `k @ qᵀ` and `v @ doᵀ` transposed), added
        to `start` (broadcast to the block) if given."""
        em = self.em
        acc = em.const(0.0, f32, self.score_shape) if start is None else em.to_shape(start, self.score_shape)
        return em.emit(tt.DotOp(a, b, acc))

    def _probabilities(self, s: SSAValue, rows: SSAValue, row_ok: SSAValue, cols: SSAValue, col_ok: SSAValue | None,
                       masked: bool | SSAValue, lse: SSAValue) -> SSAValue:
        """`p = exp2(s - lse)` of the score block `s` (`_product`), recomputed as the forward computed it (the
        scale in the same FMA: `_scaled_exp2`). The kernels issue `s` and `dp`'s product back to back before this:
        the softmax runs while `dp` is on the tensor cores (tinyton/lowering/tt_to_llvm/dot_overlap.py)."""
        if isinstance(masked, SSAValue):  # the causal mask only where the scalar i1 `masked` holds
            s = self.em.branch(masked, lambda: [self._score_block(s, rows, cols, row_ok, col_ok, True)],
                               lambda: [self._score_block(s, rows, cols, row_ok, col_ok, False)])[0]
            return self._scaled_exp2(s, lse)
        return self._scaled_exp2(self._score_block(s, rows, cols, row_ok, col_ok, masked), lse)

    def _dq_sum_block(self, flat: SSAValue, rows: SSAValue, row_ok: SSAValue) -> tuple[SSAValue, SSAValue]:
        """Pointers of the rows' dq sums (`[R, D]`) of batch entry `flat`, and the rows' mask in that shape."""
        em = self.em
        shape = (shape_of(rows.type)[0], self.dp)
        first = em.to_shape(em.mul_int(flat, self.s_q * self.dp), (1, 1))
        offsets = em.binary(tt.AddOp, first, em.mul_int(rows, self.dp))
        offsets = em.to_shape(em.binary(tt.AddOp, offsets, em.arange(self.dp, 2, 1)), shape)
        return em.emit(tt.AddPtrOp(em.to_shape(self.buffers.dq_sum, shape), offsets)), em.to_shape(row_ok, shape)

    def _finish(self, grad: Gradient, acc: SSAValue) -> SSAValue:
        """The gradient's own scale (constant or a one-element array) and dtype applied to its accumulator."""
        em = self.em
        if grad.scale is not None:
            factor = grad.factor
            if is_constant(factor):
                value = em.const(factor.op.value.value.data, f32)
            else:
                value = em.cast(em.emit(tt.LoadOp(self.pointers[factor], None, None)), f32)
            acc = em.binary(tt.DivOp if isinstance(grad.scale, tta.DivOp) else tt.MulOp, acc, value)
        return em.cast(acc, element_type(grad.result.type))

    def _store(self, grad: Gradient, batch_index: SSAValue, rows: SSAValue, row_ok: SSAValue, padded: int,
               value: SSAValue) -> None:
        """`value` (`[R, padded]`), rows `rows` of the gradient's batch entry `batch_index` (row-major over its batch
        axes longer than 1), to each array it is stored in, through that array's strides (`Gradient.outputs`)."""
        em = self.em
        cols = em.arange(padded, 2, 1)
        shape = (shape_of(rows.type)[0], padded)
        for view in grad.outputs:
            width = view.shape[-1]
            first = flat_offset(em, batch_index, view.shape[:-2], view.strides[:-2])
            first = em.add(first, em.i32(view.offset) if view.offset else None)
            offsets = em.binary(tt.AddOp, em.to_shape(first, (1, 1)), em.mul_int(rows, view.strides[-2]))
            offsets = em.to_shape(em.binary(tt.AddOp, offsets, em.mul_int(cols, view.strides[-1])), shape)
            mask = em.to_shape(em.and_(row_ok, self._below(cols, padded, width)), shape)
            ptrs = em.emit(tt.AddPtrOp(em.to_shape(self.pointers[view.base], shape), offsets))
            em.emit(tt.StoreOp(ptrs, value, mask))


class _KeyValueGrads(BackwardProgram):
    """dk and dv of one key block of one key/value head: grid (key blocks, key/value heads), under a causal mask
    (key/value heads, key blocks).

    The scores are computed transposed, `sᵀ = k @ qᵀ` (`[BN, BM]`: keys on the rows, FlashAttention-2's
    order), so that `pᵀ` and `dsᵀ` come out of their products in the accumulator layout the next products take
    their left operand in: `dv += pᵀ @ do` and `dk += dsᵀ @ q` read them from registers (wgmma), and every product
    has a key block's rows (`BN`, split over the warpgroups) as its M. Computed as `q @ kᵀ`, each of `pᵀ`, `dsᵀ`
    was transposed through shared memory, and a 32-query block kept the score products off wgmma. The fifth
    product, the query block's share of dq `ds @ k`, takes `ds` through shared memory."""

    transposed_scores = True

    def emit(self) -> tuple[int, int, int]:
        em, bwd = self.em, self.bwd
        # Causal: the key blocks along the grid's second axis, so that every head's first key block, seen by the
        # most queries, is launched first (the GPU places programs in id order, the first axis fastest): in a
        # head's order the longest programs of the last heads ran last, on a few SMs (a 2-wave grouped-query grid)
        key_axis = 1 if self.att.causal_offset is not None else 0
        outer = em.emit(tt.ProgramIdOp(1 - key_axis))
        key_block = em.emit(tt.ProgramIdOp(key_axis))
        start = em.mul_int(key_block, self.bn)
        self.coords = self._coords_of(outer, em.i32(0) if self.group else None)  # k and v: any head of the group
        keys = em.binary(tt.AddOp, em.to_shape(start, (self.bn, 1)), em.arange(self.bn, 2, 0))  # [BN, 1]
        key_ok = em.cmp("lt", keys, em.i32(self.s_kv)) if self.s_kv % self.bn else None
        bound = self._ragged_bound(key_ok)
        k = self._key_block(start, bound, rows=True)
        dv_cols = em.arange(self.dvp, 2, 1)
        self.prepare_scale()
        v = self._value_block(start, bound, dv_cols)
        operand = self.element

        def q_block(i: SSAValue, carried: list[SSAValue]) -> list[SSAValue]:
            dk, dv = carried
            rows, row_ok = self._rows(i, self.bm)
            q, do = self._query_rows(i, rows, row_ok)
            queries = em.binary(tt.AddOp, em.to_shape(i, (1, self.bm)), em.arange(self.bm, 2, 1))  # [1, BM]
            query_ok = em.cmp("lt", queries, em.i32(self.s_q))
            # the rows' lse and delta read before the products are issued: their latency runs under the products
            lse = self._lse(queries, query_ok)
            # dpᵀ - delta: the product starts from -delta, which then takes no registers of its own across the step;
            # read for every element of the block, each accumulator register loaded by itself: a row read once and
            # copied from register to register made ptxas wait for sᵀ's product before issuing dpᵀ's (C7517)
            shape = self.score_shape
            delta = self._delta(em.to_shape(queries, shape), em.to_shape(query_ok, shape))
            minus_delta = em.binary(tt.SubOp, em.const(0.0, f32, shape), delta)
            qt, dot = (em.emit(tt.TransOp(x, (1, 0))) for x in (q, do))
            st = self._product(k, qt)
            dpt = self._product(v, dot, minus_delta)
            pt = self._probabilities(st, queries, query_ok, keys, key_ok, self._crosses_diagonal(i, start), lse)
            if self.s_q % self.bm:  # queries past S_q: no contribution (their lse and do read 0)
                pt = em.select(em.to_shape(query_ok, shape), pt, em.const(0.0, f32))
            dv = em.emit(tt.DotOp(em.cast(pt, operand), em.cast(do, operand), dv))
            dst = em.cast(em.binary(tt.MulOp, pt, dpt), operand)
            dk = em.emit(tt.DotOp(dst, q, dk))
            if self.dq_reduced:
                self._add_query_grads(i, rows, row_ok, em.emit(tt.TransOp(dst, (1, 0))), k)
            return [dk, dv]

        carried = [em.const(0.0, f32, (self.bn, self.dp)), em.const(0.0, f32, (self.bn, self.dvp))]
        first = self._first_query(start)

        def in_turn(block: SSAValue, blocks: SSAValue) -> SSAValue:
            """Without a causal mask every key block walks all of a head's query blocks: each from its own on (then
            round), so that the programs of a head, which run side by side, add their shares of dq to different
            blocks of the sum at a time, not all to the same one."""
            return em.binary(tt.ModOp, em.add(block, key_block), blocks) if first == 0 else block

        if self.group:  # one loop over (head of the group, query block) pairs, pipelined across the heads: a loop
            # a head had a pipeline's prologue and drain each, and spilled (21 registers at D = 128: ptxas, sm_90a)
            group = prod(self.batch[i] for i in self.group)
            first_value = em.i32(first) if isinstance(first, int) else first
            per_head = em.div_int(em.binary(tt.SubOp, em.i32(self.s_q + self.bm - 1), first_value), self.bm)

            def step(t: SSAValue, values: list[SSAValue]) -> list[SSAValue]:
                self.coords = self._coords_of(outer, em.binary(tt.FloorDivOp, t, per_head))
                block = in_turn(em.binary(tt.ModOp, t, per_head), per_head)
                return q_block(em.add(first_value, em.mul_int(block, self.bm)), values)

            dk, dv = em.for_loop(0, em.mul_int(per_head, group), 1, carried, step, self.blocks.stages)
        elif first == 0:
            blocks = em.i32(cdiv(self.s_q, self.bm))

            def walk(t: SSAValue, values: list[SSAValue]) -> list[SSAValue]:
                return q_block(em.mul_int(in_turn(t, blocks), self.bm), values)

            dk, dv = em.for_loop(0, blocks, 1, carried, walk, self.blocks.stages)
        else:
            dk, dv = em.for_loop(first, self.s_q, self.bm, carried, q_block, self.blocks.stages)
        c = self.att.causal_offset
        if c is not None and c < 0 < self.s_q:  # query 0 sees no key: its NaN p reaches every key's gradients
            dk, dv = (em.binary(tt.AddOp, x, em.const(float("nan"), f32, shape_of(x.type))) for x in (dk, dv))
        kv_ok = em.cmp("lt", keys, em.i32(self.s_kv))
        self._store(bwd.dk, outer, keys, kv_ok, self.dp, self._finish(bwd.dk, dk))
        self._store(bwd.dv, outer, keys, kv_ok, self.dvp, self._finish(bwd.dv, dv))
        grid = [cdiv(self.s_kv, self.bn), max(1, prod(n for i, n in enumerate(self.batch) if i not in self.group))]
        return grid[key_axis], grid[1 - key_axis], 1

    def _query_rows(self, i: SSAValue, rows: SSAValue, row_ok: SSAValue) -> tuple[SSAValue, SSAValue]:
        """q and do of the query block at `i`: 16-bit ones read by TMA on sm_90 where it can read them
        (`descriptor_rows`: one thread copies each block, where loads took every thread's addresses, held across
        the loop), else loaded."""
        att, bwd = self.att, self.bwd
        q_view = self.descriptor_view(att.q)
        do_view = self.descriptor_view(bwd.do_view or own_layout(bwd.do))
        if self.element.bitwidth != 16 or q_view is None or do_view is None:
            return self._q_block(rows, row_ok), self._do_block(rows, row_ok)
        return (self.descriptor_rows(att.q.base, q_view, i, self.bm, self.d, self.dp),
                self.descriptor_rows(do_view.base, do_view, i, self.bm, self.d_v, self.dvp))

    def _add_query_grads(self, i: SSAValue, rows: SSAValue, row_ok: SSAValue, ds: SSAValue, k: SSAValue) -> None:
        """`ds @ k` added to the dq sums of the query block at `i` (`[BM, D]`, every key block's programs adding
        theirs): one `tt.descriptor_reduce` of the block of the sums seen as `[batch, S_q, D]`."""
        em = self.em
        part = em.emit(tt.DotOp(ds, k, em.const(0.0, f32, (self.bm, self.dp))))
        flat = self._flat_batch()
        ptrs, mask = self._dq_sum_block(flat, rows, row_ok)
        sizes = [em.i32(n) for n in (max(1, prod(self.batch)), self.s_q, self.dp)]
        strides = [em.i32(n) for n in (self.s_q * self.dp, self.dp, 1)]
        em.emit(tt.DescriptorReduceOp("add", ptrs, part, mask if self.s_q % self.bm else None, self.buffers.dq_sum,
                                      sizes, strides, [flat, i, em.i32(0)]))

    def _crosses_diagonal(self, i: SSAValue, start: SSAValue) -> bool | SSAValue:
        """Whether the query block at `i` needs the causal mask over the key block at `start`: some of its queries
        do not see all of its keys (queries q see keys j <= q + c); True without a causal mask (nothing to skip)."""
        c = self.att.causal_offset
        if c is None:
            return True
        return self.em.cmp("lt", i, self.em.add(start, self.em.i32(self.bn - 1 - c)))

    def _first_query(self, start: SSAValue) -> int | SSAValue:
        """The first query block that sees key `start` (0 without a causal mask; queries i see keys j <= i + c)."""
        c = self.att.causal_offset
        if c is None:
            return 0
        em = self.em
        first = em.binary(tt.MaximumOp, em.add(start, em.i32(-c)), em.i32(0))
        return em.mul_int(em.div_int(first, self.bm), self.bm)


def emit_key_value_grads(em: Emitter, bwd: AttentionBackward, pointers: dict[SSAValue, SSAValue],
                         buffers: BackwardBuffers, blocks: BackwardBlocks) -> tuple[int, int, int]:
    return _KeyValueGrads(em, bwd, pointers, blocks.dkdv, buffers).emit()
