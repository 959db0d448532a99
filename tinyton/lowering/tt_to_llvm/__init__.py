"""
tt -> llvm + nvvm: Triton-style SIMT code generation.

Each tile is unrolled at compile time into per-thread registers according to a layout
(`layouts`, chosen by `assign`); memory accesses are vectorised from `axis_info`;
reductions shuffle within warps and meet in shared memory across warps.
"""

from tinyton.lowering.tt_to_llvm.context import LoweringError
from tinyton.lowering.tt_to_llvm.pass_ import (
    KernelInfo,
    TinytonToLLVMPass,
    kernel_arch,
    lower_to_llvm,
)

__all__ = ["KernelInfo", "LoweringError", "TinytonToLLVMPass", "kernel_arch", "lower_to_llvm"]
