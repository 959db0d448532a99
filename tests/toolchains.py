"""Marks and helpers shared by the tests that compile to PTX: both PTX paths as a parameter (the mlir one only where
the LLVM 22 tools are installed), tests that need ptxas, and the loops of a kernel's PTX."""

from __future__ import annotations

import pytest

from tinyton.lowering.ptx import mlir_path
from tinyton.lowering.ptx.toolchain import find_tool

needs_mlir = pytest.mark.skipif(not mlir_path.available(), reason="LLVM 22 tools not found")
needs_ptxas = pytest.mark.skipif(find_tool("ptxas") is None, reason="ptxas not found")
TOOLCHAINS = [pytest.param("mlir", marks=needs_mlir), "llvmlite"]


def ptx_loops(ptx: str) -> list[str]:
    """The text of each PTX loop: from a label to the branch back to it (llc comments its labels)."""
    lines = ptx.splitlines()
    starts: dict[str, int] = {}
    loops = []
    for i, line in enumerate(lines):
        if line.startswith("$L__BB"):
            starts[line.split(":")[0]] = i
        elif "bra" in line and (target := line.split()[-1].rstrip(";")) in starts:
            loops.append("\n".join(lines[starts[target] : i]))
    return loops
