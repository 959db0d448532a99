"""Marks shared by the tests that compile to PTX: both PTX paths as a parameter (the mlir one only where the LLVM 22
tools are installed), and tests that need ptxas."""

from __future__ import annotations

import pytest

from tinyton.lowering.ptx import mlir_path
from tinyton.lowering.ptx.toolchain import find_tool

needs_mlir = pytest.mark.skipif(not mlir_path.available(), reason="LLVM 22 tools not found")
needs_ptxas = pytest.mark.skipif(find_tool("ptxas") is None, reason="ptxas not found")
TOOLCHAINS = [pytest.param("mlir", marks=needs_mlir), "llvmlite"]
