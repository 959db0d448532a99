"""
`tt.gather`, `tt.histogram` and `tt.inline_asm`.

A gather stores its source tile row-major in shared memory (one round, as a layout conversion) and every
thread loads each of its result elements at the address its index names; the index is taken modulo the
axis size (a power of two), so an out-of-range index reads another element of the tile, never memory
outside it (Triton leaves the result undefined; the simulator raises). A histogram zeroes `bins` i32
counters in shared memory, each element owned by one thread (replicas skip) adds 1 to its bin with
`red.shared.add.u32` when it lies in `[0, bins)` and its mask is true, and the counters are read back in
the result's layout. Inline asm runs per `pack` consecutive registers of a thread, operands narrower than
32 bits packed into words as Triton packs them (element `k` of a word at bits `k * width`).
"""

from __future__ import annotations

from math import prod

from xdsl.dialects import llvm
from xdsl.dialects.builtin import AnyFloat, DenseArrayBase, IntegerType, i32, i64
from xdsl.ir import Attribute, SSAValue

from tinyton.dialects import tt
from tinyton.dialects.tt_indexing import packed_words
from tinyton.lowering.tt_to_llvm.casts import convert
from tinyton.lowering.tt_to_llvm.context import (
    KernelContext,
    llvm_type,
    lowers,
    lowers_tile,
)
from tinyton.lowering.tt_to_llvm.layouts import Layout
from tinyton.lowering.tt_to_llvm.shared import byte_size, load_tile, store_tile


@lowers_tile(tt.GatherOp)
def lower_gather(ctx: KernelContext, op: tt.GatherOp, layout: Layout | None) -> list[SSAValue]:
    assert layout is not None
    src = ctx.layout_of(op.src)
    elem = llvm_type(op.src.type)
    shape, axis = src.shape, op.axis.value.data
    nbytes = prod(shape) * byte_size(elem)
    start = ctx.smem_buffer(nbytes, f"a gather from a {list(shape)} tile")
    store_tile(ctx, ctx.get(op.src, src), src, elem, start)
    ctx.barrier()
    strides = src.strides()
    index_type = tt.element_type(op.index.type)
    out = []
    for r, index in enumerate(ctx.get(op.index, layout)):
        along = ctx.int_op("and", convert(ctx, index, index_type, i32), ctx.const(shape[axis] - 1))
        linear = ctx.int_op("mul", along, ctx.const(strides[axis]))
        for d, coord in enumerate(ctx.coords(layout, r)):
            if d != axis and shape[d] > 1:
                linear = ctx.int_op("add", linear, ctx.int_op("mul", coord, ctx.const(strides[d])))
        out.append(ctx.value(llvm.LoadOp(ctx.smem_ptr(elem, linear, start), elem)))
    ctx.smem_read(start, nbytes)
    return out


@lowers_tile(tt.HistogramOp)
def lower_histogram(ctx: KernelContext, op: tt.HistogramOp, layout: Layout | None) -> list[SSAValue]:
    assert layout is not None
    bins = layout.shape[0]
    start = ctx.smem_buffer(bins * 4, f"a histogram of {bins} bins")
    store_tile(ctx, [ctx.const(0)] * layout.num_regs, layout, i32, start)
    ctx.barrier()
    src = ctx.layout_of(op.src)
    elem = tt.element_type(op.src.type)
    masks = ctx.get(op.mask, src) if op.mask is not None else None
    owner = ctx.replica_predicate(src)
    for r, value in enumerate(ctx.get(op.src, src)):
        wide = convert(ctx, value, elem, i64)
        inside = ctx.icmp("ult", wide, ctx.const(bins, i64))
        counted = ctx.all_of([owner, inside, masks[r] if masks is not None else None])
        bin_index = ctx.select(inside, ctx.value(llvm.TruncOp(wide, i32)), ctx.const(0))
        address = ctx.value(llvm.PtrToIntOp(ctx.smem_ptr(i32, bin_index, start), i32))
        ctx.insert(
            llvm.InlineAsmOp("@$1 red.shared.add.u32 [$0], 1;", "r,b", [address, counted], [], has_side_effects=True)
        )
    ctx.barrier()
    out = load_tile(ctx, layout, layout.shape, i32, start)
    ctx.smem_read(start, bins * 4)
    return out


def _word(ctx: KernelContext, values: list[SSAValue], elem: Attribute) -> SSAValue:
    """`values` (each `elem`) packed into one integer, value `k` at bits `k * width`."""
    if len(values) == 1:
        return values[0]
    width = elem.bitwidth
    word_type = IntegerType(width * len(values))
    word = ctx.const(0, word_type)
    for k, v in enumerate(values):
        bits = ctx.value(llvm.BitcastOp(v, IntegerType(width))) if isinstance(elem, AnyFloat) else v
        part = ctx.value(llvm.ZExtOp(bits, word_type))
        word = ctx.int_op("or", word, ctx.int_op("shl", part, ctx.const(k * width, word_type)))
    return word


def _unpack(ctx: KernelContext, word: SSAValue, elem: Attribute, count: int) -> list[SSAValue]:
    """The inverse of `_word`."""
    if count == 1:
        return [word]
    width, out = elem.bitwidth, []
    for k in range(count):
        part = ctx.value(llvm.TruncOp(ctx.int_op("lshr", word, ctx.const(k * width, word.type)), IntegerType(width)))
        out.append(ctx.value(llvm.BitcastOp(part, elem)) if isinstance(elem, AnyFloat) else part)
    return out


@lowers(tt.InlineAsmOp)
def lower_inline_asm(ctx: KernelContext, op: tt.InlineAsmOp) -> None:
    shape = tt.shape_of(op.outputs[0].type)
    layout = ctx.layout_of(op.outputs[0]) if shape else None
    args = [ctx.get(a, layout) for a in op.args]
    count = layout.num_regs if layout is not None else 1
    pack = op.pack.value.data
    elems = [llvm_type(r.type) for r in op.outputs]
    shapes = [packed_words(e.bitwidth, pack) for e in elems]
    word_types = [e if per == 1 else IntegerType(per * e.bitwidth) for e, (per, _) in zip(elems, shapes)]
    flat_types = [t for t, (_, words) in zip(word_types, shapes) for _ in range(words)]
    results: list[list[SSAValue]] = [[] for _ in op.outputs]
    for first in range(0, count, pack):
        regs = [min(first + j, count - 1) for j in range(pack)]  # a short last group repeats its last register
        operands = []
        for values in args:
            elem = values[0].type
            per, words = packed_words(getattr(elem, "bitwidth", 64), pack)
            operands += [
                _word(ctx, [values[regs[min(w * per + k, pack - 1)]] for k in range(per)], elem) for w in range(words)
            ]
        many = len(flat_types) > 1
        result_type = llvm.LLVMStructType.from_type_list(flat_types) if many else flat_types[0]
        asm = llvm.InlineAsmOp(
            op.asm.data, op.constraints.data, operands, [result_type], has_side_effects=not op.pure.value.data
        )
        value = ctx.value(asm)
        position = 0
        for k, (elem, word_type, (per, words)) in enumerate(zip(elems, word_types, shapes)):
            unpacked: list[SSAValue] = []
            for _ in range(words):
                where = DenseArrayBase.from_list(i64, [position])
                word = ctx.value(llvm.ExtractValueOp(where, value, word_type)) if many else value
                unpacked += _unpack(ctx, word, elem, per)
                position += 1
            results[k] += unpacked[: min(pack, count - first)]
    for result, regs in zip(op.outputs, results):
        ctx.set(result, layout, regs)
