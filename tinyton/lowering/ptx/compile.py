"""Entry points of the PTX backend: toolchain selection, compilation, assembly."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from xdsl.dialects.builtin import ModuleOp

from tinyton.lazy import lazy_module
from tinyton.lowering.ptx import mlir_path
from tinyton.lowering.ptx.toolchain import (
    ToolchainError,
    find_tool,
    parse_arch,
    run_tool,
)

llvmlite_path = lazy_module("tinyton.lowering.ptx.llvmlite_path")  # llvmlite and xDSL's converter load slowly

TOOLCHAINS = ("mlir", "llvmlite")
_EXTERN_FUNC = re.compile(r"^\.extern\s+\.func\s+(?:\([^)]*\)\s*)?([\w.$]+)", re.MULTILINE)


def resolve_toolchain(toolchain: str | None = None) -> str:
    """`toolchain`, else `$TINYTON_TOOLCHAIN`, else auto: mlir when its tools exist."""
    choice = toolchain or os.environ.get("TINYTON_TOOLCHAIN") or "auto"
    if choice == "auto":
        return "mlir" if mlir_path.available() else "llvmlite"
    if choice not in TOOLCHAINS:
        raise ToolchainError(f"unknown toolchain {choice!r}; use mlir, llvmlite or auto")
    return choice


SYSTEM_CALLS = frozenset({"vprintf"})
"""External functions of CUDA's device runtime that the driver resolves when it loads the PTX."""


def compile_llvm_module(
    module: ModuleOp, *, arch: str, toolchain: str | None = None, print_input: bool = True
) -> dict[str, str]:
    """
    Compile a module in the llvm (+ nvvm, llvm_extra) dialects to PTX for `arch` (`sm_NN`, decided by the
    caller: the lowering knows no device).

    Returns the stages `llvm-mlir` (the printed input), `llvm-ir` (after O3) and `ptx`; without
    `print_input`, `llvm-mlir` only where the toolchain printed it anyway (the mlir tools read it; llvmlite
    does not, and xDSL's printing was a twentieth of a cold compile that wants the PTX alone).
    Raises `ToolchainError` with the failing tool's diagnostics.
    """
    parse_arch(arch)
    # Not verified again here: the lowering emits typed ops, and mlir-translate or LLVM's verifier checks
    # what they are given (xDSL's verifier cost a fifth of a cold compile).
    if resolve_toolchain(toolchain) == "mlir":
        stages = mlir_path.compile_with_mlir_tools(module, arch)
    else:
        stages = llvmlite_path.compile_with_llvmlite(module, arch, print_input)
    # The driver does not link: an external function (such as an `llvm.*` name that
    # is no intrinsic, which LLVM silently declares) would only fail at load time.
    unresolved = [f for f in _EXTERN_FUNC.findall(stages["ptx"]) if f not in SYSTEM_CALLS]
    if unresolved:
        raise ToolchainError(
            f"unresolved function(s) {', '.join(unresolved)}: unknown intrinsic or "
            "missing definition"
        )
    return stages


def assemble_ptx(ptx: str, arch: str) -> bytes:
    """Assemble PTX with `ptxas` into a cubin; `ToolchainError` if it is rejected."""
    ptxas = find_tool("ptxas")
    if ptxas is None:
        raise ToolchainError("ptxas not found on PATH")
    with tempfile.TemporaryDirectory(prefix="tinyton-") as tmp:
        cubin = Path(tmp, "kernel.cubin")
        source = Path(tmp, "kernel.ptx")
        source.write_text(ptx)
        run_tool([ptxas, f"-arch={arch}", str(source), "-o", str(cubin)])
        return cubin.read_bytes()
