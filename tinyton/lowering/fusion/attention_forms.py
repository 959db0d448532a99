"""FlashAttention-3's forms of the flash-attention kernel's KV loop (tinyton/lowering/fusion/attention.py), each a
tuning candidate (`Blocks.overlap`, `Blocks.warp_specialize`):

- intra-warpgroup overlap: a step issues its scores and the previous step's `p @ v` together, so that the softmax
  runs while `p @ v` is on the tensor cores (the lowering leaves both in flight until their readers:
  tinyton/lowering/tt_to_llvm/dot_overlap.py); the last `p @ v` after the loops;
- producer and consumers: one KV loop whose key and value blocks are TMA descriptor loads, split by the pipeliner
  into a producer warpgroup filling an mbarrier-guarded ring and the consumer warpgroups
  (tinyton/lowering/tt_to_llvm/warp_specialize.py);
- ping-pong: those consumer warpgroups issue each step's products in turns, so that one's softmax runs while the
  other's products are on the tensor cores (tinyton/lowering/tt_to_llvm/warpgroup_turns.py);
- persistent programs: one an SM walking over the tiles (`_tile`; the producer copies each tile's q a tile ahead).
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type
from xdsl.ir import SSAValue

from tinyton.analysis.attention import Attention
from tinyton.analysis.strided_views import QView, own_layout
from tinyton.dialects import tt
from tinyton.dialects.tt import element_type
from tinyton.lowering.fusion.attention_blocks import Blocks, KVSplit
from tinyton.lowering.fusion.attention_scores import score_arrays
from tinyton.lowering.fusion.emitter import Emitter


class FlashAttention3Forms:
    """The KV loop forms of `attention._Program`, which provides the emitter, the region, the blocks and the loads,
    the score steps and the online softmax step."""

    em: Emitter
    att: Attention
    blocks: Blocks
    split: KVSplit | None
    packed: tuple[int, ...]
    batch: tuple[int, ...]
    coords: list[SSAValue]
    pointers: dict[SSAValue, SSAValue]
    score_tiles: dict[SSAValue, SSAValue]
    last_values: SSAValue | None
    tiles: int
    start: SSAValue
    score_shape: tuple[int, int]
    s_q: int
    s_kv: int
    d: int
    d_v: int
    dp: int
    dvp: int
    bn: int
    _kv_block: Callable[..., list[SSAValue]]
    _columns: Callable[..., tuple[SSAValue, SSAValue | None]]
    _block_scores: Callable[..., SSAValue]
    _key_block: Callable[..., SSAValue]
    _value_block: Callable[..., SSAValue]
    _ragged_bound: Callable[..., SSAValue | None]
    _scores: Callable[..., SSAValue]
    _weighted_values: Callable[..., SSAValue]
    _softmax_step: Callable[..., tuple[SSAValue, ...]]
    _stored_view: Callable[..., QView | None]
    _values_transposed: Callable[..., bool]
    _below: Callable[..., SSAValue | None]
    block_pointers: Callable[..., SSAValue]
    _query_block: Callable[..., SSAValue]
    grid: tuple[int, int, int]
    sm_count: int
    rows: int
    descriptor_view: Callable[..., QView | None]
    descriptor_block: Callable[..., SSAValue]

    def _tile(self) -> tuple[SSAValue, SSAValue]:
        """The query block and the batch program (the index `_batch_coords` decomposes) this program computes: its
        program ids, or for a persistent kernel (`Blocks.persistent`, on the warp-specialised loop) those of the
        tile `program_id(0)`, which `persist` makes the tile loop's index."""
        count, programs = self.grid[0], self.grid[1]
        if not (self.blocks.persistent and self.sm_count and self.specializes()):
            return self._query_block(count), self.em.emit(tt.ProgramIdOp(1))
        em, tile = self.em, self.em.emit(tt.ProgramIdOp(0))
        if self.att.causal_offset is None or count == 1:  # a head's query blocks one after another: its keys stay in L2
            self.tiles = count * programs
            return em.mod_int(tile, count), em.div_int(tile, count)
        return self._causal_tile(tile, count, programs)

    def _causal_tile(self, tile: SSAValue, count: int, programs: int) -> tuple[SSAValue, SSAValue]:
        """A persistent causal kernel's tile: causal query blocks differ in length (block b sees b + 1 key blocks),
        and a fixed walk cannot start the next tile on whichever SM is free as the GPU does with a program a
        tile, so each program runs blocks in pairs of one head that add up alike, `i` and `m - 1 - i` (m: the
        even count of blocks under `count`; an odd count's last block runs beside an empty one), in two
        consecutive turns; a wave's P programs take the next P pairs, the last wave's n pairs shared out over
        its 2n tiles. Pairs of one head come one after another: a wave's heads' keys and values stay in L2."""
        em = self.em
        even = count - count % 2
        pairs = even // 2 + count % 2
        units = pairs * programs
        self.tiles = 2 * units
        p = min(self.tiles, self.sm_count)  # the programs `persist` launches
        wave = em.div_int(tile, 2 * p)
        turn = em.mod_int(tile, 2 * p)
        n = em.binary(tt.MinimumOp, em.i32(p), em.binary(tt.SubOp, em.i32(units), em.mul_int(wave, p)))
        unit = em.add(em.mul_int(wave, p), em.binary(tt.ModOp, turn, n))
        second = em.cmp("ge", turn, n)
        i, batch = em.mod_int(unit, pairs), em.div_int(unit, pairs)
        if count % 2:  # the unpaired last block, then an empty block past the rows (`_kv_end` gives it no keys)
            unpaired = em.cmp("eq", i, em.i32(even // 2))
            long = em.select(unpaired, em.i32(count - 1), em.binary(tt.SubOp, em.i32(even - 1), i))
            short = em.select(unpaired, em.i32(count), i)
        else:
            long, short = em.binary(tt.SubOp, em.i32(even - 1), i), i
        return em.select(second, short, long), batch

    def _overlapped_block(self, j: SSAValue, rows: SSAValue, row_ok: SSAValue, q: SSAValue, dv_cols: SSAValue,
                          masked: bool | SSAValue, m_old: SSAValue, l_old: SSAValue, acc: SSAValue, p_prev: SSAValue,
                          loaded: list[SSAValue] | None = None) -> list[SSAValue]:  # fmt: skip
        """One key block with FlashAttention-3's intra-warpgroup overlap (`Blocks.overlap`): this block's scores
        and the previous block's `p @ v` are issued back to back, so that the tensor cores compute `p @ v` while
        the softmax of this block runs (the lowering leaves both dots in flight and waits for each where it is
        read: tinyton/lowering/tt_to_llvm/dot_overlap.py). `acc` and `p_prev` are relative to `m_old` until
        `alpha` moves them to the new maximum; the first step's `p_prev` is 0, its `p @ v` reads the first block.
        The value block read is the previous one, always whole (keys below this block's start); `loaded`: this
        block's kᵀ and that value block, read by the caller."""
        if loaded is not None:
            kt, v = loaded
        else:
            assert isinstance(masked, bool), "a block masked only where a condition holds is loaded before"
            kt = self._key_block(j, self._ragged_bound(self._columns(j, masked)[1]))
            v = self._value_block(self._previous_block(j), None, dv_cols)
        s = self._scores(q, kt)
        acc = self._weighted_values(p_prev, v, acc)
        s = self._block_scores(s, j, rows, row_ok, masked)
        m_new, l_new, alpha, p = self._softmax_step(s, m_old, l_old)
        return [m_new, l_new, self.em.binary(tt.MulOp, acc, alpha), p]

    def _previous_block(self, j: SSAValue) -> SSAValue:
        """The start of the key block before the one at `j` (the first block's own start)."""
        return self.em.binary(tt.MaximumOp, self.em.binary(tt.SubOp, j, self.em.i32(self.bn)), self.em.i32(0))

    def _last_product(self, end: int | SSAValue, dv_cols: SSAValue, m: SSAValue, total: SSAValue, acc: SSAValue,
                      p: SSAValue) -> list[SSAValue]:  # fmt: skip
        """The overlapped loops' last `p @ v`: the value block of their last step, `max((end - 1) // BN, 0)`
        blocks in (with no step, `p` is 0 and the first block serves)."""
        if self.last_values is not None:  # read before the loop (`_specialized_loop`)
            return [m, total, self._weighted_values(p, self.last_values, acc)]
        bound = self.em.i32(self.s_kv) if self.s_kv % self.bn else None
        return [m, total, self._weighted_values(p, self._value_block(self._last_block(end), bound, dv_cols), acc)]

    def _last_block(self, end: int | SSAValue) -> SSAValue:
        """The start of the overlapped loops' last value block, `max((end - 1) // BN, 0)` blocks in."""
        em = self.em
        if isinstance(end, int):
            return em.i32(max((end - 1) // self.bn * self.bn, 0))
        blocks = em.div_int(em.binary(tt.SubOp, end, em.i32(1)), self.bn)
        return em.binary(tt.MaximumOp, em.mul_int(blocks, self.bn), em.i32(0))

    def _specialized_loop(self, rows: SSAValue, row_ok: SSAValue, q: SSAValue, dv_cols: SSAValue,
                          carried: list[SSAValue], split: int | SSAValue, end: int | SSAValue) -> list[SSAValue] | None:
        """FlashAttention-3's producer and consumers (`Blocks.warp_specialize`): one KV loop up to `end` whose key and
        value blocks are descriptor loads, marked for the pipeliner to split into a producer warpgroup copying them
        by TMA into an mbarrier-guarded ring and the program's warps computing (lowering/tt_to_llvm/warp_specialize.py;
        q stays in registers, wgmma's left operand, for key blocks under 128, else in shared memory: pipeline.py
        `SHARED_A_MIN_N`). A causal mask or a ragged last block is applied to every
        block from `split` on, a branch in the one loop (the plain kernel's split into unmasked and masked loops
        would be two loops to specialise). None, emitting nothing, for a split, packed or broadcast rows, a
        key limit, f32, float8 in turns (`specializes`), or where TMA cannot read k or v (a window at an offset, a
        select, a k stored transposed). A v stored transposed (float8's copy) is copied as vᵀ's `[D_v, BN]` boxes.
        With `Blocks.overlap` too, the consumers overlap their products as `_overlapped_block` does; with
        `Blocks.pingpong`, their two warpgroups issue each step's products in turns."""
        att, blocks = self.att, self.blocks
        if not self.specializes():
            return None
        k_view = self._descriptor_view(att.k)
        assert k_view is not None and self._value_descriptor_view() is not None
        em = self.em
        needs_mask = att.causal_offset is not None or self.s_kv % self.bn != 0
        unmasked_end = split if isinstance(split, SSAValue) else em.i32(split)
        if blocks.overlap:  # the producer copies it before the loop's blocks (a tile ahead, with q, when persistent)
            self.last_values = self._descriptor_values(self._last_block(end))

        def body(j: SSAValue, values: list[SSAValue]) -> list[SSAValue]:
            masked = em.cmp("ge", j, unmasked_end) if needs_mask else False
            self.score_tiles = self._score_tiles(j)
            kt = em.emit(tt.TransOp(self._descriptor_rows(att.k, k_view, j, self.d, self.dp), (1, 0)))
            if blocks.overlap:
                v = self._descriptor_values(self._previous_block(j))
                return self._overlapped_block(j, rows, row_ok, q, dv_cols, masked, *values, loaded=[kt, v])
            v = self._descriptor_values(j)
            return self._kv_block(j, rows, row_ok, q, dv_cols, masked, *values, loaded=[kt, v])

        carried = em.for_loop(0, end, self.bn, carried, body, self.blocks.stages, warp_specialize=True,
                              pingpong=blocks.pingpong)
        self.score_tiles = {}
        return carried

    def _score_tiles(self, j: SSAValue) -> dict[SSAValue, SSAValue]:
        """The `[BM, BN]` blocks at key `j` of the score arrays (an additive bias) the producer can copy with the key
        and value blocks: 16- and 32-bit floats of S_q x S_kv rows contiguous along the keys (a key-padding bias of
        one row, or a mask of bools, is loaded by the consumers as before)."""
        tiles = {}
        for value in score_arrays(self.att):
            view = self.descriptor_view(own_layout(value))
            element = element_type(value.type)
            if view is None or not isinstance(element, (Float16Type, BFloat16Type, Float32Type)):
                continue
            if view.shape[-2:] != (self.s_q, self.s_kv):
                continue
            tiles[value] = self.descriptor_block(value, view, (self.start, j), self.score_shape, self.s_kv)
        return tiles

    def specializes(self) -> bool:
        """Whether the KV loop takes the producer-and-consumers form (`_specialized_loop`)."""
        att, blocks = self.att, self.blocks
        if not blocks.warp_specialize or blocks.broadcast or self.split is not None or self.packed:
            return False
        bits = element_type(att.q.base.type).bitwidth
        if att.key_limit is not None or bits > 16 or not att.k_transposed:
            return False
        if bits == 8 and (blocks.pingpong or att.p_cast is None):  # float8: both products e4m3 wgmmas, p staged
            return False  # through shared memory (a barrier of both consumer warpgroups: no turns between them)
        return self._descriptor_view(att.k) is not None and self._value_descriptor_view() is not None

    def _value_descriptor_view(self) -> QView | None:
        """The view of v that `_descriptor_values` reads: v's rows, or for a v stored transposed (float8's copy,
        attention_values.py) vᵀ's rows, `(..., D_v, S_kv)`."""
        if not self._values_transposed():
            return self._descriptor_view(self.att.v)
        view = self._stored_view(self.att.v)
        *batch, s_kv, d_v = view.shape
        *strides, _, d_stride = view.strides
        rows = QView(view.base, view.ops, (*batch, d_v, s_kv), (*strides, d_stride, 1), view.offset)
        return self.descriptor_view(rows)

    def _descriptor_values(self, j: SSAValue) -> SSAValue:
        """The value block at key `j`, `[BN, D_v]`, as TMA copies it: v's rows, or vᵀ's `[D_v, BN]` box transposed."""
        view = self._value_descriptor_view()
        if not self._values_transposed():
            return self._descriptor_rows(self.att.v, view, j, self.d_v, self.dvp)
        box = self.descriptor_block(self.att.v, view, (self.em.i32(0), j), (self.dvp, self.bn), self.s_kv)
        return self.em.emit(tt.TransOp(box, (1, 0)))

    def _descriptor_view(self, value: SSAValue) -> QView | None:
        """The view of k or v that `descriptor_rows` reads (`descriptor_view`); None for a select."""
        att = self.att
        if (att.k_select if value is att.k else att.v_select) is not None:
            return None
        return self.descriptor_view(self._stored_view(value) or own_layout(value))

    def _descriptor_rows(self, value: SSAValue, view: QView, j: SSAValue, width: int, padded: int) -> SSAValue:
        """The `[BN, padded]` rows of k or v from key `j` (`descriptor_rows`)."""
        return self.descriptor_rows(value, view, j, self.bn, width, padded)
