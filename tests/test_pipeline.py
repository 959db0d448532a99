"""Software pipelining (`tinyton-pipeline`): which loops it rewrites and how deep, PTX with `cp.async` that
ptxas accepts on both paths (static and dynamic shared memory), and on a GPU, pipelined matmuls that match
NumPy at every depth, with masked tails in M, N and K (K also not a multiple of 8: synchronous copies)."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest
from mma_kernels import matmul, matmul_f16, reference
from xdsl.dialects import scf

import tinyton
from tinyton.compiler import compile_module
from tinyton.dialects import tt
from tinyton.frontend.programs import compile_array_program
from tinyton.lowering.fusion.kernels import fusion_to_kernels
from tinyton.lowering.fusion.matmul_tiles import CANDIDATES, MatmulTiles
from tinyton.lowering.ptx.usage import register_usage
from tinyton.rewrites.pipeline import fuse_module
from tinyton.lowering.ptx import assemble_ptx
from tinyton.lowering.ptx.toolchain import find_tool
from tinyton.lowering.tt_to_llvm.control_flow import dots_outlive_their_wait
from tinyton.lowering.tt_to_llvm.pipeline import pipeline_module
from toolchains import TOOLCHAINS, needs_ptxas


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


def _linear_gelu(x, w, b):
    return tinyton.tanh(x @ w.T + b)


def _swiglu(x, w1, w3):
    gate = x @ w1.T
    return tinyton.sigmoid(gate) * gate * (x @ w3.T)


@pytest.mark.parametrize("fn, dots", [(_linear_gelu, 1), (_swiglu, 2)], ids=["x@w.T", "swiglu"])
def test_array_matmul_dots_stay_in_flight_on_sm_90a(fn, dots: int):
    """`x @ w.T` (B the transpose of a pipelined slot, read K-major) and the two products of SwiGLU's one K
    loop stay in flight on wgmma: each dot waits only for its previous iteration's instance (`tt.dot_wait 1`:
    SwiGLU's two are one commit group, issued together, test_wgmma_groups.py), all of them after the loop; the
    PTX keeps one wgmma group pending."""
    bf16 = ml_dtypes.bfloat16
    x, weights = np.ones((512, 256), bf16), [np.ones((512, 256), bf16) for _ in range(dots)]
    extra = [np.ones(512, bf16)] if fn is _linear_gelu else []
    (kernel,) = compile_array_program(tinyton.jit(fn), (x, *weights, *extra)).kernels()
    module = kernel.module.clone()
    pipeline_module(module, 227 * 1024, arch="sm_90a")
    (loop,) = _ops(module, scf.ForOp)
    in_loop = [op for op in loop.body.walk() if isinstance(op, (tt.DotOp, tt.DotWaitOp))]
    assert [type(op) for op in in_loop] == [tt.DotOp, tt.DotWaitOp] * dots
    assert all(tt.ASYNC_DOT_ATTR in op.attributes for op in in_loop[::2])
    assert [op.pending.value.data for op in in_loop[1::2]] == [1] * dots
    after = [op for op in _ops(module, tt.DotWaitOp) if op not in in_loop]
    assert [op.pending.value.data for op in after] == [0] * dots
    # each dot runs into the next iteration, past the wait that unpins its staged operands: no barrier in this loop
    # tells the lowering that every earlier read of shared memory is done
    assert dots_outlive_their_wait(loop)
    if find_tool("ptxas") is not None:
        ptx = compile_module(kernel.module.clone(), num_warps=kernel.num_warps, arch="sm_90a").asm["ptx"]
        assert "wgmma.wait_group.sync.aligned 1;" in ptx
        assemble_ptx(ptx, "sm_90a")


@needs_ptxas
def test_two_stage_candidate_fits_two_programs_an_sm():
    """The tuner's two-stage 128x128x64 tile exists so that two programs share an SM (one's GELU epilogue
    overlapping the other's K loop): its buffers (three slots with the dot in flight) and registers allow it."""
    two_stage = MatmulTiles(128, 128, 64, 8, 2)
    assert two_stage in CANDIDATES
    bf16 = ml_dtypes.bfloat16
    graph = tinyton.jit(_linear_gelu).compile(np.ones((512, 256), bf16), np.ones((512, 256), bf16),
                                              np.ones(512, bf16)).graph
    (spec,) = fusion_to_kernels(fuse_module(graph, fuse=True), choose_tiles=lambda _: two_stage)
    kernel = compile_module(spec.module, num_warps=spec.num_warps, arch="sm_90a")
    registers, spills = register_usage(kernel.asm["ptx"], "sm_90a")
    assert spills == 0 and 2 * registers * 32 * spec.num_warps <= 65536
    assert 2 * kernel.shared_bytes <= 227 * 1024


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


def test_synchronous_copies_are_made_by_one_thread_of_the_replicas():
    """K not a multiple of 8 (copies of 2 bytes, under cp.async's 4, go through registers) with 16 x 16 tiles on 16
    warps: two threads hold each element, and only one, as cp.async's issuer, loads and stores it (racecheck's
    write-write hazard otherwise): every such store is branched around in the other."""
    kernel = _kernel((16, 16, 16), 16, num_stages=3, mnk=(64, 64, 60))
    kernel.arch, kernel.toolchain = "sm_80", "llvmlite"
    lines = kernel.asm["ptx"].splitlines()
    guarded = []
    for i, line in enumerate(lines):
        if "st.shared.b16" in line:
            j = i
            while not (lines[j].strip().endswith(":") or re.search(r"@%p\d+ bra", lines[j])):
                j -= 1
            guarded.append(bool(re.search(r"@%p\d+ bra", lines[j])))
    assert guarded and all(guarded)
