"""Dots of one left operand issued as one wgmma (pipeline_plan.py `issued_together`, wgmma.py): SwiGLU's gate and
up products put their B tiles side by side in one slot, and each K step is one m64n256 wgmma instead of two
m64n128 (a 128 x 256 tile's instructions); written `x @ w.T` or `x @ w`, two or three products; tiles that do not
qualify stay separate dots. On a GPU the grouped kernels match NumPy."""

from __future__ import annotations

import re

import numpy as np
import pytest
from xdsl.dialects import scf

import tinyton as tt
from tinyton.compiler import compile_module, program
from tinyton.dialects import tt as ttd
from tinyton.dtypes import BF16
from tinyton.frontend.tracing import trace
from tinyton.lowering.fusion import fusion_to_kernels
from tinyton.lowering.fusion.matmul_tiles import MatmulTiles
from tinyton.lowering.ptx import assemble_ptx
from tinyton.lowering.ptx.usage import register_usage
from tinyton.lowering.tt_to_llvm.pipeline import pipeline_module
from tinyton.rewrites.pipeline import fuse_module
from toolchains import needs_ptxas

F32 = np.float32
WIDE = MatmulTiles(128, 128, 64, 8, 3)


def swiglu(x, w1, w3):
    gate = x @ w1.T
    return tt.sigmoid(gate) * gate * (x @ w3.T)


def swiglu_kn(x, w1, w3):
    """SwiGLU with weights stored K x N (`x @ w`): B tiles read MN-major."""
    gate = x @ w1
    return tt.sigmoid(gate) * gate * (x @ w3)


def three_products(x, w1, w2, w3):
    return (x @ w1.T) * (x @ w2.T) + (x @ w3.T)


def _operands(fn, m=512, n=512, k=256, rng=None):
    rng = rng or np.random.default_rng(0)
    x = rng.standard_normal((m, k)).astype(BF16)
    count = 3 if fn is three_products else 2
    shape = (k, n) if fn is swiglu_kn else (n, k)
    return [x, *((rng.standard_normal(shape) * 0.05).astype(BF16) for _ in range(count))]


def _kernel_module(fn, tiles: MatmulTiles):
    (spec,) = fusion_to_kernels(fuse_module(trace(fn, _operands(fn))), choose_tiles=lambda p: tiles.fit(p))
    return spec


def _pipelined(fn, tiles: MatmulTiles):
    spec = _kernel_module(fn, tiles)
    module = spec.module.clone()
    pipeline_module(module, 227 * 1024, num_warps=spec.num_warps, arch="sm_90a")
    return module


def _ops(module, kind):
    return [op for op in module.walk() if isinstance(op, kind)]


@pytest.mark.parametrize("fn", [swiglu, swiglu_kn], ids=["x@w.T", "x@w"])
def test_gate_and_up_tiles_share_each_slot(fn):
    """Both B tiles of an iteration land in one slot of one buffer (parts 0 and 1, by TMA), the dots read their
    parts and wait for one commit group an iteration (the pair is one)."""
    module = _pipelined(fn, WIDE)
    shapes = sorted(tuple(op.result.type.get_shape()) for op in _ops(module, ttd.LocalAllocOp))
    b_slot = (4, 2, 128, 64) if fn is swiglu else (4, 2, 64, 128)
    assert shapes == sorted([(4, 128, 64), b_slot])
    assert sorted(op.part_index for op in _ops(module, ttd.TmaCopyOp)) == [0, 0, 0, 0, 0, 0, 1, 1, 1]
    (loop,) = _ops(module, scf.ForOp)
    reads = [op for op in loop.body.walk() if isinstance(op, ttd.LocalLoadOp)]
    assert sorted(op.part_index for op in reads) == [0, 0, 1]
    waits = [op for op in loop.body.walk() if isinstance(op, ttd.DotWaitOp)]
    assert [op.pending.value.data for op in waits] == [1, 1]


@pytest.mark.parametrize("fn, tiles, together", [
    (three_products, MatmulTiles(64, 64, 64, 4, 3), 3),  # 3 x 64 columns: one m64n192
    (swiglu, MatmulTiles(64, 256, 64, 8, 3), 0),  # two warpgroups side by side along N: a dot's tile is not one instruction
    (swiglu_kn, MatmulTiles(64, 32, 64, 4, 3), 0),  # 32 columns: 64-byte rows, not whole 128-byte panels
    (swiglu, MatmulTiles(64, 64, 128, 4, 3), 0),  # 256-byte K rows: two panels each
])
def test_which_dots_are_issued_together(fn, tiles, together):
    module = _pipelined(fn, tiles)
    parts = [ttd.buffer_parts(op.result.type) for op in _ops(module, ttd.LocalAllocOp)]
    assert max(parts) == max(together, 1)


@needs_ptxas
@pytest.mark.parametrize("fn", [swiglu, swiglu_kn], ids=["x@w.T", "x@w"])
def test_swiglu_is_one_m64n256_wgmma_a_k_step(fn):
    """On a 128 x 128 tile the two products are m64n256k16 wgmmas only (four a K step of 64, however many steps LLVM
    unrolls), as a 128 x 256 tile's; 128 accumulator registers a thread and no spills (ptxas -v, sm_90a)."""
    spec = _kernel_module(fn, WIDE)
    ptx = compile_module(spec.module, num_warps=spec.num_warps, arch="sm_90a").asm["ptx"]
    shapes = re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m64n\d+k16)", ptx)
    assert set(shapes) == {"m64n256k16"} and len(shapes) % 4 == 0
    assert "wgmma.wait_group.sync.aligned 1;" in ptx
    registers, spills = register_usage(ptx, "sm_90a") or (0, 0)
    assert spills == 0 and registers <= 232
    assemble_ptx(ptx, "sm_90a")


@needs_ptxas
def test_three_products_are_one_m64n192_wgmma():
    spec = _kernel_module(three_products, MatmulTiles(64, 64, 64, 4, 3))
    ptx = compile_module(spec.module, num_warps=spec.num_warps, arch="sm_90a").asm["ptx"]
    assert set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m64n\d+k16)", ptx)) == {"m64n192k16"}
    assemble_ptx(ptx, "sm_90a")


def _reference(fn, args):
    x, *ws = (a.astype(F32) for a in args)
    products = [x @ (w if fn is swiglu_kn else w.T) for w in ws]
    products = [p.astype(BF16).astype(F32) for p in products]
    if fn is three_products:
        return products[0] * products[1] + products[2]
    gate, up = products
    return gate / (1 + np.exp(-gate)) * up


@pytest.mark.gpu
@pytest.mark.parametrize("fn, tiles", [
    (swiglu, WIDE), (swiglu_kn, WIDE), (swiglu, MatmulTiles(128, 128, 64, 8, 2)), (swiglu, MatmulTiles(64, 64, 32, 4, 3)),
    (three_products, MatmulTiles(64, 64, 64, 4, 3)),
], ids=["x@w.T", "x@w", "two-stage", "64-wide", "three"])
def test_grouped_dots_match_numpy_on_the_gpu(monkeypatch, fn, tiles):
    """330 rows, 300 columns and K 264: row and column blocks masked, a ragged last K step (TMA zero-fills)."""
    monkeypatch.setenv("TINYTON_BACKEND", "cuda")
    monkeypatch.setattr(program, "matmul_tiles", lambda p: tiles.fit(p))
    args = _operands(fn, m=330, n=300, k=264, rng=np.random.default_rng(4))
    got = np.asarray(tt.jit(fn)(*args)).astype(F32)
    np.testing.assert_allclose(got, _reference(fn, args), rtol=3e-2, atol=3e-2)
