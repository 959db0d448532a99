"""
`tt.cast` between any two element types: ints of any width and signedness, f16/f32/f64, float8.

Ints wrap (trunc) or extend by the source's signedness; int-float conversions are signed or unsigned by
the int's type; floats to ints truncate (`cvt.rzi`, saturating); booleans are 0/1 (true is 1, as in
NumPy) and anything becomes a boolean as `!= 0`. float8 (e4m3fn, e5m2) travels as i8 bits and converts
through f32 (to) or f16 (from) with the sm_89+ PTX instructions `cvt.rn.satfinite.{e4m3,e5m2}x2.f32`
and `cvt.rn.f16x2.{e4m3,e5m2}x2`, as Triton does: round to nearest even, saturating to the largest
finite value. bf16 converts through f32.

A tile of f32 becomes f16 or bf16 two registers at a time (`cvt.rn.{f16,bf16}x2.f32`): ptxas serialises every
wgmma of a loop (a wait after each, C7514) when the accumulators it produces are rounded one by one
(`cvt.rn.bf16.f32`), as a matmul's epilogue in bf16 (`x @ w.T + b`) does; two at a time it keeps them in flight.
"""

from __future__ import annotations

from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    Float8E4M3FNType,
    Float8E5M2Type,
    Float16Type,
    IntegerType,
    Signedness,
    bf16,
    f32,
    i16,
    i32,
)
from xdsl.ir import Attribute, OpResult, SSAValue

from tinyton.dialects import llvm_extra, tt
from tinyton.lowering.tt_to_llvm.context import KernelContext, llvm_type, lowers_tile
from tinyton.lowering.tt_to_llvm.elementwise import map_registers
from tinyton.lowering.tt_to_llvm.layouts import Layout
from tinyton.lowering.tt_to_llvm.memory import _inline_asm

FLOAT8 = {Float8E4M3FNType(): "e4m3", Float8E5M2Type(): "e5m2"}


def _kind(t: Attribute) -> str:
    """'b' (i1), 'i' (signed or signless int), 'u' (unsigned int), 'f' (float)."""
    if isinstance(t, IntegerType):
        return "b" if t.bitwidth == 1 else "u" if t.signedness.data == Signedness.UNSIGNED else "i"
    return "f"


def _to_float8(ctx: KernelContext, x: SSAValue, name: str) -> SSAValue:
    pair = _inline_asm(ctx, [f"cvt.rn.satfinite.{name}x2.f32 $0, $1, $1;"], ["=h"], [("f", x)], i16)
    assert pair is not None
    return ctx.value(llvm.TruncOp(pair, IntegerType(8)))


def _from_float8(ctx: KernelContext, bits: SSAValue, name: str) -> SSAValue:
    """float8 bits as an f32: `cvt.rn.f16x2` on sm_90+, bit arithmetic before (the instruction is sm_89+ and
    tinyton targets PTX 8.0)."""
    if ctx.sm < 90:
        return _from_float8_bits(ctx, bits, name)
    pair = _inline_asm(ctx, [f"cvt.rn.f16x2.{name}x2 $0, $1;"], ["=r"], [("h", ctx.value(llvm.ZExtOp(bits, i16)))], i32)
    assert pair is not None
    half = ctx.value(llvm.BitcastOp(ctx.value(llvm.TruncOp(pair, i16)), Float16Type()))
    return ctx.value(llvm.FPExtOp(half, f32))


def _from_float8_bits(ctx: KernelContext, bits: SSAValue, name: str) -> SSAValue:
    """float8 bits as an f32, exactly, with integer ops: e5m2 is the top byte of an f16; e4m3fn's exponent and
    mantissa shifted into an f16's give the value times 2**-8 (subnormals included: the f16 is subnormal
    where the float8 is), scaled back by 256; its one NaN (S.1111.111) is restored and the sign set."""
    wide = ctx.value(llvm.ZExtOp(bits, i16))
    if name == "e5m2":
        half = ctx.value(llvm.BitcastOp(ctx.int_op("shl", wide, ctx.const(8, i16)), Float16Type()))
        return ctx.value(llvm.FPExtOp(half, f32))
    magnitude = ctx.int_op("and", wide, ctx.const(0x7F, i16))
    half = ctx.value(llvm.BitcastOp(ctx.int_op("shl", magnitude, ctx.const(7, i16)), Float16Type()))
    value = ctx.value(llvm.FMulOp(ctx.value(llvm.FPExtOp(half, f32)), ctx.const(256.0, f32)))
    value = ctx.select(ctx.icmp("eq", magnitude, ctx.const(0x7F, i16)), ctx.const(float("nan"), f32), value)
    negative = ctx.icmp("ne", ctx.int_op("and", wide, ctx.const(0x80, i16)), ctx.const(0, i16))
    return ctx.select(negative, ctx.value(llvm.FNegOp(value)), value)


def _unpacked_bf16(ctx: KernelContext, x: SSAValue) -> tuple[SSAValue, bool] | None:
    """The 32-bit word a bf16 register was cut from (`memory.unpack`: a vector load's halves), and whether it is
    the high half; None for any other bf16."""
    if not (isinstance(x, OpResult) and isinstance(x.op, llvm.BitcastOp)):
        return None
    bits = x.op.operands[0]
    if not (isinstance(bits, OpResult) and isinstance(bits.op, llvm.TruncOp) and bits.op.operands[0].type == i32):
        return None
    word = bits.op.operands[0]
    if isinstance(word, OpResult) and isinstance(word.op, llvm.LShrOp) and ctx.known(word.op.operands[1]) == 16:
        return word.op.operands[0], True
    return word, False


def convert(ctx: KernelContext, x: SSAValue, src: Attribute, dst: Attribute) -> SSAValue:
    """`x`, a register of tt element type `src`, as one of tt element type `dst`. A bf16 half of a loaded word
    widens to f32 by one integer op on the word (its bits are f32's top 16): the half's extraction and
    `cvt.f32.bf16` took two or three instructions."""
    if src == dst:
        return x
    if src == bf16 and dst == f32 and (unpacked := _unpacked_bf16(ctx, x)) is not None:
        word, high = unpacked
        top = ctx.int_op("and", word, ctx.const(-(1 << 16), i32)) if high else ctx.int_op(
            "shl", word, ctx.const(16, i32))
        return ctx.value(llvm.BitcastOp(top, f32))
    if src in FLOAT8:
        return convert(ctx, _from_float8(ctx, x, FLOAT8[src]), f32, dst)
    if dst in FLOAT8:
        return _to_float8(ctx, convert(ctx, x, src, f32), FLOAT8[dst])
    if bf16 in (src, dst) and f32 not in (src, dst):  # bf16 converts through f32 only
        return convert(ctx, convert(ctx, x, src, f32), f32, dst)
    to = llvm_type(dst)
    sk, dk = _kind(src), _kind(dst)
    if dk == "b":
        if sk == "f":
            return ctx.value(llvm.FCmpOp(x, ctx.const(0.0, x.type), "une"))
        return ctx.icmp("ne", x, ctx.const(0, x.type))
    if sk == "f" and dk == "f":
        if src.bitwidth == dst.bitwidth:
            return x
        return ctx.value((llvm.FPExtOp if dst.bitwidth > src.bitwidth else llvm.FPTruncOp)(x, to))
    if sk == "f":
        convert_op = llvm_extra.FPToUIOp if dk == "u" else llvm_extra.FPToSIOp
        if to.bitwidth >= 32:  # PTX cvt.rzi saturates to 32 and 64 bits (NaN gives 0), as the simulator does
            return ctx.value(convert_op(x, to))
        return _narrow_saturated(ctx, ctx.value(convert_op(x, i32)), dk == "u", to)
    if dk == "f":
        return ctx.value((llvm_extra.UIToFPOp if sk in "bu" else llvm.SIToFPOp)(x, to))
    if src.bitwidth == dst.bitwidth:
        return x
    if src.bitwidth > dst.bitwidth:
        return ctx.value(llvm.TruncOp(x, to))
    return ctx.value((llvm.ZExtOp if sk in "bu" else llvm.SExtOp)(x, to))


def _narrow_saturated(ctx: KernelContext, wide: SSAValue, unsigned: bool, to: IntegerType) -> SSAValue:
    """An i32 (already saturated by cvt.rzi) clamped to a narrower int's range, then truncated: float to
    int8/int16 saturates like the wider conversions (LLVM would truncate, giving 32767 for 1e9 -> int8)."""
    bits = to.bitwidth
    low, high = (0, (1 << bits) - 1) if unsigned else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if not unsigned:
        wide = ctx.select(ctx.icmp("slt", wide, ctx.const(low)), ctx.const(low), wide)
    wide = ctx.select(ctx.icmp("ugt" if unsigned else "sgt", wide, ctx.const(high)), ctx.const(high), wide)
    return ctx.value(llvm.TruncOp(wide, to))


def cast(ctx: KernelContext, x: SSAValue, to: Attribute) -> SSAValue:
    """`x` converted to the LLVM type `to` (signless ints count as signed, as in the tt dialect)."""
    return convert(ctx, x, x.type, to)


PAIRED = {bf16: "bf16x2", Float16Type(): "f16x2"}
"""Types an f32 tile is rounded to two registers at a time, and the name of the pair in `cvt`."""


def _round_pairs(ctx: KernelContext, regs: list[SSAValue], dst: Attribute) -> list[SSAValue]:
    """f32 registers rounded to `dst` (bf16 or f16) with one `cvt.rn.*x2.f32` per pair (sm_80 and later)."""
    to = llvm_type(dst)

    def round_pair(ctx: KernelContext, low: SSAValue, high: SSAValue) -> tuple[SSAValue, SSAValue]:
        asm = llvm.InlineAsmOp(f"cvt.rn.{PAIRED[dst]}.f32 $0, $2, $1;", "=r,f,f", [low, high], [i32])
        pair = ctx.value(asm)  # `high` rounded in the upper half, `low` in the lower
        low_half, high_half = pair, ctx.int_op("lshr", pair, ctx.const(16))
        return tuple(ctx.value(llvm.BitcastOp(ctx.value(llvm.TruncOp(h, i16)), to)) for h in (low_half, high_half))

    return [half for pair in map_registers(ctx, round_pair, regs[0::2], regs[1::2]) for half in pair]


@lowers_tile(tt.CastOp)
def lower_cast(ctx: KernelContext, op: tt.CastOp, layout: Layout | None) -> list[SSAValue]:
    src, dst = tt.element_type(op.input.type), tt.element_type(op.result.type)
    regs = ctx.get(op.input, layout)
    if src == f32 and dst in PAIRED and len(regs) % 2 == 0 and ctx.sm >= 80:
        return _round_pairs(ctx, regs, dst)
    return map_registers(ctx, lambda c, x: convert(c, x, src, dst), regs)
