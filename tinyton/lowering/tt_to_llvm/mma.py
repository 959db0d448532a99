"""
`tt.dot` on tensor cores: `ldmatrix` from swizzled shared memory and `mma.sync` (m16n8k16 for f16 and
bf16, m16n8k8 for tf32).

Both operands are stored into shared memory, XOR-swizzled (`swizzle`), from whatever layout
they are in (or, in a pipelined loop, are already there: `tt.local_load` of a slot that
`cp.async` filled, see `async_copy`); after a barrier each warp loads the fragments of its 16-row blocks of A with
`ldmatrix.x4` and of its 16-column blocks of B with `ldmatrix.x4.trans` (B is row-major K x
N, so each 8x8 matrix is read transposed), one 16-deep step of K at a time, and issues one
`mma` per 16x8 piece of its accumulator (`mma_layout`). An f32 accumulator uses the f16 x
f16 -> f32 instruction; an f16 one the f16 -> f16 instruction, which rounds after every
16-deep step (as Triton's `out_dtype=float16` does). bf16 operands use the bf16 instruction (f32
accumulator only).

f32 operands with `input_precision` "tf32" or "tf32x3" use `mma.m16n8k8.tf32`, 8 deep: `ldmatrix` still
loads A (a 16x8 block of 32-bit elements is a 16x16 block of 16-bit halves, and the halves land exactly where
the tf32 A fragment wants them), and B read K-major (`x @ w.T`: the N x K tile as stored) the same way; a
K x N B's fragment (b0 = (k t, n g), b1 = (k t+4, n g)) is loaded element by element, as `ldmatrix.trans`
cannot transpose 32-bit elements. "tf32" rounds every fragment word with `cvt.rna.tf32.f32` (to nearest,
ties away from zero), as the simulator rounds; "tf32x3" splits each word into three (`tf32`) and issues
three mmas per piece, lo_a hi_b, hi_a lo_b, then hi_a hi_b, into the same f32 accumulators.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    BFloat16Type,
    DenseArrayBase,
    Float32Type,
    IntegerType,
    VectorType,
    f16,
    f32,
    i8,
    i32,
    i64,
)
from xdsl.ir import Attribute, SSAValue

from tinyton.dialects import tt
from tinyton.lowering.tt_to_llvm.async_copy import (
    BUFFER_ALIGN,
    fence_async_proxy,
    slot_base,
)
from tinyton.lowering.tt_to_llvm.context import KernelContext, llvm_type
from tinyton.lowering.tt_to_llvm.layouts import Layout
from tinyton.lowering.tt_to_llvm.mma_layout import (
    BLOCK,
    MmaTiling,
    k_major_b,
    mma_tiling,
)
from tinyton.lowering.tt_to_llvm.swizzle import Swizzle, store_swizzled
from tinyton.lowering.tt_to_llvm.tf32 import Tf32Parts, round_tf32, tf32x3_step

HALF2 = VectorType(f16, [2])
I16 = IntegerType(16)
FRAGMENT_REGS = 4
"""32-bit registers that one `ldmatrix.x4` gives each thread."""


def _fields(ctx: KernelContext, struct: SSAValue, types: list[Attribute]) -> list[SSAValue]:
    position = lambda i: DenseArrayBase.from_list(i64, [i])
    return [ctx.value(llvm.ExtractValueOp(position(i), struct, t)) for i, t in enumerate(types)]


def _pack(ctx: KernelContext, lo: SSAValue, hi: SSAValue) -> SSAValue:
    """Two halves as one `<2 x half>` register."""
    vec = ctx.value(llvm.UndefOp(HALF2))
    vec = ctx.value(llvm.InsertElementOp(vec, lo, ctx.const(0)))
    return ctx.value(llvm.InsertElementOp(vec, hi, ctx.const(1)))


def _unpack(ctx: KernelContext, pair: SSAValue) -> list[SSAValue]:
    word = ctx.value(llvm.BitcastOp(pair, i32))
    halves = (word, ctx.int_op("lshr", word, ctx.const(16)))
    return [ctx.value(llvm.BitcastOp(ctx.value(llvm.TruncOp(h, I16)), f16)) for h in halves]


def _ldmatrix(ctx: KernelContext, ptr: SSAValue, trans: bool) -> list[SSAValue]:
    """Four 8x8 matrices of 16-bit elements as i32 words; this lane supplies the address of one row."""
    name = f"llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4{'.trans' if trans else ''}.b16"
    words = [i32] * FRAGMENT_REGS
    result = llvm.LLVMStructType.from_type_list(words)
    return _fields(ctx, ctx.value(llvm.CallIntrinsicOp(name, [ptr], [result])), words)


def _mma(
    ctx: KernelContext, operand: Attribute, a: list[SSAValue], b: list[SSAValue], c: list[SSAValue]
) -> list[SSAValue]:
    """One `mma` on a 16x8 piece: A and B fragments as i32 words, c0..c3 in, d0..d3 out (f32 or f16)."""
    if isinstance(operand, Float32Type):
        name, types, args = "llvm.nvvm.mma.m16n8k8.row.col.tf32", [f32] * 4, [*a, *b, *c]
    elif isinstance(operand, BFloat16Type):
        name, types, args = "llvm.nvvm.mma.m16n8k16.row.col.bf16", [f32] * 4, [*a, *b, *c]
    else:
        halves = [ctx.value(llvm.BitcastOp(w, HALF2)) for w in (*a, *b)]
        if c[0].type == f32:
            name, types, args = "llvm.nvvm.mma.m16n8k16.row.col.f32.f32", [f32] * 4, [*halves, *c]
        else:
            name, types = "llvm.nvvm.mma.m16n8k16.row.col.f16.f16", [HALF2] * 2
            args = [*halves, _pack(ctx, c[0], c[1]), _pack(ctx, c[2], c[3])]
    result = llvm.LLVMStructType.from_type_list(types)
    d = _fields(ctx, ctx.value(llvm.CallIntrinsicOp(name, args, [result])), types)
    return d if types[0] == f32 else [h for pair in d for h in _unpack(ctx, pair)]


def _warp_block(ctx: KernelContext, tiling: MmaTiling) -> tuple[SSAValue, SSAValue]:
    """First row and first column of this warp's 16x16 blocks."""

    def build() -> tuple[SSAValue, SSAValue]:
        n_bits = tiling.warps_n.bit_length() - 1
        warp_n = ctx.int_op("and", ctx.warp, ctx.const(tiling.warps_n - 1))
        warp_m = ctx.int_op("and", ctx.int_op("lshr", ctx.warp, ctx.const(n_bits)), ctx.const(tiling.warps_m - 1))
        return ctx.int_op("mul", warp_m, ctx.const(BLOCK)), ctx.int_op("mul", warp_n, ctx.const(BLOCK))

    return ctx.cached(("mma warp block", tiling), build)


def _lane_row_col(ctx: KernelContext, vec: int) -> tuple[SSAValue, SSAValue]:
    """The row (0..15) and column (0 or `vec`, the elements of 16 bytes) of a block whose address this
    lane gives to `ldmatrix.x4`: lane i addresses row i % 8 of matrix i / 8, and the matrices are the
    block's quadrants, column-major (top left, bottom left, top right, bottom right)."""

    def build() -> tuple[SSAValue, SSAValue]:
        row = ctx.int_op("and", ctx.lane, ctx.const(15))
        col = ctx.int_op("mul", ctx.int_op("lshr", ctx.lane, ctx.const(4)), ctx.const(vec))
        return row, col

    return ctx.cached(("ldmatrix lane", vec), build)


def _fragments(
    ctx: KernelContext, swizzle: Swizzle, base: SSAValue, row: SSAValue, col: SSAValue, trans: bool
) -> list[SSAValue]:
    """The four fragment words of the block at (`row`, `col`) of a swizzled tile at `base` (16x16
    16-bit elements, or 16x8 32-bit ones)."""
    lane_row, lane_col = _lane_row_col(ctx, swizzle.vec)
    offset = swizzle.offset(ctx, ctx.int_op("add", row, lane_row), ctx.int_op("add", col, lane_col))
    return _ldmatrix(ctx, ctx.gep(base, offset, IntegerType(8 * swizzle.elem_bytes)), trans)


def _tf32_b_fragments(ctx: KernelContext, swizzle: Swizzle, base: SSAValue, row: SSAValue, col: SSAValue) -> list[SSAValue]:
    """b0, b1 of the two n8 halves of the 8x16 block of f32 B at (`row`, `col`): (k t, n g), (k t+4, n g)."""
    g = ctx.int_op("lshr", ctx.lane, ctx.const(2))
    t = ctx.int_op("and", ctx.lane, ctx.const(3))
    words = []
    for half in range(2):
        n = ctx.int_op("add", col, ctx.int_op("add", g, ctx.const(8 * half)))
        for dk in (0, 4):
            k = ctx.int_op("add", row, ctx.int_op("add", t, ctx.const(dk)))
            ptr = ctx.gep(base, swizzle.offset(ctx, k, n), f32)
            words.append(ctx.value(llvm.LoadOp(ptr, f32, alignment=4)))
    return words


def b_tile(op: tt.DotOp) -> Swizzle:
    """B's swizzled shared-memory tile: K x N, or N x K when read K-major (`k_major_b`)."""
    (k, n), size = tt.shape_of(op.b.type), tt.element_type(op.b.type).bitwidth // 8
    return Swizzle(n, k, size) if k_major_b(op) is not None else Swizzle(k, n, size)


def shared_operands(
    ctx: KernelContext, op: tt.DotOp, sources: tuple[SSAValue | None, SSAValue], tiles: tuple[Swizzle, Swizzle],
    async_proxy: bool = False, in_flight: SSAValue | None = None,
) -> list[SSAValue | None]:
    """The byte address of each operand's swizzled tile (`sources`: the values whose tiles they are; None
    for an operand read from registers): the slot a `tt.local_load` reads (pipelined loops), or a staging
    buffer the operand's registers are stored to (then a barrier, after a `fence.proxy.async` when
    `async_proxy`: wgmma reads them; pinned until the dot `in_flight` is waited for, if given)."""
    bases: list[SSAValue | None] = [None, None]
    staged = []
    for i, (value, tile) in enumerate(zip(sources, tiles)):
        if value is None:
            continue
        source = value.owner
        if isinstance(source, tt.LocalLoadOp):
            bases[i] = slot_base(ctx, source.buffer, source.slot, source.part_index)
        else:
            staged.append((i, value, tile))
    if staged:
        (m, k), (_, n) = tt.shape_of(op.a.type), tt.shape_of(op.b.type)
        nbytes = sum(tile.nbytes for _, _, tile in staged)
        what = f"tt.dot of {m}x{k} by {k}x{n} (operands staged in shared memory)"
        start = ctx.smem_buffer(nbytes, what, BUFFER_ALIGN if async_proxy else 16)
        offset = start
        for i, value, tile in staged:
            layout = ctx.layout_of(value)
            store_swizzled(ctx, ctx.get(value, layout), layout, llvm_type(value.type), tile, offset)
            bases[i] = ctx.smem_ptr(i8, 0, offset)
            offset += tile.nbytes
        if async_proxy:
            fence_async_proxy(ctx)
        ctx.barrier()
        ctx.smem_read(start, nbytes)
        if in_flight is not None:
            ctx.pin_smem(in_flight, start + nbytes)
    return bases


Parts = tuple[list[SSAValue], ...]
"""The words of one fragment as the mmas read them: one list, or hi, lo and cross for "tf32x3"."""


def _pairs(a: Parts, b: Parts) -> list[tuple[list[SSAValue], list[SSAValue]]]:
    """The (A, B) fragments whose products one piece accumulates, in order: the small ones first."""
    if len(a) == 1:
        return [(a[0], b[0])]
    (a_hi, a_lo, a_cross), (b_hi, b_lo, b_cross) = a, b
    return [(a_lo, b_cross), (a_cross, b_lo), (a_hi, b_hi)]


def _issue(
    ctx: KernelContext, operand: Attribute, tiling: MmaTiling, a_frags: list[Parts], b_frags: list[Parts],
    acc: list[SSAValue],
) -> list[SSAValue]:
    """One K step's mmas over every piece of this warp's accumulator (B fragments: both n8 halves)."""
    acc = list(acc)
    for j, b in enumerate(b_frags):
        for half in range(2):
            b_half = tuple(words[2 * half : 2 * half + 2] for words in b)
            for i, a in enumerate(a_frags):
                base = 8 * (i * tiling.reps_n + j) + 4 * half
                for a_words, b_words in _pairs(a, b_half):
                    acc[base : base + 4] = _mma(ctx, operand, a_words, b_words, acc[base : base + 4])
    return acc


def _issue_split(
    ctx: KernelContext, operand: Attribute, tiling: MmaTiling, a_frags: list[list[SSAValue]],
    b_frags: list[list[SSAValue]], acc: list[SSAValue], split: Callable[[SSAValue], Tf32Parts],
) -> list[SSAValue]:
    """`_issue` of "tf32x3" fragments, each word's parts given by `split`."""

    def parts(frags: list[list[SSAValue]]) -> list[Parts]:
        return [tuple([getattr(split(w), part) for w in frag] for part in ("hi", "lo", "cross")) for frag in frags]

    return _issue(ctx, operand, tiling, parts(a_frags), parts(b_frags), acc)


def lower_mma_dot(ctx: KernelContext, op: tt.DotOp, layout: Layout) -> list[SSAValue]:
    tiling = mma_tiling(op, ctx.num_warps)
    assert layout == tiling.accumulator(), "tt.dot with mma operands must have the mma layout"
    m, k = tt.shape_of(op.a.type)
    operand = tt.element_type(op.a.type)
    tf32 = isinstance(operand, Float32Type)
    precision = op.input_precision.data if tf32 else None
    k_major = k_major_b(op)
    a_tile, bt = Swizzle(m, k, 4 if tf32 else 2), b_tile(op)
    acc = list(ctx.get(op.acc, layout))
    a_base, b_base = shared_operands(ctx, op, (op.a, k_major or op.b), (a_tile, bt))
    assert a_base is not None and b_base is not None

    row0, col0 = _warp_block(ctx, tiling)
    step_m, step_n = BLOCK * tiling.warps_m, BLOCK * tiling.warps_n
    for kk in range(0, k, 8 if tf32 else BLOCK):
        kc = ctx.const(kk)
        a_frags = [
            _fragments(ctx, a_tile, a_base, ctx.int_op("add", row0, ctx.const(i * step_m)), kc, trans=False)
            for i in range(tiling.reps_m)
        ]
        cols = [ctx.int_op("add", col0, ctx.const(j * step_n)) for j in range(tiling.reps_n)]
        if k_major is not None:  # matrices (n, k) 0-7/0-7, 8-15/0-7, 0-7/8-15, 8-15/8-15: b0 b0' b1 b1'
            # (tf32: k 0-3 and 4-7 of 32-bit elements, the same order)
            b_frags = [[w[0], w[2], w[1], w[3]] for w in (_fragments(ctx, bt, b_base, c, kc, trans=False) for c in cols)]
        elif tf32:
            b_frags = [_tf32_b_fragments(ctx, bt, b_base, kc, c) for c in cols]
        else:
            b_frags = [_fragments(ctx, bt, b_base, kc, c, trans=True) for c in cols]
        if precision == "tf32x3":
            words = [w for frag in (*a_frags, *b_frags) for w in frag]
            acc = tf32x3_step(ctx, words, partial(_issue_split, ctx, operand, tiling, a_frags, b_frags, acc))
        else:
            if precision == "tf32":
                a_frags, b_frags = ([[round_tf32(ctx, w) for w in f] for f in frags] for frags in (a_frags, b_frags))
            acc = _issue(ctx, operand, tiling, [(a,) for a in a_frags], [(b,) for b in b_frags], acc)
    return acc
