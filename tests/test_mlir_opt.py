"""Upstream `mlir-opt` in the subprocess PTX path: every llvm + nvvm module tinyton emits is verified by
upstream MLIR and run through `--convert-nvvm-to-llvm` before mlir-translate and llc. A representative
kernel of each kind (elementwise, reductions, mma.sync and wgmma matmuls, TMA, attention, atomics) passes,
for sm_80 and sm_90; the llvmlite path gives the same PTX (up to llc's comments), and both are
ptxas-clean. A module upstream rejects fails loudly, naming mlir-opt."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from target_kernels import KERNELS
from xdsl.dialects import llvm
from xdsl.dialects.builtin import ModuleOp, i32
from xdsl.ir import Block, Region

from tinyton import profiling
from tinyton.compiler import compile_module
from tinyton.lowering.ptx import ToolchainError, assemble_ptx, compile_llvm_module, mlir_path
from tinyton.lowering.ptx.llvmlite_path import _target_machine
from tinyton.lowering.ptx.toolchain import DATA_LAYOUT, find_tool

pytestmark = [
    pytest.mark.skipif(not mlir_path.available(), reason="LLVM/MLIR 22 tools (mlir-opt) not found"),
    pytest.mark.skipif(find_tool("ptxas") is None, reason="ptxas not found"),
]
REORDERED = {"attention"}
"""Kernels whose PTX the two paths schedule differently (the same instructions, other registers and order)."""


def _code(ptx: str) -> list[str]:
    """The PTX without comments and blank lines (llc prints per-block comments the llvmlite path does not)."""
    lines = (re.sub(r"//.*", "", line).rstrip() for line in ptx.splitlines())
    return [line for line in lines if line]


def _opcode(line: str) -> str:
    return line.split()[0]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernels_pass_mlir_opt_and_match_llvmlite(name, arch, monkeypatch):
    monkeypatch.setenv("TINYTON_ARCH", arch)
    kernel = KERNELS[name]()
    kernel.stage("ptx")
    ptx = {}
    for toolchain in ("mlir", "llvmlite"):
        fresh = compile_module(kernel.module.clone(), num_warps=kernel.num_warps, arch=kernel.target_arch,
                               toolchain=toolchain)
        assert fresh.asm["llvm-ir"]  # compiles for real, not from the disk cache
        ptx[toolchain] = fresh.asm["ptx"]
        assert assemble_ptx(ptx[toolchain], kernel.target_arch)
    if name in REORDERED:
        assert Counter(map(_opcode, _code(ptx["mlir"]))) == Counter(map(_opcode, _code(ptx["llvmlite"])))
    else:
        assert _code(ptx["mlir"]) == _code(ptx["llvmlite"])
    if kernel.target_arch == "sm_90a":
        text = fresh.asm["llvm-mlir"]
        assert "nvvm.wgmma.fence.aligned" in text and "nvvm.wgmma.commit.group.sync.aligned" in text
    if name == "tma_matmul" and arch == "sm_90":
        assert "nvvm.fence.mbarrier.init" in fresh.asm["llvm-mlir"]
        assert "fence.mbarrier_init.release.cluster;" in ptx["mlir"]


def test_a_module_upstream_rejects_is_a_compiler_bug():
    """A function declared to return an i32 whose block returns nothing: xDSL prints it unverified (the
    lowering's output is not verified again), upstream's verifier refuses it before mlir-translate."""
    body = Region(Block([llvm.ReturnOp()]))
    function = llvm.FuncOp("k", llvm.LLVMFunctionType([], i32), linkage=llvm.LinkageAttr("external"), body=body)
    module = ModuleOp([function])
    with pytest.raises(ToolchainError, match=r"upstream MLIR rejects .* \(a compiler bug\): mlir-opt failed"):
        compile_llvm_module(module, arch="sm_90", toolchain="mlir")


def test_profile_shows_the_mlir_opt_stage(monkeypatch, capsys):
    monkeypatch.setenv("TINYTON_PROFILE", "1")
    monkeypatch.setenv("TINYTON_ARCH", "sm_90")
    kernel = KERNELS["vector_add"]()
    with profiling.stage("compile"):
        compile_module(kernel.module.clone(), num_warps=kernel.num_warps, toolchain="mlir").asm["llvm-ir"]
    err = capsys.readouterr().err
    assert "mlir-opt (verify, convert-nvvm-to-llvm)" in err
    assert err.index("mlir-opt") < err.index("mlir-translate") < err.index("llc")


def test_both_paths_use_short_shared_pointers():
    """The subprocess path's module carries the data layout llvmlite's target machine gives (32-bit shared
    pointers, `toolchain.DATA_LAYOUT`): shared addresses are one register on both paths."""
    assert str(_target_machine("sm_90a").target_data) == DATA_LAYOUT
    assert "p3:32:32" in DATA_LAYOUT
