"""float8 matmuls: `tt.dot` of e4m3/e5m2 tiles on wgmma's `.e4m3`/`.e5m2` (sm_90a, k32, B read K-major or
transposed to it) with f32 accumulation, widened to f16 with the same results where there is no wgmma
(sm_80: bit-exact float8 -> f16 conversion); `a @ b` of float8 arrays (float32, as ml_dtypes' NumPy) and
`tt.scaled_matmul` (torch._scaled_mm: per-tensor and per-row/column scales, f32/f16/bf16 out) in array
programs, the scales in the matmul kernel's epilogue. Hopper's float8 wgmma sums in ~13 fraction bits, not
f32: `max_num_imprecise_acc` (Triton's) bounds how many products share one such sum before an f32 add;
array programs set it to 128 (four k32 wgmmas, DeepSeek-V3's interval). Simulator against NumPy here (f32
accumulation whatever the setting); PTX ptxas-checked for sm_80, sm_90 and sm_90a on both toolchains; the GPU tests (marked `gpu`)
check the device against NumPy within what that arithmetic guarantees (`_wgmma_error_bound`)."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest
from sim_helpers import run_sim

import tinyton as tt
import tinyton.language as tl
from tinyton.compiler import compile_module
from tinyton.dtypes import BF16, float8e4nv, float8e5
from tinyton.errors import CompilationError
from tinyton.frontend.tracing import trace
from tinyton.compiler import program
from tinyton.lowering.fusion import fusion_to_kernels
from tinyton.lowering.fusion.matmul import FLOAT8_IMPRECISE_ACC
from tinyton.lowering.fusion.matmul_tiles import (
    FLOAT8_CANDIDATES, FLOAT8_SKINNY_CANDIDATES, MatmulProblem, MatmulTiles, candidates,
)
from tinyton.lowering.ptx import assemble_ptx
from tinyton.lowering.ptx.toolchain import find_tool
from tinyton.lowering.ptx.usage import register_usage
from tinyton.rewrites.pipeline import fuse_module
from toolchains import TOOLCHAINS, needs_ptxas

E4M3, E5M2 = float8e4nv.np, float8e5.np
on_gpu = pytest.mark.gpu


@tt.jit
def fp8_matmul(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
               B_ROWS_OF_K: tl.constexpr, IMPRECISE: tl.constexpr):
    """c = a @ b for row-major a [M, K] and b given as [K, N] or, with B_ROWS_OF_K, as w [N, K] (b = w.T),
    at most IMPRECISE products per float8 partial sum (None: Triton's default, all of K)."""
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    ks = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rows[:, None] * K + (k + ks[None, :]), mask=(rows[:, None] < M) & (k + ks[None, :] < K),
                    other=0.0)
        if B_ROWS_OF_K:
            w = tl.load(b_ptr + cols[:, None] * K + (k + ks[None, :]),
                        mask=(cols[:, None] < N) & (k + ks[None, :] < K), other=0.0)
            b = tl.trans(w)
        else:
            b = tl.load(b_ptr + (k + ks[:, None]) * N + cols[None, :], mask=(k + ks[:, None] < K) & (cols[None, :] < N),
                        other=0.0)
        acc += tl.dot(a, b, max_num_imprecise_acc=IMPRECISE)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc, mask=(rows[:, None] < M) & (cols[None, :] < N))


def _operands(m, n, k, types=(E4M3, E5M2), seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, k)).astype(types[0]), rng.standard_normal((k, n)).astype(types[1])


def _reference(a, b):
    return a.astype(np.float64) @ b.astype(np.float64)


def _launch(run, a, b, rows_of_k, block=(128, 128, 64), warps=4, imprecise=None):
    (m, k), n = a.shape, b.shape[1]
    c = np.full((m, n), np.nan, np.float32)
    operand = np.ascontiguousarray(b.T) if rows_of_k else b
    grid = (tt.cdiv(m, block[0]), tt.cdiv(n, block[1]))
    return run(grid, a, operand, c, m, n, k, block, warps, rows_of_k, imprecise), c


def _simulate(grid, a, b, c, m, n, k, block, warps, rows_of_k, imprecise):
    return run_sim(fp8_matmul, grid, a, b, c, m, n, k, BM=block[0], BN=block[1], BK=block[2], B_ROWS_OF_K=rows_of_k,
                   IMPRECISE=imprecise, num_warps=warps)


@pytest.mark.parametrize("imprecise", [None, 32], ids=["fast", "promoted"])
@pytest.mark.parametrize("rows_of_k", [True, False], ids=["w.T", "b"])
@pytest.mark.parametrize("types", [(E4M3, E4M3), (E4M3, E5M2), (E5M2, E5M2)], ids=["e4m3", "e4m3xe5m2", "e5m2"])
def test_simulator_accumulates_fp8_products_in_f32(types, rows_of_k, imprecise):
    """The simulator's dot is f32 accumulation whatever `max_num_imprecise_acc` says (what promotion buys
    on the device, where the limit is the hardware's)."""
    a, b = _operands(150, 130, 96, types)
    _, c = _launch(_simulate, a, b, rows_of_k, imprecise=imprecise)
    np.testing.assert_allclose(c, _reference(a, b), rtol=1e-5, atol=1e-4)


def _kernel(rows_of_k, types=(E4M3, E5M2), block=(128, 128, 64), warps=4, imprecise=None):
    a, b = _operands(256, 256, 256, types)
    return fp8_matmul.compile(a, b, np.zeros((256, 256), np.float32), 256, 256, 256, BM=block[0], BN=block[1],
                              BK=block[2], B_ROWS_OF_K=rows_of_k, IMPRECISE=imprecise, num_warps=warps)


@needs_ptxas
@pytest.mark.parametrize("toolchain", TOOLCHAINS)
@pytest.mark.parametrize("rows_of_k", [True, False], ids=["w.T", "b"])
@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_90a"])
def test_fp8_dot_instructions_per_target(arch, rows_of_k, toolchain, monkeypatch):
    """sm_90(a): e4m3 x e5m2 wgmma with k32 (B K-major as loaded, or transposed to it); sm_80: mma.sync on
    the operands widened to f16."""
    monkeypatch.setenv("TINYTON_ARCH", arch)
    kernel = _kernel(rows_of_k)
    kernel.stage("ptx")
    fresh = compile_module(kernel.module.clone(), num_warps=4, arch=kernel.target_arch, toolchain=toolchain)
    ptx = fresh.asm["ptx"]
    if arch == "sm_80":
        assert kernel.target_arch == "sm_80"
        assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ptx and "wgmma" not in ptx
        assert "e4m3" not in ptx  # the float8 -> f16 conversion is integer arithmetic below sm_90
    else:
        assert kernel.target_arch == "sm_90a"
        assert set(re.findall(r"wgmma\.mma_async\.[\w.]+", ptx)) == {"wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e5m2"}
        assert "cvt.rn.f16x2" not in ptx  # not widened
    assert assemble_ptx(ptx, kernel.target_arch)


def _count(pattern: str, ptx: str) -> int:
    return len(re.findall(pattern, ptx))


@needs_ptxas
@pytest.mark.parametrize("imprecise, partials", [(None, 0), (64, 1), (32, 2), (0, 2)])
@pytest.mark.parametrize("rows_of_k", [True, False], ids=["w.T", "b"])
def test_fp8_partial_sums_are_added_in_f32(rows_of_k, imprecise, partials, monkeypatch):
    """128 x 128 x 64 on one warpgroup: per dot two 64-row blocks x two k32 steps = 4 wgmmas. Each partial
    (all K steps, Triton's default: none; 64: one per block; 32 or 0: one per wgmma) is committed and added by
    64 `add.f32` (m64n128: 64 registers per thread) once the next one is issued (`wait_group 1`: at most that
    one still runs), the last after the dot's one `wait_group 0`; without partials that wait ends the dot."""
    monkeypatch.setenv("TINYTON_ARCH", "sm_90a")
    ptx = _kernel(rows_of_k, imprecise=imprecise).asm["ptx"]
    assert _count(r"wgmma\.mma_async\.sync\.aligned\.m64n128k32\.f32\.e4m3\.e5m2", ptx) == 4
    groups = 2 * partials if partials else 1
    assert _count(r"wgmma\.commit_group", ptx) == groups
    assert _count(r"wgmma\.wait_group\.sync\.aligned 0", ptx) == 1
    if partials:  # (a dot without them the pipeliner leaves in flight: its own `wait_group 1`)
        assert _count(r"wgmma\.wait_group\.sync\.aligned 1", ptx) == groups - 1
    assert _count(r"\badd(\.rn)?\.f32", ptx) == 64 * 2 * partials
    assert assemble_ptx(ptx, "sm_90a")


@pytest.mark.parametrize("imprecise", [65, -1, 2.0, "32"])
def test_max_num_imprecise_acc_is_a_constexpr_int_up_to_k(imprecise):
    with pytest.raises(CompilationError, match=r"max_num_imprecise_acc must be a constexpr int between 0 and K \(64\)"):
        _kernel(True, imprecise=imprecise)


def test_fp8_dots_that_do_not_fit_wgmma_are_widened(monkeypatch):
    """2 warps (no whole warpgroup) on sm_90a: f16 mma.sync on widened operands, the same result."""
    monkeypatch.setenv("TINYTON_ARCH", "sm_90a")
    ptx = _kernel(True, block=(64, 64, 32), warps=2).asm["ptx"]
    assert "wgmma" not in ptx and "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in ptx
    assert "cvt.rn.f16x2.e4m3x2" in ptx and "cvt.rn.f16x2.e5m2x2" in ptx


# --- array programs ---------------------------------------------------------------------------------------


@tt.jit
def product(a, b):
    return a @ b


@tt.jit
def product_wt(a, w):
    return a @ w.T


@tt.jit
def scaled(a, w, scale_a, scale_b):
    return tt.scaled_matmul(a, w.T, scale_a, scale_b, out_dtype=tt.bfloat16)


OUT_DTYPES = {np.float32: tt.float32, np.float16: tt.float16, BF16: tt.bfloat16}


@tt.jit
def _add(a):
    return a + a


@tt.jit
def scaled_any(a, b, scale_a, scale_b, out):
    return tt.scaled_matmul(a, b, scale_a, scale_b, out_dtype=out)


@needs_ptxas
@pytest.mark.parametrize("spelling", [product, product_wt], ids=["b", "w.T"])
def test_fp8_array_matmul_adds_each_partial_in_f32(spelling, monkeypatch):
    """Array programs promote their partial sums (NumPy's f32 accumulation): the default tiles (64 x 64, one
    m64n64k32 per K step, too shallow to be left in flight) wait for each instruction and add its N / 2 registers."""
    monkeypatch.setenv("TINYTON_ARCH", "sm_90a")
    a, b = _operands(256, 128, 256, (E4M3, E4M3))
    ptx = tt.jit(spelling.fn).compile(a, b if spelling is product else np.ascontiguousarray(b.T)).asm["ptx"]
    wgmmas = _count(r"wgmma\.mma_async\.sync\.aligned\.m64n64k32\.f32\.e4m3\.e4m3", ptx)
    assert wgmmas == 1 and _count(r"wgmma\.wait_group\.sync\.aligned 0", ptx) == wgmmas
    assert _count(r"\badd(\.rn)?\.f32", ptx) == 32 * wgmmas
    assert assemble_ptx(ptx, "sm_90a")


def _array_kernels(spelling, tiles, shape=(1024, 1024, 1024)):
    """The tt kernels of `spelling` on float8 operands of `shape` (m, n, k), its matmul on `tiles`."""
    m, n, k = shape
    a, b = np.zeros((m, k), E4M3), np.zeros((k, n), E4M3)
    module = trace(spelling.fn, [a, b if spelling is product else np.ascontiguousarray(b.T)])
    return fusion_to_kernels(fuse_module(module), choose_tiles=lambda _: tiles)


@needs_ptxas
@pytest.mark.parametrize("spelling", [product, product_wt], ids=["b", "w.T"])
def test_fp8_tile_candidates_on_wgmma_do_not_spill(spelling):
    """The tuner's float8 candidates that run on wgmma keep the promoted partials in registers: ptxas -v
    reports no spills (128 x 256 on 8 warps and 128 x 128 on 4, dropped, spill 52 to 580 bytes)."""
    tiles = candidates(MatmulProblem(1, 1024, 1024, 1024, "float8e4nv"))
    assert all(t.block_m * t.block_n <= 64 * 32 * t.num_warps for t in tiles)
    on_wgmma = [t for t in tiles if t.block_m % 64 == 0 and t.num_warps % 4 == 0]
    assert len(on_wgmma) == 8  # 128 x 128 x 64 at three stages and at two; FLOAT8_CANDIDATES' 128-deep ones
    assert {(t.block_m, t.block_k) for t in on_wgmma if t.block_k == 128} == {(128, 128), (64, 128)}
    for t in on_wgmma:
        (spec,) = _array_kernels(spelling, t)
        ptx = compile_module(spec.module, num_warps=spec.num_warps, arch="sm_90a").asm["ptx"]
        usage = register_usage(ptx, "sm_90a")
        assert "wgmma.mma_async" in ptx and usage is not None and usage[1] == 0, (t, usage)


@needs_ptxas
def test_fp8_decode_tiles_keep_64_rows_for_wgmma():
    """A 16-row float8 product (a decode step) is measured on 64-row tiles too, padding rows and all, with their
    split-K forms: wgmma with B by TMA and the promotion in flight, no spills (16-row tiles widen to f16)."""
    p = MatmulProblem(1, 16, 4096, 4096, "float8e4nv")
    tiles = candidates(p)
    padded = [t for t in tiles if t.block_m == 64]
    assert {t.split_k for t in padded if t.block_k == 128} >= {1, 2, 4}
    for t in [FLOAT8_SKINNY_CANDIDATES[0], replace(FLOAT8_SKINNY_CANDIDATES[0], split_k=4)]:
        (spec,) = _array_kernels(product_wt, t.fit(p), shape=(16, 4096, 4096))
        ptx = compile_module(spec.module, num_warps=spec.num_warps, arch="sm_90a").asm["ptx"]
        usage = register_usage(ptx, "sm_90a")
        assert "wgmma.mma_async" in ptx and "cp.async.bulk.tensor" in ptx and usage is not None and usage[1] == 0


def test_fp8_array_matmul_is_float32_as_numpy():
    a, b = _operands(100, 72, 96)
    w = np.ascontiguousarray(b.T)
    for got in (product(a, b), product_wt(a, w)):
        expected = a @ b  # ml_dtypes: float8 @ float8 is float32
        assert got.dtype == expected.dtype == np.float32
        np.testing.assert_allclose(got, _reference(a, b), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("out", [np.float32, np.float16, BF16], ids=["f32", "f16", "bf16"])
@pytest.mark.parametrize("per", ["tensor", "float", "row-column"])
def test_scaled_matmul_matches_numpy(per, out):
    rng = np.random.default_rng(1)
    a, b = _operands(100, 72, 96, (E4M3, E4M3))
    if per == "tensor":
        sa, sb = np.array(0.5, np.float32), np.array([3.0], np.float32)
    elif per == "float":
        sa, sb = 0.5, 3.0
    else:
        sa, sb = rng.random((100, 1)).astype(np.float32), rng.random((1, 72)).astype(np.float32)
    got = scaled_any(a, b, sa, sb, OUT_DTYPES[out])
    expected = (_reference(a, b) * np.asarray(sa, np.float64).reshape(-1, 1) * np.asarray(sb, np.float64).reshape(1, -1))
    assert got.dtype == np.dtype(out)
    tolerance = {np.float32: 1e-5, np.float16: 1e-3, BF16: 8e-3}[out]
    np.testing.assert_allclose(got.astype(np.float64), expected, rtol=tolerance, atol=tolerance * np.abs(expected).max())


def test_scaled_matmul_is_one_kernel_with_the_scales_in_its_epilogue(monkeypatch):
    monkeypatch.setenv("TINYTON_ARCH", "sm_90a")
    a, b = _operands(256, 128, 128, (E4M3, E4M3))
    w = np.ascontiguousarray(b.T)
    program = scaled.compile(a, w, np.ones((256, 1), np.float32), np.ones((1, 128), np.float32))
    assert len(program.kernels()) == 1
    ptx = program.asm["ptx"]
    assert "wgmma.mma_async.sync.aligned" in ptx and ".e4m3.e4m3" in ptx and "cp.async.bulk.tensor" in ptx
    assert assemble_ptx(ptx, "sm_90a") if find_tool("ptxas") else True


@pytest.mark.parametrize("call, message", [
    (lambda a, b: scaled_any(a.astype(np.float32), b, 1.0, 1.0, tt.float32), "a must be a 2-D float8"),
    (lambda a, b: scaled_any(a, b, np.ones((3, 1), np.float32), 1.0, tt.float32), r"scale_a has shape \(3, 1\); give one value \(per tensor\) or shape \(64, 1\)"),
    (lambda a, b: scaled_any(a, b, 1.0, np.ones((1, 48), np.float16), tt.float32), "scale_b must be a Python float or a float32 array"),
    (lambda a, b: scaled_any(a, b, 1.0, 1.0, tt.int32), "out_dtype must be float32, float16 or bfloat16"),
    (lambda a, b: _add(a), "float8 arrays are matmul operands .* not arithmetic operands"),
], ids=["operand", "scale shape", "scale dtype", "out dtype", "elementwise"])
def test_bad_input_is_a_clear_error(call, message):
    a, b = _operands(64, 48, 32, (E4M3, E4M3))
    with pytest.raises(CompilationError, match=message):
        call(a, b)


# --- on the GPU (the lead's runs) -------------------------------------------------------------------------

GPU_SHAPES = [(256, 256, 256), (300, 200, 160), (129, 65, 96), (1000, 777, 320)]
WGMMA_K = 32
WGMMA_FRACTION_BITS = 12
"""Fraction bits of a float8 wgmma's running sum relied on: Hopper keeps about 13 (DeepSeek-V3: "around 14
bits"; no result of the unpromoted path in the 2026-11-28 H200 run has more than 13 fraction bits, and some
need all 13), less one of margin for what is not known of its rounding."""


def _wgmma_error_bound(a: np.ndarray, b: np.ndarray, chain: int) -> np.ndarray:
    """A bound of |C - a @ b| per element when float8 wgmmas (k32) are chained `chain` at a time into a
    partial sum that is then added to an f32 accumulator (1: `max_num_imprecise_acc=32`; a huge chain: the
    unpromoted path). Products of float8 values are exact (e4m3 x e5m2 has at most 7 significant bits). One
    wgmma aligns its 32 products and the incoming partial to the largest of them and keeps F fraction bits
    of it: each of the 33 addends loses less than 2^(e_max - F), and the sum's own rounding less than
    2^-F |sum|; with R_in, R_out the sums of |products| already in the partial before and after it, and P
    the largest product, the wgmma errs by < 2^-F (33 max(P, R_in) + R_out). Each f32 add of a partial errs
    by < 2^-24 of the running sum of |products|."""
    A, B = np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64))
    steps = -(-A.shape[1] // WGMMA_K)
    bound, added, partial = (np.zeros((A.shape[0], B.shape[1])) for _ in range(3))
    for step in range(steps):
        a_k, b_k = A[:, step * WGMMA_K : (step + 1) * WGMMA_K], B[step * WGMMA_K : (step + 1) * WGMMA_K]
        largest = np.outer(a_k.max(axis=1), b_k.max(axis=0))
        out = partial + a_k @ b_k
        bound += 2.0**-WGMMA_FRACTION_BITS * (33 * np.maximum(largest, partial) + out)
        partial = out
        if (step + 1) % chain == 0 or step == steps - 1:
            added += partial
            bound += 2.0**-24 * added
            partial = np.zeros_like(partial)
    return bound


def _assert_within(got: np.ndarray, expected: np.ndarray, bound: np.ndarray) -> None:
    error = np.abs(got.astype(np.float64) - expected)
    worst = np.unravel_index(np.argmax(error - bound), error.shape)
    assert np.all(error <= bound), f"at {worst}: |{got[worst]} - {expected[worst]}| > {bound[worst]}"


def _small_after_large(m: int, n: int, k: int, seed: int = 4, large: int = WGMMA_K) -> tuple[np.ndarray, np.ndarray]:
    """Operands whose first `large` K elements (one promotion interval: a k32 step, or the array programs' 128)
    sum to 256 x `large` (16 x 16 products) and whose later steps add products of 0.25 to 0.77 (multiples of 2^-6,
    sums below 128 an interval). Every wgmma sum is then exact in 13 fraction bits when it starts from zero or
    from large products only, and so is the f32 total (below 2^16, multiples of 2^-6): a path promoting at least
    every `large` products, on boundaries of them, must give a @ b exactly. A chain holding the large sum has a
    unit of 1 or more in 13 fraction bits and cannot keep the later steps' fractions."""
    rng = np.random.default_rng(seed)
    a = rng.choice([0.5, 0.75, 0.875], (m, k)).astype(E4M3)
    b = rng.choice([0.5, 0.625, 0.75, 0.875], (k, n)).astype(E4M3)
    a[:, :large], b[:large] = 16.0, 16.0
    return a, b


def _device(grid, a, b, c, m, n, k, block, warps, rows_of_k, imprecise):
    # A fresh jit function: TINYTON_ARCH is read when a variant compiles, and a launched call shape keeps its own.
    tt.jit(fp8_matmul.fn)[grid](a, b, c, m, n, k, BM=block[0], BN=block[1], BK=block[2], B_ROWS_OF_K=rows_of_k,
                                IMPRECISE=imprecise, num_warps=warps)


@on_gpu
@pytest.mark.parametrize("arch, imprecise", [(None, 32), (None, None), ("sm_80", None)],
                         ids=["promoted", "fast", "sm_80-fallback"])
@pytest.mark.parametrize("rows_of_k", [True, False], ids=["w.T", "b"])
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=str)
def test_gpu_fp8_dot_matches_numpy(shape, rows_of_k, arch, imprecise, monkeypatch):
    """On an H100/H200 the native runs are wgmma e4m3 x e5m2, each wgmma's partial added in f32
    (`max_num_imprecise_acc=32`) or the whole K in one chain (Triton's default), each within what its
    arithmetic guarantees (`_wgmma_error_bound`); TINYTON_ARCH=sm_80 runs the widened mma.sync path on the
    same GPU, f16 products (exact) accumulated in f32: NumPy's numbers to f32 rounding."""
    if arch:
        monkeypatch.setenv("TINYTON_ARCH", arch)
    m, n, k = shape
    a, b = _operands(m, n, k)
    _, c = _launch(_device, a, b, rows_of_k, imprecise=imprecise)
    if arch == "sm_80":
        np.testing.assert_allclose(c, _reference(a, b), rtol=1e-5, atol=1e-4)
    else:
        _assert_within(c, _reference(a, b), _wgmma_error_bound(a, b, 1 if imprecise else k))


@on_gpu
@pytest.mark.parametrize("rows_of_k", [True, False], ids=["w.T", "b"])
def test_gpu_fp8_promotion_keeps_what_the_wgmma_chain_loses(rows_of_k):
    """`_small_after_large`: promoted, the result is a @ b exactly; in one chain (Triton's default) the later
    steps' fractions are lost: the difference is the reason for the promotion (if it ever vanishes, the
    hardware accumulates float8 in more than 13 bits and the promotion only costs time)."""
    a, b = _small_after_large(128, 128, 256)
    expected = _reference(a, b)
    _, promoted = _launch(_device, a, b, rows_of_k, imprecise=32)
    np.testing.assert_array_equal(promoted, expected.astype(np.float32))
    _, fast = _launch(_device, a, b, rows_of_k, imprecise=None)
    _assert_within(fast, expected, _wgmma_error_bound(a, b, 256))
    assert not np.array_equal(fast, promoted), "one wgmma chain kept every fraction bit"


@tt.jit
def widen(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs).to(tl.float32))


@on_gpu
@pytest.mark.parametrize("arch", [None, "sm_80"], ids=["cvt", "integer-arithmetic"])
@pytest.mark.parametrize("dtype", [E4M3, E5M2], ids=["e4m3", "e5m2"])
def test_gpu_every_float8_value_widens_exactly(dtype, arch, monkeypatch):
    """All 256 bit patterns (subnormals, NaN, inf, -0) through the sm_90 `cvt` and the sm_80 bit arithmetic."""
    if arch:
        monkeypatch.setenv("TINYTON_ARCH", arch)
    x = np.arange(256, dtype=np.uint8).view(dtype)
    y = np.zeros(256, np.float32)
    tt.jit(widen.fn)[(1,)](x, y, BLOCK=256)  # fresh: compiled for this test's TINYTON_ARCH
    expected = x.astype(np.float32)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(expected))
    keep = ~np.isnan(expected)
    np.testing.assert_array_equal(y[keep].view(np.uint32), expected[keep].view(np.uint32))


def _scaled_bound(a, b, sa, sb, out) -> np.ndarray:
    """`_wgmma_error_bound` of promoted wgmmas through the scales (two f32 products), then the rounding
    to `out` (half a unit: 2^-24 of the value for f32, 2^-8 for bf16's 8-bit significand)."""
    accumulated = _wgmma_error_bound(a, b, FLOAT8_IMPRECISE_ACC // WGMMA_K) * sa * sb
    rounding = {np.float32: 2.0**-24, BF16: 2.0**-8}[out]
    return accumulated + (2 * 2.0**-24 + rounding) * (np.abs(_reference(a, b) * sa * sb) + accumulated)


@on_gpu
def test_gpu_scaled_matmul_of_w_transposed_matches_numpy():
    """The torch._scaled_mm layout (w [N, K] row-major): TMA copies of both K-major operands on Hopper."""
    rng = np.random.default_rng(3)
    a, b = _operands(1000, 768, 512, (E4M3, E4M3))
    w = np.ascontiguousarray(b.T)
    sa, sb = rng.random((1000, 1)).astype(np.float32), rng.random((1, 768)).astype(np.float32)
    got = np.asarray(scaled(a, w, sa, sb)).astype(np.float64)
    _assert_within(got, _reference(a, b) * sa * sb, _scaled_bound(a, b, sa, sb, BF16))


@on_gpu
@pytest.mark.parametrize("tiles", [*FLOAT8_CANDIDATES, MatmulTiles(128, 128, 64, 8, 3)],
                         ids=lambda t: f"{t.block_m}x{t.block_n}x{t.block_k}{'-ws' if t.warp_specialize else ''}")
def test_gpu_promoted_float8_tiles_match_numpy(monkeypatch, tiles):
    """Every float8 tile form on the tuner's list (promoted dots in flight: 64- and 128-deep K steps, 4 and 8
    warps, warp-specialised persistent programs), odd sizes: within the promoted bound, and exact on
    `_small_after_large`."""
    monkeypatch.setattr(program, "matmul_tiles", lambda p: tiles.fit(p))
    rng = np.random.default_rng(5)
    a, b = _operands(1000, 776, 640, (E4M3, E4M3))
    sa, sb = rng.random((1000, 1)).astype(np.float32), rng.random((1, 776)).astype(np.float32)
    got = np.asarray(tt.jit(scaled.fn)(a, np.ascontiguousarray(b.T), sa, sb)).astype(np.float64)
    _assert_within(got, _reference(a, b) * sa * sb, _scaled_bound(a, b, sa, sb, BF16))
    a, b = _small_after_large(384, 256, 512, large=FLOAT8_IMPRECISE_ACC)
    np.testing.assert_array_equal(tt.jit(product_wt.fn)(a, np.ascontiguousarray(b.T)), _reference(a, b).astype(np.float32))


@on_gpu
@pytest.mark.parametrize("split", [1, 4])
@pytest.mark.parametrize("tiles", FLOAT8_SKINNY_CANDIDATES, ids=lambda t: f"{t.block_m}x{t.block_n}x{t.block_k}")
def test_gpu_float8_decode_tiles_match_numpy(monkeypatch, tiles, split):
    """16 rows on 64-row wgmma tiles (48 of padding), whole or in K ranges: within the promoted bound."""
    monkeypatch.setattr(program, "matmul_tiles", lambda p: replace(tiles, split_k=split).fit(p))
    rng = np.random.default_rng(6)
    a, b = _operands(16, 1000, 1024, (E4M3, E4M3))
    sa, sb = rng.random((16, 1)).astype(np.float32), rng.random((1, 1000)).astype(np.float32)
    got = np.asarray(tt.jit(scaled.fn)(a, np.ascontiguousarray(b.T), sa, sb)).astype(np.float64)
    _assert_within(got, _reference(a, b) * sa * sb, _scaled_bound(a, b, sa, sb, BF16))


@on_gpu
@pytest.mark.parametrize("out", [np.float32, BF16], ids=["f32", "bf16"])
def test_gpu_scaled_matmul_matches_numpy(out):
    rng = np.random.default_rng(2)
    a, b = _operands(1000, 768, 512, (E4M3, E4M3))
    sa, sb = rng.random((1000, 1)).astype(np.float32), rng.random((1, 768)).astype(np.float32)
    got = np.asarray(scaled_any(a, b, sa, sb, OUT_DTYPES[out])).astype(np.float64)
    _assert_within(got, _reference(a, b) * sa * sb, _scaled_bound(a, b, sa, sb, out))


@on_gpu
@pytest.mark.parametrize("spelling", [product, product_wt], ids=["b", "w.T"])
def test_gpu_fp8_array_matmul_is_exact_where_f32_is(spelling):
    """Array programs promote at least every 128 products, on multiples of 128: `_small_after_large` with its large
    products in the first 128 comes out exactly, as from NumPy."""
    a, b = _small_after_large(256, 192, 512, large=FLOAT8_IMPRECISE_ACC)
    got = spelling(a, b if spelling is product else np.ascontiguousarray(b.T))
    np.testing.assert_array_equal(got, _reference(a, b).astype(np.float32))
