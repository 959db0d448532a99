"""
Tiles in shared memory: layout conversions, and the operands of `tt.dot`.

A tile is stored row-major at its coordinates, so any layout can read any element back.
Each thread addresses a run of registers that holds consecutive elements through one base
pointer plus constant offsets, with the run's alignment, so that LLVM's load/store
vectorizer turns the run into one `ld.shared.v4` / `st.shared.v4`.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from xdsl.dialects import llvm
from xdsl.dialects.builtin import AnyFloat, IntegerType
from xdsl.ir import Attribute, SSAValue

from tinyton.lowering.tt_to_llvm.context import GLOBAL_PTR, KernelContext
from tinyton.lowering.tt_to_llvm.layouts import Layout


def byte_size(elem: Attribute) -> int:
    """Bytes of one register of LLVM type `elem` in shared memory."""
    if elem == GLOBAL_PTR:
        return 8
    assert isinstance(elem, AnyFloat | IntegerType)
    return max(1, elem.bitwidth // 8)


def tile_pointers(
    ctx: KernelContext, layout: Layout, shape: Sequence[int], elem: Attribute, byte_offset: int = 0
) -> list[tuple[SSAValue, int]]:
    """Per register of `layout`: its address in a row-major `shape` array at `byte_offset`
    (`shape` may be 1 where `layout` is not: those dimensions broadcast), and its alignment."""
    strides = [prod(shape[d + 1 :]) if shape[d] > 1 else 0 for d in range(len(shape))]

    def linear(coords: Sequence[SSAValue | int]) -> SSAValue:
        out = ctx.const(0)
        for c, s in zip(coords, strides):
            if s:
                term = ctx.int_op("mul", c if isinstance(c, SSAValue) else ctx.const(c), ctx.const(s))
                out = ctx.int_op("add", out, term)
        return out

    base = ctx.cached(("linear", layout.lane, layout.warp, tuple(shape)), lambda: linear(ctx.thread_coords(layout)))
    size = byte_size(elem)
    run = layout.contiguous_per_thread() if shape[-1] > 1 else 1
    out: list[tuple[SSAValue, int]] = []
    for r in range(layout.num_regs):
        if r % run == 0:
            index = ctx.int_op("add", base, linear(layout.reg_coord(r)))
            start = ctx.smem_ptr(elem, index, byte_offset)
            out.append((start, min(16, run * size)))
        else:
            out.append((ctx.gep(start, r % run, elem), size))
    return out


def store_tile(
    ctx: KernelContext, regs: Sequence[SSAValue], layout: Layout, elem: Attribute, byte_offset: int = 0
) -> None:
    for value, (ptr, align) in zip(regs, tile_pointers(ctx, layout, layout.shape, elem, byte_offset)):
        ctx.insert(llvm.StoreOp(value, ptr, alignment=align))


def load_tile(
    ctx: KernelContext, layout: Layout, shape: Sequence[int], elem: Attribute, byte_offset: int = 0
) -> list[SSAValue]:
    return [
        ctx.value(llvm.LoadOp(ptr, elem, alignment=align))
        for ptr, align in tile_pointers(ctx, layout, shape, elem, byte_offset)
    ]


def convert_layout(
    ctx: KernelContext, regs: Sequence[SSAValue], src: Layout, elem: Attribute, dst: Layout
) -> list[SSAValue]:
    """Move a tile between layouts (or broadcast it) through shared memory."""
    nbytes = prod(src.shape) * byte_size(elem)
    start = ctx.smem_buffer(nbytes, f"a layout conversion of a {list(src.shape)} tile")
    store_tile(ctx, regs, src, elem, start)
    ctx.barrier()
    out = load_tile(ctx, dst, src.shape, elem, start)
    ctx.smem_read(start, nbytes)
    return out
