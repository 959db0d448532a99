"""
PTX through the upstream LLVM tools, as subprocesses.

xDSL prints the module; upstream `mlir-opt` verifies it and runs `--convert-nvvm-to-llvm` (which expands the
`nvvm` ops that have no intrinsic into the PTX upstream writes for them; those mlir-translate knows pass
through), so a module that upstream MLIR rejects is caught as the compiler bug it is; `mlir-translate` turns it
into LLVM IR (with the 32-bit shared pointers of `toolchain.DATA_LAYOUT`), `llvm-link` adds the libdevice functions
it calls (if any: f64 math), `opt -O3` runs the same mid-level pipeline as the llvmlite path, and `llc` emits PTX.
Each tool's stderr ends up in the `ToolchainError` when it fails.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp, StringAttr

from tinyton.lowering.ptx.libdevice import calls_libdevice, libdevice_path
from tinyton.lowering.ptx.toolchain import (
    DATA_LAYOUT,
    SHORT_POINTERS,
    TRIPLE,
    ToolchainError,
    find_tool,
    ptx_features,
    run_tool,
)
from tinyton.profiling import stage

TOOLS = ("mlir-opt", "mlir-translate", "opt", "llc")
DATA_LAYOUT_ATTR = "llvm.data_layout"
"""The module attribute mlir-translate writes as the LLVM module's `target datalayout`."""
MLIR_OPT_PASSES = ("--convert-nvvm-to-llvm",)


def _llvm_link() -> str:
    tool = find_tool("llvm-link")
    if tool is None:
        raise ToolchainError("linking libdevice (f64 math) on the mlir toolchain needs llvm-link on PATH")
    return tool


def available() -> bool:
    return all(find_tool(t) for t in TOOLS)


def compile_with_mlir_tools(module: ModuleOp, arch: str) -> dict[str, str]:
    """Return the `llvm-mlir`, `llvm-ir` (after O3) and `ptx` stages."""
    mlir_opt, translate, opt, llc = tools = [find_tool(t) for t in TOOLS]
    if None in tools:
        raise ToolchainError(f"the mlir toolchain needs {', '.join(TOOLS)} on PATH")
    target = [f"-mtriple={TRIPLE}", f"-mcpu={arch}", f"-mattr={ptx_features(arch)}", SHORT_POINTERS]
    module.attributes[DATA_LAYOUT_ATTR] = StringAttr(DATA_LAYOUT)
    with stage("print llvm dialect (xDSL)"):
        mlir_text = str(module)
    with stage("mlir-opt (verify, convert-nvvm-to-llvm)"):
        try:
            upstream = run_tool([mlir_opt, *MLIR_OPT_PASSES, "-"], mlir_text)
        except ToolchainError as e:
            raise ToolchainError(f"upstream MLIR rejects the llvm + nvvm module tinyton emitted (a compiler bug): {e}") from None
    with stage("mlir-translate"):
        llvm_ir = run_tool([translate, "--mlir-to-llvmir", "-"], upstream)
    if calls_libdevice(module):
        with stage("llvm-link libdevice"):
            llvm_ir = run_tool([_llvm_link(), "-S", "--only-needed", "--internalize", "-", str(libdevice_path())],
                               llvm_ir)
    with stage("opt -O3"):
        optimized = run_tool([opt, "-O3", "-S", *target, "-"], llvm_ir)
    with stage("llc"):
        ptx = run_tool([llc, "-O3", *target, "-"], optimized)
    return {"llvm-mlir": mlir_text, "llvm-ir": optimized.decode(), "ptx": ptx.decode()}
