"""A bf16 reciprocal is the correctly rounded one on every bf16, though the GPU takes `rcp.approx.f32` for it.

`1 / x`, `tt.reciprocal` and sigmoid's last step of a bf16 array compute the f32 reciprocal with the approximate
instruction (a tenth of `rcp.rn.f32`'s instructions, no slow-path branch: the SwiGLU epilogue's largest cost),
whose bf16 rounding is the exact quotient's (elementwise.py `_bf16_reciprocal` says why). Checked here for all
65,536 bit patterns, bit for bit against NumPy (ml_dtypes rounds the float32 quotient), on the simulator and,
marked `gpu`, on the GPU; and in the PTX of both paths without one.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tinyton as tt
from tinyton.compiler import compile_module
from tinyton.frontend.tracing import trace
from tinyton.lowering.fusion import fusion_to_kernels
from tinyton.rewrites.pipeline import fuse_module
from tinyton.runtime import driver
from toolchains import TOOLCHAINS

BF16 = ml_dtypes.bfloat16
EVERY_BF16 = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(BF16)
DEVICES = ["default", pytest.param("gpu", marks=pytest.mark.gpu)]


@tt.jit
def divided(x):
    return 1 / x


@tt.jit
def reciprocal(x):
    return tt.reciprocal(x)


@tt.jit
def sigmoid(x):
    return tt.sigmoid(x)


def _same(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Equal bits, or both NaN."""
    nan = np.isnan(got.astype(np.float32)) & np.isnan(want.astype(np.float32))
    return (got.view(np.uint16) == want.view(np.uint16)) | nan


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("program", [divided, reciprocal], ids=["1 / x", "reciprocal"])
def test_every_bf16_reciprocal_is_correctly_rounded(program, device):
    if device == "gpu":
        assert driver.backend() == "cuda", "the GPU variant runs with TINYTON_BACKEND=cuda or auto on a GPU"
    got = np.asarray(program(EVERY_BF16))
    with np.errstate(divide="ignore", invalid="ignore"):
        want = np.divide(BF16(1), EVERY_BF16)
    wrong = ~_same(got, want)
    assert got.dtype == BF16 and not wrong.any(), (EVERY_BF16[wrong][:8], got[wrong][:8], want[wrong][:8])


@pytest.mark.parametrize("device", DEVICES)
def test_every_bf16_sigmoid_matches_numpy(device):
    if device == "gpu":
        assert driver.backend() == "cuda", "the GPU variant runs with TINYTON_BACKEND=cuda or auto on a GPU"
    got = np.asarray(sigmoid(EVERY_BF16))
    one = BF16(1)
    with np.errstate(over="ignore", invalid="ignore"):
        want = one / (one + np.exp(-EVERY_BF16))  # each step rounded to bf16, as tt.sigmoid documents
    # exp (ex2.approx on the GPU, exp2 of x * log2(e) on the simulator) may round to the neighbouring bf16
    close = np.abs(got.astype(np.float32) - want.astype(np.float32)) <= 2**-7 * np.abs(want.astype(np.float32))
    assert (_same(got, want) | close).all()


@pytest.mark.parametrize("toolchain", TOOLCHAINS)
def test_a_bf16_reciprocal_takes_the_approximate_instruction(toolchain):
    x = EVERY_BF16[:64]
    cases = [(lambda x: 1 / x, True), (lambda x: 3 / x, False), (lambda x: 1 / x.astype(np.float32), False)]
    for fn, approximate in cases:
        (spec,) = fusion_to_kernels(fuse_module(trace(fn, [x])))
        ptx = compile_module(spec.module, num_warps=spec.num_warps, arch="sm_90a", toolchain=toolchain).asm["ptx"]
        assert ("rcp.approx.f32" in ptx) == approximate and ("rcp.rn.f32" in ptx or "div.rn.f32" in ptx) != approximate
