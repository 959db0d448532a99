"""
TMA copies and mbarriers (tinyton/dialects/tt_tma.py) on sm_90, and the tensor maps they read.

A `tt.tma_copy` of an `R x C` block fills one slot of a pipelining buffer, the `Swizzle` tile that
`ldmatrix` and wgmma read: rows of 32, 64 or 128 bytes whose 16-byte chunks are XORed with the row's phase
are exactly TMA's 32/64/128-byte swizzles of 1024-byte aligned slots, and a tile whose rows are longer is
cut into 128-byte-wide panels, one box each (`box = R x panel_cols`, the panel at column `p * panel_cols`
lands at byte `p * panel_bytes` of the slot). Thread 0 issues everything (PTX ISA, "Data Movement and
Conversion Instructions: cp.async.bulk.tensor", "mbarrier"):

    mbarrier.expect_tx [bar], bytes          per box, before its copy
    cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [dst], [map, {col, row}], [bar]
    (.3d to .5d with the batch indices after `row` for a descriptor of a batch of matrices, box 1 x ... x R x C)
    mbarrier.arrive [bar]                    once per slot (`tt.tma_arrive`)

and every thread waits with `mbarrier.try_wait.parity` in a loop before a barrier. All of it is inline asm,
the same text on both PTX paths (LLVM 22 has `llvm.nvvm.cp.async.bulk.tensor.*` intrinsics, but their
operand lists change between LLVM versions; the asm does not).

Each distinct tensor map (the descriptor's base, sizes and strides, the box, dtype, padding and swizzle)
becomes one kernel parameter after the kernel's own, a pointer to the encoded `CUtensorMap` in global memory;
`tensor_map_specs` says how the runtime encodes each from the launch's parameter values
(tinyton/runtime/tensor_maps.py). A descriptor qualifies when its base is a kernel parameter known to be
16-byte aligned (`tt.divisibility`) and its sizes and strides are kernel parameters or constants (constant
strides a multiple of 16 bytes, the last 1); what the runtime only learns at launch it checks there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xdsl.dialects import func, llvm
from xdsl.dialects.builtin import IntegerAttr, i8, i32, i64
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from tinyton.dialects import nvvm, tt
from tinyton.dtypes import dtype_of
from tinyton.lowering.tt_to_llvm.async_copy import fence_async_proxy, slot_base, slot_swizzle
from tinyton.lowering.tt_to_llvm.axis_info import POINTER_ALIGNMENT_ATTR
from tinyton.lowering.tt_to_llvm.context import KernelContext, llvm_type, lowers
from tinyton.lowering.tt_to_llvm.memory import _inline_asm
from tinyton.lowering.tt_to_llvm.shared import byte_size
from tinyton.lowering.tt_to_llvm.swizzle import Swizzle, store_swizzled

TMA_DTYPES = frozenset({"float16", "bfloat16", "float32", "int8", "uint8", "int16", "int32", "float8e4nv", "float8e5"})
MAX_BOX = 256
"""TMA's largest box side."""
MAX_RANK = 5
"""TMA's largest tensor rank."""


def _scalar_source(value: SSAValue, kernel: func.FuncOp) -> int | str | None:
    """A kernel parameter (`"p3"`) or an integer constant that `value` is, else None."""
    if isinstance(value, BlockArgument) and value.owner is kernel.body.block:
        return f"p{value.index}"
    op = value.owner
    if isinstance(op, tt.ConstantOp) and isinstance(op.value, IntegerAttr) and not tt.shape_of(value.type):
        return op.value.value.data
    return None


def _param_multiple_of_16(value: SSAValue, kernel: func.FuncOp) -> int | None:
    """The index of the kernel parameter `value` is, when it is known to be a multiple of 16 (`tt.divisibility`:
    a pointer 16-byte aligned, an integer specialised as a multiple of 16)."""
    if not (isinstance(value, BlockArgument) and value.owner is kernel.body.block):
        return None
    attrs = kernel.arg_attrs.data if kernel.arg_attrs is not None else ()
    hint = attrs[value.index].data.get(POINTER_ALIGNMENT_ATTR) if value.index < len(attrs) else None
    return value.index if isinstance(hint, IntegerAttr) and hint.value.data % 16 == 0 else None


def tensor_map_spec(
    base: SSAValue, shape: Sequence[SSAValue], strides: Sequence[SSAValue], block: tuple[int, ...], padding: str,
    kernel: func.FuncOp,
) -> dict[str, Any] | None:
    """How to encode the map of a 2-D block of the descriptor (of rank 2 to 5: the leading dimensions are
    a batch, one index each), read into a `Swizzle` tile; None when TMA cannot read it (see the module's
    docstring)."""
    elem = tt.element_type(base.type).pointee
    name = dtype_of(elem).name
    if len(block) != 2 or not 2 <= len(shape) <= MAX_RANK or name not in TMA_DTYPES:
        return None
    param = _param_multiple_of_16(base, kernel)
    sizes = [_scalar_source(v, kernel) for v in shape]
    steps = [_scalar_source(v, kernel) for v in strides]
    if param is None or None in sizes or None in steps:
        return None
    nbytes = byte_size(elem)
    # What TMA requires of the strides must be known here, never found out at launch (where the simulator
    # would have run the kernel): the last one is 1, the others multiples of 16 bytes.
    if steps[-1] != 1:
        return None
    for step, stride in zip(steps[:-1], strides):
        if isinstance(step, int) and (step <= 0 or step * nbytes % 16):
            return None
        if isinstance(step, str) and _param_multiple_of_16(stride, kernel) is None:
            return None
    if any(isinstance(s, int) and s <= 0 for s in sizes):
        return None
    tile = Swizzle(block[0], block[1], nbytes)
    if tile.rows > MAX_BOX or tile.row_bytes < 16 or (tile.row_bytes >= 32 and tile.rows % 8):
        return None
    return {
        "base": param, "shape": sizes, "strides": steps, "box": [1] * (len(shape) - 2) + [tile.rows, tile.panel_cols], "dtype": name,
        "padding": padding, "swizzle": tile.row_bytes if tile.row_bytes >= 32 else 0,
    }


def copy_spec(op: tt.TmaCopyOp, kernel: func.FuncOp) -> dict[str, Any]:
    block = tuple(tt.shape_of(tt.slot_type(op.buffer.type)))
    spec = tensor_map_spec(op.base, op.shape, op.strides, block, op.padding.data, kernel)
    assert spec is not None, "the pipeliner only makes tt.tma_copy of descriptors TMA can read"
    return spec


def store_spec(op: tt.DescriptorWriteBase, kernel: func.FuncOp) -> dict[str, Any] | None:
    """The map a descriptor store or reduction writes through; None when TMA cannot write it."""
    return tensor_map_spec(op.base, op.shape, op.strides, tuple(tt.shape_of(op.value.type)), "zero", kernel)


def tensor_map_specs(kernel: func.FuncOp) -> tuple[list[dict[str, Any]], dict[Operation, int]]:
    """The distinct maps the kernel's `tt.tma_copy` and TMA-written `tt.descriptor_store`/`tt.descriptor_reduce`
    ops use, in order (one parameter each), and the map of each."""
    specs: list[dict[str, Any]] = []
    index: dict[Operation, int] = {}
    for op in kernel.walk():
        if isinstance(op, (tt.TmaCopyOp, tt.DescriptorWriteBase)):
            spec = copy_spec(op, kernel) if isinstance(op, tt.TmaCopyOp) else store_spec(op, kernel)
            assert spec is not None, "descriptor stores TMA cannot write were expanded"
            if spec not in specs:
                specs.append(spec)
            index[op] = specs.index(spec)
    return specs, index


def expand_descriptors(kernel: func.FuncOp, tma_stores: bool) -> None:
    """The descriptor loads TMA does not read, and the descriptor writes it does not make (all of them without
    `tma_stores`; else the stores outside a warp-specialised kernel's consumers, the reductions in its producer, and
    those of a map TMA cannot write), become the masked loads, stores and atomics they stand for."""
    for op in list(kernel.walk()):
        if isinstance(op, tt.DescriptorLoadOp):
            plain: Operation = tt.LoadOp(op.ptr, op.mask, op.other)
        elif isinstance(op, tt.DescriptorWriteBase) and not (tma_stores and _tma_writes(op, kernel)):
            plain = (tt.StoreOp(op.ptr, op.value, op.mask) if isinstance(op, tt.DescriptorStoreOp)
                     else tt.AtomicRMWOp(op.kind.data, op.ptr, op.value, op.mask, sem="relaxed"))
        else:
            continue
        block = op.parent_block()
        assert block is not None
        block.insert_op_before(plain, op)
        for old, new in zip(op.results, plain.results):
            old.replace_all_uses_with(new)
        op.detach()
        op.erase()


def _tma_writes(op: tt.DescriptorWriteBase, kernel: func.FuncOp) -> bool:
    """Whether TMA makes the write on sm_90: a store only in a warp-specialised kernel's consumers (the persistent
    matmul's epilogue it was built for), a reduction anywhere but in a producer; either where TMA can write its map."""
    role = _warp_role(op)
    placed = role == "consumer" if isinstance(op, tt.DescriptorStoreOp) else role != "producer"
    return placed and store_spec(op, kernel) is not None


def _warp_role(op: Operation) -> str | None:
    """"consumer" or "producer" for an op in a `tt.warp_specialize`'s region of that name; None outside one."""
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, tt.WarpSpecializeOp):
        op, parent = parent, parent.parent_op()
    if parent is None:
        return None
    return "consumer" if op.parent_region() is parent.consumer else "producer"


def reserve_barriers(ctx: KernelContext, kernel: func.FuncOp) -> None:
    """Give every `tt.barrier_alloc` its shared memory (8 bytes per mbarrier)."""
    for op in kernel.walk():
        if isinstance(op, tt.BarrierAllocOp):
            ctx.local_buffers[op.result] = ctx.reserve_smem(8 * op.result.type.get_shape()[0], 8)


def _address(ctx: KernelContext, ptr: SSAValue) -> SSAValue:
    """The 32-bit shared-window address of a shared-memory pointer."""
    return ctx.value(llvm.PtrToIntOp(ptr, i32))


def _barrier(ctx: KernelContext, barriers: SSAValue, slot: SSAValue) -> SSAValue:
    base = ctx.smem_ptr(i64, ctx.scalar(slot), ctx.local_buffers[barriers])
    return _address(ctx, base)


@lowers(tt.BarrierAllocOp)
def lower_barrier_alloc(ctx: KernelContext, op: tt.BarrierAllocOp) -> None:
    """Reserved before lowering (`reserve_barriers`)."""


@lowers(tt.BarrierInitOp)
def lower_barrier_init(ctx: KernelContext, op: tt.BarrierInitOp) -> None:
    slots = op.barriers.type.get_shape()[0]
    leader = ctx.leader()
    for s in range(slots):
        bar = _address(ctx, ctx.smem_ptr(i64, s, ctx.local_buffers[op.barriers]))
        line = f"@$0 mbarrier.init.shared::cta.b64 [$1], {op.arrival_count};"
        _inline_asm(ctx, [line], [], [("b", leader), ("r", bar)], None)
    ctx.insert(nvvm.FenceMbarrierInitOp())
    ctx.barrier()


def _panels(ctx: KernelContext, op: tt.TmaCopyOp | tt.DescriptorWriteBase, tile: Swizzle, shared: SSAValue):
    """Per 128-byte panel of `tile` (at the shared-window address `shared`): its address and the coordinates of
    its box in `op`'s map, innermost first, as `cp.async.bulk.tensor` takes them."""
    *outer, row, col = (ctx.scalar(v) for v in op.offsets)
    for p in range(tile.cols // tile.panel_cols):
        at = ctx.int_op("add", shared, ctx.const(p * tile.panel_bytes))
        yield at, [ctx.int_op("add", col, ctx.const(p * tile.panel_cols)), row, *reversed(outer)]


def _map(ctx: KernelContext, op: tt.TmaCopyOp | tt.DescriptorWriteBase) -> SSAValue:
    """The address of the map `op` reads or writes through."""
    return ctx.value(llvm.PtrToIntOp(ctx.tensor_maps[op], i64))


@lowers(tt.TmaCopyOp)
def lower_tma_copy(ctx: KernelContext, op: tt.TmaCopyOp) -> None:
    tile: Swizzle = slot_swizzle(op.buffer)
    param = _map(ctx, op)
    pred = ctx.int_op("and", ctx.leader(), ctx.scalar(op.valid))
    bar = _barrier(ctx, op.barriers, op.slot)
    dst = _address(ctx, slot_base(ctx, op.buffer, op.slot, op.part_index))
    rank = len(op.offsets)
    coords = ", ".join(f"${4 + i}" for i in range(rank))
    for at, box in _panels(ctx, op, tile, dst):
        lines = [
            "{",
            ".reg .b64 map;",
            "cvta.global.u64 map, $2;",
            f"@$0 mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [$1], {tile.panel_bytes};",
            f"@$0 cp.async.bulk.tensor.{rank}d.shared::cluster.global.mbarrier::complete_tx::bytes [$3], [map, {{{coords}}}], [$1];",
            "}",
        ]
        inputs = [("b", pred), ("r", bar), ("l", param), ("r", at)] + [("r", v) for v in box]
        _inline_asm(ctx, lines, [], inputs, None)


@lowers(tt.TmaArriveOp)
def lower_tma_arrive(ctx: KernelContext, op: tt.TmaArriveOp) -> None:
    pred = ctx.int_op("and", ctx.leader(), ctx.scalar(op.valid))
    bar = _barrier(ctx, op.barriers, op.slot)
    _inline_asm(ctx, ["@$0 mbarrier.arrive.shared::cta.b64 _, [$1];"], [], [("b", pred), ("r", bar)], None)


@lowers(tt.TmaWaitOp, tt.BarrierWaitOp)
def lower_tma_wait(ctx: KernelContext, op: tt.TmaWaitOp | tt.BarrierWaitOp) -> None:
    """Every thread waits for the phase; `tt.tma_wait` then synchronises the program.

    The loop has no way out but the phase: a wait that gave up after N tries with `trap` (so that a wrong
    protocol fails the launch instead of hanging) made ptxas 12.9 and 13.0 schedule the epilogue's reads of the
    wgmma accumulators above the final `wgmma.wait_group 0` of a warp-specialised kernel (the last K step's
    product missing from part of the tile, measured on an H200), and cost registers. The protocol is checked
    without a GPU instead (tests/ws_protocol.py), and the GPU tests of split kernels run in a process of
    their own under a time limit."""
    bar = _barrier(ctx, op.barriers, op.slot)
    lines = ["{", ".reg .pred done;", "wait:", "mbarrier.try_wait.parity.shared::cta.b64 done, [$0], $1;",
             "@!done bra.uni wait;", "}"]
    _inline_asm(ctx, lines, [], [("r", bar), ("r", ctx.scalar(op.phase))], None)
    if isinstance(op, tt.TmaWaitOp):
        ctx.barrier()


@lowers(tt.BarrierArriveOp)
def lower_barrier_arrive(ctx: KernelContext, op: tt.BarrierArriveOp) -> None:
    """Lane 0 of each warp arrives (the warp's lanes are past the `wgmma.wait_group` that freed the slot)."""
    pred = ctx.int_op("and", ctx.icmp("eq", ctx.lane, ctx.const(0)), ctx.scalar(op.valid))
    bar = _barrier(ctx, op.barriers, op.slot)
    _inline_asm(ctx, ["@$0 mbarrier.arrive.shared::cta.b64 _, [$1];"], [], [("b", pred), ("r", bar)], None)


def staged_store_bytes(root: Operation) -> int:
    """Bytes of the shared-memory tile the TMA stores and reductions under `root` stage their blocks in (the
    largest; 0: none), which the pipeliner keeps out of its buffers' budget."""
    return max((_staged_tile(op).nbytes for op in root.walk() if isinstance(op, tt.DescriptorWriteBase)), default=0)


def reserve_store_tile(ctx: KernelContext, kernel: func.FuncOp) -> None:
    """Give the kernel's TMA stores one shared-memory tile for the whole kernel (`staged_store_bytes`), so that a
    store's copy out of it may run on while the program goes on: the next store waits for it, not this one."""
    nbytes = staged_store_bytes(kernel)
    if nbytes:
        ctx.store_tile = ctx.reserve_smem(nbytes, 1024)


def _staged_tile(op: tt.DescriptorWriteBase) -> Swizzle:
    rows, cols = tt.shape_of(op.value.type)
    return Swizzle(rows, cols, byte_size(llvm_type(op.value.type)))


@lowers(tt.DescriptorStoreOp, tt.DescriptorReduceOp)
def lower_descriptor_store(ctx: KernelContext, op: tt.DescriptorWriteBase) -> None:
    """The block goes to the kernel's store tile (`reserve_store_tile`) in the map's swizzled panels, then thread 0
    stores each panel with TMA (`cp.async.bulk.tensor ... .bulk_group`; a reduction adds it to memory:
    `cp.reduce.async.bulk.tensor ... .add.tile.bulk_group`, atomic per element) and commits them, without waiting.
    Before writing, thread 0 waits until TMA has read the previous store's panels (`wait_group.read 0`) and a
    barrier tells the other threads: a persistent matmul's tile goes out while the next tile's K loop runs,
    instead of holding the leader's warpgroup (and with it the tensor cores) until it has. Where the block has a
    barrier since its last store (`ctx.last_barrier`), the wait goes right before that one instead: no barrier of
    its own."""
    layout = ctx.layout_of(op.value)
    tile = _staged_tile(op)
    assert ctx.store_tile is not None, "reserve_store_tile gives every TMA store its tile before lowering"
    leader = ctx.leader()
    wait = llvm.InlineAsmOp("@$0 cp.async.bulk.wait_group.read 0;", "b", [leader], [], has_side_effects=True)
    if ctx.last_barrier is not None:
        Rewriter.insert_op(wait, InsertPoint.before(ctx.last_barrier))
    else:
        ctx.insert(wait)
        ctx.barrier()
    store_swizzled(ctx, ctx.get(op.value, layout), layout, llvm_type(op.value.type), tile, ctx.store_tile)
    fence_async_proxy(ctx)
    ctx.barrier()
    param = _map(ctx, op)
    rank = len(op.offsets)
    coords = ", ".join(f"${3 + i}" for i in range(rank))
    copy = (f"cp.reduce.async.bulk.tensor.{rank}d.global.shared::cta.{op.kind.data}.tile.bulk_group"
            if isinstance(op, tt.DescriptorReduceOp) else f"cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group")
    for at, box in _panels(ctx, op, tile, _address(ctx, ctx.smem_ptr(i8, 0, ctx.store_tile))):
        lines = ["{", ".reg .b64 map;", "cvta.global.u64 map, $1;", f"@$0 {copy} [map, {{{coords}}}], [$2];", "}"]
        inputs = [("b", leader), ("l", param), ("r", at)] + [("r", v) for v in box]
        _inline_asm(ctx, lines, [], inputs, None)
    _inline_asm(ctx, ["@$0 cp.async.bulk.commit_group;"], [], [("b", leader)], None)
    ctx.last_barrier = None


def finish_stores(ctx: KernelContext) -> None:
    """At the kernel's end thread 0 waits for its TMA stores to complete: the store tile must outlive their reads."""
    if ctx.store_tile is not None:
        assert ctx.leader_warp == 0, "the kernel's end is the program's warps' (the stores' leader), not a producer's"
        _inline_asm(ctx, ["@$0 cp.async.bulk.wait_group 0;"], [], [("b", ctx.leader())], None)
