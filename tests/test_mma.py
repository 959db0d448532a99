"""`tt.dot` on tensor cores: fp16 kernels assemble for sm_80 and sm_90 on both PTX paths, and
(on a GPU) match NumPy's f32-accumulated product at shapes that are and are not tile multiples."""

from __future__ import annotations

import numpy as np
import pytest
from mma_kernels import dot_tile, matmul, matmul_f16, reference

from tinyton.compiler import compile_module
from tinyton.lowering.ptx import assemble_ptx
from tinyton.lowering.tt_to_llvm.layouts import LANES
from tinyton.lowering.tt_to_llvm.mma_layout import MmaTiling
from toolchains import TOOLCHAINS, needs_ptxas


def _arrays(m: int, n: int, k: int, out=np.float32, seed: int = 0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    return a, b, np.full((m, n), np.nan, out)


# (kernel, problem M N K, BLOCK_M N K, warps): single tiles and K loops, K tails (48 = 32 + 16) included.
CASES = {
    "tile16": ("tile", (16, 16, 16), None, 4),
    "tile64x64x32": ("tile", (64, 64, 32), None, 4),
    "tile128x128x64": ("tile", (128, 128, 64), None, 8),
    "loop128x64x48": ("loop", (128, 64, 48), (128, 64, 32), 4),
    "loop_like_matmul_py": ("loop", (300, 200, 100), (64, 64, 32), 4),
}


def _compiled(case: str, acc_f16: bool):
    kind, (m, n, k), block, warps = CASES[case]
    a, b, c = _arrays(m, n, k, np.float16 if acc_f16 else np.float32)
    if kind == "tile":
        return dot_tile.compile(a, b, c, M=m, N=n, K=k, ACC_F16=acc_f16, num_warps=warps)
    bm, bn, bk = block
    return matmul_f16.compile(a, b, c, m, n, k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, ACC_F16=acc_f16, num_warps=warps)


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("toolchain", TOOLCHAINS)
@pytest.mark.parametrize("acc_f16", [False, True], ids=["acc_f32", "acc_f16"])
@pytest.mark.parametrize("case", CASES)
def test_mma_kernels_assemble(case: str, acc_f16: bool, toolchain: str, arch: str):
    kernel = _compiled(case, acc_f16)
    fresh = compile_module(kernel.module.clone(), num_warps=kernel.num_warps, arch=arch, toolchain=toolchain)
    ptx = fresh.asm["ptx"]
    accumulate = "f16.f16.f16.f16" if acc_f16 else "f32.f16.f16.f32"
    assert f"mma.sync.aligned.m16n8k16.row.col.{accumulate}" in ptx
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx
    assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in ptx
    assert assemble_ptx(ptx, arch)


@pytest.mark.parametrize("m, n, warps", [(16, 16, 4), (64, 64, 4), (128, 128, 8), (16, 256, 4), (256, 16, 8)])
def test_mma_layouts_cover_the_tile(m: int, n: int, warps: int):
    """Every element of the accumulator and of the operands sits in exactly one register of
    one lane, up to warps that the tile is too small for (replicas)."""
    tiling = MmaTiling.of(m, n, warps)
    for layout in (tiling.accumulator(), tiling.operand(0, 32), tiling.operand(1, 32)):
        live = [w for w in range(warps) if not any(w >> i & 1 for i, b in enumerate(layout.warp) if not any(b))]
        seen = set()
        for w in live:
            for lane in range(LANES):
                base = np.zeros(2, int)
                for bases, index in ((layout.lane, lane), (layout.warp, w)):
                    base += sum((np.array(b) for i, b in enumerate(bases) if index >> i & 1), np.zeros(2, int))
                seen |= {tuple(base + layout.reg_coord(r)) for r in range(layout.num_regs)}
        assert len(seen) == len(live) * LANES * layout.num_regs == np.prod(layout.shape)


def test_mma_accumulator_is_the_ptx_fragment():
    """Registers 4i..4i+3 of a lane are c0..c3 of one m16n8k16 instruction: (g, 2t), (g, 2t+1),
    (g+8, 2t), (g+8, 2t+1) with g = lane / 4, t = lane % 4 (PTX ISA, mma.m16n8k16 fragments)."""
    layout = MmaTiling.of(64, 64, 4).accumulator()
    for lane in range(LANES):
        g, t = lane // 4, lane % 4
        base = [0, 0]
        for bit, basis in enumerate(layout.lane):
            if lane >> bit & 1:
                base = [base[0] + basis[0], base[1] + basis[1]]
        coords = [tuple(b + c for b, c in zip(base, layout.reg_coord(r))) for r in range(4)]
        assert coords == [(g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1)]


# --- on the GPU -------------------------------------------------------------------------------------------

GPU_SHAPES = [(128, 128, 64), (256, 256, 256), (300, 200, 100), (129, 65, 48), (16, 512, 64), (1000, 777, 300)]
GPU_BLOCKS = [((64, 64, 32), 4), ((128, 128, 32), 4), ((128, 128, 64), 8), ((16, 64, 32), 4)]


@pytest.mark.gpu
@pytest.mark.parametrize("block, warps", GPU_BLOCKS, ids=lambda x: str(x))
@pytest.mark.parametrize("m, n, k", GPU_SHAPES)
def test_mma_matmul_matches_numpy(m: int, n: int, k: int, block, warps: int):
    a, b, c = _arrays(m, n, k)
    np.testing.assert_allclose(matmul(a, b, c, block, warps), reference(a, b), rtol=1e-3, atol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("m, n, k", [(128, 128, 64), (300, 200, 100)])
def test_mma_matmul_f16_accumulator(m: int, n: int, k: int):
    a, b, c = _arrays(m, n, k, np.float16)
    got = matmul(a, b, c, (64, 64, 32), 4, acc_f16=True).astype(np.float32)
    np.testing.assert_allclose(got, reference(a, b), rtol=2e-2, atol=0.1)


@pytest.mark.gpu
@pytest.mark.parametrize("case", [c for c in CASES if CASES[c][0] == "tile"])
def test_mma_single_tile(case: str):
    _, (m, n, k), _, warps = CASES[case]
    a, b, c = _arrays(m, n, k)
    dot_tile[(1,)](a, b, c, M=m, N=n, K=k, ACC_F16=False, num_warps=warps)
    np.testing.assert_allclose(c, reference(a, b), rtol=1e-3, atol=1e-3)
