"""The `tinyton-to-llvm` pass: a tt kernel module becomes an llvm + nvvm kernel.

Takes: a module holding one `func.func` of tt (and scf/arith) ops, or modules nesting such kernel modules
(the output of `tinyton-fusion-to-kernels`). Gives: each kernel as an `llvm.func` with the `nvvm.kernel`
attribute, of llvm + nvvm (+ llvm_extra) ops only, ready for the PTX backend (tinyton/lowering/ptx).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xdsl.context import Context
from xdsl.dialects import func, llvm
from xdsl.dialects.builtin import (
    DenseArrayBase,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    TensorType,
    UnitAttr,
    i32,
)
from xdsl.ir import Block, Region
from xdsl.passes import ModulePass

from tinyton.analysis.pass_inputs import check_kernel_module
from tinyton.dialects import tt
from tinyton.errors import CompilationError
from tinyton.lowering.tt_to_llvm import (
    async_copy,
    atomics,
    casts,
    combine,
    control_flow,
    debug,
    dot,
    elementwise,
    grid_dependency,
    indexing,
    libdevice,
    libm,
    math,
    memory,
    random,
    reductions,
    scan,
    shapes,
    tma,
    warp_roles,
)
from tinyton.lowering.tt_to_llvm.assign import LayoutAssignment
from tinyton.lowering.tt_to_llvm.axis_info import AxisAnalysis
from tinyton.lowering.tt_to_llvm.context import (
    MIN_PROGRAMS_ATTR,
    NUM_WARPS_ATTR,
    SMEM_LIMIT,
    KernelContext,
    LoweringError,
    kernel_num_warps,
    llvm_type,
    programs_per_sm,
)
from tinyton.lowering.tt_to_llvm.float8_dot import prepare_float8_dots
from tinyton.lowering.tt_to_llvm.pipeline import pipeline_module
from tinyton.lowering.tt_to_llvm.warp_specialize import launch_registers
from tinyton.lowering.tt_to_llvm.emitter import GLOBAL_PTR
from tinyton.lowering.tt_to_llvm.shared import convert_layout
from tinyton.lowering.tt_to_llvm.wgmma_layout import runs_on_wgmma, uses_wgmma

OP_MODULES = (
    async_copy, atomics, casts, combine, control_flow, debug, dot, elementwise, grid_dependency, indexing, libdevice,
    libm, math, memory, random, reductions, scan, shapes, tma,
)  # fmt: skip
"""The modules whose `@lowers_tile` / `@lowers_op` functions fill the lowering tables (context.py) as they are
imported: the pass needs every one of them loaded."""


@dataclass(frozen=True)
class KernelInfo:
    """What launching the kernel needs to know."""

    name: str
    num_warps: int
    shared_bytes: int
    """Shared memory the kernel uses: declared statically up to 48 KiB (`SMEM_LIMIT`), else dynamic (an
    `extern` array: the launch passes this size and opts in above 48 KiB)."""
    param_types: tuple[str, ...]
    """The tt type of each parameter, printed: `!tt.ptr<f32>`, `i32`, `f32`."""
    tensor_maps: tuple[dict[str, Any], ...] = ()
    """The TMA maps the kernel takes after its parameters, one pointer each (tinyton/runtime/tensor_maps.py)."""
    launch_warps: int = 0
    """Warps to launch: `num_warps`, and a warp-specialised kernel's producer warps."""
    waits_for_prior_grid: bool = False
    """Whether every program passes a `griddepcontrol.wait` before it reads what an earlier launch wrote or writes
    anything (`grid_dependency.py`): only such a kernel may be launched with programmatic stream serialization."""


def is_kernel(function: func.FuncOp) -> bool:
    """A tt kernel takes pointers and scalars and returns nothing (array programs take tensors)."""
    inputs, outputs = function.function_type.inputs.data, function.function_type.outputs.data
    return not outputs and not any(isinstance(t, TensorType) for t in inputs)


def lower_to_llvm(
    module: ModuleOp, num_warps: int | None = None, shared_limit: int = SMEM_LIMIT, arch: str = "", use_tma: bool = True
) -> KernelInfo:
    """Lower the module's one tt kernel in place (pipelining its loops first); `num_warps` overrides
    `tt.num_warps`; `shared_limit` is the shared memory the target lets a program use; `arch` the target
    (`sm_90a` lowers dots to wgmma where they fit; else mma.sync; sm_90* pipelines descriptor loads with
    TMA unless `use_tma` is false)."""
    try:
        check_kernel_module(module, TinytonToLLVMPass.name)
    except CompilationError as e:
        raise LoweringError(str(e)) from None
    warps = kernel_num_warps(module, num_warps)
    prepare_float8_dots(module, warps, arch)
    pipeline_module(module, shared_limit, warps, arch, use_tma)
    kernels = [op for op in module.ops if isinstance(op, func.FuncOp) and is_kernel(op)]
    if len(kernels) != 1:
        raise LoweringError(
            f"expected one tt kernel (func.func) in the module, found {len(kernels)}"
            + ("; put each kernel in a builtin.module of its own" if kernels else "")
        )
    kernel = kernels[0]
    tma.expand_descriptors(kernel, use_tma and arch.startswith("sm_90"))
    if tt.OVERLAP_ATTR in module.attributes:
        grid_dependency.place_grid_dependency(kernel)
    maps, map_of = tma.tensor_map_specs(kernel)
    name = kernel.sym_name.data
    param_types = tuple(str(a.type) for a in kernel.args)
    params = [llvm_type(a.type) for a in kernel.args] + [GLOBAL_PTR] * len(maps)
    fn = llvm.FuncOp(
        name,
        llvm.LLVMFunctionType(params),
        linkage=llvm.LinkageAttr("external"),
        body=Region(Block(arg_types=params)),
    )
    fn.attributes["nvvm.kernel"] = UnitAttr()
    launch = warp_roles.launch_warps(kernel, warps)
    fn.attributes["nvvm.reqntid"] = DenseArrayBase.from_list(i32, [32 * launch, 1, 1])
    if launch > warps:  # setmaxnreg moves registers between warpgroups: launch with all of them
        fn.attributes["nvvm.maxnreg"] = IntegerAttr(launch_registers(32 * launch, programs_per_sm(module)), i32)
    if isinstance(least := module.attributes.get(MIN_PROGRAMS_ATTR), IntegerAttr):
        fn.attributes["nvvm.minctasm"] = IntegerAttr(least.value.data, i32)

    smem = f"{name}_smem"
    wgmma = any(isinstance(op, tt.PromotedDotOp) or isinstance(op, tt.DotOp) and uses_wgmma(op, warps, arch)
                for op in kernel.walk())
    ctx = KernelContext(
        fn, warps, LayoutAssignment(kernel, warps, arch), AxisAnalysis(kernel), smem, convert_layout, shared_limit,
        wgmma,
    )
    ctx.programs_per_sm = programs_per_sm(module)
    ctx.spare_warps = launch > warps
    ctx.dots_outlive_waits = control_flow.dots_outlive_their_wait(kernel)
    async_copy.reserve_buffers(ctx, kernel)
    tma.reserve_barriers(ctx, kernel)
    tma.reserve_store_tile(ctx, kernel)
    for arg, param in zip(kernel.args, fn.body.block.args):
        ctx.set(arg, None, [param])
    map_params = fn.body.block.args[len(kernel.args):]
    ctx.tensor_maps = {op: map_params[i] for op, i in map_of.items()}
    ctx.lower_block(kernel.body.block)
    waits = ctx.sm >= grid_dependency.SM_GRID_DEPENDENCY and any(
        isinstance(op, tt.GridDependencyWaitOp) for op in kernel.body.block.ops)
    tma.finish_stores(ctx)
    ctx.insert(llvm.ReturnOp())
    ctx.finish()

    block = module.body.block
    if ctx.smem_bytes > SMEM_LIMIT:
        array = llvm.LLVMArrayType(0, IntegerType(8))
        block.insert_op_before(llvm.GlobalOp(array, smem, "external", addr_space=3, alignment=1024), kernel)
    elif ctx.smem_bytes:
        array = llvm.LLVMArrayType(ctx.smem_bytes, IntegerType(8))
        align = 1024 if ctx.local_buffers or wgmma else 16
        block.insert_op_before(llvm.GlobalOp(array, smem, "internal", addr_space=3, alignment=align), kernel)
    for op in ctx.module_ops.values():
        block.insert_op_before(op, kernel)
    block.insert_op_before(fn, kernel)
    kernel.detach()
    kernel.erase()
    module.attributes[NUM_WARPS_ATTR] = IntegerAttr(warps, 32)
    return KernelInfo(name, warps, ctx.smem_bytes, param_types, tuple(maps), launch, waits)


def kernel_arch(module: ModuleOp, num_warps: int, arch: str) -> str:
    """The target to compile the module's kernel for on an `arch` device: sm_90a (whose PTX loads on
    Hopper only) when the GPU is an sm_90 and a dot fits wgmma (a float8 dot with B read K-major or not:
    `float8_dot`), else `arch`."""
    if arch == "sm_90" and any(isinstance(op, tt.DotOp) and runs_on_wgmma(op, num_warps, "sm_90a") for op in module.walk()):
        return "sm_90a"
    return arch


@dataclass(frozen=True)
class TinytonToLLVMPass(ModulePass):
    """tt kernel -> llvm + nvvm (`num_warps` defaults to the module's `tt.num_warps`, else 4)."""

    name = "tinyton-to-llvm"

    num_warps: int | None = None
    shared_limit: int = SMEM_LIMIT
    arch: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Lower the module's kernel, or each nested kernel module (as `tinyton-fusion-to-kernels` makes)."""
        nested = [m for m in op.ops if isinstance(m, ModuleOp)]
        if any(isinstance(f, func.FuncOp) and is_kernel(f) for f in op.ops) or not nested:
            lower_to_llvm(op, self.num_warps, self.shared_limit, self.arch)
        for module in nested:
            lower_to_llvm(module, self.num_warps, self.shared_limit, self.arch)
