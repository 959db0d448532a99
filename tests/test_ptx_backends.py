"""Both PTX toolchains on kernels written directly in the llvm + nvvm dialects."""

from __future__ import annotations

import re
from collections import Counter
from io import StringIO

import pytest
from llvm_kernels import op_zoo, row_sum, vector_add
from xdsl.context import Context
from xdsl.dialects import builtin, llvm
from xdsl.dialects.builtin import ModuleOp, f32, i32
from xdsl.ir import Block, Region
from xdsl.parser import Parser
from xdsl.printer import Printer

from tinyton.dialects.llvm_extra import load_llvm_extra
from tinyton.dialects.nvvm import NVVM
from tinyton.lowering.ptx import (
    ToolchainError,
    assemble_ptx,
    compile_llvm_module,
    mlir_path,
    resolve_toolchain,
)
from toolchains import TOOLCHAINS, needs_mlir, needs_ptxas

KERNELS = {"vector_add": vector_add, "row_sum": row_sum, "op_zoo": op_zoo}

# What each kernel's PTX must contain, whatever the toolchain.
EXPECTED = {
    "vector_add": [
        ".entry vadd4",
        ".reqntid 128, 1, 1",
        ".param .u64 .ptr .global .align 16 vadd4_param_0",
        "ld.global.v4.b32",
        "st.global.v4.b32",
    ],
    "row_sum": [
        ".entry row_sum",
        "shfl.sync.bfly.b32",
        "bar.sync",
        ".shared .align 16",
        "st.shared",
    ],
    "op_zoo": [
        ".entry zoo",
        "ex2.approx",
        "rsqrt.approx",
        "lg2.approx",
        "atom.global.add.f32",
        "cvt.rzi.s32.f32",
        "cvt.rzi.u32.f32",
        "cvt.rn.f32.u32",
    ],
}


def compile_kernel(name: str, toolchain: str) -> dict[str, str]:
    return compile_llvm_module(KERNELS[name](), arch="sm_90", toolchain=toolchain)


@pytest.mark.parametrize("toolchain", TOOLCHAINS)
@pytest.mark.parametrize("name", KERNELS)
def test_ptx_contents(name: str, toolchain: str):
    stages = compile_kernel(name, toolchain)
    assert set(stages) == {"llvm-mlir", "llvm-ir", "ptx"}
    assert ".target sm_90" in stages["ptx"]
    for needle in EXPECTED[name]:
        assert needle in stages["ptx"], needle


@needs_ptxas
@pytest.mark.parametrize("toolchain", TOOLCHAINS)
@pytest.mark.parametrize("name", KERNELS)
def test_ptxas_accepts(name: str, toolchain: str):
    assert assemble_ptx(compile_kernel(name, toolchain)["ptx"], "sm_90")[:4] == b"\x7fELF"


def _opcodes(ptx: str) -> Counter[str]:
    return Counter(re.findall(r"^\s+([a-z@][\w.]*)", ptx, re.M))


@needs_mlir
@pytest.mark.parametrize("name", KERNELS)
def test_toolchains_agree(name: str):
    """Same O3 pipeline and backend: the same instructions, up to ordering."""
    assert _opcodes(compile_kernel(name, "mlir")["ptx"]) == _opcodes(
        compile_kernel(name, "llvmlite")["ptx"]
    )


@needs_ptxas
def test_assemble_ptx_reports_ptxas_errors():
    with pytest.raises(ToolchainError, match="ptxas"):
        assemble_ptx(".version 8.0\n.target sm_90\n.address_size 64\nnot ptx", "sm_90")


def _calls(intrinsic: str, result_types=()) -> ModuleOp:
    zero = llvm.ConstantOp(builtin.IntegerAttr(0, i32), i32)
    call = llvm.CallIntrinsicOp(intrinsic, [zero.result], list(result_types))
    body = Region(Block([zero, call, llvm.ReturnOp()]))
    func = llvm.FuncOp(
        "k", llvm.LLVMFunctionType([]), linkage=llvm.LinkageAttr("external"), body=body
    )
    return ModuleOp([func])


@pytest.mark.parametrize("toolchain", TOOLCHAINS)
def test_unknown_intrinsic_is_an_error(toolchain: str):
    with pytest.raises(ToolchainError, match="llvm.nvvm.no.such"):
        compile_llvm_module(_calls("llvm.nvvm.no.such", [f32]), arch="sm_90", toolchain=toolchain)


def test_llvmlite_rejects_intrinsics_without_nvptx_lowering():
    """LLVM would abort the process on these; the converter refuses them first."""
    with pytest.raises(ToolchainError, match="no NVPTX lowering"):
        compile_llvm_module(_calls("llvm.log2.f32"), arch="sm_90", toolchain="llvmlite")


@needs_mlir
def test_mlir_tool_errors_carry_stderr():
    with pytest.raises(ToolchainError, match="could not find LLVM intrinsic"):
        compile_llvm_module(_calls("llvm.nvvm.barrier0"), arch="sm_90", toolchain="mlir")


def test_resolve_toolchain(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TINYTON_TOOLCHAIN", "llvmlite")
    assert resolve_toolchain() == "llvmlite"
    assert resolve_toolchain("mlir") == "mlir"
    monkeypatch.setenv("TINYTON_TOOLCHAIN", "auto")
    assert resolve_toolchain() == ("mlir" if mlir_path.available() else "llvmlite")
    with pytest.raises(ToolchainError, match="unknown toolchain"):
        resolve_toolchain("nvcc")


def test_bad_arch():
    with pytest.raises(ToolchainError, match="unsupported architecture"):
        compile_llvm_module(vector_add(), arch="90")


NVVM_TEXT = """\
builtin.module {
  llvm.func @f(%x : f32, %i : i32) -> f32 {
    %t = nvvm.read.ptx.sreg.tid.x : i32
    %l = nvvm.read.ptx.sreg.laneid : i32
    %s = nvvm.shfl.sync bfly %t, %x, %i, %l : f32 -> f32
    %u = nvvm.shfl.sync up %t, %i, %i, %l : i32 -> i32
    nvvm.barrier0
    %c = "llvm.fptosi"(%s) : (f32) -> i32
    llvm.return %s : f32
  }
}"""


def test_nvvm_and_extra_ops_round_trip():
    ctx = Context()
    for dialect in (builtin.Builtin, llvm.LLVM, NVVM):
        ctx.load_dialect(dialect)
    load_llvm_extra(ctx)
    module = Parser(ctx, NVVM_TEXT).parse_module()
    module.verify()
    assert "nvvm.shfl.sync bfly %t, %x, %i, %l : f32 -> f32" in str(module)
    assert '"llvm.fptosi"(%s) : (f32) -> i32' in str(module)
    # The generic form spells the shuffle kind like upstream, and parses back.
    generic = StringIO()
    Printer(stream=generic, print_generic_format=True).print_op(module)
    assert "<{kind = #nvvm<shfl_kind bfly>}>" in generic.getvalue()
    assert str(Parser(ctx, generic.getvalue()).parse_module()) == str(module)
