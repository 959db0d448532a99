"""Tilings of attention kernels: the problem, the default blocks, the tuner's candidates, the KV split.

The compiler driver picks one `Blocks` per attention region through a `BlockChooser`: measured on the GPU
(tinyton/compiler/attention_tuning.py) or `default_blocks` without one. Whether the KV loop is split across
programs (flash-decoding) follows from the blocks and the GPU's SM count, a target fact the driver passes
down (`NOMINAL_SM_COUNT`, an H100's, without a GPU), since the lowering knows no device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from math import prod

from tinyton.analysis.attention import Attention
from tinyton.analysis.index_masks import index_mask, is_constant
from tinyton.dialects.tt import shape_of
from tinyton.intmath import cdiv, next_power_of_2

SHARED_BUDGET = 40 * 1024
"""Bytes of shared memory the FMA path's two dots may stage their operands in (48 KiB without opting in)."""
NOMINAL_SM_COUNT = 132
"""An H100 SXM's multiprocessors: the split decision's target when no GPU is there to ask."""
PROGRAMS_PER_SM = 2
"""Fewer programs than this many per SM leave the GPU partly idle: the KV loop is split until there are."""
MIN_SPLIT_BLOCKS = 4
"""The keys are split only when they span twice this many key blocks (a short loop is not worth a second
launch for the partials)."""
CHUNK_MIN_BLOCKS = 2
"""Each chunk of a split walks at least this many key blocks (at 4, a Llama-3.2-1B decode step over 1024
cached keys ran 32 programs, its attention at 150 GB/s on the H200)."""


@dataclass(frozen=True)
class AttentionProblem:
    """`batch` (batch x heads) attentions of `s_q` queries over `s_kv` keys, head dims `d` (q, k) and `d_v`."""

    batch: int
    s_q: int
    s_kv: int
    d: int
    d_v: int
    dtype: str
    causal: bool
    kv_dtype: str = ""
    """What k and v are stored as when the attention casts them after loading (a bf16 KV cache under float32
    attention); "" when they are of `dtype`."""
    score_arrays: int = 0
    """Arrays of scores' shape each key block reads beside k and v (an additive bias, a boolean mask array):
    their loads weigh in the tiling as much as the keys' (a bias tuned without them ran 16 % slower, H200)."""

    @property
    def element_bytes(self) -> int:
        return _bytes(self.dtype)

    @property
    def kv_element_bytes(self) -> int:
        """Bytes of a key or value element as read from memory."""
        return _bytes(self.kv_dtype or self.dtype)

    @property
    def tensor_cores(self) -> bool:
        """16-bit and float8 operands: both products on tensor cores (f32 ones on FMAs or TF32x3)."""
        return self.element_bytes < 4

    def seq_class(self) -> tuple[int, int]:
        """Power-of-two buckets of (S_q, S_kv): problems of one class share a tuned tiling."""
        return next_power_of_2(max(1, self.s_q)), next_power_of_2(max(1, self.s_kv))


@dataclass(frozen=True)
class Blocks:
    """A program's tiling: `bm` queries, `bn` keys per step, `num_warps`, pipeline depths of the unmasked
    and the masked (diagonal or ragged) KV loops."""

    bm: int
    bn: int
    num_warps: int
    stages: int = 3
    masked_stages: int = 2
    splits: int = 0
    """Chunks of the KV loop (flash-decoding): 0 lets `kv_split` decide from the SM count; a measured choice
    (`candidates` of a decoding problem) names the count, 1 for none."""
    tf32x3: bool = False
    """f32 operands: both products as three TF32 products each on the tensor cores (f32's accuracy, as f32
    matmuls have by default: tinyton/lowering/matmul_precision.py) instead of FMAs."""
    broadcast: bool = False
    """Decoding: both products as one broadcast multiply and sum in f32 over the whole `[BM, BN, D]` tile in
    registers, `bm` the query rows themselves (a group's 4 heads, not a dot's 16): no operand staged in shared
    memory, no barrier in the KV loop (`tt.dot` on FMAs stages both operands; on tensor cores, 16-bit decoding
    pads the rows to 16 and stages k and v)."""
    warp_specialize: bool = False
    """FlashAttention-3's producer warpgroup (sm_90a): the key and value blocks copied by TMA into a ring of
    mbarrier-guarded slots while the program's warps compute (`attention._specialized_loop`: one KV loop, masked
    throughout where a causal mask or a ragged block needs it; where it cannot be, the request is ignored, as Triton
    ignores its `warp_specialize`)."""
    pingpong: bool = False
    """FlashAttention-3's ping-pong, with `warp_specialize` on two warpgroups: they issue each step's products in
    turns, one's softmax running while the other's products are on the tensor cores
    (tinyton/lowering/tt_to_llvm/warpgroup_turns.py)."""
    overlap: bool = False
    """FlashAttention-3's intra-warpgroup overlap: each KV step issues its scores and the previous step's `p @ v`
    together, and the softmax runs while `p @ v` is on the tensor cores (wgmma, sm_90a; elsewhere the same
    results in another order)."""
    persistent: bool = False
    """With `warp_specialize`, a program an SM walking over the tiles (`attention.py`, `persist`): the producer
    copies the next tile's first key and value blocks while the consumers finish the last tile and store it
    (FlashAttention-3's persistent kernel; programs of a few KV steps, S 512-1024, spent a share of their time in
    a prologue and an epilogue nothing overlapped)."""


BlockChooser = Callable[[AttentionProblem], Blocks]


def _bytes(dtype: str) -> int:
    return 4 if dtype in ("float32", "float64") else 1 if dtype.startswith("float8") else 2


def _padded(d: int) -> int:
    return max(16, next_power_of_2(d))


def default_blocks(p: AttentionProblem) -> Blocks:
    """16-bit operands run on tensor cores with q, the key and value blocks in shared memory (q once, k
    and v pipelined): 128 queries on 8 warps (two wgmma warpgroups), 64 for shorter sequences on 4, 16
    for decoding; key blocks of 64 for head dims up to 128 (the buffers of both loops fit 227 KiB), else
    32. f32 operands run on FMAs, staging both dots' operands: the largest of 64, 32, 16 that fits
    `SHARED_BUDGET`."""
    dp, dvp = _padded(p.d), _padded(p.d_v)
    if p.tensor_cores:
        bm = 128 if p.s_q > 64 else 64 if p.s_q > 16 else 16
        bn = 64 if max(dp, dvp) <= 128 else 32
        return Blocks(bm, bn, 8 if bm == 128 else 4)
    bm_max = max(16, min(64, next_power_of_2(p.s_q)))
    for bm in (64, 32, 16):
        for bn in (64, 32, 16):
            if bm <= bm_max and _fma_staged_bytes(p, bm, bn) <= SHARED_BUDGET:
                return Blocks(bm, bn, 4)
    return Blocks(16, 16, 4)


def _fma_staged_bytes(p: AttentionProblem, bm: int, bn: int) -> int:
    """Shared memory the FMA path stages its two dots' operands in: q, a key block, the scores, a value block."""
    dp, dvp = _padded(p.d), _padded(p.d_v)
    return (bm * dp + dp * bn + bm * bn + bn * dvp) * p.element_bytes


def candidates(p: AttentionProblem, sm_count: int = NOMINAL_SM_COUNT) -> list[Blocks]:
    """What the tuner measures for a 16-bit problem: the default, then query blocks of 64 and 128 (at
    most the padded S_q, 16 for decoding), key blocks by head dim, 4 or 8 warps (8 only for 128 queries:
    two warpgroups), for prefill each also with its two products overlapped (`Blocks.overlap`) and those on 8 warps
    also warp-specialised (`Blocks.warp_specialize`), with and without ping-pong (`Blocks.pingpong`; float8 without,
    its p staged through shared memory), the ping-pong ones also persistent (`Blocks.persistent`), head dims over
    64 also in FlashAttention-3's wider key blocks (128 keys, 64 over head dim 128; two stages beside q in shared
    memory); for decoding,
    each of those with the KV loop split in half, the heuristic's count,
    twice it, or not at all (`split_counts`), and the broadcast forms (`_broadcast_candidates`). An f32
    problem tries its default blocks on FMAs and on TF32x3 tensor cores; decoding (Llama's f32 attention over a
    bf16 cache) also its key blocks of 16 to 64 that fit `SHARED_BUDGET`, each with the split counts, as a
    decode step's attention is a few latencies long and the split sets how many there are."""
    default = default_blocks(p)
    if not p.tensor_cores:
        return _float32_candidates(p, default, sm_count)
    widest = max(_padded(p.d), _padded(p.d_v))
    key_blocks = (32, 64, 128) if widest <= 64 else (32, 64) if widest <= 128 else (32,)
    query_blocks = (16,) if p.s_q <= 16 else tuple(dict.fromkeys(min(bm, _padded(p.s_q)) for bm in (64, 128)))
    found = [default]
    for bm in query_blocks:
        for bn in key_blocks:
            for warps in (4, 8) if bm == 128 else (4,):
                found.append(Blocks(bm, bn, warps))
    found = [replace(b, splits=n) for b in found for n in split_counts(p, b, sm_count) or (0,)]
    if p.s_q > 16:  # prefill: each tiling with the scores and `p @ v` overlapped too, and on two warpgroups with a
        found += [replace(b, overlap=True) for b in found]  # producer warpgroup
        wide_keys = 128 if widest <= 128 else 64  # FlashAttention-3's blocks: two stages beside q in shared memory
        wide = [Blocks(128, wide_keys, 8, stages=2, overlap=o) for o in (False, True)] if 64 < widest and 128 < p.s_q else []
        turns = (False,) if p.element_bytes == 1 else (False, True)  # float8 stages p: no ping-pong (attention_forms)
        specialized = [replace(b, warp_specialize=True, pingpong=pp)
                       for b in [*found, *wide] if b.num_warps == 8 for pp in turns]
        found += specialized + [replace(b, persistent=True) for b in specialized if b.pingpong]
    return list(dict.fromkeys([*found, *_broadcast_candidates(p, sm_count)]))


BROADCAST_TILE = 8192
"""Most elements of a broadcast product's `[BM, BN, D]` tile: 64 f32 registers a thread on 4 warps."""


def _float32_candidates(p: AttentionProblem, default: Blocks, sm_count: int) -> list[Blocks]:
    """An f32 problem's candidates: the default on FMAs and on TF32x3 tensor cores, and for decoding its
    query block with each key block whose staged operands fit, split as `split_counts` says, both ways, and
    the broadcast forms."""
    if p.s_q > default.bm:
        return [default, replace(default, tf32x3=True)]
    fitting = [replace(default, bn=bn) for bn in (64, 32, 16) if _fma_staged_bytes(p, default.bm, bn) <= SHARED_BUDGET]
    found = [replace(b, splits=n) for b in [default, *fitting] for n in split_counts(p, b, sm_count) or (0,)]
    tf32x3 = [replace(b, tf32x3=True) for b in found]
    return list(dict.fromkeys([*found, *tf32x3, *_broadcast_candidates(p, sm_count)]))


def _broadcast_candidates(p: AttentionProblem, sm_count: int) -> list[Blocks]:
    """A decoding problem's broadcast forms (`Blocks.broadcast`, not for float8): the query rows alone, each key
    block whose `[rows, BN, D]` tile fits `BROADCAST_TILE` on 4 warps, and with fewer rows than 4 also on a warp
    a row (no reduction across warps, which one row on 4 warps makes through shared memory every block), split
    as `split_counts` says."""
    rows = next_power_of_2(p.s_q)
    if p.s_q > PACK_MAX_QUERIES or p.element_bytes == 1:
        return []
    width = max(_padded(p.d), _padded(p.d_v))
    found = [Blocks(rows, bn, warps, broadcast=True) for warps in dict.fromkeys((4, min(rows, 4)))
             for bn in (64, 32, 16) if rows * bn * width * 4 <= BROADCAST_TILE * warps]  # fmt: skip
    return [replace(b, splits=n) for b in found for n in split_counts(p, b, sm_count) or (0,)]


def split_counts(p: AttentionProblem, blocks: Blocks, sm_count: int) -> tuple[int, ...]:
    """The KV splits the tuner measures for a decoding problem tiled by `blocks`: none, half the
    heuristic's count, its count and twice it (within one key block a chunk); () when the queries do not
    fit one block (not decoding) or the keys span too few blocks to split."""
    kv_blocks = cdiv(p.s_kv, blocks.bn)
    if p.s_q > blocks.bm or kv_blocks < 2 * MIN_SPLIT_BLOCKS:
        return ()
    heuristic = kv_split(p, replace(blocks, splits=0), sm_count)
    count = heuristic.count if heuristic else 1
    return tuple(sorted({1, max(1, count // 2), count, min(2 * count, kv_blocks)}))


@dataclass(frozen=True)
class KVSplit:
    """The KV loop cut into `count` chunks of `chunk` keys (a multiple of the key block), one program each."""

    count: int
    chunk: int


def kv_split(p: AttentionProblem, blocks: Blocks, sm_count: int) -> KVSplit | None:
    """The measured split of `blocks.splits` chunks, or else the flash-decoding split when the queries fit one block (decoding: S_q = 1, or a few speculative
    tokens), batch x heads alone launch fewer than `PROGRAMS_PER_SM` programs per SM and the keys span
    enough blocks to share out; None to keep one program per query block. (Prefill keeps one KV loop per
    program: its query blocks already give the GPU work, and it is the path measured against SDPA.)"""
    programs = max(1, p.batch)
    kv_blocks = cdiv(p.s_kv, blocks.bn)
    if blocks.splits:  # measured
        chunk = cdiv(kv_blocks, blocks.splits) * blocks.bn
        count = cdiv(p.s_kv, chunk)
        return KVSplit(count, chunk) if count > 1 and p.s_q <= blocks.bm else None
    target = PROGRAMS_PER_SM * sm_count
    if p.s_q > blocks.bm or programs >= target or kv_blocks < 2 * MIN_SPLIT_BLOCKS:
        return None
    wanted = min(target // programs, kv_blocks // CHUNK_MIN_BLOCKS)  # no more programs than the target
    chunk = cdiv(kv_blocks, wanted) * blocks.bn
    count = cdiv(p.s_kv, chunk)
    return KVSplit(count, chunk) if count > 1 else None


PACK_MAX_QUERIES = 16
"""Decoding (at most this many queries per head) packs grouped-query heads into one program."""


def packed_group_axes(att: Attention) -> tuple[int, ...]:
    """Grouped-query decoding: the batch axes of q over which k and v broadcast (the query heads sharing a
    key/value head), packed as rows of one program's query block so that each K/V block is read once for
    the whole group. Only when they are q's innermost batch axes with q contiguous across them (the rows
    of the group are then rows of one matrix), S_q <= `PACK_MAX_QUERIES`, and no bias array varies along
    them; () otherwise. With one query per head the query axis' stride is moot (Llama's `swapaxes` of
    `(B, 1, H, D)` gives it H x D): the group's rows are then one matrix of rows `query_row_stride` apart."""
    out = shape_of(att.pv.result.type) if att.pv is not None else ()
    batch, s_q = tuple(out[:-2]), att.q.shape[-2]
    if s_q > PACK_MAX_QUERIES or tuple(att.q.shape[:-2]) != batch:
        return ()
    padded = lambda value: (1,) * (len(batch) - len(shape_of(value.type)[:-2])) + tuple(shape_of(value.type)[:-2])  # noqa: E731
    k, v = padded(att.k), padded(att.v)
    group = tuple(i for i, n in enumerate(batch) if n > 1 and k[i] == 1 and v[i] == 1)
    if not group or group != tuple(range(len(batch) - len(group), len(batch))):
        return ()
    row_stride = query_row_stride(att, group)
    if any(att.q.strides[a] != prod(att.q.shape[a + 1 : -1]) * row_stride for a in group):
        return ()
    for step in att.steps:
        for value in step.others:
            if is_constant(value) or index_mask(value) is not None or len(shape_of(value.type)) < 2:
                continue
            if any(padded(value)[a] != 1 for a in group):
                return ()
    return group


def query_row_stride(att: Attention, packed: tuple[int, ...]) -> int:
    """Elements between two consecutive query rows of a program's block: q's query stride, or, for heads of
    one query packed as rows, the innermost packed axis' stride."""
    return att.q.strides[packed[-1]] if packed and att.q.shape[-2] == 1 else att.q.strides[-2]
