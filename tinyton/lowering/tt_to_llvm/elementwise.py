"""
Ops that compute each register from the same register of their operands, plus the
sources of tiles (constants, `arange`, `splat`) and the grid queries.

Each op is a row of a table mapping it to an integer and a float implementation on one
register. Float transcendentals of f16 run in f32 (the approximate PTX instructions are
f32-only), and so do NumPy's f16 `%` and `//` (as NumPy's half loops); other f16 arithmetic is left
to LLVM, which promotes what sm_90 lacks. Float remainders are exact (`fmod`, never LLVM's `frem`). bf16
computes everything in f32 and rounds back (`cvt.rn.bf16.f32`), as Triton does: PTX has
few bf16 instructions before sm_90, and for + - * / sqrt one f32 step then one rounding
is the correctly rounded bf16 result, so sm_80 and sm_90 agree with the simulator. A bf16 reciprocal
(`1 / x`, sigmoid's last step) takes `rcp.approx.f32` instead of the correctly rounded `rcp.rn.f32`, a tenth of
its instructions and no slow-path branch: the two round to the same bf16 (`_bf16_reciprocal`).
Conversions to and from bf16 go through f32 (one rounding, the same on every target).
"""

from __future__ import annotations

from collections.abc import Callable
from math import log, log2
from typing import TypeVar

from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    BFloat16Type,
    FloatAttr,
    Float16Type,
    Float64Type,
    IntegerType,
    Signedness,
    f32,
)
from xdsl.ir import Attribute, Operation, SSAValue

from tinyton.dialects import nvvm, tt
from tinyton.lowering.tt_to_llvm.context import (
    KernelContext,
    LoweringError,
    llvm_type,
    lowers_tile,
)
from tinyton.lowering.tt_to_llvm.fmod import fmod
from tinyton.lowering.tt_to_llvm.layouts import Layout

T = TypeVar("T")
Unary = Callable[[KernelContext, SSAValue], SSAValue]
Binary = Callable[[KernelContext, SSAValue, SSAValue], SSAValue]


def _count(layout: Layout | None) -> int:
    return layout.num_regs if layout is not None else 1


def _int(kind: str) -> Binary:
    return lambda ctx, a, b: ctx.int_op(kind, a, b)


def _llvm(op_type: type[Operation]) -> Binary:
    return lambda ctx, a, b: ctx.value(op_type(a, b))


def _intrinsic(name: str) -> Callable[..., SSAValue]:
    """A call of `name.<type>` (e.g. `llvm.maximum.f32`), or of `name` if it has a suffix."""

    def call(ctx: KernelContext, *args: SSAValue) -> SSAValue:
        t = args[0].type
        suffix = "" if name.startswith("llvm.nvvm.") else f".f{t.bitwidth}"
        return ctx.value(llvm.CallIntrinsicOp(name + suffix, list(args), [t]))

    return call


def _fcmp(ctx: KernelContext, predicate: str, a: SSAValue, b: SSAValue) -> SSAValue:
    return ctx.value(llvm.FCmpOp(a, b, predicate))


def _nonzero_divisor(on_zero: Callable[[KernelContext, SSAValue], SSAValue], compute: Binary) -> Binary:
    """`compute(a, b)`, or `on_zero(a)` where b is 0: LLVM's sdiv/srem by zero is undefined behaviour, so
    a divisor not known to be non-zero is replaced by 1 and the result chosen after (one compare, two selects)."""

    def guarded(ctx: KernelContext, a: SSAValue, b: SSAValue) -> SSAValue:
        k = ctx.known(b)
        if k is not None and k != 0:
            return compute(ctx, a, b)
        zero = ctx.icmp("eq", b, ctx.const(0, b.type))
        result = compute(ctx, a, ctx.select(zero, ctx.const(1, b.type), b))
        return ctx.select(zero, on_zero(ctx, a), result)

    return guarded


def _floordiv(ctx: KernelContext, a: SSAValue, b: SSAValue) -> SSAValue:
    """NumPy's `//`: truncate, then step down when the remainder's sign differs from b's."""
    k = ctx.known(b)
    if k is not None and k > 0 and not k & (k - 1):
        return ctx.int_op("ashr", a, ctx.const(k.bit_length() - 1, a.type))
    q = ctx.value(llvm.SDivOp(a, b))
    r = ctx.value(llvm.SRemOp(a, b))
    return ctx.select(_needs_floor_fix(ctx, r, b), ctx.int_op("sub", q, ctx.const(1, q.type)), q)


def _int_mod(ctx: KernelContext, a: SSAValue, b: SSAValue) -> SSAValue:
    """NumPy's `%`: the remainder takes the divisor's sign."""
    k = ctx.known(b)
    if k is not None and k > 0 and not k & (k - 1):
        return ctx.int_op("and", a, ctx.const(k - 1, a.type))
    r = ctx.value(llvm.SRemOp(a, b))
    return ctx.select(_needs_floor_fix(ctx, r, b), ctx.int_op("add", r, b), r)


def _zero(ctx: KernelContext, a: SSAValue) -> SSAValue:
    """NumPy's integer `//` and `%` by zero."""
    return ctx.const(0, a.type)


def _needs_floor_fix(ctx: KernelContext, r: SSAValue, b: SSAValue) -> SSAValue:
    nonzero = ctx.icmp("ne", r, ctx.const(0, r.type))
    signs_differ = ctx.icmp("slt", ctx.int_op("xor", r, b), ctx.const(0, r.type))
    return ctx.value(llvm.AndOp(nonzero, signs_differ))


def _float_mod(ctx: KernelContext, a: SSAValue, b: SSAValue) -> SSAValue:
    """NumPy's float `%` (npy_divmod): the exact fmod, plus b (rounded, as NumPy's `mod += b`) where its
    sign differs from b's; a zero remainder takes b's sign (-4.0 % 2.0 is 0.0, fmod's is -0.0)."""
    zero = ctx.const(0.0, a.type)
    r = fmod(ctx, a, b)
    signs_differ = ctx.value(llvm.XOrOp(_fcmp(ctx, "olt", r, zero), _fcmp(ctx, "olt", b, zero)))
    fix = ctx.value(llvm.AndOp(_fcmp(ctx, "une", r, zero), signs_differ))
    r = ctx.select(fix, ctx.value(llvm.FAddOp(r, b)), r)
    signed_zero = _intrinsic("llvm.copysign")(ctx, zero, b)
    return ctx.select(_fcmp(ctx, "oeq", r, zero), signed_zero, r)


def _int_pick(predicate: str) -> Binary:
    """maximum/minimum by a compare and a select; i1 compares unsigned (True, 1, is the larger, as NumPy's
    and the simulator's maximum of bools; signed i1 would read True as -1)."""

    def pick(ctx: KernelContext, a: SSAValue, b: SSAValue) -> SSAValue:
        bool_aware = "u" + predicate[1:] if isinstance(a.type, IntegerType) and a.type.bitwidth == 1 else predicate
        return ctx.select(ctx.icmp(bool_aware, a, b), a, b)

    return pick


BINARY: dict[type[Operation], tuple[Binary | None, Binary | None]] = {
    tt.AddOp: (_int("add"), _llvm(llvm.FAddOp)),
    tt.SubOp: (_int("sub"), _llvm(llvm.FSubOp)),
    tt.MulOp: (_int("mul"), _llvm(llvm.FMulOp)),
    tt.DivOp: (_nonzero_divisor(lambda ctx, a: ctx.const(-1, a.type), _llvm(llvm.SDivOp)), _llvm(llvm.FDivOp)),
    tt.RemOp: (_nonzero_divisor(lambda ctx, a: a, _llvm(llvm.SRemOp)), fmod),
    tt.FloorDivOp: (_nonzero_divisor(_zero, _floordiv), None),
    tt.ModOp: (_nonzero_divisor(_zero, _int_mod), _float_mod),
    tt.MaximumOp: (_int_pick("sgt"), _intrinsic("llvm.maximum")),
    tt.MinimumOp: (_int_pick("slt"), _intrinsic("llvm.minimum")),
    tt.AndOp: (_int("and"), None),
    tt.OrOp: (_int("or"), None),
    tt.XorOp: (_int("xor"), None),
    tt.ShlOp: (_int("shl"), None),
    tt.ShrOp: (_int("ashr"), None),
}
"""(integer, float) implementation of each binary op; the verifier rules out the Nones."""

UNSIGNED: dict[type[Operation], Binary] = {
    tt.DivOp: _nonzero_divisor(lambda ctx, a: ctx.const(-1, a.type), _llvm(llvm.UDivOp)),
    tt.RemOp: _nonzero_divisor(lambda ctx, a: a, _llvm(llvm.URemOp)),
    tt.FloorDivOp: _nonzero_divisor(_zero, _llvm(llvm.UDivOp)),
    tt.ModOp: _nonzero_divisor(_zero, _llvm(llvm.URemOp)),
    tt.MaximumOp: _int_pick("ugt"),
    tt.MinimumOp: _int_pick("ult"),
    tt.ShrOp: _int("lshr"),
}
"""The integer implementations that differ for unsigned operands."""


def is_unsigned(t: Attribute) -> bool:
    """Whether a tt type has unsigned integer elements."""
    e = tt.element_type(t)
    return isinstance(e, IntegerType) and e.signedness.data == Signedness.UNSIGNED


def binary_fn(op_type: type[Operation], t: Attribute) -> Binary:
    """The implementation of a binary op on registers of tt type `t`."""
    int_fn, float_fn = BINARY[op_type]
    fn = float_fn if tt.is_float(t) else UNSIGNED.get(op_type, int_fn) if is_unsigned(t) else int_fn
    assert fn is not None
    return fn


def _scaled(fn: Unary, factor: float, before: bool) -> Unary:
    """`fn(x * factor)` or `fn(x) * factor`: exp and log through their base-2 instructions."""

    def apply(ctx: KernelContext, x: SSAValue) -> SSAValue:
        c = ctx.const(factor, x.type)
        if before:
            return fn(ctx, ctx.value(llvm.FMulOp(x, c)))
        return ctx.value(llvm.FMulOp(fn(ctx, x), c))

    return apply


def _nan_kept(fn: Unary) -> Unary:
    """`fn(x)` with NaN passed through by a select: ptxas takes the results of `ex2.approx` and `abs.f32` to be
    ordered and non-negative, and folded `exp(x) > -1` (H100, fuzz seed 20261123 case 9171) and `abs(exp(x)) >=
    -1` (H200, seed 20261202 case 4651, fused only) to true where x was NaN; the select hides what it knows."""

    def apply(ctx: KernelContext, x: SSAValue) -> SSAValue:
        return ctx.select(ctx.value(llvm.FCmpOp(x, x, "uno")), x, fn(ctx, x))

    return apply


def exp2(ctx: KernelContext, x: SSAValue) -> SSAValue:
    """2**x by `ex2.approx` (ptxas may take the result to be ordered: `exp2_nan_kept` where that matters)."""
    return ctx.value(llvm.FExp2Op(x))


exp2_nan_kept = _nan_kept(exp2)
"""2**x by `ex2.approx`, NaN kept."""


def _int_abs(ctx: KernelContext, x: SSAValue) -> SSAValue:
    """|x|; a bool is its own absolute value (NumPy's and Triton's abs of bool)."""
    if x.type.bitwidth == 1:
        return x
    zero = ctx.const(0, x.type)
    return ctx.select(ctx.icmp("slt", x, zero), ctx.int_op("sub", zero, x), x)


UNARY: dict[type[Operation], tuple[Unary | None, Unary]] = {
    tt.NegOp: (lambda ctx, x: ctx.int_op("sub", ctx.const(0, x.type), x), lambda ctx, x: ctx.value(llvm.FNegOp(x))),
    tt.AbsOp: (_int_abs, _nan_kept(lambda ctx, x: ctx.value(llvm.FAbsOp(x, x.type)))),
    # llvm.exp has no NVPTX lowering (llc aborts); exp2 becomes ex2.approx.f32.
    tt.ExpOp: (None, _scaled(exp2_nan_kept, log2(2.718281828459045), before=True)),
    tt.LogOp: (None, _scaled(_intrinsic("llvm.nvvm.lg2.approx.f"), log(2.0), before=False)),
    tt.SqrtOp: (None, lambda ctx, x: ctx.value(llvm.FSqrtOp(x))),
    tt.RsqrtOp: (None, _intrinsic("llvm.nvvm.rsqrt.approx.f")),
}

UNSIGNED_UNARY: dict[type[Operation], Unary] = {tt.AbsOp: lambda ctx, x: x}
"""The integer implementations that differ for unsigned operands: an unsigned value is its own absolute value
(a signed test made uint8 195 into 61 on an H200, found by the fuzzer)."""

F64_NATIVE = {tt.NegOp, tt.AbsOp, tt.SqrtOp}
"""Unary ops with an f64 PTX instruction (the others are rows added by `math`, which names its own)."""
F64_CALLS: dict[type[Operation], Callable[..., SSAValue]] = {}
"""The f64 implementation of the other float ops: a libdevice call (filled by `libdevice`)."""

_ICMP = {"eq": "eq", "ne": "ne", "lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge"}
_BOOL_ICMP = {**_ICMP, "lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge"}
_FCMP = {"eq": "oeq", "ne": "une", "lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge"}
"""Like NumPy: ordered comparisons are false on NaN, `!=` is true."""


def map_registers(ctx: KernelContext, fn: Callable[..., T], *operands: list[SSAValue]) -> list[T]:
    """Apply `fn` register by register, once per distinct tuple of operands (splats repeat)."""
    done: dict[tuple[SSAValue, ...], T] = {}
    out = []
    for args in zip(*operands):
        if args not in done:
            done[args] = fn(ctx, *args)
        out.append(done[args])
    return out


def _in_f32(fn: Callable[..., SSAValue], round_back: bool = True) -> Callable[..., SSAValue]:
    """`fn` on operands widened to f32 (exact), its result rounded back to their type."""

    def apply(ctx: KernelContext, *args: SSAValue) -> SSAValue:
        result = fn(ctx, *(ctx.value(llvm.FPExtOp(x, f32)) for x in args))
        return ctx.value(llvm.FPTruncOp(result, args[0].type)) if round_back else result

    return apply


def _is_bf16(t: Attribute) -> bool:
    return isinstance(tt.element_type(t), BFloat16Type)


HALF_IN_F32 = (tt.ModOp, tt.FloorDivOp)
"""NumPy computes float16 `%` and `//` in float32 and rounds once (npy_half_divmod): so does the GPU."""


def _bf16_reciprocal(divide: Binary) -> Binary:
    """bf16 `a / b` (`divide`), by `rcp.approx.f32` (subnormals kept) where `a` is the constant 1.

    Rounded to bf16 it equals the correctly rounded reciprocal's: 1/d of a bf16 d (8 significant bits) is never
    within 2**-17 of its size from a bf16 rounding boundary (a 9-bit odd multiple of a power of two: D * C, with D
    < 256 and C odd and above 256, is never a power of two), and `rcp.approx.f32` errs by at most one f32 ulp
    (2**-23 of its size); tests/test_bf16_reciprocal.py checks every bf16 on the GPU."""

    def apply(ctx: KernelContext, a: SSAValue, b: SSAValue) -> SSAValue:
        if not (isinstance(a.owner, llvm.ConstantOp) and a.owner.value == FloatAttr(1.0, a.type)):
            return divide(ctx, a, b)
        wide = ctx.value(llvm.FPExtOp(b, f32))
        inverse = ctx.value(llvm.InlineAsmOp("rcp.approx.f32 $0, $1;", "=f,f", [wide], [f32]))
        return ctx.value(llvm.FPTruncOp(inverse, b.type))

    return apply


@lowers_tile(*BINARY)
def lower_binary(ctx: KernelContext, op: tt.BinaryOp, layout: Layout | None) -> list[SSAValue]:
    fn = binary_fn(type(op), op.result.type)
    half = isinstance(op, HALF_IN_F32) and isinstance(tt.element_type(op.result.type), Float16Type)
    if _is_bf16(op.result.type) or half:
        fn = _in_f32(fn)
    if _is_bf16(op.result.type) and isinstance(op, tt.DivOp):
        fn = _bf16_reciprocal(fn)
    return map_registers(ctx, fn, ctx.get(op.lhs, layout), ctx.get(op.rhs, layout))


@lowers_tile(*UNARY)
def lower_unary(ctx: KernelContext, op: tt.UnaryOp, layout: Layout | None) -> list[SSAValue]:
    int_fn, float_fn = UNARY[type(op)]
    elem = tt.element_type(op.result.type)
    if isinstance(elem, Float64Type) and type(op) not in F64_NATIVE:
        if type(op) not in F64_CALLS:
            raise LoweringError(f"{op.name} has no f64 implementation; compute in f32")
        fn = F64_CALLS[type(op)]
    elif tt.is_float(op.result.type):
        half = isinstance(elem, Float16Type | BFloat16Type)
        fn = _in_f32(float_fn) if half else float_fn
    else:
        fn = UNSIGNED_UNARY.get(type(op), int_fn) if is_unsigned(elem) else int_fn
        assert fn is not None
    return map_registers(ctx, fn, ctx.get(op.input, layout))


@lowers_tile(tt.CmpOp)
def lower_cmp(ctx: KernelContext, op: tt.CmpOp, layout: Layout | None) -> list[SSAValue]:
    pred = op.predicate.data
    elem = tt.element_type(op.lhs.type)
    if tt.is_float(op.lhs.type):
        fn: Binary = lambda c, a, b: _fcmp(c, _FCMP[pred], a, b)
        if _is_bf16(elem):
            fn = _in_f32(fn, round_back=False)
    else:
        table = _BOOL_ICMP if elem.bitwidth == 1 or is_unsigned(elem) else _ICMP
        fn = lambda c, a, b: c.icmp(table[pred], a, b)
    return map_registers(ctx, fn, ctx.get(op.lhs, layout), ctx.get(op.rhs, layout))


@lowers_tile(tt.SelectOp)
def lower_select(ctx: KernelContext, op: tt.SelectOp, layout: Layout | None) -> list[SSAValue]:
    return map_registers(
        ctx,
        lambda c, m, a, b: c.select(m, a, b),
        ctx.get(op.condition, layout),
        ctx.get(op.true_value, layout),
        ctx.get(op.false_value, layout),
    )


@lowers_tile(tt.ConstantOp)
def lower_constant(ctx: KernelContext, op: tt.ConstantOp, layout: Layout | None) -> list[SSAValue]:
    return [ctx.const(op.value.value.data, llvm_type(op.result.type))] * _count(layout)


@lowers_tile(tt.SplatOp)
def lower_splat(ctx: KernelContext, op: tt.SplatOp, layout: Layout | None) -> list[SSAValue]:
    return [ctx.scalar(op.input)] * _count(layout)


@lowers_tile(tt.ArangeOp)
def lower_arange(ctx: KernelContext, op: tt.ArangeOp, layout: Layout | None) -> list[SSAValue]:
    assert layout is not None
    start = ctx.const(op.start.value.data)
    return [ctx.int_op("add", ctx.coords(layout, r)[0], start) for r in range(layout.num_regs)]


@lowers_tile(tt.ExpandDimsOp)
def lower_expand_dims(ctx: KernelContext, op: tt.ExpandDimsOp, layout: Layout | None) -> list[SSAValue]:
    assert layout is not None
    return ctx.get(op.input, layout.slice(op.axis.value.data))


@lowers_tile(tt.BroadcastOp)
def lower_broadcast(ctx: KernelContext, op: tt.BroadcastOp, layout: Layout | None) -> list[SSAValue]:
    return ctx.get(op.input, layout)


@lowers_tile(tt.ProgramIdOp, tt.NumProgramsOp)
def lower_grid_query(ctx: KernelContext, op: tt._GridQueryOp, layout: Layout | None) -> list[SSAValue]:
    register = ("ctaid." if isinstance(op, tt.ProgramIdOp) else "nctaid.") + "xyz"[op.axis.value.data]
    return [ctx.cached(("sreg", register), lambda: ctx.value(nvvm.read_special_register(register)))]
