"""`tt.dot` on Hopper's wgmma (sm_90a) and on mma.sync for bf16 and tf32: the PTX assembles on both paths,
the driver picks sm_90a on an sm_90 only for kernels whose dots fit, the wgmma accumulator layout is the
PTX fragment, and (on a GPU) results match NumPy at shapes that are and are not tile multiples."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from dot_kernels import matmul_kernel
from mma_kernels import dot_tile

import tinyton as tt
from tinyton.compiler import compile_module
from tinyton.lowering.ptx import assemble_ptx
from tinyton.lowering.tt_to_llvm import kernel_arch
from tinyton.lowering.tt_to_llvm.layouts import LANES
from tinyton.lowering.tt_to_llvm.wgmma_layout import WgmmaTiling
from tinyton.runtime import driver
from tinyton.runtime.simulator.tiles import round_tf32
from toolchains import TOOLCHAINS, needs_ptxas

BF16 = np.dtype(ml_dtypes.bfloat16)

# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps): one warpgroup, two along M, two along N, n16, 64-byte A rows.
WGMMA_BLOCKS = [(64, 64, 32, 4), (128, 128, 64, 4), (128, 256, 64, 8), (64, 256, 64, 8), (64, 16, 16, 4),
                (128, 128, 32, 8)]


def _loop_kernel(dtype, block, precision="ieee", m=256, n=256, k=256):
    bm, bn, bk, warps = block
    a, b, c = np.zeros((m, k), dtype), np.zeros((k, n), dtype), np.zeros((m, n), np.float32)
    return matmul_kernel.compile(a, b, c, m, n, k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, PRECISION=precision,
                                 OUT_F16=False, num_warps=warps)


@needs_ptxas
@pytest.mark.parametrize("toolchain", TOOLCHAINS)
@pytest.mark.parametrize("dtype", [np.float16, BF16], ids=["f16", "bf16"])
@pytest.mark.parametrize("block", WGMMA_BLOCKS, ids=lambda b: "x".join(map(str, b)))
def test_wgmma_kernels_assemble(block, dtype, toolchain):
    kernel = _loop_kernel(dtype, block)
    ptx = compile_module(kernel.module.clone(), num_warps=block[3], arch="sm_90a", toolchain=toolchain).asm["ptx"]
    name = "bf16" if dtype == BF16 else "f16"
    n = min(256, block[1] // max(1, block[3] // 4 // max(1, block[0] // 64)))
    assert f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{name}.{name}" in ptx
    assert "fence.proxy.async.shared::cta" in ptx and "wgmma.wait_group.sync.aligned 0" in ptx
    assert ".target sm_90a" in ptx and "ldmatrix" not in ptx
    assert assemble_ptx(ptx, "sm_90a")


@needs_ptxas
@pytest.mark.parametrize("toolchain", TOOLCHAINS)
def test_wgmma_staged_tile_assembles(toolchain):
    """A dot of whole loaded tiles (no loop to pipeline): the operands are stored swizzled, fenced, then read."""
    a = np.zeros((128, 64), np.float16)
    kernel = dot_tile.compile(a, a.T.copy(), np.zeros((128, 128), np.float32), M=128, N=128, K=64, ACC_F16=False,
                              num_warps=8)
    ptx = compile_module(kernel.module.clone(), num_warps=8, arch="sm_90a", toolchain=toolchain).asm["ptx"]
    assert "wgmma.mma_async.sync.aligned.m64n128k16" in ptx and "fence.proxy.async" in ptx
    assert assemble_ptx(ptx, "sm_90a")


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90", "sm_90a"])
@pytest.mark.parametrize("toolchain", TOOLCHAINS)
@pytest.mark.parametrize("dtype, precision, instruction", [
    (BF16, "ieee", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"),
    (np.float32, "tf32", "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"),
], ids=["bf16", "tf32"])
def test_bf16_and_tf32_mma_sync_assemble(dtype, precision, instruction, toolchain, arch):
    """bf16 on mma.sync where there is no wgmma (2 warps, sm_80/90); tf32 always on mma.sync, operands cvt.rna."""
    block = (64, 64, 32, 2 if precision == "ieee" else 4)
    kernel = _loop_kernel(dtype, block, precision)
    ptx = compile_module(kernel.module.clone(), num_warps=block[3], arch=arch, toolchain=toolchain).asm["ptx"]
    assert instruction in ptx and "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx
    assert ("cvt.rna.tf32.f32" in ptx) == (precision == "tf32")
    assert assemble_ptx(ptx, arch)


def test_driver_picks_sm_90a_for_wgmma_dots():
    fits = _loop_kernel(np.float16, (128, 128, 64, 4)).module
    assert kernel_arch(fits, 4, "sm_90") == "sm_90a"
    assert kernel_arch(fits, 4, "sm_80") == "sm_80"
    assert kernel_arch(fits, 2, "sm_90") == "sm_90"  # no whole warpgroup: mma.sync
    assert kernel_arch(_loop_kernel(np.float32, (64, 64, 32, 4), "tf32").module, 4, "sm_90") == "sm_90"


@pytest.mark.parametrize("m, n, warps", [(64, 64, 4), (128, 256, 8), (64, 256, 8), (256, 128, 4), (64, 16, 4)])
def test_wgmma_accumulator_covers_the_tile_as_the_ptx_fragment(m, n, warps):
    """Every element in exactly one register of one thread; registers 4i..4i+3 of a lane of warp w are
    (16w + g, 8i + 2t), (.., +1), (16w + g + 8, 8i + 2t), (.., +1) within its first instruction."""
    tiling = WgmmaTiling.of(m, n, warps)
    layout = tiling.accumulator()
    seen = set()
    for w in range(warps):
        for lane in range(LANES):
            base = np.zeros(2, int)
            for bases, index in ((layout.lane, lane), (layout.warp, w)):
                base += sum((np.array(b) for i, b in enumerate(bases) if index >> i & 1), np.zeros(2, int))
            coords = [tuple(base + layout.reg_coord(r)) for r in range(layout.num_regs)]
            seen |= set(coords)
            if w < 4:
                g, t = lane // 4, lane % 4
                for i in range(tiling.instr_n // 8):
                    row = 16 * w + g
                    assert coords[4 * i : 4 * i + 4] == [(row, 8 * i + 2 * t), (row, 8 * i + 2 * t + 1),
                                                         (row + 8, 8 * i + 2 * t), (row + 8, 8 * i + 2 * t + 1)]
    assert len(seen) == warps * LANES * layout.num_regs == m * n


# --- on the GPU -------------------------------------------------------------------------------------------

GPU_SHAPES = [(256, 256, 256), (300, 200, 100), (129, 65, 48), (1000, 777, 300), (64, 512, 1024)]


def _run(a, b, block, precision="ieee"):
    (m, k), (_, n) = a.shape, b.shape
    bm, bn, bk, warps = block
    c = np.full((m, n), np.nan, np.float32)
    grid = (tt.cdiv(m, bm), tt.cdiv(n, bn))
    matmul_kernel[grid](a, b, c, m, n, k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, PRECISION=precision, OUT_F16=False,
                        num_warps=warps)
    return c


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float16, BF16], ids=["f16", "bf16"])
@pytest.mark.parametrize("block", WGMMA_BLOCKS, ids=lambda b: "x".join(map(str, b)))
def test_gpu_wgmma_matmul_matches_numpy(block, dtype):
    rng = np.random.default_rng(4)
    for m, n, k in GPU_SHAPES:
        a, b = rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)
        want = a.astype(np.float32) @ b.astype(np.float32)
        np.testing.assert_allclose(_run(a, b, block), want, rtol=1e-3, atol=1e-2, err_msg=f"{m}x{n}x{k}")


@pytest.mark.gpu
def test_gpu_picks_wgmma_on_hopper():
    kernel = _loop_kernel(np.float16, (128, 128, 64, 4))
    kernel.asm["ptx"]
    expected = "sm_90a" if driver.default_arch() == "sm_90" else driver.default_arch()
    assert kernel.target_arch == expected


@pytest.mark.gpu
def test_gpu_wgmma_staged_tile():
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((128, 64)).astype(np.float16), rng.standard_normal((64, 128)).astype(np.float16)
    c = np.full((128, 128), np.nan, np.float32)
    dot_tile[(1,)](a, b, c, M=128, N=128, K=64, ACC_F16=False, num_warps=8)
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-3, atol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("block", [(64, 64, 32, 4), (128, 128, 32, 8), (16, 64, 16, 4)], ids=str)
def test_gpu_tf32_rounds_like_the_simulator(block):
    """cvt.rna.tf32.f32 on the GPU and round_tf32 in the simulator give the same operands: the product then
    differs from NumPy's of the rounded operands only by the order of f32 sums."""
    rng = np.random.default_rng(6)
    for m, n, k in [(256, 256, 256), (129, 65, 48)]:
        a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
        want = round_tf32(a).astype(np.float64) @ round_tf32(b).astype(np.float64)
        np.testing.assert_allclose(_run(a, b, block, "tf32"), want, rtol=1e-4, atol=1e-4 * np.sqrt(k))
