"""Cross-compiling without a GPU: `TINYTON_ARCH` (and `tinyton compile --arch`) choose the target, so the
examples' kernels compile for sm_80 (mma.sync), sm_90 (sm_90a for dots that fit wgmma) and sm_90a (wgmma,
TMA) on any machine, and ptxas checks each. The target is part of every cache key; an unknown name is a
clear error."""

from __future__ import annotations

import numpy as np
import pytest
from target_kernels import DOTS, EXAMPLES, KERNELS, matmul, softmax

import tinyton as tt
from tinyton.cli.compile import main as tinyton_main
from tinyton.compiler import target
from tinyton.errors import CompilationError
from tinyton.lowering.ptx import assemble_ptx
from toolchains import needs_ptxas

F16 = np.float16


EXPECTED_TARGET = {  # TINYTON_ARCH -> the .target of a kernel with a wgmma-sized dot / of one without
    "sm_80": ("sm_80", "sm_80"), "sm_90": ("sm_90a", "sm_90"), "sm_90a": ("sm_90a", "sm_90a"),
}


@needs_ptxas
@pytest.mark.parametrize("arch", sorted(EXPECTED_TARGET))
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_examples_cross_compile_and_assemble(name, arch, monkeypatch):
    monkeypatch.setenv("TINYTON_ARCH", arch)
    compiled = KERNELS[name]()
    ptx = compiled.asm["ptx"]
    with_dot, without = EXPECTED_TARGET[arch]
    expected = with_dot if name in DOTS else without
    assert f".target {expected}" in ptx
    assert compiled.target_arch == expected
    if name in DOTS:
        tensor_cores = "wgmma.mma_async" if expected == "sm_90a" else "mma.sync.aligned"
        assert tensor_cores in ptx
        assert ("mma.sync" in ptx) == (expected == "sm_80")
    if name == "tma_matmul":
        assert ("cp.async.bulk.tensor" in ptx) == arch.startswith("sm_90")
    assert assemble_ptx(ptx, expected)


def test_each_target_is_its_own_variant(monkeypatch):
    """The same call compiled under two targets gives two kernels (the jit's variants, the cache keys)."""
    monkeypatch.setenv("TINYTON_ARCH", "sm_80")
    old = matmul()
    monkeypatch.setenv("TINYTON_ARCH", "sm_90a")
    new = matmul()
    assert old is not new
    assert "mma.sync" in old.asm["ptx"] and "wgmma" in new.asm["ptx"]


def test_array_programs_follow_the_target(monkeypatch):
    @tt.jit
    def product(a, b):
        return a @ b

    a = np.ones((256, 256), F16)
    ptx = {}
    for arch in ("sm_80", "sm_90a"):
        monkeypatch.setenv("TINYTON_ARCH", arch)
        ptx[arch] = product.compile(a, a).asm["ptx"]
    assert ".target sm_80" in ptx["sm_80"] and "mma.sync" in ptx["sm_80"]
    assert ".target sm_90a" in ptx["sm_90a"] and "wgmma.mma_async" in ptx["sm_90a"]


@pytest.mark.parametrize("bad", ["sm_75", "sm90", "hopper", "sm_100"])
def test_unknown_arch_is_a_clear_error(bad, monkeypatch):
    monkeypatch.setenv("TINYTON_ARCH", bad)
    with pytest.raises(CompilationError, match=rf"TINYTON_ARCH='{bad}' is not an architecture .* sm_80, .* sm_90a"):
        softmax()
    with pytest.raises(CompilationError, match="one of sm_80"):
        target.requested_arch()


def test_cli_arch(capsys, monkeypatch):
    monkeypatch.delenv("TINYTON_ARCH", raising=False)
    args = [str(EXAMPLES / "matmul.py"), "-k", "matmul_kernel", "-s", "*fp16,*fp16,*fp32,i32,i32,i32",
            "-D", "BLOCK_M=64", "-D", "BLOCK_N=64", "-D", "BLOCK_K=32"]
    assert tinyton_main(["compile", *args, "--arch", "sm_80"]) == 0
    assert ".target sm_80" in capsys.readouterr().out
    assert tinyton_main(["compile", *args, "--arch", "sm_75"]) == 1
    assert "--arch='sm_75' is not an architecture tinyton compiles for" in capsys.readouterr().err


def test_cli_stage_printing_names_mlir_opt(capsys, monkeypatch):
    monkeypatch.setenv("TINYTON_TOOLCHAIN", "mlir")
    args = [str(EXAMPLES / "vector_add.py"), "-s", "*i32,*i32,*i32,i32", "--emit", "ptx", "-v", "--arch", "sm_80"]
    assert tinyton_main(["compile", *args]) == 0
    out = capsys.readouterr().out
    assert "IR after mlir-opt --convert-nvvm-to-llvm (upstream verifier) + mlir-translate" in out
    assert ".target sm_80" in out


@pytest.mark.parametrize("compiled_for, device, loads", [
    ("sm_80", "sm_90", True), ("sm_90a", "sm_90", True), ("sm_90", "sm_90", True),
    ("sm_90a", "sm_80", False), ("sm_90", "sm_89", False),
])
def test_a_gpu_refuses_ptx_it_cannot_load(compiled_for, device, loads, monkeypatch):
    """TINYTON_ARCH=sm_80 runs the mma.sync path on a Hopper (PTX is forward compatible); sm_90a PTX runs on
    an sm_90 only; anything newer than the GPU is refused by name before the driver's opaque error."""
    from tinyton.runtime import driver

    kernel = softmax()
    kernel.target_arch = compiled_for
    monkeypatch.setattr(driver, "default_arch", lambda: device)
    if loads:
        kernel._check_loadable()
    else:
        with pytest.raises(RuntimeError, match=f"compiled for {compiled_for} .* this {device} GPU cannot run"):
            kernel._check_loadable()
