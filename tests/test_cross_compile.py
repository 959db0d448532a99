"""Cross-compiling without a GPU: `TINYTON_ARCH` (and `tinyton compile --arch`) choose the target, so the
examples' kernels compile for sm_80 (mma.sync), sm_90 (sm_90a for dots that fit wgmma) and sm_90a (wgmma,
TMA) on any machine, and ptxas checks each. The target is part of every cache key; an unknown name is a
clear error."""

from __future__ import annotations

import runpy
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import tinyton as tt
from tinyton.cli.compile import main as tinyton_main
from tinyton.compiler import target
from tinyton.errors import CompilationError
from tinyton.lowering.ptx import assemble_ptx
from tinyton.lowering.ptx.toolchain import find_tool

EXAMPLES = Path(__file__).parent.parent / "examples"
needs_ptxas = pytest.mark.skipif(find_tool("ptxas") is None, reason="ptxas not found")
F16, BF16 = np.float16, np.dtype(ml_dtypes.bfloat16)


def _example(name: str) -> dict:
    """An example's namespace without running its script part."""
    return runpy.run_path(str(EXAMPLES / f"{name}.py"), run_name="example")


def _matmul(dtype=F16):
    kernel = _example("matmul")["matmul_kernel"]
    a, b, c = np.zeros((256, 256), dtype), np.zeros((256, 256), dtype), np.zeros((256, 256), np.float32)
    return kernel.compile(a, b, c, 256, 256, 256, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=4)


def _attention():
    kernel = _example("flash_attention")["flash_attention"]
    q = np.zeros((1, 2, 256, 64), F16)
    return kernel.compile(q, q, q, q, 256, 0.18, HEAD_DIM=64, BLOCK_M=64, BLOCK_N=64, CAUSAL=True, num_warps=4)


def _softmax():
    kernel = _example("softmax")["softmax_kernel"]
    x = np.zeros((8, 1000), np.float32)
    return kernel.compile(x, x, 1000, 1000, BLOCK=1024, num_warps=4)


def _descriptor_matmul():
    from test_tma import desc_matmul, made_matmul  # noqa: F401 - the TMA test kernels

    a = np.zeros((256, 256), F16)
    return made_matmul.compile(a, a, np.zeros((256, 256), np.float32), 256, 256, 256, BM=128, BN=128, BK=64,
                               num_warps=4)


KERNELS = {"matmul": _matmul, "flash_attention": _attention, "softmax": _softmax, "tma_matmul": _descriptor_matmul}
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
    expected = without if name == "softmax" else with_dot
    assert f".target {expected}" in ptx
    assert compiled.target_arch == expected
    if name != "softmax":
        tensor_cores = "wgmma.mma_async" if expected == "sm_90a" else "mma.sync.aligned"
        assert tensor_cores in ptx
        assert ("mma.sync" in ptx) == (expected == "sm_80")
    if name == "tma_matmul":
        assert ("cp.async.bulk.tensor" in ptx) == arch.startswith("sm_90")
    assert assemble_ptx(ptx, expected)


def test_each_target_is_its_own_variant(monkeypatch):
    """The same call compiled under two targets gives two kernels (the jit's variants, the cache keys)."""
    monkeypatch.setenv("TINYTON_ARCH", "sm_80")
    old = _matmul()
    monkeypatch.setenv("TINYTON_ARCH", "sm_90a")
    new = _matmul()
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
        _softmax()
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
