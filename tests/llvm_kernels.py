"""
Kernels written directly in the llvm + nvvm dialects, shared by the PTX and GPU tests.

They exercise what the tt lowering emits: kernel attributes, special registers, loops as
block arguments, global and shared-memory GEPs, warp shuffles, a barrier, predicated
vector loads/stores as inline asm, casts and float intrinsics.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    DenseArrayBase,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    ModuleOp,
    UnitAttr,
    f32,
    f64,
    i1,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from tinyton.dialects import llvm_extra, nvvm

GLOBAL = llvm.LLVMPointerType(IntAttr(1))
SHARED = llvm.LLVMPointerType(IntAttr(3))
VEC4 = llvm.LLVMStructType.from_type_list([i32] * 4)

# Predicated 128-bit load: outputs $0..$3, address $4, predicate $5 (i1, constraint "b").
LOAD_V4 = (
    "mov.b32 $0, 0;\n\tmov.b32 $1, 0;\n\tmov.b32 $2, 0;\n\tmov.b32 $3, 0;\n\t"
    "@$5 ld.global.v4.b32 {$0, $1, $2, $3}, [$4];"
)
STORE_V4 = "@$5 st.global.v4.b32 [$4], {$0, $1, $2, $3};"


class _Kernel:
    """Builds one `llvm.func` kernel; calling it appends an op to the current block."""

    def __init__(
        self,
        name: str,
        params: Sequence[Attribute],
        threads: int,
        arg_attrs: Sequence[dict[str, Attribute]] | None = None,
    ):
        self.func = llvm.FuncOp(
            name,
            llvm.LLVMFunctionType(params),
            linkage=llvm.LinkageAttr("external"),
            body=Region(Block(arg_types=params)),
            other_props={
                "arg_attrs": None
                if arg_attrs is None
                else ArrayAttr([DictionaryAttr(d) for d in arg_attrs])
            },
        )
        self.func.attributes["nvvm.kernel"] = UnitAttr()
        self.func.attributes["nvvm.reqntid"] = DenseArrayBase.from_list(i32, [threads, 1, 1])
        self.args = self.func.body.block.args
        self.current = self.func.body.block

    def __call__(self, op: Operation) -> SSAValue:
        self.current.add_op(op)
        return op.results[0] if op.results else None  # type: ignore[return-value]

    def const(self, value: int | float, ty: Attribute = i32) -> SSAValue:
        attr = FloatAttr(value, ty) if ty == f32 else IntegerAttr(value, ty)
        return self(llvm.ConstantOp(attr, ty))

    def sreg(self, register: str) -> SSAValue:
        return self(nvvm.read_special_register(register))

    def block(self, *arg_types: Attribute) -> Block:
        block = Block(arg_types=arg_types)
        self.func.body.add_block(block)
        return block

    def move_to(self, block: Block) -> None:
        self.current = block


def vector_add() -> ModuleOp:
    """`c = a + b` on f32, 4 elements per thread through predicated v4 inline asm."""
    restrict = {"llvm.noalias": UnitAttr(), "llvm.align": IntegerAttr(16, i64)}
    k = _Kernel("vadd4", [GLOBAL] * 3 + [i32], threads=128, arg_attrs=[restrict] * 3 + [{}])
    a, b, c, n = k.args
    block = k(llvm.MulOp(k.sreg("ctaid.x"), k.sreg("ntid.x")))
    first = k(llvm.MulOp(k(llvm.AddOp(block, k.sreg("tid.x"))), k.const(4)))
    # The whole vector is in bounds (n is a multiple of 4 in the tests).
    pred = k(llvm.ICmpOp(first, n, IntegerAttr(2, i64)))  # slt

    def address(base: SSAValue) -> SSAValue:
        return k(llvm.GEPOp(base, [llvm.GEP_USE_SSA_VAL], f32, [first], GLOBAL, True))

    def lanes(base: SSAValue) -> list[SSAValue]:
        asm = llvm.InlineAsmOp(LOAD_V4, "=r,=r,=r,=r,l,b", [address(base), pred], [VEC4])
        packed = k(asm)
        return [
            k(llvm.ExtractValueOp(DenseArrayBase.from_list(i64, [j]), packed, i32))
            for j in range(4)
        ]

    sums = []
    for x, y in zip(lanes(a), lanes(b)):
        fx, fy = k(llvm.BitcastOp(x, f32)), k(llvm.BitcastOp(y, f32))
        sums.append(k(llvm.BitcastOp(k(llvm.FAddOp(fx, fy)), i32)))
    store = llvm.InlineAsmOp(
        STORE_V4, "r,r,r,r,l,b", [*sums, address(c), pred], has_side_effects=True
    )
    k(store)
    k(llvm.ReturnOp())
    return ModuleOp([k.func])


def row_sum(threads: int = 128) -> ModuleOp:
    """`out[row] = sum(x[row, :n])`, one block per row: strided loop, shuffles, smem."""
    warps = threads // 32
    smem = llvm.GlobalOp(
        llvm.LLVMArrayType(warps, f32),
        "partials",
        "internal",
        addr_space=3,
        alignment=16,
    )
    k = _Kernel("row_sum", [GLOBAL, GLOBAL, i32], threads=threads)
    x, out, n = k.args
    tid, row = k.sreg("tid.x"), k.sreg("ctaid.x")
    row_base = k(llvm.MulOp(row, n))
    loop, body, done = k.block(i32, f32), k.block(), k.block()
    k(llvm.BrOp(loop, tid, k.const(0.0, f32)))

    k.move_to(loop)
    j, acc = loop.args
    k(llvm.CondBrOp(k(llvm.ICmpOp(j, n, IntegerAttr(2, i64))), body, [], done, []))

    k.move_to(body)
    index = k(llvm.AddOp(row_base, j))
    ptr = k(llvm.GEPOp(x, [llvm.GEP_USE_SSA_VAL], f32, [index], GLOBAL, True))
    value = k(llvm.LoadOp(ptr, f32, alignment=4))
    k(llvm.BrOp(loop, k(llvm.AddOp(j, k.sreg("ntid.x"))), k(llvm.FAddOp(acc, value))))

    k.move_to(done)
    total = warp_sum(k, acc)
    lane, warp = k.sreg("laneid"), k(llvm.LShrOp(tid, k.const(5)))
    partials = k(llvm.AddressOfOp("partials", SHARED))
    slot = k(llvm.GEPOp(partials, [0, llvm.GEP_USE_SSA_VAL], smem.global_type, [warp], SHARED))
    write, after_write = k.block(), k.block()
    k(
        llvm.CondBrOp(
            k(llvm.ICmpOp(lane, k.const(0), IntegerAttr(0, i64))), write, [], after_write, []
        )
    )
    k.move_to(write)
    k(llvm.StoreOp(total, slot, alignment=4))
    k(llvm.BrOp(after_write))

    k.move_to(after_write)
    k(nvvm.Barrier0Op())
    in_range = k(llvm.ICmpOp(lane, k.const(warps), IntegerAttr(2, i64)))
    index = k(llvm.SelectOp(in_range, lane, k.const(0)))  # stay inside the buffer
    first = k(llvm.GEPOp(partials, [0, llvm.GEP_USE_SSA_VAL], smem.global_type, [index], SHARED))
    loaded = k(llvm.LoadOp(first, f32, alignment=4))
    result = warp_sum(k, k(llvm.SelectOp(in_range, loaded, k.const(0.0, f32))))
    store, end = k.block(), k.block()
    k(llvm.CondBrOp(k(llvm.ICmpOp(tid, k.const(0), IntegerAttr(0, i64))), store, [], end, []))
    k.move_to(store)
    dest = k(llvm.GEPOp(out, [llvm.GEP_USE_SSA_VAL], f32, [row], GLOBAL, True))
    k(llvm.StoreOp(result, dest, alignment=4))
    k(llvm.BrOp(end))
    k.move_to(end)
    k(llvm.ReturnOp())
    return ModuleOp([smem, k.func])


def warp_sum(k: _Kernel, value: SSAValue) -> SSAValue:
    """Butterfly reduction over the 32 lanes of a warp."""
    mask, clamp = k.const(-1), k.const(31)
    for offset in (16, 8, 4, 2, 1):
        other = k(nvvm.ShflOp(nvvm.ShflKind.BFLY, mask, value, k.const(offset), clamp))
        value = k(llvm.FAddOp(value, other))
    return value


def op_zoo() -> ModuleOp:
    """One of every other op the lowering may emit, folded into a single store."""
    k = _Kernel("zoo", [GLOBAL, f32, i32], threads=32)
    out, x, n = k.args
    fi = k(llvm_extra.FPToSIOp(x, i32))
    fu = k(llvm_extra.FPToUIOp(x, i32))
    mixed = k(llvm.XOrOp(k(llvm.AShrOp(fi, k.const(1))), k(llvm.ShlOp(fu, k.const(2)))))
    mixed = k(llvm.OrOp(k(llvm.AndOp(mixed, n)), k(llvm.SRemOp(mixed, k.const(7)))))
    mixed = k(llvm.UDivOp(k(llvm.SDivOp(mixed, k.const(3))), k.const(5)))
    wide = k(llvm.SExtOp(mixed, i64))
    wide = k(llvm.AddOp(wide, k(llvm.ZExtOp(k(llvm.TruncOp(wide, i1)), i64))))
    as_int = k(llvm.PtrToIntOp(out))
    # IntToPtrOp's constructor only builds `!llvm.ptr`.
    back = k(llvm.IntToPtrOp.create(operands=[as_int], result_types=[GLOBAL]))
    y = k(llvm.FAddOp(k(llvm_extra.UIToFPOp(n, f32)), k(llvm.SIToFPOp(fi, f32))))
    y = k(llvm.FMulOp(y, k(llvm.FExp2Op(k(llvm.FSubOp(x, k.const(1.5, f32)))))))
    y = k(llvm.FDivOp(y, k(llvm.FSqrtOp(k(llvm.FAbsOp(x, f32))))))
    y = k(llvm.VectorFMaxOp(k(llvm.FFloorOp(y)), k(llvm.VectorFMinOp(y, x))))
    y = k(llvm.FMAOp(y, x, k(llvm.FNegOp(x))))
    y = k(llvm.CallIntrinsicOp("llvm.nvvm.ex2.approx.f32", [y], [f32]))
    y = k(llvm.CallIntrinsicOp("llvm.nvvm.rsqrt.approx.f", [y], [f32]))
    y = k(llvm.CallIntrinsicOp("llvm.nvvm.lg2.approx.f", [y], [f32]))
    y = k(llvm.CallIntrinsicOp("llvm.maxnum.f32", [y, x], [f32]))
    m = k(llvm.CallIntrinsicOp("llvm.smax.i32", [mixed, n], [i32]))
    y = k(llvm.FPTruncOp(k(llvm.FAddOp(k(llvm.FPExtOp(y, f64)), k(llvm.SIToFPOp(m, f64)))), f32))
    lt = k(llvm.FCmpOp(y, x, "olt"))
    y = k(llvm.SelectOp(lt, y, k(llvm.UndefOp(f32))))
    pair = k(llvm.UndefOp(llvm.LLVMStructType.from_type_list([f32, i64])))
    pair = k(llvm.InsertValueOp(DenseArrayBase.from_list(i64, [0]), pair, y))
    pair = k(llvm.InsertValueOp(DenseArrayBase.from_list(i64, [1]), pair, wide))
    y = k(llvm.ExtractValueOp(DenseArrayBase.from_list(i64, [0]), pair, f32))
    idx = k(llvm.ExtractValueOp(DenseArrayBase.from_list(i64, [1]), pair, i64))
    ptr = k(llvm.GEPOp(back, [llvm.GEP_USE_SSA_VAL], f32, [idx], GLOBAL))
    k(llvm.StoreOp(y, ptr, alignment=4))
    old = k(llvm_extra.AtomicRMWOp(llvm_extra.AtomicBinOp.FADD, out, y))
    k(llvm.StoreOp(old, k(llvm.GEPOp(out, [1], f32, result_type=GLOBAL)), alignment=4))
    k(llvm.ReturnOp())
    return ModuleOp([k.func])
