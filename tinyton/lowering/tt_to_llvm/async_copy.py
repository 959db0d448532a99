"""
The pipelining ops (tinyton/dialects/tt_shared.py): `cp.async` into swizzled, multi-buffered shared memory.

Each `tt.local_alloc` owns shared memory for the whole kernel, reserved below the per-op staging buffers
before anything is lowered. A slot holds one tile with the XOR-swizzled 16-byte chunks that `ldmatrix`
reads (`swizzle`), so `tt.async_copy` writes every thread's run of `v` elements (the axis analysis' vector
width) straight to its swizzled place with `cp.async` (`.cg` for 16 bytes, `.ca` for 4 and 8; src-size 0
zero-fills masked-off runs), and a `tt.dot` reads `tt.local_load` slots with `ldmatrix` directly. Runs of
2 bytes, which `cp.async` cannot move, are loaded and stored synchronously (the next `tt.async_wait`'s
barrier orders them as well). `tt.async_wait` is `cp.async.wait_group N` followed by a barrier (and, in a kernel whose dots use wgmma,
which reads shared memory through the async proxy, a `fence.proxy.async` before it).
"""

from __future__ import annotations

from xdsl.dialects import func, llvm
from xdsl.dialects.builtin import MemRefType, i8, i32
from xdsl.ir import Attribute, SSAValue

from tinyton.dialects import tt
from tinyton.lowering.tt_to_llvm.context import (
    KernelContext,
    llvm_type,
    lowers,
    lowers_tile,
)
from tinyton.lowering.tt_to_llvm.layouts import Layout
from tinyton.lowering.tt_to_llvm.memory import _inline_asm, access_width, load_words
from tinyton.lowering.tt_to_llvm.shared import byte_size
from tinyton.lowering.tt_to_llvm.swizzle import Swizzle

BUFFER_ALIGN = 1024
"""Alignment of each buffer (what wgmma's 128-byte swizzle needs, more than ldmatrix does)."""


def slot_swizzle(buffer: SSAValue) -> Swizzle:
    """The swizzled tile geometry of one tile of a slot of `buffer` (slots may hold several, side by side)."""
    t = buffer.type
    assert isinstance(t, MemRefType)
    *_, rows, cols = t.get_shape()
    return Swizzle(rows, cols, byte_size(t.element_type))


def reserve_buffers(ctx: KernelContext, kernel: func.FuncOp) -> None:
    """Give every `tt.local_alloc` of the kernel its shared memory."""
    for op in kernel.walk():
        if isinstance(op, tt.LocalAllocOp):
            tiles = op.result.type.get_shape()[0] * tt.buffer_parts(op.result.type)
            ctx.local_buffers[op.result] = ctx.reserve_smem(tiles * slot_swizzle(op.result).nbytes, BUFFER_ALIGN)


def slot_base(ctx: KernelContext, buffer: SSAValue, slot: SSAValue, part: int = 0) -> SSAValue:
    """Byte address (`!llvm.ptr<3>` to i8) of slot `slot` of `buffer` (of its tile `part`)."""
    tile_bytes = slot_swizzle(buffer).nbytes
    index = ctx.int_op("mul", ctx.scalar(slot), ctx.const(tt.buffer_parts(buffer.type) * tile_bytes))
    return ctx.smem_ptr(i8, index, ctx.local_buffers[buffer] + part * tile_bytes)


def fence_async_proxy(ctx: KernelContext) -> None:
    """Make this thread's shared-memory writes visible to wgmma (before the barrier that publishes them)."""
    ctx.insert(llvm.CallIntrinsicOp("llvm.nvvm.fence.proxy.async.shared_cta", [], []))


@lowers(tt.LocalAllocOp)
def lower_local_alloc(ctx: KernelContext, op: tt.LocalAllocOp) -> None:
    """Reserved before lowering (`reserve_buffers`)."""


def _cp_async(
    ctx: KernelContext, dst: SSAValue, src: SSAValue, nbytes: int, pred: SSAValue | None, issuer: SSAValue | None
) -> None:
    """One `cp.async` of `nbytes`: zero-filled where `pred` is false, issued only where `issuer` is true (one of the
    threads holding the same run: a replica would write the same bytes again, a race for racecheck)."""
    kind = "cg" if nbytes == 16 else "ca"
    size = [ctx.select(pred, ctx.const(nbytes), ctx.const(0))] if pred is not None else []
    if issuer is not None:  # the intrinsic takes no predicate
        line = f"@$2 cp.async.{kind}.shared.global [$0], [$1], {nbytes}{', $3' if size else ''};"
        address = ctx.value(llvm.PtrToIntOp(dst, i32))
        inputs = [("r", address), ("l", src), ("b", issuer), *(("r", copied) for copied in size)]
        _inline_asm(ctx, [line], [], inputs, None)
        return
    name = f"llvm.nvvm.cp.async.{kind}.shared.global.{nbytes}" + (".s" if size else "")
    ctx.insert(llvm.CallIntrinsicOp(name, [dst, src, *size], []))


@lowers(tt.AsyncCopyOp)
def lower_async_copy(ctx: KernelContext, op: tt.AsyncCopyOp) -> None:
    layout = ctx.assign.anchor([op.ptr, op.mask], op.ptr)
    ptrs = ctx.get(op.ptr, layout)
    masks = ctx.get(op.mask, layout) if op.mask is not None else None
    elem = llvm_type(tt.element_type(op.ptr.type).pointee)
    v = access_width(ctx, op.ptr, op.mask, layout)
    nbytes = v * byte_size(elem)
    swizzle = slot_swizzle(op.buffer)
    base = slot_base(ctx, op.buffer, op.slot)
    issuer = ctx.replica_predicate(layout)
    for g in range(0, len(ptrs), v):
        row, col = ctx.coords(layout, g)
        dst = ctx.gep(base, swizzle.offset(ctx, row, col), elem)
        pred = masks[g] if masks is not None else None
        if nbytes >= 4:
            _cp_async(ctx, dst, ptrs[g], nbytes, pred, issuer)
        else:  # below cp.async's 4 bytes: loaded and stored by the one thread of the replicas, as cp.async is
            ctx.only_where(issuer, lambda dst=dst, ptr=ptrs[g], pred=pred: _copy_words(ctx, dst, ptr, pred, elem, v))


def _copy_words(ctx: KernelContext, dst: SSAValue, src: SSAValue, pred: SSAValue | None, elem: Attribute,
                v: int) -> None:
    """`v` elements from global `src` to shared `dst` through registers (zeros where `pred` is false)."""
    for i, value in enumerate(load_words(ctx, src, pred, elem, v)):
        ctx.insert(llvm.StoreOp(value, ctx.gep(dst, i, elem), alignment=byte_size(elem)))


@lowers(tt.AsyncCommitOp)
def lower_async_commit(ctx: KernelContext, op: tt.AsyncCommitOp) -> None:
    ctx.insert(llvm.CallIntrinsicOp("llvm.nvvm.cp.async.commit.group", [], []))


@lowers(tt.AsyncWaitOp)
def lower_async_wait(ctx: KernelContext, op: tt.AsyncWaitOp) -> None:
    pending = ctx.const(op.pending.value.data)
    ctx.insert(llvm.CallIntrinsicOp("llvm.nvvm.cp.async.wait.group", [pending], []))
    if ctx.wgmma:
        fence_async_proxy(ctx)
    ctx.barrier()


@lowers_tile(tt.LocalLoadOp)
def lower_local_load(ctx: KernelContext, op: tt.LocalLoadOp, layout: Layout | None) -> list[SSAValue]:
    """The slot's tile in any layout, element by element (a `tt.dot` reads slots with `ldmatrix` instead)."""
    assert layout is not None
    elem = llvm_type(op.result.type)
    swizzle = slot_swizzle(op.buffer)
    base = slot_base(ctx, op.buffer, op.slot, op.part_index)
    out = []
    for r in range(layout.num_regs):
        row, col = ctx.coords(layout, r)
        ptr = ctx.gep(base, swizzle.offset(ctx, row, col), elem)
        out.append(ctx.value(llvm.LoadOp(ptr, elem, alignment=byte_size(elem))))
    return out

