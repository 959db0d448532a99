"""
`tt.dot` on Hopper's warpgroup MMA: `wgmma.mma_async` with both operands in swizzled shared memory.

The operand tiles are the `Swizzle` tiles that `cp.async` fills (or that the operands are stored to):
rows of 32, 64 or 128 bytes (longer rows cut into 128-byte panels) whose 16-byte chunks are XORed with
the row's phase, which is exactly wgmma's 32/64/128-byte swizzle of 1024-byte aligned atoms. A 64-bit
matrix descriptor names each operand block (PTX ISA, "Matrix Descriptor Format"):

    bits 0-13: start address >> 4    bits 16-29: leading byte offset >> 4
    bits 32-45: stride byte offset >> 4    bits 62-63: swizzle (1: 128 B, 2: 64 B, 3: 32 B)

A (M x K, K contiguous) is K-major: the stride offset steps 8 rows (8 rows x the row's bytes), the
leading one is unused; the K step of 16 moves the start address along the row (the hardware swizzles
the final address, so no XOR here). B (K x N, N contiguous) is MN-major (`imm-trans-b` = 1): the
leading offset steps one panel along N, the stride offset 8 rows along K. Triton builds the same
descriptors (`createDescriptor` in its WGMMA lowering).

Per dot: `wgmma.fence`, one `wgmma.mma_async` per 64 x N block and K step of 16, `commit_group`, and
`wait_group 0`, whose inline asm takes and returns the accumulators so that no use of them can move above it.
Dots whose B tiles the pipeliner put side by side in one slot (`issued_together`: SwiGLU's gate and up) are one
such dot whose instructions are as many times wider, their accumulators concatenated (the registers of columns
N.. of an m64n(2N) accumulator are those of the second dot's m64nN, in the same order). A dot the pipeliner
left in flight (`tt.async_dot`) stops after the commit; its `tt.dot_wait` is that `wait_group N` (wgmma orders
the accumulator registers between consecutive instructions of one shape, so the next iteration's dot may take
them before they are final); operands it staged in shared memory stay pinned there until that wait (no barrier
orders wgmma's reads of them: `KernelContext.pin_smem`). A float8 dot with
`max_num_imprecise_acc` (`float8_dot.promotion_steps`) goes block by block: per chain of that many K steps a
fence, the wgmmas into a fresh partial (the first with scale-d false) and a commit; then `wait_group 1` (the chain
before is done, this one runs on) and one `add.f32` per register of the chain before into the accumulator, and
after the last chain `wait_group 0` and its adds. Waiting for each chain before issuing the next, as Triton's does,
left the tensor cores idle while each product drained (the array program's fp8 at ~27 % of `torch._scaled_mm`). Two
partials are live (N registers more than the accumulator's). In flight (`tt.promoted_dot`, the pipeliner's form of
such a dot in a K loop: `float8_dot.chain_in_flight`) the dot is two chains: `wait_group 0` for the chain the
previous iteration left running (ptxas serialises every wgmma, C7514, when registers a wgmma wrote before the
loop's back edge are read after a smaller wait), the first chain, the carried chain's adds, the second chain (once
the adds have read the carried registers, the register allocator puts it in them: a move at the back edge would
read a running wgmma's registers, which tests/test_wgmma_in_flight.py rules out), `wait_group 1` and the first
chain's adds; the second chain is carried out.
Shared memory written by threads (the generic proxy) is made visible to wgmma (the async
proxy) with `fence.proxy.async` before the barrier that precedes the dot (`tt.async_wait` emits it when
the kernel uses wgmma). There is no LLVM intrinsic for `wgmma.mma_async`, so it is inline asm on both
PTX paths (the same text `mlir-opt --convert-nvvm-to-llvm` makes of upstream MLIR's `nvvm.wgmma`).
"""

from __future__ import annotations

from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    BFloat16Type, DenseArrayBase, Float8E4M3FNType, Float8E5M2Type, Float16Type, VectorType, f32, i32, i64,
)
from xdsl.ir import SSAValue

from tinyton.dialects import nvvm, tt
from tinyton.lowering.tt_to_llvm.context import KernelContext, llvm_type, lowers, lowers_tile
from tinyton.lowering.tt_to_llvm.float8_dot import chain_in_flight, promotion_steps
from tinyton.lowering.tt_to_llvm.layouts import Layout
from tinyton.lowering.tt_to_llvm.mma import b_tile, k_major_b, shared_operands
from tinyton.lowering.tt_to_llvm.mma_layout import m_major_a
from tinyton.lowering.tt_to_llvm.pipeline_plan import is_zero
from tinyton.lowering.tt_to_llvm.swizzle import Swizzle
from tinyton.lowering.tt_to_llvm.wgmma_layout import (
    ROWS, WARPGROUP, WgmmaTiling, k_step, register_a, wgmma_tiling,
)

SWIZZLE_MODE = {128: 1, 64: 2, 32: 3}


def _descriptor_bits(tile: Swizzle, leading: int) -> int:
    """The constant fields of a descriptor of `tile` (everything but the start address)."""
    stride = 8 * tile.row_bytes
    return (leading >> 4) << 16 | (stride >> 4) << 32 | SWIZZLE_MODE[tile.row_bytes] << 62


Descriptor = tuple[SSAValue, int]
"""A block's descriptor as the wgmma asm takes it: a 64-bit descriptor and a constant byte offset (a multiple of 16)
that the asm adds to its address field. The K steps of a tile differ by constants only: their descriptors share one
register pair, which LLVM hoists out of a loop when the tile is the loop's invariant (a descriptor a K step, hoisted,
held 2 registers each: 32 of the attention backward's dk/dv kernel's, which then spilled)."""


def _descriptor(ctx: KernelContext, base: SSAValue, offset: tuple[SSAValue, int], bits: int) -> Descriptor:
    """The descriptor of the block at `base` + `offset` (a shared-memory pointer, an i32 and constant bytes)."""
    address = ctx.int_op("add", ctx.value(llvm.PtrToIntOp(base, i32)), offset[0])
    field = ctx.int_op("and", ctx.int_op("lshr", address, ctx.const(4)), ctx.const(0x3FFF))
    wide = ctx.value(llvm.ZExtOp(field, i64))
    return ctx.value(llvm.OrOp(wide, ctx.const(bits, i64))), offset[1]


def _asm(ctx: KernelContext, text: str, outputs: int, inputs: list[tuple[str, SSAValue]], tied: list[SSAValue]) -> list[SSAValue]:
    """Side-effecting inline asm returning `outputs` f32 registers, the last `tied` inputs tied to them."""
    constraints = [*["=f"] * outputs, *(c for c, _ in inputs), *(str(i) for i in range(len(tied)))]
    struct = llvm.LLVMStructType.from_type_list([f32] * outputs)
    op = llvm.InlineAsmOp(text, ",".join(constraints), [*(v for _, v in inputs), *tied], [struct], has_side_effects=True)
    result = ctx.value(op)
    position = lambda i: DenseArrayBase.from_list(i64, [i])
    return [ctx.value(llvm.ExtractValueOp(position(i), result, f32)) for i in range(outputs)]


PTX_TYPES = {Float16Type(): "f16", BFloat16Type(): "bf16", Float8E4M3FNType(): "e4m3", Float8E5M2Type(): "e5m2"}


def _wgmma(
    ctx: KernelContext, shape: tuple[int, int], types: tuple[str, str], a: Descriptor | list[SSAValue], b: Descriptor,
    transposes: tuple[int, int | None], acc: list[SSAValue] | None,
) -> list[SSAValue]:
    """`acc += A @ B` for one 64 x N x K block (`shape` (N, K); `acc`: this thread's N / 2 registers, None:
    a fresh accumulator, `A @ B` with scale-d false); A a descriptor, or the four i32 registers of its
    fragment. `transposes`: imm-trans-a (1: A M-major in shared memory) and imm-trans-b (1: B MN-major), the
    latter None for 8-bit types, which have no transpose operands (both operands K-major)."""
    trans_a, trans_b = transposes
    r = shape[0] // 2
    regs = ", ".join(f"${i}" for i in range(r))
    scale_d = ("r", ctx.const(0 if acc is None else 1))
    descriptors = [("b", b)]
    if isinstance(a, list):
        inputs = [*(("r", w) for w in a), ("l", b[0]), scale_d]
        a_text, scales = "{" + ", ".join(f"${r + i}" for i in range(4)) + "}", ["1", "1"]
    else:
        inputs = [("l", a[0]), ("l", b[0]), scale_d]
        a_text, scales = "da", ["1", "1"] if trans_b is None else ["1", "1", str(trans_a)]
        descriptors.insert(0, ("a", a))
    if trans_b is not None:
        scales.append(str(trans_b))
    n_in = len(inputs)
    lines = ["{", ".reg .pred p;", ".reg .b64 da, db;", f"setp.ne.b32 p, ${r + n_in - 1}, 0;"]
    for (name, (_, offset)), position in zip(descriptors, range(r + n_in - 1 - len(descriptors), r + n_in - 1)):
        assert offset % 16 == 0, "a block's descriptor addresses 16-byte units"
        lines.append(f"add.s64 d{name}, ${position}, {offset >> 4};")
    lines += [f"wgmma.mma_async.sync.aligned.m64n{shape[0]}k{shape[1]}.f32.{types[0]}.{types[1]} {{{regs}}}, "
              f"{a_text}, db, p, {', '.join(scales)};", "}"]
    return _asm(ctx, "\n".join(lines), r, inputs, acc or [])


def _a_fragments(ctx: KernelContext, op: tt.DotOp, layout: Layout) -> list[list[list[SSAValue]]]:
    """Per M repetition and K step, the four i32 words of A's fragment: pairs of consecutive registers of
    the accumulator layout (columns 2t, 2t+1), rows g and g+8, columns +0 and +8."""
    k = tt.shape_of(op.a.type)[1]
    regs = ctx.get(op.a, layout)
    pair = VectorType(llvm_type(op.a.type), [2])

    def word(i: int) -> SSAValue:
        vec = ctx.value(llvm.UndefOp(pair))
        vec = ctx.value(llvm.InsertElementOp(vec, regs[i], ctx.const(0)))
        vec = ctx.value(llvm.InsertElementOp(vec, regs[i + 1], ctx.const(1)))
        return ctx.value(llvm.BitcastOp(vec, i32))

    per = k // 2
    reps = len(regs) // per
    return [[[word(rep * per + 8 * s + 2 * j) for j in range(4)] for s in range(k // 16)] for rep in range(reps)]


def _warpgroup(ctx: KernelContext, tiling: WgmmaTiling) -> tuple[SSAValue, SSAValue]:
    """First row and first column of this warpgroup's blocks."""

    def build() -> tuple[SSAValue, SSAValue]:
        group = ctx.int_op("lshr", ctx.warp, ctx.const(2))
        m_bits = tiling.groups_m.bit_length() - 1
        gm = ctx.int_op("and", group, ctx.const(tiling.groups_m - 1))
        gn = ctx.int_op("and", ctx.int_op("lshr", group, ctx.const(m_bits)), ctx.const(tiling.groups_n - 1))
        return ctx.int_op("mul", gm, ctx.const(ROWS)), ctx.int_op("mul", gn, ctx.const(tiling.instr_n))

    return ctx.cached(("wgmma warpgroup", tiling), build)


def _along_k(tile: Swizzle, kk: int) -> int:
    """Byte offset of column `kk` of a K-major tile's row 0: its panel, then its bytes into the row."""
    return kk // tile.panel_cols * tile.panel_bytes + kk % tile.panel_cols * tile.elem_bytes


def _block_offset(tile: Swizzle, start: SSAValue, kk: int, k_major: bool, ctx: KernelContext) -> tuple[SSAValue, int]:
    """Byte offset of an operand's block at row or column `start` (A's rows, B's columns), K step `kk`, as a part that
    depends on `start` and the step's constant bytes: K-major (an M x K or N x K tile), rows `start`.. and the step's
    bytes along the row; MN-major (K x M or K x N), the panel of `start` and rows `kk`.."""
    if k_major:
        return ctx.int_op("mul", start, ctx.const(tile.row_bytes)), _along_k(tile, kk)
    panel = ctx.int_op("lshr", start, ctx.const(tile.panel_cols.bit_length() - 1))
    return ctx.int_op("mul", panel, ctx.const(tile.panel_bytes)), kk * tile.row_bytes


def issued_together(op: tt.DotOp) -> list[tt.DotOp]:
    """The dots whose wgmmas are issued as one with `op`'s, in the order of their B tiles: those whose B is
    another tile of the slot `op`'s B is in (the pipeliner puts them side by side, pipeline_plan.py
    `issued_together`); `[op]` when that slot holds one tile."""
    source = _b_slot(op)
    if source is None or tt.buffer_parts(source.buffer.type) == 1:
        return [op]
    parts: dict[int, tt.DotOp] = {}
    for other in op.parent_block().ops:
        slot = _b_slot(other) if isinstance(other, tt.DotOp) else None
        if slot is not None and slot.buffer is source.buffer and slot.slot is source.slot:
            parts[slot.part_index] = other
    assert sorted(parts) == list(range(tt.buffer_parts(source.buffer.type))), "a slot's tiles feed one dot each"
    return [parts[p] for p in sorted(parts)]


def _b_slot(op: tt.DotOp) -> tt.LocalLoadOp | None:
    owner = (k_major_b(op) or op.b).owner
    return owner if isinstance(owner, tt.LocalLoadOp) else None


def lower_wgmma_dot(ctx: KernelContext, op: tt.DotOp | tt.PromotedDotOp, layout: Layout) -> list[SSAValue]:
    tiling = wgmma_tiling(op, ctx.num_warps)
    assert layout == tiling.accumulator(), "tt.dot on wgmma must have the wgmma layout"
    assert ctx.num_warps % WARPGROUP == 0
    group = issued_together(op)
    if op is not group[0]:
        return ctx.get(op.result, layout)  # issued with the first dot of its group
    m, k = tt.shape_of(op.a.type)
    types = (PTX_TYPES[tt.element_type(op.a.type)], PTX_TYPES[tt.element_type(op.b.type)])
    step = k_step(op)
    k_major, m_major = k_major_b(op), m_major_a(op)
    size = tt.element_type(op.a.type).bitwidth // 8
    a_tile, bt = Swizzle(k, m, size) if m_major is not None else Swizzle(m, k, size), b_tile(op)
    from_registers = register_a(op, ctx.layout_of(op.a), ctx.num_warps)
    a_words = _a_fragments(ctx, op, ctx.layout_of(op.a)) if from_registers else None
    accs = [list(ctx.get(dot.acc, layout)) for dot in group]
    a_source = None if from_registers else m_major or op.a
    in_flight = op.result if tt.ASYNC_DOT_ATTR in op.attributes else None
    a_base, b_base = shared_operands(ctx, op, (a_source, k_major or op.b), (a_tile, bt), True, in_flight)
    a_bits = _descriptor_bits(a_tile, 16) if m_major is None else _descriptor_bits(a_tile, a_tile.panel_bytes)
    b_bits = _descriptor_bits(bt, 16) if k_major is not None else _descriptor_bits(bt, bt.panel_bytes)
    row0, col0 = _warpgroup(ctx, tiling)
    per = tiling.instr_n // 2
    trans_a = int(m_major is not None)
    trans_b = None if a_tile.elem_bytes == 1 else 0 if k_major is not None else 1

    def issue(kk: int, i: int, j: int, block: list[SSAValue] | None) -> list[SSAValue]:
        """The wgmma of K step `kk` for the instruction block (i, j) of this warpgroup, into `block` (the
        group's B tiles side by side: as many instructions wide)."""
        if a_words is not None:
            a: Descriptor | list[SSAValue] = a_words[i][kk // step]
        else:
            row = ctx.int_op("add", row0, ctx.const(i * ROWS * tiling.groups_m))
            a = _descriptor(ctx, a_base, _block_offset(a_tile, row, kk, m_major is None, ctx), a_bits)
        col = ctx.int_op("add", col0, ctx.const(j * tiling.instr_n * tiling.groups_n))
        b_desc = _descriptor(ctx, b_base, _block_offset(bt, col, kk, k_major is not None, ctx), b_bits)
        return _wgmma(ctx, (len(group) * tiling.instr_n, step), types, a, b_desc, (trans_a, trans_b), block)

    blocks = [(i, j, (i * tiling.reps_n + j) * per) for i in range(tiling.reps_m) for j in range(tiling.reps_n)]
    steps = promotion_steps(op)
    if steps is not None:
        assert tt.ASYNC_DOT_ATTR not in op.attributes and len(group) == 1, "a promoted float8 dot is issued alone"
        (acc,) = accs

        def chain(first: int, count: int, into: list[SSAValue] | None, i: int = 0, j: int = 0) -> list[SSAValue]:
            """A fence, the wgmmas of K steps first.. (count of them) into `into` (None: a fresh partial), a commit."""
            ctx.insert(nvvm.WgmmaFenceOp())
            for kk in range(first * step, (first + count) * step, step):
                into = issue(kk, i, j, into)
            assert into is not None
            ctx.insert(nvvm.WgmmaCommitGroupOp())
            return into

        def add(base: int, done: list[SSAValue]) -> None:
            """Add a finished partial to the f32 accumulator's registers from `base`."""
            acc[base : base + per] = [ctx.value(llvm.FAddOp(x, y)) for x, y in zip(acc[base : base + per], done)]

        def promote(base: int, partial: list[SSAValue], pending: int) -> None:
            """Wait until at most `pending` chains run (this one is done), then add its partial in f32."""
            add(base, _wait(ctx, pending, partial))

        if isinstance(op, tt.PromotedDotOp):
            half = chain_in_flight(op, ctx.num_warps)
            assert half is not None and len(blocks) == 1, "a promoted dot in flight is one block of two chains"
            carried = _wait(ctx, 0, list(ctx.get(op.pending, layout)))  # before the first chain: see the docstring
            partial = chain(0, half, None)
            add(0, carried)
            ctx.set(op.pending_out, layout, chain(half, half, None))  # runs on into the next iteration
            promote(0, partial, 1)
            return acc
        previous: tuple[int, list[SSAValue]] | None = None
        for i, j, base in blocks:
            for first in range(0, k // step, steps):
                partial = chain(first, min(steps, k // step - first), None, i, j)
                if previous is not None:  # the chain before is added while this one runs
                    promote(*previous, 1)
                previous = (base, partial)
        assert previous is not None
        promote(*previous, 0)
        return acc
    # A product from zero: its first K step writes fresh registers (scale-d false), no zeros copied into them first
    # (copied from one accumulator register to the others, they made ptxas wait for the wgmmas in flight, C7517)
    fresh = all(is_zero(dot.acc) for dot in group)
    ctx.insert(nvvm.WgmmaFenceOp())
    for kk in range(0, k, step):
        for i, j, base in blocks:
            into = None if fresh and kk == 0 else [r for acc in accs for r in acc[base : base + per]]
            out = issue(kk, i, j, into)
            for g, acc in enumerate(accs):
                acc[base : base + per] = out[g * per : (g + 1) * per]
    ctx.insert(nvvm.WgmmaCommitGroupOp())
    if tt.ASYNC_DOT_ATTR not in op.attributes:
        accs = [_wait(ctx, 0, acc) for acc in accs]
    for dot, acc in zip(group[1:], accs[1:]):
        ctx.set(dot.result, layout, acc)
    return accs[0]


def _wait(ctx: KernelContext, pending: int, acc: list[SSAValue]) -> list[SSAValue]:
    """`wgmma.wait_group pending`, taking and giving back the accumulators so that none is read before."""
    return _asm(ctx, f"wgmma.wait_group.sync.aligned {pending};", len(acc), [], acc)


@lowers_tile(tt.DotWaitOp)
def lower_dot_wait(ctx: KernelContext, op: tt.DotWaitOp, layout: Layout | None) -> list[SSAValue]:
    assert layout is not None
    done = _wait(ctx, op.pending.value.data, list(ctx.get(op.acc, layout)))
    ctx.unpin_smem(op.acc)
    return done


@lowers(tt.PromotedDotOp)
def lower_promoted_dot(ctx: KernelContext, op: tt.PromotedDotOp) -> None:
    layout = ctx.layout_of(op.result)
    ctx.set(op.result, layout, lower_wgmma_dot(ctx, op, layout))
