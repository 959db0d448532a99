"""Attention block sizes measured on first use and kept in the disk cache (issue 7, point 3): the matmul
tiles' `Tuner` (tinyton/compiler/autotune.py) over `attention_blocks.candidates`, keyed by GPU name,
dtype, head dims, causality and sequence class; the defaults without a GPU. Measured here by stand-ins."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pytest

import tinyton as tt
from tinyton.compiler import attention_tuning
from tinyton.compiler import program as compiler_program
from tinyton.lowering.fusion import fusion_to_kernels
from tinyton.lowering.fusion.attention_blocks import (
    AttentionProblem,
    Blocks,
    candidates,
    default_blocks,
)
from tinyton.rewrites.pipeline import fuse_module
from tinyton.runtime.cache import KernelCache

PREFILL = AttentionProblem(28, 2048, 2048, 128, 128, "float16", True)


@dataclass
class FakeDevice:
    name: str
    sm_count: int = 132


@pytest.fixture
def gpu(monkeypatch, tmp_path):
    """A pretend GPU with an empty tuning cache; `gpu.measured` lists what the stand-in timed."""
    device = FakeDevice("Pretend H100")
    monkeypatch.setattr(attention_tuning.driver, "is_available", lambda: True)
    monkeypatch.setattr(attention_tuning.driver, "device", lambda: device)
    monkeypatch.setattr(attention_tuning.TUNER, "cache", KernelCache(tmp_path, disk=True))
    measured: list[Blocks] = []

    def timer(p, blocks, sm_count, samples):  # the fastest: 64 x 32 on 4 warps; 128 x 128 does not fit
        measured.append(blocks)
        if blocks.bn == 128 and blocks.bm == 128:
            raise RuntimeError("out of shared memory")
        return lambda: 1.0 if (blocks.bm, blocks.bn, blocks.num_warps) == (64, 32, 4) else 2.0

    monkeypatch.setattr(attention_tuning, "_timer", timer)
    device.measured = measured
    device.tmp_path = tmp_path
    return device


def test_without_a_gpu_the_defaults(monkeypatch):
    monkeypatch.setattr(attention_tuning.driver, "is_available", lambda: False)
    monkeypatch.setattr(attention_tuning.TUNER, "choose", lambda *_: pytest.fail("tuned without a GPU"))
    assert attention_tuning.attention_blocks(PREFILL) == default_blocks(PREFILL)


def test_measured_once_then_read_from_the_disk_cache(gpu):
    assert attention_tuning.attention_blocks(PREFILL) == Blocks(64, 32, 4)
    assert len(gpu.measured) == len(candidates(PREFILL)) and list((gpu.tmp_path / "tune-attention").glob("*.json"))
    gpu.measured.clear()
    same_class = AttentionProblem(16, 1500, 1500, 128, 128, "float16", True)
    assert attention_tuning.attention_blocks(same_class) == Blocks(64, 32, 4)
    assert not gpu.measured, "a problem of the same class reads the stored choice"
    attention_tuning.attention_blocks(AttentionProblem(28, 2048, 2048, 128, 128, "float16", False))
    assert gpu.measured, "causality is part of the key"
    gpu.measured.clear()
    gpu.name = "Pretend H200"
    attention_tuning.attention_blocks(PREFILL)
    assert gpu.measured, "the GPU's name is part of the key"


def test_small_problems_take_the_default(gpu):
    small = AttentionProblem(2, 64, 64, 64, 64, "float16", False)
    assert attention_tuning.attention_blocks(small) == default_blocks(small)
    assert not gpu.measured


def test_float32_problems_measure_fmas_against_tf32x3_tensor_cores():
    f32 = AttentionProblem(28, 2048, 2048, 128, 128, "float32", False)
    assert candidates(f32) == [default_blocks(f32), replace(default_blocks(f32), tf32x3=True)]


def test_candidates_by_head_dim_and_sequence():
    assert {b.bn for b in candidates(AttentionProblem(1, 4096, 4096, 64, 64, "bfloat16", False))} == {32, 64, 128}
    assert {b.bn for b in candidates(PREFILL) if not b.warp_specialize} == {32, 64}
    wide = [b for b in candidates(PREFILL) if b.bn == 128]  # FlashAttention-3's: warp-specialised, two stages
    assert len(wide) == 6 and all(b.warp_specialize and b.stages == 2 and b.num_warps == 8 for b in wide)
    persistent = [b for b in candidates(PREFILL) if b.persistent]  # ping-pong ones, also walking over tiles
    assert persistent and all(b.warp_specialize and b.pingpong for b in persistent)
    wide_head = candidates(AttentionProblem(1, 4096, 4096, 256, 256, "float16", False))
    assert {b.bn for b in wide_head if not b.warp_specialize} == {32}
    assert {b.bn for b in wide_head if b.stages == 2} == {64}  # FlashAttention-3's, q in shared memory
    assert {b.bm for b in candidates(PREFILL)} == {64, 128}
    decode = candidates(AttentionProblem(256, 1, 4096, 128, 128, "float16", False))
    assert {b.bm for b in decode if not b.broadcast} == {16} and {b.bm for b in decode if b.broadcast} == {1}
    assert all(b.num_warps == 4 for b in candidates(PREFILL) if b.bm == 64)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("score_arrays, dtype", [(0, "float16"), (2, "float16"), (0, "float8e4nv")])
def test_the_tuning_module_is_one_attention_region(causal, score_arrays, dtype):
    """The module the tuner times is the problem it is tuned for: the same region, biases and all (a bias tuned as
    a plain attention got the plain one's blocks); float8 scores in float32, as two float8 operands multiply (e4m3
    has no -inf: a causal float8 problem once failed to build its module; its v copied transposed first, timed with
    the flash kernel)."""
    p = AttentionProblem(3, 5, 300, 32, 16, dtype, causal, score_arrays=score_arrays)
    seen = []
    choose = lambda problem: seen.append(problem) or default_blocks(problem)  # noqa: E731
    module = fuse_module(attention_tuning.attention_module(p), fuse=True)
    *copies, spec = fusion_to_kernels(module, choose_blocks=choose)
    assert seen == [p]
    assert [c.kind for c in copies] == (["attention_values"] if dtype == "float8e4nv" else [])
    assert spec.kind == "attention" and spec.grid == (1, 3, 1)
    assert ("tt.minimum" in str(spec.module)) == causal


def test_the_chosen_blocks_reach_the_kernel(monkeypatch):
    monkeypatch.setattr(compiler_program, "attention_blocks", lambda p: Blocks(32, 16, 4))

    @tt.jit
    def attention(q, k, v):
        s = q @ k.T
        e = tt.exp(s - tt.max(s, axis=-1, keepdims=True))
        return (e / tt.sum(e, axis=-1, keepdims=True)) @ v

    q = np.random.default_rng(0).standard_normal((70, 16)).astype(np.float32)
    program = attention.compile(q, q, q)
    assert program.steps[0].launch.tiles == {"block_m": 32, "block_n": 16} and program.steps[0].grid[0] == 3
    s = q.astype(np.float64) @ q.T
    e = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(program(q, q, q), e / e.sum(-1, keepdims=True) @ q, rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
def test_attention_blocks_are_measured_on_the_gpu(tmp_path, monkeypatch):
    monkeypatch.setattr(attention_tuning.TUNER, "cache", KernelCache(tmp_path, disk=True))
    monkeypatch.delenv("TINYTON_TUNE", raising=False)  # measured even where the run turns tuners off
    blocks = attention_tuning.attention_blocks(AttentionProblem(8, 1024, 1024, 64, 64, "float16", True))
    assert blocks in candidates(AttentionProblem(8, 1024, 1024, 64, 64, "float16", True))
    assert list((tmp_path / "tune-attention").glob("*.json"))
