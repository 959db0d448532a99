"""How a tuner times one candidate (tinyton/compiler/tuning_runs.py), without a GPU: the device calls are
stood in for, and what reaches them is checked: every kernel of the program compiled and launched, each
parameter bound to a buffer of the right shape (inputs, outputs, the scratch of a split KV loop; a row
region cut out of its program)."""

from __future__ import annotations

import gc

import ml_dtypes
import numpy as np
import pytest

import tinyton as tt
from tinyton.compiler import attention_tuning, compile_module, matmul_tuning, row_tuning, tuning_runs
from tinyton.dtypes import BF16
from tinyton.lowering.fusion import fusion_to_kernels
from tinyton.lowering.fusion.attention_blocks import AttentionProblem, default_blocks
from tinyton.lowering.fusion.matmul_tiles import (
    ACC_REGISTERS,
    MatmulProblem,
    MatmulTiles,
    accumulator_registers,
    candidates,
    default_tiles,
)
from tinyton.lowering.fusion.row_shapes import RowShape
from tinyton.lowering.ptx.toolchain import find_tool
from tinyton.lowering.ptx.usage import register_usage
from tinyton.rewrites.pipeline import fuse_module

FREED: list[tuple[int, ...]] = []


class _Buffer:
    def __init__(self, shape, dtype, zeroed=False):
        self.shape, self.dtype, self.ptr, self.zeroed = tuple(shape), np.dtype(dtype), object(), zeroed

    def __del__(self):
        FREED.append(self.shape)


class _Kernel:
    threads = (128, 1, 1)

    def __init__(self, launched):
        self.launcher = type("Launcher", (), {"launch": staticmethod(lambda *a: launched.append(a))})


@pytest.fixture
def device(monkeypatch):
    """Stand-ins for the GPU: buffers record their shape, launches are recorded, do_bench runs once."""
    made, launched, compiled = [], [], []
    monkeypatch.setattr(tuning_runs.arrays, "to_device", lambda x: made.append(_Buffer(x.shape, x.dtype)) or made[-1])
    monkeypatch.setattr(tuning_runs.arrays, "empty", lambda s, d: made.append(_Buffer(s, d)) or made[-1])
    monkeypatch.setattr(tuning_runs.arrays, "zeros", lambda s, d: made.append(_Buffer(s, d, zeroed=True)) or made[-1])
    monkeypatch.setattr(tuning_runs, "compile_module", lambda m, num_warps: compiled.append(m) or _Kernel(launched))
    monkeypatch.setattr(tuning_runs, "do_bench", lambda fn, warmup, rep, return_mode: fn() or 0.25)
    return made, launched, compiled


def test_matmul_candidate_is_one_launch_over_its_operands(device):
    made, launched, compiled = device
    p = MatmulProblem(1, 64, 48, 32, "float16")
    assert matmul_tuning._timer(p, default_tiles(p))() == 0.25
    assert len(compiled) == len(launched) == 1
    assert [(b.shape, b.dtype) for b in made] == [((1, 64, 32), np.float16), ((1, 32, 48), np.float16), ((1, 64, 48), np.float16)]
    assert launched[0][4] == tuple(b.ptr for b in made)


def test_split_attention_candidate_is_one_launch_with_its_scratch(device):
    made, launched, compiled = device
    p = AttentionProblem(1, 1, 32768, 64, 64, "float16", False)
    assert attention_tuning._timer(p, default_blocks(p), sm_count=132)() == 0.25
    assert len(compiled) == len(launched) == 1  # flash-decoding: the chunks' last program combines
    assert sum(b.dtype == np.float32 for b in made) >= 3  # the partial results' scratch
    assert [b.zeroed for b in made if b.dtype == np.int32] == [True]  # the row blocks' counters, from 0


@tt.jit
def rmsnorm(x, w):
    return x * tt.rsqrt(tt.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w


def rmsnorm_problem() -> row_tuning.RowProblem:
    """The row problem of `rmsnorm` on fp16 512x1000, as the row tuner receives it."""
    x, w = np.zeros((512, 1000), np.float16), np.zeros(1000, np.float16)
    problems = []
    fusion_to_kernels(fuse_module(rmsnorm.compile(x, w).graph.clone(), fuse=True),
                      choose_rows=lambda p: problems.append(p) or RowShape(8))
    return problems[0]


def test_row_candidate_is_its_region_alone(device):
    made, launched, compiled = device
    problem = rmsnorm_problem()
    assert row_tuning.shape_timer(problem, RowShape(4, 2))() == 0.25
    assert len(compiled) == len(launched) == 1 and launched[0][0] == (256, 1, 1)  # 2 rows per program
    half = np.float16
    assert [(b.shape, b.dtype) for b in made] == [((512, 1000), half), ((1000,), half), ((512, 1000), half)]


def test_the_timer_keeps_its_buffers_alive(device):
    """The launches hold bare addresses: the device arrays behind them must outlive `program_timer`'s
    frame until the timer goes (freed ones faulted on the H100)."""
    made, _, _ = device
    p = MatmulProblem(1, 64, 48, 32, "float16")
    timer = matmul_tuning._timer(p, default_tiles(p))
    made.clear()
    FREED.clear()
    gc.collect()
    assert not FREED and timer() == 0.25
    del timer
    gc.collect()
    assert len(FREED) == 3


def test_the_candidates_of_one_tuning_share_their_inputs(device):
    """Inputs are made (and copied to the device) once per tuning, outputs once per candidate."""
    made, _, _ = device
    problem = rmsnorm_problem()
    samples: tuning_runs.Samples = {}
    for shape in (RowShape(4), RowShape(8), RowShape(4, 2)):
        row_tuning.shape_timer(problem, shape, samples)
    assert sorted(b.shape for b in made) == [(512, 1000)] * 4 + [(1000,)], "x and w once, three outputs"
    assert len(samples) == 2


@tt.jit
def swiglu(x, w1, w3):
    g = x @ w1.T
    return g * tt.sigmoid(g) * (x @ w3.T)


def matmul_problems(program, *args) -> list[MatmulProblem]:
    """The matmul problems of `program`'s kernels, as the tile chooser receives them."""
    problems = []
    fusion_to_kernels(fuse_module(program.compile(*args).graph.clone(), fuse=True),
                      choose_tiles=lambda p: problems.append(p) or default_tiles(p))
    return problems


def test_swiglu_tiles_are_timed_on_its_region_with_both_accumulators(device):
    """Sibling matmuls hold an accumulator each: the tuner times the region itself, keyed apart from a plain
    `a @ b`, over tiles whose two accumulators fit the register budget (no 128 x 256 on 8 warps)."""
    made, launched, compiled = device
    x, w = np.zeros((512, 256), np.float16), np.zeros((512, 256), np.float16)
    (problem,) = matmul_problems(swiglu, x, w, w)
    assert (problem.dots, problem.region is not None) == (2, True)
    assert problem.fingerprint and problem != MatmulProblem(1, 512, 512, 256, "float16")
    tiles = candidates(problem)
    assert all(accumulator_registers(problem, t) <= ACC_REGISTERS for t in tiles)
    assert MatmulTiles(128, 256, 64, 8) in candidates(MatmulProblem(1, 512, 512, 256, "float16"))
    assert MatmulTiles(128, 256, 64, 8) not in tiles and MatmulTiles(128, 128, 64, 8) in tiles
    assert matmul_tuning._timer(problem, tiles[0])() == 0.25
    assert len(compiled) == len(launched) == 1  # the fused SwiGLU kernel, one launch
    assert sorted(b.shape for b in made) == [(512, 256)] * 3 + [(512, 512)]


def test_a_region_with_integer_inputs_is_timed_itself_on_zeros(device):
    """A bool or int input (a mask, a position to gather at: Llama's RoPE rows at `pos`) gets zeros, valid for
    any use, so the region is timed itself; its float inputs get random values of their own dtypes."""
    made, launched, compiled = device
    x, w, keep = np.zeros((512, 256), np.float16), np.zeros((256, 512), np.float16), np.zeros((512, 512), bool)
    (problem,) = matmul_problems(masked_matmul, x, w, keep)
    assert problem.region is not None and problem.fingerprint
    assert matmul_tuning._timer(problem, default_tiles(problem))() == 0.25
    assert len(compiled) == len(launched) == 1
    assert sorted((b.shape, str(b.dtype)) for b in made) == [((256, 512), "float16"), ((512, 256), "float16"),
                                                            ((512, 512), "bool"), ((512, 512), "float16")]
    zeros = tuning_runs._sample(2, (3, 4), np.dtype(bool))
    assert zeros.dtype == bool and not zeros.any() and tuning_runs._sample(0, (3,), np.dtype(BF16)).any()


def test_a_scaled_float8_region_is_timed_itself_with_its_scales(device):
    """`tt.scaled_matmul(x, w.T, sx, sw)` with scalar scales: the region is timed, w read K-major as the call
    reads it (timed as a plain `a @ b`, B stored K x N, float8 wgmma's B went through registers and the tuner
    picked 355-TFLOPS tiles over 1,050-TFLOPS ones on the H200), each scale a random 0-d array, as a call
    passes it."""
    made, launched, compiled = device
    x, w = np.zeros((512, 256), ml_dtypes.float8_e4m3fn), np.zeros((384, 256), ml_dtypes.float8_e4m3fn)
    (problem,) = matmul_problems(scaled_float8, x, w, np.full((), 0.5, np.float32), np.full((), 2.0, np.float32))
    assert problem.region is not None and problem.fingerprint
    assert matmul_tuning._timer(problem, default_tiles(problem))() == 0.25
    assert sorted(b.shape for b in made) == [(), (), (384, 256), (512, 256), (512, 384)]
    assert len(launched) == 1


@tt.jit
def scaled_float8(x, w, sx, sw):
    return tt.scaled_matmul(x, w.T, sx, sw, out_dtype=tt.bfloat16)


@tt.jit
def masked_matmul(x, w, keep):
    return tt.where(keep, x @ w, 0.0)


@pytest.mark.skipif(find_tool("ptxas") is None, reason="ptxas not found")
def test_swiglu_candidates_on_wgmma_do_not_spill():
    """ptxas -v (sm_90a) on the bf16 SwiGLU kernel of each candidate the budget keeps: no spills (the two
    dropped, 128 x 256 on 8 warps and 128 x 128 on 4, spill 283 and 152 bytes)."""
    x = np.zeros((4096, 4096), BF16)
    (problem,) = matmul_problems(swiglu, x, x, x)
    graph = swiglu.compile(x, x, x).graph
    on_wgmma = [t for t in candidates(problem) if t.block_m % 64 == 0 and t.num_warps % 4 == 0]
    assert len(on_wgmma) == 6  # 128 x 128 x 64 at three stages and at two
    for t in on_wgmma:
        (spec,) = fusion_to_kernels(fuse_module(graph.clone(), fuse=True), choose_tiles=lambda _, t=t: t)
        ptx = compile_module(spec.module, num_warps=spec.num_warps, arch="sm_90a").asm["ptx"]
        usage = register_usage(ptx, "sm_90a")
        assert "wgmma.mma_async" in ptx and usage is not None and usage[1] == 0, (t, usage)


@tt.jit
def cache_write(x, w, cache, pos):
    cache[:, pos] = x @ w
    return cache


def test_every_argument_of_a_split_region_is_a_sample(device, monkeypatch):
    """A region writing at `pos` into a cache is re-fused as a program that first copies the cache: the
    matmul kernel, not the first one, reads `pos`. Every program argument is made from a sample (zeros for
    `pos`), none left uninitialised (a garbage position tripped the H200's bounds check in Llama decode)."""
    made, launched, _ = device
    sampled: list[np.ndarray] = []
    to_device = tuning_runs.arrays.to_device
    monkeypatch.setattr(tuning_runs.arrays, "to_device", lambda x: sampled.append(x) or to_device(x))
    x, w = np.zeros((1, 64), np.float32), np.zeros((64, 512), np.float32)
    cache, pos = np.zeros((1, 1024, 512), np.float32), np.zeros(1, np.int32)
    (problem,) = matmul_problems(cache_write, x, w, cache, pos)
    assert matmul_tuning._timer(problem, default_tiles(problem))() == 0.25
    assert len(launched) > 1, "the cache copy, then the matmul writing its row"
    assert sorted(s.shape for s in sampled) == [(1,), (1, 64), (1, 1024, 512), (64, 512)]
    assert not next(s for s in sampled if s.dtype == np.int32).any()
