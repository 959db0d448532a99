"""A matmul's wgmma stay in flight whatever its epilogue does (ptxas -v, sm_90a, no GPU needed).

ptxas serialises every wgmma of a kernel (a wait after each: "C7514 ... serialized due to non wgmma instructions
reading accumulator registers") when the accumulators are rounded to bf16 or f16 one register at a time and
then computed with, as `x @ w.T + b` and `(x @ w.T) * 2` did in bf16: the tensor cores then idle while each
product finishes. tinyton rounds an f32 tile two registers at a time (`cvt.rn.bf16x2.f32`, casts.py), which
ptxas keeps in flight. Both PTX paths, the plain pipelined kernels and the warp-specialised ones."""

from __future__ import annotations


import ml_dtypes
import numpy as np
import pytest

import tinyton as tt
from tinyton.compiler import compile_module
from tinyton.dialects import tt as tt_dialect
from tinyton.frontend.tracing import trace
from tinyton.lowering.fusion import fusion_to_kernels
from tinyton.lowering.fusion.matmul_tiles import MatmulTiles
from tinyton.lowering.ptx.usage import ptxas_report
from tinyton.rewrites.pipeline import fuse_module
from toolchains import TOOLCHAINS, needs_ptxas

pytestmark = needs_ptxas


def doubled(x, w):
    return (x @ w.T) * 2


def biased(x, w, b):
    return x @ w.T + b


def gelu_tanh(x, w, b):
    y = x @ w.T + b
    return 0.5 * y * (1 + tt.tanh(0.7978845608 * (y + 0.044715 * y * y * y)))


def swiglu(x, w1, w3):
    gate = x @ w1.T
    return tt.sigmoid(gate) * gate * (x @ w3.T)


def _inputs(fn, dtype):
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(shape).astype(dtype) for shape in ((512, 512), (512, 512), (512,)))
    return {doubled: [x, w], biased: [x, w, b], gelu_tanh: [x, w, b], swiglu: [x, w, w.copy()]}[fn]


@pytest.mark.parametrize("toolchain", TOOLCHAINS)
@pytest.mark.parametrize("tiles", [MatmulTiles(128, 128, 64, 8, 3), MatmulTiles(128, 128, 64, 8, 4, warp_specialize=True)],
                         ids=["pipelined", "warp-specialised"])
@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16], ids=["bf16", "f16"])
@pytest.mark.parametrize("fn", [doubled, biased, gelu_tanh, swiglu])
def test_no_epilogue_serialises_the_wgmma(fn, dtype, tiles, toolchain):
    (spec,) = fusion_to_kernels(fuse_module(trace(fn, _inputs(fn, dtype))), choose_tiles=lambda p: tiles.fit(p),
                                sm_count=132)
    ptx = compile_module(spec.module, num_warps=spec.num_warps, arch="sm_90a", toolchain=toolchain).asm["ptx"]
    assert "wgmma.mma_async" in ptx
    report = ptxas_report(ptx, "sm_90a")
    assert report is not None, "ptxas rejected the PTX"
    assert "C7514" not in report, report


def scaled(x, w, scale_x, scale_w):
    return tt.scaled_matmul(x, w.T, scale_x, scale_w, out_dtype=tt.bfloat16)


FLOAT8_TILES = [MatmulTiles(128, 128, 128, 8, 4), MatmulTiles(64, 128, 128, 4, 4), MatmulTiles(128, 128, 64, 8, 3),
                MatmulTiles(128, 128, 128, 8, 4, warp_specialize=True), MatmulTiles(128, 128, 256, 8, 3, warp_specialize=True)]


@pytest.mark.parametrize("toolchain", TOOLCHAINS)
@pytest.mark.parametrize("tiles", FLOAT8_TILES, ids=lambda t: f"{t.block_m}x{t.block_n}x{t.block_k}{'-ws' if t.warp_specialize else ''}")
def test_promoted_float8_dots_stay_in_flight(tiles, toolchain):
    """A float8 product promotes its partial sums (`matmul.FLOAT8_IMPRECISE_ACC`) as a `tt.promoted_dot` whose last
    chain runs on into the next iteration: no `wgmma.wait_group 0` but the one for that chain at each iteration's
    top and the one after the loop, and ptxas keeps the wgmmas in flight (C7514 when the carried chain's registers
    are read after any other wait)."""
    rng = np.random.default_rng(0)
    x, w = (rng.standard_normal((512, 512)).astype(ml_dtypes.float8_e4m3fn) for _ in range(2))
    one = np.ones((1, 1), np.float32)
    (spec,) = fusion_to_kernels(fuse_module(trace(scaled, [x, w, one, one])), choose_tiles=lambda p: tiles.fit(p),
                                sm_count=132)
    assert any(isinstance(op, tt_dialect.DotOp) and op.max_num_imprecise_acc is not None for op in spec.module.walk())
    ptx = compile_module(spec.module, num_warps=spec.num_warps, arch="sm_90a", toolchain=toolchain).asm["ptx"]
    assert ptx.count("wgmma.wait_group.sync.aligned 0;") == 2 and "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3" in ptx
    report = ptxas_report(ptx, "sm_90a")
    assert report is not None, "ptxas rejected the PTX"
    assert "C7514" not in report and " 0 bytes spill stores" in report, report
