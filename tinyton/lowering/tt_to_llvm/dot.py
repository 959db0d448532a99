"""
`tt.dot`: on tensor cores when its operands are 16-bit floats (or f32 with `input_precision="tf32"`):
`wgmma` on sm_90a (`wgmma`), else `mma.sync` (`mma`); else with FMAs: f32 ones, f64 ones for f64
operands (NumPy's float64 matmul multiplies and sums in float64; f32 FMAs of f64 values lose all but
24 bits and flush what is below float32's range).

On the FMA path (f32 operands: Triton's `input_precision="ieee"`; f64), both operands go to shared memory (row-major), then each thread accumulates its own
registers of the result: per step of K it loads the A elements of its distinct rows and
the B elements of its distinct columns, and issues one FMA per register. The K loop is
an LLVM loop unrolled by `UNROLL`, whose unrolled loads of consecutive elements LLVM's
vectorizer merges into `ld.shared.v4`.
"""

from __future__ import annotations

from xdsl.dialects import llvm
from xdsl.dialects.builtin import Float64Type, f32, f64
from xdsl.ir import Attribute, SSAValue

from tinyton.dialects import tt
from tinyton.lowering.tt_to_llvm.casts import cast
from tinyton.lowering.tt_to_llvm.context import KernelContext, llvm_type, lowers_tile
from tinyton.lowering.tt_to_llvm.layouts import Layout
from tinyton.lowering.tt_to_llvm.mma import lower_mma_dot
from tinyton.lowering.tt_to_llvm.mma_layout import uses_mma
from tinyton.lowering.tt_to_llvm.shared import byte_size, store_tile
from tinyton.lowering.tt_to_llvm.wgmma import lower_wgmma_dot
from tinyton.lowering.tt_to_llvm.wgmma_layout import uses_wgmma

UNROLL = 4


def _run_starts(coords: list[int], run: int) -> dict[int, tuple[int, int]]:
    """For each coordinate, the start of its run of `run` consecutive ones and its offset."""
    return {c: (c - c % run, c % run) for c in coords}


def _load_as(ctx: KernelContext, base: SSAValue, offset: int, elem: Attribute, align: int, work: Attribute) -> SSAValue:
    """An operand element from shared memory, in the FMAs' type `work`."""
    ptr = ctx.gep(base, offset, elem)
    return cast(ctx, ctx.value(llvm.LoadOp(ptr, elem, alignment=align)), work)


def fma_element(op: tt.DotOp) -> Attribute:
    """The type the FMA path multiplies and accumulates in: f64 for an f64 accumulator, else f32."""
    return f64 if isinstance(tt.element_type(op.acc.type), Float64Type) else f32


@lowers_tile(tt.DotOp)
def lower_dot(ctx: KernelContext, op: tt.DotOp, layout: Layout | None) -> list[SSAValue]:
    assert layout is not None
    if uses_wgmma(op, ctx.num_warps, ctx.assign.arch):
        return lower_wgmma_dot(ctx, op, layout)
    if uses_mma(op):
        return lower_mma_dot(ctx, op, layout)
    (m, k), (_, n) = tt.shape_of(op.a.type), tt.shape_of(op.b.type)
    ea, eb = llvm_type(op.a.type), llvm_type(op.b.type)
    sa, sb = byte_size(ea), byte_size(eb)
    b_offset = -(-m * k * sa // 16) * 16
    la, lb = ctx.layout_of(op.a), ctx.layout_of(op.b)
    a_regs, b_regs = ctx.get(op.a, la), ctx.get(op.b, lb)
    work = fma_element(op)
    acc = [cast(ctx, x, work) for x in ctx.get(op.acc, layout)]
    nbytes = b_offset + k * n * sb
    a_offset = ctx.smem_buffer(nbytes, f"tt.dot of {m}x{k} by {k}x{n} (operands staged in shared memory)")
    b_offset += a_offset
    store_tile(ctx, a_regs, la, ea, a_offset)
    store_tile(ctx, b_regs, lb, eb, b_offset)
    ctx.barrier()

    row, col = ctx.thread_coords(layout)
    coords = [layout.reg_coord(r) for r in range(layout.num_regs)]
    rows = sorted({c[0] for c in coords})
    run = layout.contiguous_per_thread()
    cols = _run_starts(sorted({c[1] for c in coords}), run)
    # Pointers to A[row, 0] and to B[0, first column of each run].
    a_rows = {
        r: ctx.smem_ptr(ea, ctx.int_op("mul", ctx.int_op("add", row, ctx.const(r)), ctx.const(k)), a_offset)
        for r in rows
    }
    b_cols = {
        c: ctx.smem_ptr(eb, ctx.int_op("add", col, ctx.const(c)), b_offset)
        for c in {start for start, _ in cols.values()}
    }
    unroll = min(UNROLL, k)

    def steps(k0: SSAValue, acc: list[SSAValue]) -> list[SSAValue]:
        """`unroll` steps of K starting at `k0` (a multiple of `unroll`)."""
        a_vals = {}
        for r, ptr in a_rows.items():
            base = ctx.gep(ptr, k0, ea)
            for u in range(unroll):
                a_vals[r, u] = _load_as(ctx, base, u, ea, min(16, unroll * sa) if u == 0 else sa, work)
        for u in range(unroll):
            kn = ctx.int_op("mul", ctx.int_op("add", k0, ctx.const(u)), ctx.const(n))
            bases = {c: ctx.gep(ptr, kn, eb) for c, ptr in b_cols.items()}
            b_vals = {
                c: _load_as(ctx, bases[start], off, eb, min(16, run * sb) if off == 0 else sb, work)
                for c, (start, off) in cols.items()
            }
            acc = [
                ctx.value(llvm.FMAOp(a_vals[rc[0], u], b_vals[rc[1]], x)) for rc, x in zip(coords, acc)
            ]
        return acc

    if unroll == k:
        acc = steps(ctx.const(0), acc)
    else:
        acc = ctx.loop(ctx.const(0), ctx.const(k), ctx.const(unroll), acc, steps)
    ctx.smem_read(a_offset, nbytes)
    result = llvm_type(op.result.type)
    return [cast(ctx, x, result) for x in acc]
