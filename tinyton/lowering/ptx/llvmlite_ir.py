"""
Convert an xDSL module in the llvm (+ nvvm) dialects to llvmlite IR.

xDSL's `xdsl.backend.llvm` converts most instructions correctly, so this module only owns
what it gets wrong or lacks for NVPTX, and falls back to its `convert_op` for the rest:

- module level: kernels get the `ptx_kernel` calling convention, launch bounds become
  `!nvvm.annotations` (LLVM 22 upgrades them to `"nvvm.reqntid"`-style attributes), and
  globals get an `undef` initializer and their alignment (shared memory);
- getelementptr: xDSL bitcasts to an address-space-0 typed pointer, which is invalid
  for `ptr addrspace(1|3)`; stores through a pointer typed otherwise (bytes) cast it;
- `nvvm.*` ops and the casts/atomics of `tinyton.dialects.llvm_extra`;
- float intrinsics (`llvm.intr.*`) and `llvm.call_intrinsic`, so that they keep their
  type suffix (`llvm.exp2.f32`) and fast-math flags;
- LLVM's `bfloat` type, which neither llvmlite nor xDSL's type converter knows: `BFloatType`
  is registered with the converter, its constants print in LLVM's exact `0xR` hex form.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import llvmlite.ir as ir
import numpy as np
from xdsl.backend.llvm import convert_type as xdsl_types
from xdsl.backend.llvm.convert_op import convert_op as xdsl_convert_op
from xdsl.backend.llvm.convert_op import create_constant, intrinsic_suffix
from xdsl.backend.llvm.convert_type import convert_type
from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    BFloat16Type,
    DenseArrayBase,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    UnitAttr,
)
from xdsl.ir import Block, Operation, SSAValue

from tinyton.dialects import llvm_extra, nvvm
from tinyton.dtypes import BF16
from tinyton.lowering.ptx.toolchain import ToolchainError


class BFloatType(ir.types._BaseFloatType):
    """LLVM's `bfloat`; a constant prints as `0xR` and its 16 bits (rounded to nearest even)."""

    null = "0.0"
    intrinsic_name = "bf16"

    def __str__(self) -> str:
        return "bfloat"

    def format_constant(self, value: float) -> str:
        return f"0xR{int(np.array(value, BF16).view(np.uint16)):04X}"


BFloatType._create_instance()
xdsl_types._TYPE_CONVERTERS[BFloat16Type] = lambda _: BFloatType()

Values = dict[SSAValue, ir.Value]
_Op = TypeVar("_Op", bound=Operation)
_CONVERTERS: dict[type[Operation], Callable[[Any, ir.IRBuilder, Values], None]] = {}


def _converts(*op_types: type[_Op]):
    """Register the decorated function as the converter of `op_types`."""

    def register(fn: Callable[[_Op, ir.IRBuilder, Values], None]):
        for op_type in op_types:
            _CONVERTERS[op_type] = fn
        return fn

    return register


def _intrinsic(builder: ir.IRBuilder, name: str, ret: ir.Type, args: list[ir.Value]) -> ir.Function:
    """Declare (once) the function `name` with the given signature."""
    module = builder.module
    if name in module.globals:
        return module.globals[name]
    return ir.Function(module, ir.FunctionType(ret, [a.type for a in args]), name=name)


# NVPTX has no lowering for these (sin/cos only with `afn`): LLVM would abort the whole
# process with "no libcall available", so they are rejected before reaching it.
_NO_NVPTX_LOWERING = {"llvm.exp", "llvm.exp10", "llvm.log", "llvm.log10", "llvm.log2", "llvm.pow"}
_NEEDS_AFN = {"llvm.sin", "llvm.cos"}


def _check_lowerable(name: str, fastmath: list[str]) -> None:
    base = name.rsplit(".", 1)[0]
    if base in _NO_NVPTX_LOWERING or (base in _NEEDS_AFN and "afn" not in fastmath):
        raise ToolchainError(
            f"{name} has no NVPTX lowering; use llvm.exp2 / llvm.nvvm.lg2.approx.f "
            "with a scale factor (or afn for sin/cos)"
        )


def _fastmath(op: Operation) -> list[str]:
    flags = op.properties.get("fastmathFlags")
    return [] if flags is None else [f.value for f in flags.data]


@_converts(llvm.GEPOp)
def _gep(op: llvm.GEPOp, builder: ir.IRBuilder, values: Values) -> None:
    dynamic = iter(op.ssa_indices)
    indices = [
        values[next(dynamic)] if i == llvm.GEP_USE_SSA_VAL else ir.Constant(ir.IntType(32), i)
        for i in op.rawConstantIndices.iter_values()
    ]
    values[op.result] = builder.gep(
        values[op.ptr],
        indices,
        inbounds=op.inbounds is not None,
        source_etype=convert_type(op.elem_type),
    )


@_converts(llvm.StoreOp)
def _store(op: llvm.StoreOp, builder: ir.IRBuilder, values: Values) -> None:
    """A store; llvmlite's typed pointers need the address cast to a pointer to the stored type (a
    `vprintf` argument buffer is addressed as bytes)."""
    ptr, value = values[op.ptr], values[op.value]
    pointee = getattr(ptr.type, "pointee", None)
    if pointee is not None and pointee != value.type:
        ptr = builder.bitcast(ptr, value.type.as_pointer(ptr.type.addrspace))
    store = builder.store(value, ptr)
    if op.alignment:
        store.align = op.alignment.value.data


@_converts(llvm.AddressOfOp)
def _addressof(op: llvm.AddressOfOp, builder: ir.IRBuilder, values: Values) -> None:
    values[op.result] = builder.module.get_global(op.global_name.root_reference.data)


@_converts(*nvvm.SPECIAL_REGISTERS.values())
def _special_register(op: nvvm.SpecialRegisterOp, builder: ir.IRBuilder, values: Values) -> None:
    fn = _intrinsic(builder, f"llvm.{op.name}", ir.IntType(32), [])
    values[op.res] = builder.call(fn, [])


@_converts(nvvm.ShflOp)
def _shfl(op: nvvm.ShflOp, builder: ir.IRBuilder, values: Values) -> None:
    args = [values[v] for v in op.operands]
    ty = args[1].type
    name = f"llvm.nvvm.shfl.sync.{op.kind.data.value}.{intrinsic_suffix(ty)}"
    values[op.res] = builder.call(_intrinsic(builder, name, ty, args), args)


@_converts(nvvm.Barrier0Op)
def _barrier0(op: nvvm.Barrier0Op, builder: ir.IRBuilder, values: Values) -> None:
    zero = ir.Constant(ir.IntType(32), 0)
    fn = _intrinsic(builder, "llvm.nvvm.barrier.cta.sync.aligned.all", ir.VoidType(), [zero])
    builder.call(fn, [zero])


@_converts(*nvvm.FENCES)
def _fence(op: nvvm._FenceOp, builder: ir.IRBuilder, values: Values) -> None:
    builder.call(_intrinsic(builder, op.INTRINSIC, ir.VoidType(), []), [])


_CASTS: dict[type[Operation], str] = {
    llvm_extra.FPToSIOp: "fptosi",
    llvm_extra.FPToUIOp: "fptoui",
    llvm_extra.UIToFPOp: "uitofp",
    llvm_extra.AddrSpaceCastOp: "addrspacecast",
}


@_converts(*_CASTS)
def _cast(op: llvm_extra._CastOp, builder: ir.IRBuilder, values: Values) -> None:
    build = getattr(builder, _CASTS[type(op)])
    values[op.res] = build(values[op.arg], convert_type(op.res.type))


@_converts(llvm_extra.AtomicRMWOp)
def _atomicrmw(op: llvm_extra.AtomicRMWOp, builder: ir.IRBuilder, values: Values) -> None:
    kind = llvm_extra.AtomicBinOp(op.bin_op.value.data).name.lower()
    ordering = llvm_extra.AtomicOrdering(op.ordering.value.data).name.lower()
    # llvmlite cannot print an alignment here; LLVM then assumes the natural one.
    values[op.res] = builder.atomic_rmw(kind, values[op.ptr], values[op.val], ordering)


@_converts(
    llvm.FAbsOp,
    llvm.FCeilOp,
    llvm.FCopySignOp,
    llvm.FCosOp,
    llvm.FExp2Op,
    llvm.FExpOp,
    llvm.FFloorOp,
    llvm.FLog2Op,
    llvm.FLogOp,
    llvm.FMAOp,
    llvm.FPowOp,
    llvm.FSinOp,
    llvm.FSqrtOp,
    llvm.VectorFMaxOp,
    llvm.VectorFMinOp,
)
def _float_intrinsic(op: Operation, builder: ir.IRBuilder, values: Values) -> None:
    """`llvm.intr.<f>` on type T becomes a call to `llvm.<f>.<T suffix>`."""
    args = [values[v] for v in op.operands]
    ty = convert_type(op.results[0].type)
    name = f"llvm.{op.name.removeprefix('llvm.intr.')}.{intrinsic_suffix(ty)}"
    fastmath = _fastmath(op)
    _check_lowerable(name, fastmath)
    fn = _intrinsic(builder, name, ty, args)
    values[op.results[0]] = builder.call(fn, args, fastmath=fastmath)


@_converts(llvm.CallIntrinsicOp)
def _call_intrinsic(op: llvm.CallIntrinsicOp, builder: ir.IRBuilder, values: Values) -> None:
    if op.op_bundle_operands:
        raise NotImplementedError("llvm.call_intrinsic with operand bundles")
    args = [values[v] for v in op.args]
    ret = ir.VoidType() if op.ress is None else convert_type(op.ress.type)
    fastmath = _fastmath(op)
    _check_lowerable(op.intrin.data, fastmath)
    call = builder.call(_intrinsic(builder, op.intrin.data, ret, args), args, fastmath=fastmath)
    if op.ress is not None:
        values[op.ress] = call


def _convert_global(op: llvm.GlobalOp, module: ir.Module) -> None:
    addrspace = op.addr_space.value.data
    gvar = ir.GlobalVariable(
        module, convert_type(op.global_type), op.sym_name.data, addrspace=addrspace
    )
    # References must print as `ptr addrspace(N)`, not as a typed pointer.
    gvar.type = ir.PointerType(addrspace=addrspace)
    gvar.linkage = op.linkage.linkage.data
    gvar.global_constant = op.constant is not None
    if op.value is None:  # undefined; a declaration when external (dynamic shared memory)
        if op.linkage.linkage.data != "external":
            gvar.initializer = ir.Constant(gvar.value_type, ir.Undefined)
    elif isinstance(op.value, StringAttr):
        raw = bytearray(op.value.data.encode())
        gvar.initializer = ir.Constant(ir.ArrayType(ir.IntType(8), len(raw)), raw)
    else:
        gvar.initializer = create_constant(op.global_type, op.value)
    if op.alignment is not None:
        gvar.align = op.alignment.value.data


_ARG_FLAGS = {"llvm.noalias": "noalias", "llvm.nonnull": "nonnull", "llvm.noundef": "noundef"}

# Function attribute -> `!nvvm.annotations` keys, one per dimension for the arrays.
_LAUNCH_BOUNDS = {
    "nvvm.reqntid": ("reqntidx", "reqntidy", "reqntidz"),
    "nvvm.maxntid": ("maxntidx", "maxntidy", "maxntidz"),
    "nvvm.maxnreg": ("maxnreg",),
    "nvvm.minctasm": ("minctasm",),
}


def _declare_func(op: llvm.FuncOp, module: ir.Module) -> ir.Function:
    fn_type = op.function_type
    fn = ir.Function(
        module,
        ir.FunctionType(
            convert_type(fn_type.output),
            [convert_type(t) for t in fn_type.inputs],
            var_arg=fn_type.is_variadic,
        ),
        name=op.sym_name.data,
    )
    fn.linkage = op.linkage.linkage.data
    is_kernel = isinstance(op.attributes.get("nvvm.kernel"), UnitAttr)
    fn.calling_convention = "ptx_kernel" if is_kernel else op.CConv.cconv_name
    for arg, attrs in zip(fn.args, op.arg_attrs or ()):
        for name, value in attrs.data.items():
            if name == "llvm.align" and isinstance(value, IntegerAttr):
                arg.attributes.align = value.value.data
            elif name in _ARG_FLAGS:
                arg.add_attribute(_ARG_FLAGS[name])
            else:
                raise NotImplementedError(f"argument attribute {name} on @{fn.name}")
    for name, keys in _LAUNCH_BOUNDS.items():
        attr = op.attributes.get(name)
        if attr is None:
            continue
        dims = attr.get_values() if isinstance(attr, DenseArrayBase) else (attr.value.data,)
        for key, dim in zip(keys, dims):
            node = [fn, ir.MetaDataString(module, key), ir.Constant(ir.IntType(32), dim)]
            module.add_named_metadata("nvvm.annotations", node)
    return fn


def _convert_body(op: llvm.FuncOp, fn: ir.Function) -> None:
    blocks: dict[Block, ir.Block] = {b: fn.append_basic_block() for b in op.body.blocks}
    values: Values = dict(zip(op.body.blocks.first.args, fn.args))
    # Non-entry block arguments become phis; branches add their incoming values.
    for block in list(op.body.blocks)[1:]:
        builder = ir.IRBuilder(blocks[block])
        for arg in block.args:
            values[arg] = builder.phi(convert_type(arg.type))
    for block, lblock in blocks.items():
        builder = ir.IRBuilder(lblock)
        for inner in block.ops:
            convert = _CONVERTERS.get(type(inner))
            if convert is not None:
                convert(inner, builder, values)
            else:
                xdsl_convert_op(inner, builder, values, blocks)


def to_llvmlite(module: ModuleOp, *, triple: str, data_layout: str) -> ir.Module:
    """The llvmlite module for `module`, with the given triple and data layout."""
    lmodule = ir.Module()
    lmodule.triple = triple
    lmodule.data_layout = data_layout
    funcs: list[tuple[llvm.FuncOp, ir.Function]] = []
    for op in module.ops:
        if isinstance(op, llvm.GlobalOp):
            _convert_global(op, lmodule)
        elif isinstance(op, llvm.FuncOp):
            funcs.append((op, _declare_func(op, lmodule)))
        else:
            raise NotImplementedError(f"top-level op {op.name}")
    for op, fn in funcs:
        if op.body.blocks:
            _convert_body(op, fn)
    return lmodule
