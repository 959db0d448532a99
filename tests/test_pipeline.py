"""Software pipelining (`tinyton-pipeline`): which loops it rewrites and how deep, PTX with `cp.async` that
ptxas accepts on both paths (static and dynamic shared memory), and on a GPU, pipelined matmuls that match
NumPy at every depth, with masked tails in M, N and K (K also not a multiple of 8: synchronous copies)."""

from __future__ import annotations

import numpy as np
import pytest
from mma_kernels import matmul, matmul_f16, reference

from tinyton.dialects import tt
from tinyton.lowering.ptx import assemble_ptx, mlir_path
from tinyton.lowering.ptx.toolchain import find_tool
from tinyton.lowering.tt_to_llvm.pipeline import pipeline_module

TOOLCHAINS = [pytest.param("mlir", marks=pytest.mark.skipif(not mlir_path.available(), reason="no LLVM 22 tools")),
              "llvmlite"]
needs_ptxas = pytest.mark.skipif(find_tool("ptxas") is None, reason="ptxas not found")


def _kernel(block=(64, 64, 32), warps=4, num_stages=None, mnk=(256, 256, 256)):
    m, n, k = mnk
    a = np.zeros((m, k), np.float16)
    b = np.zeros((k, n), np.float16)
    c = np.zeros((m, n), np.float32)
    bm, bn, bk = block
    return matmul_f16.compile(a, b, c, m, n, k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, ACC_F16=False,
                              num_warps=warps, num_stages=num_stages)


def _pipelined(num_stages, shared_limit=48 * 1024, block=(64, 64, 32)):
    module = _kernel(block, num_stages=num_stages).module.clone()
    pipeline_module(module, shared_limit)
    return module


def _ops(module, kind):
    return [op for op in module.walk() if isinstance(op, kind)]


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_loop_is_pipelined_num_stages_deep(stages: int):
    module = _pipelined(stages)
    allocs = _ops(module, tt.LocalAllocOp)
    assert [a.result.type.get_shape() for a in allocs] == [(stages, 64, 32), (stages, 32, 64)]
    assert not _ops(module, tt.LoadOp)
    assert len(_ops(module, tt.LocalLoadOp)) == 2
    # One group per prologue iteration and one per loop iteration; waits: in the loop and after it.
    assert len(_ops(module, tt.AsyncCommitOp)) == stages
    assert [w.pending.value.data for w in _ops(module, tt.AsyncWaitOp)] == [stages - 2, 0]


def test_default_depth_is_three_and_one_stage_is_left_alone():
    assert _ops(_pipelined(None), tt.LocalAllocOp)[0].result.type.get_shape()[0] == 3
    assert not _ops(_pipelined(1), tt.LocalAllocOp)
    assert len(_ops(_pipelined(1), tt.LoadOp)) == 2


def test_depth_shrinks_to_fit_shared_memory():
    # 128x128x64 f16 operands: 32 KiB per stage; 48 KiB fits one stage (no pipelining), 100 KiB three.
    assert not _ops(_pipelined(4, 48 * 1024, (128, 128, 64)), tt.LocalAllocOp)
    assert _ops(_pipelined(4, 100 * 1024, (128, 128, 64)), tt.LocalAllocOp)[0].result.type.get_shape()[0] == 3


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("toolchain", TOOLCHAINS)
@pytest.mark.parametrize("block, warps", [((64, 64, 32), 4), ((128, 256, 64), 8)], ids=["static", "dynamic"])
def test_pipelined_ptx_assembles(block, warps: int, toolchain: str, arch: str):
    kernel = _kernel(block, warps, num_stages=3)
    kernel.arch, kernel.toolchain = arch, toolchain
    ptx = kernel.asm["ptx"]
    assert "cp.async.cg.shared.global" in ptx and "cp.async.wait_group" in ptx
    assert ("extern .shared" in ptx) == (kernel.shared_bytes > 48 * 1024)
    assemble_ptx(ptx, arch)


GPU_SHAPES = [(256, 256, 256), (300, 200, 100), (129, 65, 48), (1000, 777, 300), (64, 64, 16), (130, 70, 50)]
GPU_CONFIGS = [((64, 64, 32), 4), ((128, 128, 32), 8), ((128, 256, 64), 8), ((16, 64, 64), 4)]


@pytest.mark.gpu
@pytest.mark.parametrize("stages", [1, 2, 3, 4])
@pytest.mark.parametrize("block, warps", GPU_CONFIGS, ids=lambda x: str(x))
@pytest.mark.parametrize("m, n, k", GPU_SHAPES)
def test_pipelined_matmul_matches_numpy(m: int, n: int, k: int, block, warps: int, stages: int):
    rng = np.random.default_rng(m * n + k)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = np.full((m, n), np.nan, np.float32)
    np.testing.assert_allclose(matmul(a, b, c, block, warps, num_stages=stages), reference(a, b), rtol=1e-3, atol=1e-3)
