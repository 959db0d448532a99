"""`tl.inline_asm_elementwise`: PTX accepted by ptxas, the simulator's refusal, bad constraints, and (GPU) the
results of Triton's own inline-asm tests: several inputs, elements packed into 32-bit registers, several
outputs."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

import tinyton as triton
import tinyton.language as tl
from tinyton.frontend.arguments import runtime_values
from tinyton.lowering.ptx.toolchain import find_tool
from tinyton.runtime import driver
from tinyton.runtime.simulator import SimulatorError
from toolchains import needs_ptxas

RNG = np.random.default_rng(4)


@triton.jit
def funnel_shift_kernel(x_ptr, y_ptr, s_ptr, o_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x, y, s = tl.load(x_ptr + offs), tl.load(y_ptr + offs), tl.load(s_ptr + offs)
    z = tl.inline_asm_elementwise("shf.l.wrap.b32 $0, $1, $2, $3;", "=r,r, r, r", [x, y, s], dtype=tl.int32,
                                  is_pure=True, pack=1)
    tl.store(o_ptr + offs, z)


def funnel_shift(x: np.ndarray, y: np.ndarray, s: np.ndarray) -> np.ndarray:
    """`shf.l.wrap.b32 d, a, b, c` (PTX ISA): the 64-bit [b, a] (b the high word) shifted left by c & 31, its
    high word; here a = $1 = x, b = $2 = y, so y << n | x >> (32 - n), as Triton's test_inline_asm expects.
    (The H200 run gave exactly this; the reference had taken x for the high word.)"""
    lo, hi, n = (a.astype(np.uint64) for a in (x.view(np.uint32), y.view(np.uint32), s.view(np.uint32) & 31))
    return (((hi << 32 | lo) << n) >> 32 & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def test_funnel_shift_reference_is_ptxs_shf():
    """The PTX ISA's examples of shf.l.wrap: d = (b << n) | (a >> (32 - n)), a rotate when a == b, and
    b itself for a shift of 0 (or 32: wrap takes the count mod 32)."""
    a = np.array([0x80000001, 0x12345678, 7], np.uint32).view(np.int32)
    b = np.array([1, 0x9ABCDEF0, 9], np.uint32).view(np.int32)
    got = funnel_shift(a, b, np.array([1, 8, 32], np.int32)).view(np.uint32)
    assert got.tolist() == [(1 << 1) | (0x80000001 >> 31), (0x9ABCDEF0 << 8 | 0x12345678 >> 24) & 0xFFFFFFFF, 9]
    rotated = funnel_shift(a, a, np.array([4, 4, 4], np.int32)).view(np.uint32)
    assert rotated.tolist() == [((v << 4) | (v >> 28)) & 0xFFFFFFFF for v in a.view(np.uint32).tolist()]


@triton.jit
def packed_bytes_kernel(x_ptr, o_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    y = tl.inline_asm_elementwise("and.b32 $0, $1, 0x1F1F1F1F; \n shl.b32 $0, $0, 3;", "=r,r", [x],
                                  dtype=tl.uint8, is_pure=True, pack=4)
    tl.store(o_ptr + offs, y)


@triton.jit
def two_outputs_kernel(x_ptr, y_ptr, z_ptr, w_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x, y = tl.load(x_ptr + offs), tl.load(y_ptr + offs)
    z, w = tl.inline_asm_elementwise("{ sub.u32 $0, $2, $3; \n sub.u32 $1, $3, $2; }", "=r,=r,r,r", [x, y],
                                     dtype=(tl.uint32, tl.uint32), is_pure=True, pack=1)
    tl.store(z_ptr + offs, z)
    tl.store(w_ptr + offs, w)


@triton.jit
def half_pairs_kernel(x_ptr, y_ptr, o_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    x, y = tl.load(x_ptr + offs), tl.load(y_ptr + offs)
    z = tl.inline_asm_elementwise("add.rn.f16x2 $0, $1, $2;", "=r,r,r", [x, y], dtype=tl.float16, is_pure=False,
                                  pack=2)
    tl.store(o_ptr + offs, z)


def cases() -> dict[str, tuple]:
    """Per case: (kernel, inputs, outputs, references, an instruction of its asm), N = 256."""
    n = 256
    i32 = [RNG.integers(-(2**31), 2**31 - 1, n, dtype=np.int64).astype(np.int32) for _ in range(3)]
    u8 = RNG.integers(0, 256, n).astype(np.uint8)
    u32 = [RNG.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32) for _ in range(2)]
    f16 = [RNG.standard_normal(n).astype(np.float16) for _ in range(2)]
    return {
        "funnel-shift": (funnel_shift_kernel, i32, [np.zeros(n, np.int32)], [funnel_shift(*i32)], "shf.l.wrap.b32"),
        "packed-bytes": (
            packed_bytes_kernel, [u8], [np.zeros(n, np.uint8)], [((u8 & 0x1F) << 3).astype(np.uint8)], "shl.b32"
        ),
        "two-outputs": (
            two_outputs_kernel, u32, [np.zeros(n, np.uint32), np.zeros(n, np.uint32)],
            [u32[0] - u32[1], u32[1] - u32[0]], "sub.u32",
        ),
        "half-pairs": (half_pairs_kernel, f16, [np.zeros(n, np.float16)], [f16[0] + f16[1]], "add.rn.f16x2"),
    }


@needs_ptxas
@pytest.mark.parametrize("name", sorted(cases()))
def test_inline_asm_reaches_ptxas(name, tmp_path):
    kernel, inputs, outputs, _, instruction = cases()[name]
    compiled = kernel.compile(*inputs, *outputs, N=256)
    assert "llvm.inline_asm" in compiled.asm["llvm-mlir"]
    ptx = compiled.asm["ptx"]
    assert instruction in ptx
    (tmp_path / "k.ptx").write_text(ptx)
    subprocess.run([find_tool("ptxas"), "-arch=sm_90", str(tmp_path / "k.ptx"), "-o", str(tmp_path / "k.cubin")],
                   check=True)


def test_the_simulator_refuses_inline_asm_at_the_users_line():
    kernel, inputs, outputs, _, _ = cases()["funnel-shift"]
    compiled = kernel.compile(*inputs, *outputs, N=256)
    with pytest.raises(SimulatorError, match=r"cannot run inline PTX .*test_inline_asm.py:\d+.*TINYTON_BACKEND=cuda"):
        compiled.simulate((1,), runtime_values([*inputs, *outputs]))


@triton.jit
def bad_constraints_kernel(x_ptr, o_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r,r", [tl.load(x_ptr + offs)], dtype=tl.int32,
                                  is_pure=True, pack=1)
    tl.store(o_ptr + offs, y)


def test_constraints_that_do_not_fit_the_operands_are_an_error():
    x = np.zeros(64, np.int32)
    with pytest.raises(triton.CompilationError, match=r"test_inline_asm.py:\d+.*1 output and 1 input registers"):
        bad_constraints_kernel.compile(x, x, N=64)


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(cases()))
def test_inline_asm_on_the_gpu(name):
    kernel, inputs, outputs, references, _ = cases()[name]
    kernel[(1,)](*inputs, *outputs, N=256)
    driver.synchronize()
    for got, want in zip(outputs, references):
        np.testing.assert_array_equal(got, want)
