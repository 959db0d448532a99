"""
`tt.assert`: a thread whose registers of the condition hold a false element prints the message (with the
program id) and executes `trap`, which aborts the kernel (the launch then fails with an error, as a
failed `device_assert` does in Triton).
`tt.print`: CUDA's `vprintf` with a format string per element and an argument buffer on the stack.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    AnyFloat,
    Float64Type,
    IntegerType,
    Signedness,
    StringAttr,
    f64,
    i8,
    i32,
)
from xdsl.ir import Attribute, Operation, SSAValue

from tinyton.dialects import nvvm, tt
from tinyton.lowering.tt_to_llvm.casts import convert
from tinyton.lowering.tt_to_llvm.context import KernelContext, lowers
from tinyton.lowering.tt_to_llvm.memory import _inline_asm

GENERIC_PTR = llvm.LLVMPointerType()


@lowers(tt.AssertOp)
def lower_assert(ctx: KernelContext, op: tt.AssertOp) -> None:
    layout = ctx.assign.layout.get(op.condition)
    failed = None
    for ok in dict.fromkeys(ctx.get(op.condition, layout)):
        bad = ctx.value(llvm.XOrOp(ok, ctx.const(1, ok.type)))
        failed = bad if failed is None else ctx.value(llvm.OrOp(failed, bad))
    assert failed is not None
    message = op.message.data.replace("%", "%%")
    text = f"device_assert failed in program (%d, %d, %d): {message}\n".encode() + b"\0"
    _call_if(ctx, failed, _vprintf(ctx), _format(ctx, text), _arguments(ctx, _program_id(ctx)))
    _inline_asm(ctx, ["@$0 trap;"], [], [("b", failed)], None)


def _vprintf(ctx: KernelContext) -> str:
    return _symbol(
        ctx,
        "vprintf",
        lambda: llvm.FuncOp(
            "vprintf", llvm.LLVMFunctionType([GENERIC_PTR, GENERIC_PTR], i32), linkage=llvm.LinkageAttr("external")
        ),
    )


def _program_id(ctx: KernelContext) -> list[SSAValue]:
    return [
        ctx.cached(("sreg", f"ctaid.{a}"), lambda a=a: ctx.value(nvvm.read_special_register(f"ctaid.{a}")))
        for a in "xyz"
    ]


def _format(ctx: KernelContext, text: bytes) -> SSAValue:
    """The address of a constant format string (NUL-terminated `text`)."""
    name = f"printf_{hashlib.sha1(text).hexdigest()[:12]}"
    _symbol(
        ctx,
        name,
        lambda: llvm.GlobalOp(
            llvm.LLVMArrayType(len(text), i8), name, "internal", constant=True, value=StringAttr(text.decode())
        ),
    )
    return ctx.value(llvm.AddressOfOp(name, GENERIC_PTR))


def _arguments(ctx: KernelContext, fields: list[SSAValue]) -> SSAValue:
    """vprintf's argument buffer holding `fields`, each aligned to its size: one stack slot per size in the
    entry block (an alloca inside a loop would grow the stack every iteration)."""
    offsets, size = [], 0
    for f in fields:
        width = f.type.bitwidth // 8
        size = -(-size // width) * width
        offsets.append(size)
        size += width
    buffer = ctx.cached(("printf buffer", size), lambda: ctx.value(llvm.AllocaOp(ctx.const(size), i8, alignment=8)))
    for f, offset in zip(fields, offsets):
        ctx.insert(llvm.StoreOp(f, ctx.gep(buffer, offset, i8)))
    return buffer


def _symbol(ctx: KernelContext, name: str, build: Callable[[], Operation]) -> str:
    if name not in ctx.module_ops:
        ctx.module_ops[name] = build()
    return name


def _printf_argument(ctx: KernelContext, x: SSAValue, elem: Attribute, hex: bool) -> tuple[str, SSAValue]:
    """The `printf` conversion and the (promoted) value of one element."""
    if isinstance(x.type, AnyFloat):
        return "%f", x if isinstance(x.type, Float64Type) else convert(ctx, x, elem, f64)
    wide = isinstance(elem, IntegerType) and elem.bitwidth == 64
    value = x if wide else convert(ctx, x, elem, IntegerType(32, elem.signedness.data) if elem.bitwidth > 1 else i32)
    unsigned = elem.bitwidth == 1 or elem.signedness.data == Signedness.UNSIGNED
    return ("%ll" if wide else "%") + ("x" if hex else "u" if unsigned else "d"), value


@lowers(tt.PrintOp)
def lower_print(ctx: KernelContext, op: tt.PrintOp) -> None:
    """One `vprintf` per element in the thread that owns it (replicas stay silent), as Triton's
    `device_print`: `pid (x, y, z) idx (i, j) <prefix><value>`."""
    vprintf, pid, prefix = _vprintf(ctx), _program_id(ctx), op.prefix.data.replace("%", "%%")
    for value in op.values:
        layout = ctx.assign.layout.get(value)
        elem = tt.element_type(value.type)
        for r, x in enumerate(ctx.get(value, layout)):
            coords = ctx.coords(layout, r) if layout is not None else []
            conversion, shown = _printf_argument(ctx, x, elem, op.hex.value)
            index = f" idx ({', '.join(['%d'] * len(coords))})" if coords else ""
            text = f"pid (%d, %d, %d){index} {prefix}{conversion}\n".encode() + b"\0"
            buffer = _arguments(ctx, [*pid, *coords, shown])
            owner = ctx.replica_predicate(layout)
            _call_if(ctx, owner, vprintf, _format(ctx, text), buffer)


def _call_if(ctx: KernelContext, condition: SSAValue | None, callee: str, *args: SSAValue) -> None:
    ctx.only_where(condition, lambda: ctx.insert(llvm.CallOp(callee, *args, return_type=i32)))
