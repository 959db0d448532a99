"""PTX backend: llvm (+ nvvm) dialect module -> LLVM IR -> PTX, by two toolchains."""

from tinyton.lowering.ptx.compile import (
    TOOLCHAINS,
    assemble_ptx,
    compile_llvm_module,
    resolve_toolchain,
)
from tinyton.lowering.ptx.toolchain import ToolchainError
from tinyton.lowering.ptx.usage import register_usage

__all__ = [
    "TOOLCHAINS",
    "ToolchainError",
    "assemble_ptx",
    "compile_llvm_module",
    "register_usage",
    "resolve_toolchain",
]
