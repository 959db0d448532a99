"""
PTX in-process through llvmlite's NVPTX backend: no LLVM tools needed.

The module is converted by `llvmlite_ir`, parsed and verified by LLVM, optimized with the
O3 pipeline of the NVPTX target machine (which also runs NVVMReflect), then emitted.
"""

from __future__ import annotations

from functools import cache

import llvmlite.binding as llb
from xdsl.dialects.builtin import ModuleOp

from tinyton.lowering.ptx.libdevice import PREFIX, calls_libdevice, libdevice_path
from tinyton.lowering.ptx.llvmlite_ir import to_llvmlite
from tinyton.lowering.ptx.toolchain import SHORT_POINTERS, TRIPLE, ToolchainError, ptx_features
from tinyton.profiling import stage


@cache
def _target_machine(arch: str) -> llb.TargetMachine:
    llb.initialize_all_targets()
    llb.initialize_all_asmprinters()
    llb.set_option("tinyton", SHORT_POINTERS)
    target = llb.Target.from_triple(TRIPLE)
    return target.create_target_machine(cpu=arch, features=ptx_features(arch), opt=3)


@cache
def _libdevice_bitcode() -> bytes:
    return libdevice_path().read_bytes()


def link_libdevice(parsed: llb.ModuleRef) -> None:
    """Link libdevice in, its functions made internal so that O3 drops the ones nothing calls."""
    parsed.link_in(llb.parse_bitcode(_libdevice_bitcode()))
    for fn in parsed.functions:
        if fn.name.startswith(PREFIX) and not fn.is_declaration:
            fn.linkage = "internal"


def compile_with_llvmlite(module: ModuleOp, arch: str, print_input: bool = True) -> dict[str, str]:
    """Return the `llvm-mlir` (if `print_input`), `llvm-ir` (after O3) and `ptx` stages."""
    with stage("LLVM target machine"):
        tm = _target_machine(arch)
    with stage("convert to llvmlite IR"):
        lmodule = to_llvmlite(module, triple=TRIPLE, data_layout=str(tm.target_data))
    try:
        with stage("LLVM parse + verify"):
            parsed = llb.parse_assembly(str(lmodule))
            parsed.verify()
    except RuntimeError as e:
        raise ToolchainError(f"llvmlite rejected the converted module: {e}") from e
    if calls_libdevice(module):
        with stage("LLVM link libdevice"):
            link_libdevice(parsed)
    with stage("LLVM O3"):
        builder = llb.create_pass_builder(tm, llb.create_pipeline_tuning_options(speed_level=3))
        builder.getModulePassManager().run(parsed, builder)
    with stage("LLVM emit PTX"):
        ptx = tm.emit_assembly(parsed)
    stages = {"llvm-ir": str(parsed), "ptx": ptx}
    if print_input:
        with stage("print llvm dialect (xDSL)"):
            stages["llvm-mlir"] = str(module)
    return stages
