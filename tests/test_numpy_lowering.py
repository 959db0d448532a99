"""NumPy's elementwise functions and dtypes in fused kernels lower to PTX that ptxas accepts, on both PTX
toolchains: every new tt op (tanh, log1p, expm1, tan, log10, trunc, rint, copysign, atan2, hypot, fmax,
fmin, float floor division) on f32/f16/bf16, the f64 ones with native instructions, and int8/uint8/int16/
int64 arithmetic, shifts, powers and sums (tinyton/lowering/tt_to_llvm/libm.py, lowering/fusion/powers.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import tinyton as tt
from tinyton.frontend.tracing import trace
from tinyton.lowering.fusion import fusion_to_kernels
from tinyton.lowering.ptx import assemble_ptx, compile_llvm_module
from tinyton.lowering.ptx.libdevice import libdevice_path
from tinyton.lowering.ptx.toolchain import ToolchainError
from tinyton.lowering.tt_to_llvm import lower_to_llvm
from tinyton.rewrites.pipeline import fuse_module
from toolchains import TOOLCHAINS, needs_ptxas


def float_math(x, y):
    unary = (tt.tanh(x), tt.sin(x), tt.cos(x), tt.tan(x), tt.exp2(x), tt.log2(x), tt.log10(x), tt.log1p(x),
             tt.expm1(x), tt.floor(x), tt.ceil(x), tt.trunc(x), tt.rint(x), tt.sign(x), tt.reciprocal(x),
             tt.isnan(x), tt.isfinite(x), tt.sigmoid(x), tt.erf(x), x.round(2))  # fmt: skip
    binary = (tt.copysign(x, y), tt.arctan2(x, y), tt.hypot(x, y), tt.fmax(x, y), tt.fmin(x, y),
              tt.logaddexp(x, y), x // y, x % y, x**y, x**3, x.clip(-1, y))  # fmt: skip
    return (*unary, *binary)


def native_f64(x, y):
    return (tt.trunc(x), tt.rint(x), tt.floor(x), tt.copysign(x, y), tt.hypot(x, y), tt.fmax(x, y), x // y,
            x % y, x.sum(axis=-1), x.mean(), x * y + 1.5, x @ y.T)  # fmt: skip


def int_math(x, y):
    return (x & y, x | y, ~x, x << y, x >> y, x // y, x % y, x**y, x**5, tt.maximum(x, y), tt.sign(x), abs(x),
            tt.reciprocal(x), x * y - 3, x.sum(), (x > y).sum(axis=-1), x.astype(np.float32), x.max(axis=0))


def kernels_ptx(fn: Callable[..., Any], dtype: np.dtype, toolchain: str) -> list[str]:
    x = np.zeros((4, 96), dtype)
    module = trace(fn, [x, x])
    fuse_module(module, True)
    out = []
    for spec in fusion_to_kernels(module):
        lower_to_llvm(spec.module, None)
        out.append(compile_llvm_module(spec.module, arch="sm_90", toolchain=toolchain)["ptx"])
    return out


CASES = [
    (float_math, np.dtype(np.float32)), (float_math, np.dtype(np.float16)),
    (float_math, np.dtype(ml_dtypes.bfloat16)), (native_f64, np.dtype(np.float64)),
    *((int_math, np.dtype(d)) for d in (np.int8, np.uint8, np.int16, np.int32, np.int64, np.uint64)),
]  # fmt: skip


@needs_ptxas
@pytest.mark.parametrize("toolchain", TOOLCHAINS)
@pytest.mark.parametrize(("fn", "dtype"), CASES, ids=lambda v: getattr(v, "__name__", str(v)))
def test_numpy_functions_lower_to_ptx_that_ptxas_takes(fn, dtype, toolchain) -> None:
    ptx = kernels_ptx(fn, dtype, toolchain)
    assert ptx
    for text in ptx:
        assemble_ptx(text, "sm_90")
    joined = "\n".join(ptx)
    if fn is float_math:
        assert "cvt.rni" in joined and "cvt.rzi" in joined and "ex2.approx" in joined
    if fn is int_math:
        assert "div.s" in joined or "div.u" in joined or "shr" in joined


def f64_math(x, y):
    return (tt.exp(x), tt.log(x), tt.tanh(x), tt.sin(x), tt.cos(x), tt.tan(x), tt.log1p(x), tt.expm1(x),
            tt.erf(x), tt.arctan2(x, y), x**y, tt.logaddexp(x, y), tt.sigmoid(x), np.log10(x))  # fmt: skip


def has_libdevice() -> bool:
    try:
        libdevice_path()
    except ToolchainError:
        return False
    return True


@needs_ptxas
@pytest.mark.skipif(not has_libdevice(), reason="CUDA's libdevice.10.bc not found")
@pytest.mark.parametrize("toolchain", TOOLCHAINS)
def test_f64_transcendentals_call_libdevice(toolchain) -> None:
    """f64 exp, log, sin, tanh, atan2, ...: libdevice's functions, linked in (nothing left external)."""
    ptx = kernels_ptx(f64_math, np.dtype(np.float64), toolchain)
    for text in ptx:
        assemble_ptx(text, "sm_90")
        assert ".extern .func" not in text
    assert any("fma.rn.f64" in text for text in ptx)


def test_libdevice_calls_are_declared_once() -> None:
    x = np.zeros((4, 96), np.float64)
    module = trace(lambda v: tt.exp(v) + tt.exp(v * 2), [x])
    fuse_module(module, True)
    (spec,) = fusion_to_kernels(module)
    lower_to_llvm(spec.module, None)
    text = str(spec.module)
    assert text.count("llvm.func @__nv_exp(f64) -> f64") == 1 and text.count("llvm.call @__nv_exp") >= 2
