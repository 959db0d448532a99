"""TMA for the array program's `a @ b` beyond row-major 2-D operands: `x @ w.T` (w read as stored, its
blocks fed to the dot through `tt.trans`), batched operands (a descriptor of rank 3 whose outer index is
the program's batch index, merged batch dimensions as one), broadcast ones (a batch dimension of stride 0
drops out), a batch no right operand varies along, folded into the rows (`row_axes`: x's 2-D map holds
the rows of every batch element), and `a.T @ b` (A stored K x M, a weight gradient's layout: its blocks copied as
stored and read M-major by wgmma, `mma_layout.m_major_a`). Checked: the simulator against NumPy, shapes with tails
included; the tensor maps and ptxas sm_90a on both PTX paths; sm_80 and `TINYTON_TMA=0` keep cp.async; on the GPU,
against NumPy."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tinyton as tt
from tinyton.compiler import compile_module
from tinyton.lowering.ptx import assemble_ptx
from toolchains import TOOLCHAINS, needs_ptxas


@tt.jit
def linear(x, w):
    return x @ w.T


@tt.jit
def matmul(a, b):
    return a @ b


@tt.jit
def transposed(at, b):
    return at.swapaxes(-1, -2) @ b


CASES = {
    "x@w.T": (linear, (200, 72), (136, 72)),
    "batched x@w.T": (linear, (3, 200, 72), (136, 72)),
    "4-D x@w.T": (linear, (2, 3, 64, 64), (128, 64)),
    "batched a@b": (matmul, (3, 200, 72), (3, 72, 136)),
    "broadcast b": (matmul, (3, 200, 72), (72, 136)),
    "broadcast a": (matmul, (200, 72), (3, 72, 136)),
    "a.T@b": (transposed, (72, 200), (72, 136)),
    "batched a.T@b": (transposed, (3, 72, 200), (3, 72, 136)),
}
"""name -> (program, x shape, w or b shape)."""

MAPS = {
    "x@w.T": [([200, 72], [64, 32]), ([136, 72], [64, 32])],
    "batched x@w.T": [([600, 72], [64, 32]), ([136, 72], [64, 32])],
    "4-D x@w.T": [([384, 64], [64, 32]), ([128, 64], [64, 32])],
    "batched a@b": [([3, 200, 72], [1, 64, 32]), ([3, 72, 136], [1, 32, 64])],
    "broadcast b": [([600, 72], [64, 32]), ([72, 136], [32, 64])],
    "broadcast a": [([200, 72], [64, 32]), ([3, 72, 136], [1, 32, 64])],
    "a.T@b": [([72, 200], [32, 64]), ([72, 136], [32, 64])],
    "batched a.T@b": [([3, 72, 200], [1, 32, 64]), ([3, 72, 136], [1, 32, 64])],
}
"""The tensor maps (sizes, box) of each case on sm_90a: both operands on TMA."""


def _case(name, dtype=np.float16, seed=0):
    program, xs, ws = CASES[name]
    rng = np.random.default_rng(seed)
    return program, rng.standard_normal(xs).astype(dtype), rng.standard_normal(ws).astype(dtype)


def _reference(program, x, w):
    x, w = x.astype(np.float32), w.astype(np.float32)
    if program is transposed:
        return x.swapaxes(-1, -2) @ w
    return x @ (w.swapaxes(-1, -2) if program is linear else w)


def _ptx(name, arch, toolchain="llvmlite"):
    program, x, w = _case(name)
    (kernel,) = program.compile(x, w).kernels()
    return compile_module(kernel.module.clone(), num_warps=kernel.num_warps, arch=arch, toolchain=toolchain)


@pytest.mark.parametrize("name", CASES)
def test_simulator_matches_numpy(name):
    program, x, w = _case(name)
    np.testing.assert_allclose(program(x, w).astype(np.float32), _reference(program, x, w), rtol=2e-2, atol=2e-2)


@needs_ptxas
@pytest.mark.parametrize("toolchain", TOOLCHAINS)
@pytest.mark.parametrize("name", CASES)
def test_operands_are_tma_copies(name, toolchain):
    compiled = _ptx(name, "sm_90a", toolchain)
    ptx = compiled.asm["ptx"]
    assert [(m["shape"], m["box"]) for m in compiled.tensor_maps] == MAPS[name]
    ranks = {len(m["shape"]) for m in compiled.tensor_maps}
    assert all(f"cp.async.bulk.tensor.{r}d.shared::cluster" in ptx for r in ranks)
    assert "cp.async.cg" not in ptx and "wgmma.mma_async" in ptx
    assert assemble_ptx(ptx, "sm_90a")


def test_partly_broadcast_batch_keeps_cp_async():
    """a (2, 1, M, K) @ b (3, K, N): one program index runs over both batch dimensions, which each operand
    only partly reads; no stride steps it, so both stay plain loads."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 1, 64, 64)).astype(np.float16), rng.standard_normal((3, 64, 128)).astype(np.float16)
    np.testing.assert_allclose(matmul(a, b).astype(np.float32), a.astype(np.float32) @ b.astype(np.float32), rtol=2e-2, atol=2e-2)
    (kernel,) = matmul.compile(a, b).kernels()
    assert compile_module(kernel.module.clone(), num_warps=kernel.num_warps, arch="sm_90a").tensor_maps == ()


@needs_ptxas
@pytest.mark.parametrize("toolchain", TOOLCHAINS)
@pytest.mark.parametrize("name", ["a.T@b", "batched a.T@b"])
def test_a_transposed_is_read_m_major(name, toolchain):
    """The wgmmas take A M-major (imm-trans-a 1) from the slots TMA fills, as B K x N (imm-trans-b 1): no transpose
    in registers, and the dot stays in flight (its wait is `wait_group 1`)."""
    ptx = _ptx(name, "sm_90a", toolchain).asm["ptx"]
    assert re.findall(r"wgmma\.mma_async[^;]*, p, 1, 1, (\d), (\d);", ptx) and set(
        re.findall(r"wgmma\.mma_async[^;]*, p, 1, 1, (\d), (\d);", ptx)) == {("1", "1")}
    assert "wgmma.wait_group.sync.aligned 1;" in ptx and "ld.global" not in ptx


@needs_ptxas
@pytest.mark.parametrize("name", ["x@w.T", "batched a@b", "a.T@b"])
def test_sm_80_and_tma_off_keep_cp_async(name, monkeypatch):
    for arch, tma in (("sm_80", "1"), ("sm_90a", "0")):
        monkeypatch.setenv("TINYTON_TMA", tma)
        compiled = _ptx(name, arch)
        assert "cp.async.bulk" not in compiled.asm["ptx"] and not compiled.tensor_maps
        assert assemble_ptx(compiled.asm["ptx"], arch)


@pytest.mark.gpu
@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("scale", [1, 4], ids=["small", "large"])
def test_gpu_matches_numpy(name, scale):
    program, xs, ws = CASES[name]
    rng = np.random.default_rng(1)
    xs, ws = (*xs[:-2], xs[-2] * scale, xs[-1] * scale), (*ws[:-2], ws[-2] * scale, ws[-1] * scale)
    x, w = rng.standard_normal(xs).astype(np.float16), rng.standard_normal(ws).astype(np.float16)
    np.testing.assert_allclose(program(x, w).astype(np.float32), _reference(program, x, w), rtol=3e-2, atol=3e-2)
