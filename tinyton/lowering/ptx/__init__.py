"""PTX backend: llvm (+ nvvm) dialect module -> LLVM IR -> PTX, by two toolchains."""

from tinyton.lowering.ptx.compile import (
    TOOLCHAINS,
    assemble_ptx,
    compile_llvm_module,
    resolve_toolchain,
)
from tinyton.lowering.ptx.toolchain import ToolchainError

__all__ = [
    "TOOLCHAINS",
    "ToolchainError",
    "assemble_ptx",
    "compile_llvm_module",
    "resolve_toolchain",
]
