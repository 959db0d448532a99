"""The flash-attention kernel of an "attention" region (FlashAttention-2's forward, as Triton writes it).

Programs run over (query block, batch): each loads its `[BM, D]` block of q once, then walks the keys and
values in blocks of `BN`, keeping per row a running maximum `m`, a running sum `l` of exponentials and the
output accumulator; when a block raises the maximum, what was accumulated is rescaled by `2^(m_old - m)`.
The `S_q × S_kv` score matrix exists only one `[BM, BN]` block at a time, in registers.

The score steps between `q @ kᵀ` and the softmax (scale, additive bias, `where` masks; see
tinyton/analysis/attention.py) are applied to each score block, reading bias and mask arrays through their
broadcast strides (attention_scores.py). All of it computes in float32 whatever the inputs' dtype, in base 2
(log2(e) folded into the scale where it can be, so each score costs one FMA and one `ex2`); the probabilities
are cast to v's dtype for the second product (tensor cores for fp16 and bf16; f32 on FMAs, or as three TF32
products where the tuner found that faster: `Blocks.tf32x3`). Key blocks are loaded as stored (`[BN, D]`)
and transposed, so the dot reads them K-major and the pipeliner copies them with 16-byte `cp.async`.

The KV loop is split in two (Triton's tutorial does it with its STAGE argument): blocks every query of the
program sees whole run without the causal mask or the bounds of S_kv; only the blocks crossing the
diagonal (and the ragged last one) run masked. Causal programs stop at the diagonal. A row whose scores
are all -inf gives NaN, as NumPy's softmax does; columns past `S_kv` count as -inf.

FlashAttention-3's forms of the KV loop (the two products overlapped, a TMA producer warpgroup) are
attention_forms.py's, the block reads and addressing attention_reads.py's; causal programs run their query blocks
longest first.

Flash-decoding: given a `KVSplit` (attention_blocks.py), the grid gains a third axis of KV chunks; each
program runs both loops clipped to its chunk and stores its `m`, `l` and unnormalised accumulator instead of
the output; the last program of each row block to finish folds them into the rows (attention_combine.py), in
the same launch.
"""

from __future__ import annotations

from math import prod

from xdsl.dialects.builtin import Float32Type
from xdsl.ir import Operation, SSAValue

from tinyton.analysis.attention import Attention
from tinyton.dialects import tt
from tinyton.dialects.tt import element_type, shape_of
from tinyton.intmath import cdiv, next_power_of_2
from tinyton.lowering.fusion.attention_blocks import Blocks, KVSplit, packed_group_axes, query_row_stride
from tinyton.lowering.fusion.attention_forms import FlashAttention3Forms
from tinyton.lowering.fusion.attention_output import OutputLayout
from tinyton.lowering.fusion.attention_reads import BlockReads
from tinyton.lowering.fusion.attention_scores import ScoreSteps
from tinyton.lowering.fusion.emitter import Emitter, f32
from tinyton.lowering.fusion.matmul import imprecise_acc
from tinyton.lowering.fusion.persistent import persist

LN2 = 0.6931471805599453


class _Program(BlockReads, ScoreSteps, FlashAttention3Forms):
    """Emits one program's code: batch offsets, tile pointers, the KV loop; with a `split`, the program's
    chunk of the KV loop and its partial results (m, l, unnormalised acc) stored to `partials`."""

    def __init__(self, em: Emitter, att: Attention, pointers: dict[SSAValue, SSAValue], blocks: Blocks,
                 split: KVSplit | None = None, partials: tuple[SSAValue, SSAValue, SSAValue] | None = None,
                 lse: SSAValue | None = None, lse_guarded: bool = False, sm_count: int = 0):
        out = att.pv.result
        self.em, self.att, self.pointers = em, att, pointers
        self.split, self.partials, self.lse, self.lse_guarded = split, partials, lse, lse_guarded
        self.scale: SSAValue | None = None
        """A runtime scale times log2(e), read once before the KV loop (`_folded_scale`)."""
        self.runtime_factor: SSAValue | None = None
        self.masked_score: SSAValue | None = None
        self.scalars = {}
        self.score_tiles = {}
        self.last_values: SSAValue | None = None
        """The overlapped loops' last value block, read before them (`_specialized_loop`)."""
        out_shape = shape_of(out.type)
        self.batch = out_shape[:-2]
        self.s_q, self.d_v = out_shape[-2:]
        self.d = att.q.shape[-1]
        self.s_kv = shape_of(att.v.type)[-2]
        self.out_element = element_type(out.type)
        self.element = element_type(att.q.base.type)
        self.blocks = blocks
        self.bm, self.bn = self.blocks.bm, self.blocks.bn
        self.score_shape = (self.bm, self.bn)
        self.dp, self.dvp = max(16, next_power_of_2(self.d)), max(16, next_power_of_2(self.d_v))
        self.packed = packed_group_axes(att)
        """Grouped-query heads packed as rows of one query block (decoding): their coordinates are 0, the
        rows run over (head of the group, query) and masks and biases read the query `row % S_q`."""
        self.rows = self.s_q * prod(self.batch[a] for a in self.packed)
        programs = prod(n for i, n in enumerate(self.batch) if i not in self.packed)
        self.grid = (cdiv(self.rows, self.bm), max(1, programs), split.count if split else 1)
        self.sm_count = sm_count
        self.tiles = 0
        """A persistent kernel's tiles (`Blocks.persistent`, `_tile`); 0 for a program a tile."""
        self.invariant: Operation | None = None
        """The last op of what every tile reads alike (a runtime scale), which a persistent kernel runs once."""

    # ---- the kernel ---------------------------------------------------------------------------
    def emit(self) -> None:
        em, att = self.em, self.att
        self.prepare_scale()
        self.invariant = em.block.last_op
        block, self.batch_index = self._tile()
        self.coords = self._batch_coords(self.batch_index)
        start = self.start = em.mul_int(block, self.bm)
        rows = em.binary(tt.AddOp, em.to_shape(start, (self.bm, 1)), em.arange(self.bm, 2, 0))
        row_ok = em.cmp("lt", rows, em.i32(self.rows))
        queries = em.mod_int(rows, self.s_q) if self.packed else rows  # what masks and biases index
        d_cols, dv_cols = em.arange(self.dp, 2, 1), em.arange(self.dvp, 2, 1)
        q_ok = em.and_(row_ok, self._below(d_cols, self.dp, self.d))
        q_view = self.descriptor_view(att.q) if self.tiles else None
        if q_view is not None:  # a persistent kernel's producer copies it a tile ahead (warp_specialize._tile_ring)
            q = self.descriptor_rows(att.q.base, q_view, start, self.bm, self.d, self.dp, past_rows=True)
        else:
            q = self.load(att.q.base, rows, d_cols, query_row_stride(att, self.packed), att.q.strides[-1], q_ok, att.q)
        if self.blocks.broadcast:  # `[BM, 1, D]` f32 before the KV loop: loaded in the layout the products read
            q = em.expand(em.cast(q, f32), 1)
        self._read_scalars()

        zero_rows = em.const(0.0, f32, (self.bm, 1))
        carried = [em.const(float("-inf"), f32, (self.bm, 1)), zero_rows, em.const(0.0, f32, (self.bm, self.dvp))]
        overlap = self.blocks.overlap and not self.blocks.broadcast
        if overlap:  # the previous block's probabilities, none before the first
            carried.append(em.const(0.0, element_type(att.v.type), (self.bm, self.bn)))
        first, split, end = self._chunk(self._unmasked_end(start), self._kv_end(start))
        prefetch = self.blocks.broadcast and att.k_select is None and att.v_select is None
        specialized = self._specialized_loop(queries, row_ok, q, dv_cols, carried, split, end)
        loops = [] if specialized is not None else [(first, split, False), (split, end, True)]
        carried = specialized or carried
        for lb, ub, masked in loops:
            if ub == 0 or lb == ub:
                continue
            if prefetch:
                carried = self._prefetching_loop(lb, ub, masked, queries, row_ok, q, dv_cols, carried)
                continue

            def body(j: SSAValue, values: list[SSAValue], masked: bool = masked) -> list[SSAValue]:
                if overlap:
                    return self._overlapped_block(j, queries, row_ok, q, dv_cols, masked, *values)
                return self._kv_block(j, queries, row_ok, q, dv_cols, masked, *values)

            stages = self.blocks.masked_stages if masked else self.blocks.stages
            carried = em.for_loop(lb, ub, self.bn, carried, body, stages)
        if overlap:
            carried = self._last_product(end, dv_cols, *carried)
        if self.partials is not None:
            self._store_partials(rows, row_ok, dv_cols, *carried)
            return
        m, total, acc = carried
        if self.lse is not None:
            self._store_lse(rows, row_ok, m, total)
        # each row's reciprocal once, then a multiply an element (FlashAttention's): a division an element was 64
        # `div.rn.f32` sequences a thread at D = 128, as long as a KV step's softmax
        inverse = em.binary(tt.DivOp, em.const(1.0, f32, shape_of(total.type)), total)
        out = em.cast(em.binary(tt.MulOp, acc, inverse), self.out_element)
        shape = (self.bm, self.dvp)
        mask = em.to_shape(em.and_(row_ok, self._below(dv_cols, self.dvp, self.d_v)), shape)
        for view in att.outputs:
            layout = OutputLayout.of(att, view)
            offsets = layout.row_offsets(em, self.batch_index, rows)
            offsets = em.binary(tt.AddOp, offsets, em.mul_int(dv_cols, layout.column_stride))
            ptrs = em.emit(tt.AddPtrOp(em.to_shape(self.pointers[view.base], shape), em.to_shape(offsets, shape)))
            em.emit(tt.StoreOp(ptrs, out, mask))

    def _prefetching_loop(self, lb: int | SSAValue, ub: int | SSAValue, masked: bool, rows: SSAValue, row_ok: SSAValue,
                          q: SSAValue, dv_cols: SSAValue, carried: list[SSAValue]) -> list[SSAValue]:  # fmt: skip
        """The broadcast form's KV loop over `[lb, ub)`: each step issues the next block's k and v loads (as
        stored, keys at or past `ub` read 0) before it computes on the block loaded a step before, carried in
        registers. No dot reads them, so the pipeliner stages nothing: loading each block at the top of its step,
        a program waited a memory latency per step (a decode step's attention on the H200, 2026-12-04: a second
        32-key step took a program's time from 3.95 to 8.53 µs). Keys past `ub` that a block holds are masked in
        its scores whatever they read (the causal end, the position's, S_kv's): nothing is loaded past the loop."""
        em = self.em
        end = ub if isinstance(ub, SSAValue) else em.i32(ub)

        def body(j: SSAValue, values: list[SSAValue]) -> list[SSAValue]:
            ahead = self._kv_tiles(em.add(j, em.i32(self.bn)), end, dv_cols)
            new = self._kv_block(j, rows, row_ok, q, dv_cols, masked, *values[:3], loaded=values[3:])
            return [*new, *ahead]

        first = self._kv_tiles(lb if isinstance(lb, SSAValue) else em.i32(lb), end, dv_cols)
        return em.for_loop(lb, ub, self.bn, [*carried, *first], body)[:3]

    def _query_block(self, count: int) -> SSAValue:
        """Which of the `count` blocks of query rows this program computes. Causal programs go longest first
        (FlashAttention's order): the last query block sees every key, the first one block, so launched in row order
        the last wave is the longest programs running on a few SMs while the rest idle. (Split KV loops keep the
        order their combine step reads the partials in.)"""
        block = self.em.emit(tt.ProgramIdOp(0))
        if self.att.causal_offset is None or self.packed or self.split is not None or count == 1:
            return block
        return self.em.binary(tt.SubOp, self.em.i32(count - 1), block)

    def _chunk(self, split: int | SSAValue, end: int | SSAValue) -> tuple[int | SSAValue, ...]:
        """The bounds (start, unmasked end, end) of the KV loops: the whole range, or with a split the
        part of it inside this program's chunk of keys (empty when a causal end comes before it). Under a key
        limit (a decode step's position) the chunks share out the keys up to it, not the whole cache: at
        position 512 of a 1024-key cache, each of 16 chunks walks one 32-key block instead of half of them
        walking two and the rest none."""
        em = self.em
        value = lambda v: v if isinstance(v, SSAValue) else em.i32(v)
        if self.split is None:  # a key limit may end the loop before the unmasked blocks do
            return 0, em.binary(tt.MinimumOp, value(split), end) if self.att.key_limit is not None else split, end
        if self.att.key_limit is not None and self.att.causal_offset is None:
            blocks = em.div_int(em.add(value(end), em.i32(self.bn - 1)), self.bn)
            chunk = em.mul_int(em.div_int(em.add(blocks, em.i32(self.split.count - 1)), self.split.count), self.bn)
        else:
            chunk = em.i32(self.split.chunk)
        lb = em.binary(tt.MulOp, em.emit(tt.ProgramIdOp(2)), chunk)
        end = em.binary(tt.MinimumOp, value(end), em.add(lb, chunk))
        split = em.binary(tt.MaximumOp, em.binary(tt.MinimumOp, value(split), end), lb)
        return lb, split, end

    def _store_partials(self, rows: SSAValue, row_ok: SSAValue, dv_cols: SSAValue, m: SSAValue, total: SSAValue,
                        acc: SSAValue) -> None:
        """Store this chunk's row maxima (log2 units), sums and unnormalised accumulator, as
        `[splits, batch, S_q]` and `[splits, batch, S_q, D_v]` f32 arrays (attention_combine.py folds them)."""
        em = self.em
        assert self.partials is not None
        chunk_row = em.add(em.mul_int(em.emit(tt.ProgramIdOp(2)), self.grid[1]), em.emit(tt.ProgramIdOp(1)))
        row_index = em.binary(tt.AddOp, em.to_shape(em.mul_int(chunk_row, self.rows), (1, 1)), rows)  # [BM, 1]
        m_ptr, l_ptr, acc_ptr = self.partials
        for ptr, value in ((m_ptr, m), (l_ptr, total)):
            ptrs = em.emit(tt.AddPtrOp(em.to_shape(ptr, (self.bm, 1)), row_index))
            em.emit(tt.StoreOp(ptrs, value, row_ok))
        shape = (self.bm, self.dvp)
        offsets = em.to_shape(em.binary(tt.AddOp, em.mul_int(row_index, self.d_v), dv_cols), shape)
        ptrs = em.emit(tt.AddPtrOp(em.to_shape(acc_ptr, shape), offsets))
        em.emit(tt.StoreOp(ptrs, acc, em.to_shape(em.and_(row_ok, self._below(dv_cols, self.dvp, self.d_v)), shape)))

    def _store_lse(self, rows: SSAValue, row_ok: SSAValue, m: SSAValue, total: SSAValue) -> None:
        """Store each row's logsumexp of its (scaled, masked) scores, natural log, to `lse` (`[batch, S_q]`
        f32): what the backward kernels (attention_backward.py) recompute the probabilities from. A row
        without a key gives -inf; a row holding +inf NaN (p is NaN throughout, the softmax's), or +inf when
        `lse_guarded` (p of `tt.logsumexp`'s lse: NaN only where the score is +inf)."""
        em = self.em
        assert self.lse is not None
        lse = em.binary(tt.MulOp, em.binary(tt.AddOp, m, em.emit(tt.Log2Op(total))), em.const(LN2, f32))
        if self.lse_guarded:
            inf = em.const(float("inf"), f32)
            lse = em.select(em.cmp("eq", m, inf), inf, lse)
        row_index = em.binary(tt.AddOp, em.to_shape(em.mul_int(self.batch_index, self.rows), (1, 1)), rows)
        ptrs = em.emit(tt.AddPtrOp(em.to_shape(self.lse, (self.bm, 1)), row_index))
        em.emit(tt.StoreOp(ptrs, em.cast(lse, self.lse.type.pointee), row_ok))

    def _unmasked_end(self, start: SSAValue) -> int | SSAValue:
        """Where the blocks that need no key mask end (a multiple of BN): the ragged last block of S_kv and,
        for a causal mask, the blocks crossing the diagonal are left to a second, masked loop (as Triton's
        tutorial splits its loop by STAGE)."""
        whole = self.s_kv - self.s_kv % self.bn
        c = self.att.causal_offset
        if c is None:
            return whole
        em = self.em
        start = em.i32(0) if self.packed else start  # packed heads: every row's query may be the first
        first_row_sees = em.binary(tt.MaximumOp, em.add(start, em.i32(c + 1)), em.i32(0))  # keys j < i + c + 1
        blocks = em.mul_int(em.div_int(first_row_sees, self.bn), self.bn)
        return em.binary(tt.MinimumOp, blocks, em.i32(whole))

    def _kv_end(self, start: SSAValue) -> int | SSAValue:
        """Where the KV loop stops: S_kv, or for a causal mask (keys j <= i + c) the last key the block's
        last query sees, so blocks above the diagonal are never visited, or for a key limit (keys j <= pos,
        a decode step's cache) the end of the block holding it, so the cache past the position is not read."""
        c, limit = self.att.causal_offset, self.att.key_limit
        if c is None and limit is None:
            return self.s_kv
        em = self.em
        end = em.i32(self.s_kv)
        if c is not None and self.tiles:  # a persistent kernel's empty block past the rows (`_causal_tile`)
            end = em.select(em.cmp("lt", start, em.i32(self.rows)), end, em.i32(0))
        if c is not None:
            end = em.binary(tt.MinimumOp, em.i32(self.s_q + c) if self.packed else em.add(start, em.i32(self.bm + c)), end)
        if limit is not None:
            kept = em.binary(tt.MaximumOp, em.add(self._affine_value(limit), em.i32(1)), em.i32(0))
            end = em.binary(tt.MinimumOp, em.mul_int(em.div_int(em.add(kept, em.i32(self.bn - 1)), self.bn), self.bn), end)
        return em.binary(tt.MaximumOp, end, em.i32(0))

    def _below(self, index: SSAValue, size: int, bound: int) -> SSAValue | None:
        """`index < bound` for an index block of `size` lanes from 0; None when every lane is in range."""
        return None if size <= bound else self.em.cmp("lt", index, self.em.i32(bound))

    def _columns(self, j: SSAValue, masked: bool) -> tuple[SSAValue, SSAValue | None]:
        """The key indices `[1, BN]` of the block at `j`, and (when `masked` and S_kv is ragged) which are < S_kv."""
        em = self.em
        cols = em.binary(tt.AddOp, em.to_shape(j, (1, self.bn)), em.arange(self.bn, 2, 1))  # [1, BN]
        return cols, em.cmp("lt", cols, em.i32(self.s_kv)) if masked and self.s_kv % self.bn else None

    def _block_scores(self, s: SSAValue, j: SSAValue, rows: SSAValue, row_ok: SSAValue,
                      masked: bool | SSAValue) -> SSAValue:
        """The score steps on the block of keys from `j` (`_score_block`), masked or not, or masked only where the
        scalar i1 `masked` holds: one loop over blocks of which only the last few cross the diagonal or S_kv (the
        warp-specialised form's) then pays for the mask in those alone."""
        if isinstance(masked, bool):
            cols, col_ok = self._columns(j, masked)
            return self._score_block(s, rows, cols, row_ok, col_ok, masked)
        return self.em.branch(masked, lambda: [self._block_scores(s, j, rows, row_ok, True)],
                              lambda: [self._block_scores(s, j, rows, row_ok, False)])[0]

    def _ragged_bound(self, col_ok: SSAValue | None) -> SSAValue | None:
        """The bound of a block's key loads: S_kv where `col_ok` says the block is ragged, else None (all in range)."""
        return self.em.i32(self.s_kv) if col_ok is not None else None

    def _kv_block(self, j: SSAValue, rows: SSAValue, row_ok: SSAValue, q: SSAValue, dv_cols: SSAValue,
                  masked: bool | SSAValue, m_old: SSAValue, l_old: SSAValue, acc: SSAValue,
                  loaded: list[SSAValue] | None = None) -> list[SSAValue]:  # fmt: skip
        """One key block: scores on tensor cores, the score steps, the online softmax in base 2 (`m`, `l` in
        log2 units), `acc += p @ v`. `loaded`: the block's k and v tiles as stored, loaded a step before;
        `masked`: whether the block is masked, or where (`_block_scores`) when they are."""
        em = self.em
        if loaded is not None:
            kt, v = (em.cast(t, element_type(x.type)) for t, x in zip(loaded, (self.att.k, self.att.v)))
        else:
            assert isinstance(masked, bool), "a block masked only where a condition holds is loaded before"
            bound = self._ragged_bound(self._columns(j, masked)[1])
            kt = self._key_block(j, bound)
            # the value block is loaded with the key block: where no pipeliner stages them (the FMA path of a
            # decode step) its load then overlaps the scores and the softmax instead of waiting for them
            v = self._value_block(j, bound, dv_cols)
        if self.blocks.broadcast:  # [BM, BN, D]: the key rows (`[BN, D]`) summed along D
            k = em.cast(kt if self.att.k_transposed else em.emit(tt.TransOp(kt, (1, 0))), f32)
            s = em.emit(tt.ReduceSumOp(em.binary(tt.MulOp, q, em.expand(k, 0)), 2))
        else:
            s = self._scores(q, kt)
        s = self._block_scores(s, j, rows, row_ok, masked)
        m_new, l_new, alpha, p = self._softmax_step(s, m_old, l_old)
        scaled = em.binary(tt.MulOp, acc, alpha)
        if self.blocks.broadcast:  # [BM, BN, D_v]: the same tile's layout, summed along BN (p rounded to v's type)
            products = em.binary(tt.MulOp, em.expand(em.cast(p, f32), 2), em.expand(em.cast(v, f32), 0))
            acc_new = em.binary(tt.AddOp, scaled, em.emit(tt.ReduceSumOp(products, 1)))
        else:
            acc_new = self._weighted_values(p, v, scaled)
        return [m_new, l_new, acc_new]

    def _scores(self, q: SSAValue, kt: SSAValue) -> SSAValue:
        """`q @ kᵀ` of one block on the tensor cores (or FMAs, TF32x3), in f32."""
        zero = self.em.const(0.0, f32, (self.bm, self.bn))
        imprecise = imprecise_acc(element_type(q.type), self.dp)
        return self.em.emit(tt.DotOp(q, kt, zero, self._precision(q), imprecise))

    def _weighted_values(self, p: SSAValue, v: SSAValue, acc: SSAValue) -> SSAValue:
        """`acc + p @ v` (p already in v's type)."""
        imprecise = imprecise_acc(element_type(p.type), self.bn)
        return self.em.emit(tt.DotOp(p, v, acc, self._precision(p), imprecise))

    def _softmax_step(self, s: SSAValue, m_old: SSAValue, l_old: SSAValue) -> tuple[SSAValue, ...]:
        """The online softmax of one score block in base 2: the new row maxima and sums, the factor `alpha`
        that moves what was accumulated to the new maxima, and the probabilities in v's type. Under a runtime
        scale, whose sign decides between the scores' maxima and minima, the step is emitted for each sign and a
        branch a block picks one: a branch around the reductions alone had split the step, and ptxas no longer
        reduced one row under the other's exp2 (H100, 2026-12-06: 95 % of a constant's speed)."""
        scale = self._deferred_scale()
        if not isinstance(scale, SSAValue):
            return self._softmax_of_sign(s, m_old, l_old)
        positive = self.em.cmp("ge", scale, self.em.const(0.0, f32))
        return tuple(self.em.branch(positive, lambda: self._softmax_of_sign(s, m_old, l_old, True),
                                    lambda: self._softmax_of_sign(s, m_old, l_old, False)))

    def _softmax_of_sign(self, s: SSAValue, m_old: SSAValue, l_old: SSAValue, positive: bool = True) -> list[SSAValue]:
        """`_softmax_step` where a runtime scale is `positive` (or negative)."""
        em = self.em
        m_new = em.binary(tt.MaximumOp, m_old, self.row_maxima(s, positive))
        m_safe = em.finite_max(m_new)  # empty rows stay 0
        p = self._scaled_exp2(s, m_safe)
        alpha = em.emit(tt.Exp2Op(em.binary(tt.SubOp, m_old, m_safe)))
        l_new = em.binary(tt.AddOp, em.binary(tt.MulOp, l_old, alpha), em.reduce("sum", p, 1))
        return [m_new, l_new, alpha, em.cast(p, element_type(self.att.v.type))]

    def _precision(self, a: SSAValue) -> str:
        """f32 operands: three TF32 products on the tensor cores where the blocks say (`Blocks.tf32x3`), else
        FMAs; 16-bit ones run on the tensor cores whatever it says."""
        return "tf32x3" if self.blocks.tf32x3 and isinstance(element_type(a.type), Float32Type) else "ieee"


def emit_attention(em: Emitter, att: Attention, pointers: dict[SSAValue, SSAValue], blocks: Blocks,
                   split: KVSplit | None = None,
                   partials: tuple[SSAValue, SSAValue, SSAValue] | None = None,
                   lse: SSAValue | None = None, lse_guarded: bool = False, sm_count: int = 0) -> tuple[int, int, int]:
    """Emit the kernel body (`pointers` maps the region's inputs, and its output unless the program stores
    `partials` of a `split` KV loop, to kernel arguments; `lse`, given, receives each row's logsumexp,
    `tt.logsumexp`'s when `lse_guarded`); returns the grid (for `Blocks.persistent`, a program for each of the
    `sm_count` SMs at most)."""
    program = _Program(em, att, stored_pointers(att, pointers), blocks, split, partials, lse, lse_guarded, sm_count)
    program.emit()
    if program.tiles:
        return persist(em.block, program.tiles, sm_count, invariant=program.invariant), 1, 1
    return program.grid


def stored_pointers(att: Attention, pointers: dict[SSAValue, SSAValue]) -> dict[SSAValue, SSAValue]:
    """`pointers`, k and v read from the arrays they are views of (reshapes keep the layout; a cast is applied to
    each loaded block)."""
    pointers = dict(pointers)
    for st, value in ((att.k_stored, att.k), (att.v_stored, att.v)):
        if st is not None and st.ops:
            pointers[value] = pointers[st.base]
    return pointers

