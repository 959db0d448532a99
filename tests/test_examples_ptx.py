"""Every kernel of every example goes through both PTX paths and assembles with ptxas -arch=sm_90.

Each example runs (on the simulator here, or the GPU) so that the kernels it really compiles — hand-written
variants, the tile kernels of its array programs and of the torch backend's programs (an example's
`tinyton.torch.explain` result) — are collected, then each is compiled afresh through
`mlir-translate` + `llc` and through llvmlite.
"""

from __future__ import annotations

import runpy
import shutil
from pathlib import Path

import pytest

from tinyton.compiler import compile_module
from tinyton.frontend.jit import JITFunction
from tinyton.frontend.programs import _PROGRAMS
from tinyton.lowering.ptx import assemble_ptx

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.py"))
HAVE_MLIR_TOOLS = Path("/usr/lib/llvm-22/bin/mlir-translate").exists()


def compiled_kernels(example: Path) -> list:
    """The CompiledKernels that running `example` produced."""
    namespace = runpy.run_path(str(example), run_name="__main__")
    kernels = []
    for value in namespace.values():
        if isinstance(value, JITFunction):
            kernels += value._variants.values()
            for program in _PROGRAMS.get(value.fn, {}).values():
                kernels += program.kernels()
        for group in getattr(getattr(value, "report", None), "groups", ()):  # a tinyton.torch explanation
            for program in group.programs.values():
                kernels += program.kernels()
    return kernels


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas (CUDA toolkit) is not installed")
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
@pytest.mark.parametrize(
    "toolchain",
    [
        pytest.param("mlir", marks=pytest.mark.skipif(not HAVE_MLIR_TOOLS, reason="no LLVM/MLIR 22 tools")),
        "llvmlite",
    ],
)
def test_example_kernels_assemble(example: Path, toolchain: str, capsys):
    kernels = compiled_kernels(example)
    capsys.readouterr()
    assert kernels, f"{example.name} compiled no kernel"
    for kernel in kernels:
        fresh = compile_module(kernel.module.clone(), num_warps=kernel.num_warps, arch="sm_90", toolchain=toolchain)
        assert fresh.asm["llvm-ir"]  # asking for the LLVM IR compiles for real, bypassing the disk cache
        ptx = fresh.asm["ptx"]
        assert ".entry" in ptx
        assert assemble_ptx(ptx, "sm_90")
