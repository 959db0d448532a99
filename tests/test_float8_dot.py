"""`tl.dot` on float8 operands (Triton's tutorial 03 multiplies float8e5 matrices): f32 accumulation of exact
products (wgmma e4m3/e5m2 on sm_90a, widened to f16 elsewhere: exact), so the product equals the f16 product of
the same values (tests/test_fp8_matmul.py has the per-target checks); float8 arrays come as NumPy
(`ml_dtypes`) arrays or torch tensors, strided views included."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from sim_helpers import run_sim

import tinyton as triton
import tinyton.language as tl
from tinyton.dtypes import float8e4nv, float8e5
from tinyton.lowering.ptx.toolchain import find_tool


@triton.jit
def dot_f8(a, b, c, sam, sak, sbk, sbn, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    m, n, k = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    x = tl.load(a + m[:, None] * sam + k[None, :] * sak)
    y = tl.load(b + k[:, None] * sbk + n[None, :] * sbn)
    tl.store(c + m[:, None] * N + n[None, :], tl.dot(x, y))


def _operands(dtype, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((16, 32)).astype(dtype)
    b = rng.standard_normal((32, 16)).astype(dtype)
    return a, b


@pytest.mark.parametrize("fp8", [float8e5, float8e4nv], ids=lambda d: d.name)
def test_float8_dot_is_the_f16_product(fp8):
    a, b = _operands(fp8.np)
    c = np.zeros((16, 16), np.float32)
    run_sim(dot_f8, (1,), a, b, c, 32, 1, 16, 1, M=16, N=16, K=32)
    expected = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c, expected, rtol=1e-5, atol=1e-5)


def test_float8_torch_tensors_and_transposed_views():
    torch = pytest.importorskip("torch")
    a = torch.randn(16, 32).to(torch.float8_e5m2)
    b = torch.randn(16, 32).to(torch.float8_e5m2).T  # a strided view, as tutorial 03 passes `b.T`
    c = torch.zeros(16, 16)
    dot_f8[(1,)](a, b, c, *a.stride(), *b.stride(), M=16, N=16, K=32)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(find_tool("ptxas") is None, reason="ptxas not found")
def test_float8_dot_ptx_is_accepted_by_ptxas():
    a, b = _operands(float8e5.np)
    ptx = dot_f8.compile(a, b, np.zeros((16, 16), np.float32), 32, 1, 16, 1, M=16, N=16, K=32).asm["ptx"]
    proc = subprocess.run([find_tool("ptxas"), "-arch=sm_90", "-", "-o", "/dev/null"], input=ptx.encode(), capture_output=True, check=False)
    assert proc.returncode == 0, proc.stderr.decode()
