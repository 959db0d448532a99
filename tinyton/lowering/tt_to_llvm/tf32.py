"""
f32 operands of tensor-core dots as the tf32 words `mma.m16n8k8.tf32` takes.

`input_precision="tf32"` rounds each operand with `cvt.rna.tf32.f32` (10-bit mantissa). `"tf32x3"` (CUTLASS's
"3xTF32", Triton's `tf32x3`) recovers float32 accuracy on the tensor cores: each operand x is split into
hi = tf32(x) and lo = tf32(x - hi) (x - hi is exact in f32), and `a @ b` is computed as
lo_a hi_b + hi_a lo_b + hi_a hi_b with f32 accumulation: every product of parts is exact, the dropped
lo_a lo_b is below 2^-22 |a b| and the parts represent x to 2^-23, so a product is within 2^-21 of a b
(float32 FMAs: the sum's roundings only, which dominate from K ~ 8 on). Values below ~2^-115, whose lo
part underflows TF32's subnormal spacing 2^-136, keep that absolute accuracy instead of a relative one.

The split is integer arithmetic that the simulator repeats bit for bit (`simulator.tiles.split_tf32x3`):
hi rounds to nearest, ties away, as `cvt.rna` does, but falls back to truncation where rounding would
overflow to infinity (within 2^-12 of float32's largest value; `cvt.rna.tf32.f32` itself overflows
there); NaNs become the canonical NaN, whose low 13 bits are zero, so that whatever the tensor core does
with them a NaN stays a NaN. For infinities and NaN the cross terms take 0 for both hi and lo, so that
`inf * 0` in a cross product cannot turn an infinite result into a NaN: the infinities reach the result
through hi_a hi_b alone, exactly as through a b.

Handling those values costs ~14 integer instructions per word, on the ALU pipe that runs at half the FMA
pipe's rate: more than the mmas it feeds. So each warp splits a K step's words the short way first (hi =
(x + half ulp) & mask, lo the same of x - hi, cross = hi: 5 instructions, equal to the full split for every
finite x but the largest ones) and checks that every x - hi was finite (a sum of them, one FADD a word:
infinities, NaN and rounding overflow make it inf or NaN, and finite ones, below 2^-11 x, cannot overflow);
only a warp that saw such a value (`vote.any`) takes the branch that splits the step again in full.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.dialects import llvm
from xdsl.dialects.builtin import IntegerType, f32, i32
from xdsl.ir import Block, SSAValue

from tinyton.lowering.tt_to_llvm.context import KernelContext

MASK = 0xFFFFE000
"""The bits a TF32 value keeps of a float32: sign, exponent and the top 10 mantissa bits."""
HALF_ULP = 0x1000
MAGNITUDE = 0x7FFFFFFF
INFINITY = 0x7F800000
CANONICAL_NAN = 0x7FC00000


@dataclass(frozen=True)
class Tf32Parts:
    """The three i32 words of one f32 operand word under `"tf32x3"`: `hi` for hi_a hi_b, `lo` and `cross`
    (hi, or 0 for infinities and NaN) for the cross products."""

    hi: SSAValue
    lo: SSAValue
    cross: SSAValue


def _bits(ctx: KernelContext, value: SSAValue) -> SSAValue:
    return value if value.type == i32 else ctx.value(llvm.BitcastOp(value, i32))


def round_tf32(ctx: KernelContext, value: SSAValue) -> SSAValue:
    """An f32 (or its i32 bits) rounded to tf32 with `cvt.rna.tf32.f32`, as the i32 the mma takes."""
    if value.type != f32:
        value = ctx.value(llvm.BitcastOp(value, f32))
    return ctx.value(llvm.CallIntrinsicOp("llvm.nvvm.f2tf32.rna", [value], [i32]))


def split_tf32x3(ctx: KernelContext, value: SSAValue) -> Tf32Parts:
    """hi, lo and the cross-term hi of an f32 (or its i32 bits), as i32 words (module docstring)."""
    bits = _bits(ctx, value)
    magnitude = ctx.int_op("and", bits, ctx.const(MAGNITUDE))
    finite = ctx.icmp("ult", magnitude, ctx.const(INFINITY))
    nearest = ctx.int_op("and", ctx.int_op("add", bits, ctx.const(HALF_ULP)), ctx.const(MASK))
    overflows = ctx.icmp("uge", ctx.int_op("and", nearest, ctx.const(MAGNITUDE)), ctx.const(INFINITY))
    hi = ctx.select(overflows, ctx.int_op("and", bits, ctx.const(MASK)), nearest)
    x, hi_value = (ctx.value(llvm.BitcastOp(w, f32)) for w in (bits, hi))
    rest = _bits(ctx, ctx.value(llvm.FSubOp(x, hi_value)))
    lo = ctx.int_op("and", ctx.int_op("add", rest, ctx.const(HALF_ULP)), ctx.const(MASK))
    zero = ctx.const(0)
    return Tf32Parts(
        hi=ctx.select(ctx.icmp("ugt", magnitude, ctx.const(INFINITY)), ctx.const(CANONICAL_NAN), hi),
        lo=ctx.select(finite, lo, zero),
        cross=ctx.select(finite, hi, zero),
    )


def _nearest(ctx: KernelContext, bits: SSAValue) -> SSAValue:
    """tf32 to nearest, ties away, of a finite f32's bits (overflowing to infinity near the largest)."""
    return ctx.int_op("and", ctx.int_op("add", bits, ctx.const(HALF_ULP)), ctx.const(MASK))


def _short_split(ctx: KernelContext, value: SSAValue) -> tuple[Tf32Parts, SSAValue]:
    """The parts of a finite f32 below 2^128 (1 - 2^-12), and x - hi: inf or NaN for any other x."""
    bits = _bits(ctx, value)
    hi = _nearest(ctx, bits)
    x, hi_value = (ctx.value(llvm.BitcastOp(w, f32)) for w in (bits, hi))
    rest = ctx.value(llvm.FSubOp(x, hi_value))
    return Tf32Parts(hi, _nearest(ctx, _bits(ctx, rest)), hi), rest


Issue = Callable[[Callable[[SSAValue], Tf32Parts]], list[SSAValue]]
"""Emits a K step's mmas taking each word's parts from the given function; returns the accumulators."""


def tf32x3_step(ctx: KernelContext, words: list[SSAValue], issue: Issue) -> list[SSAValue]:
    """A K step of a "tf32x3" dot over the fragment `words` (f32 bits) this warp loaded: the short split,
    and the full one in a branch for a warp that holds an infinity, a NaN or a value within 2^-12 of the
    largest float32 (module docstring); `issue` emits the mmas."""
    short, rests = {}, []
    for w in dict.fromkeys(words):
        short[w], rest = _short_split(ctx, w)
        rests.append(rest)
    while len(rests) > 1:  # a tree of sums: inf or NaN iff some x - hi is
        rests = [ctx.value(llvm.FAddOp(*rests[i : i + 2])) if i + 1 < len(rests) else rests[i] for i in range(0, len(rests), 2)]
    finite = ctx.value(llvm.FCmpOp(ctx.value(llvm.FAbsOp(rests[0], f32)), ctx.const(float("inf"), f32), "olt"))
    special = ctx.value(llvm.XOrOp(finite, ctx.const(1, IntegerType(1))))
    any_special = ctx.value(llvm.CallIntrinsicOp("llvm.nvvm.vote.any.sync", [ctx.const(-1), special], [IntegerType(1)]))
    full_block, short_block = ctx.new_block(), ctx.new_block()
    ctx.insert(llvm.CondBrOp(any_special, full_block, [], short_block, []))
    full: dict[SSAValue, Tf32Parts] = {}

    def full_split(w: SSAValue) -> Tf32Parts:
        if w not in full:
            full[w] = split_tf32x3(ctx, w)
        return full[w]

    results = []
    for block, parts in ((full_block, full_split), (short_block, short.__getitem__)):
        ctx.move_to(block)
        results.append(issue(parts))
    merge = Block(arg_types=[v.type for v in results[0]])
    for block, values in zip((full_block, short_block), results):
        ctx.move_to(block)
        ctx.insert(llvm.BrOp(merge, *values))
    ctx.func.body.add_block(merge)
    ctx.move_to(merge)
    return list(merge.args)
