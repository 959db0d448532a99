"""Flash-decoding (issue 7, point 4): few queries against a long KV cache split the KV loop across
programs (tinyton/lowering/fusion/attention_blocks.py `kv_split`), then the last program of each row block
rescales and sums the partial results (attention_combine.py): one launch, matching NumPy in float64 with causal masks,
biases, grouped-query heads, boolean masks, ragged lengths and rows masked whole (NaN, as NumPy)."""

from __future__ import annotations

import numpy as np
import pytest
from test_attention import (
    batched_attention,
    causal_attention,
    causal_reference,
    masked_attention,
    randn,
    reference,
)

import tinyton as tt
from tinyton.compiler import compile_module
from tinyton.compiler import program as compiler_program
from tinyton.lowering.fusion.attention_blocks import (
    AttentionProblem,
    Blocks,
    KVSplit,
    default_blocks,
    kv_split,
)
from tinyton.lowering.ptx import assemble_ptx
from tinyton.lowering.ptx.toolchain import find_tool


def assert_split(program, s_kv: int) -> None:
    """One launch whose programs split the KV loop, no (S_q, S_kv) buffer, f32 partials in scratch arrays and
    an i32 counter per row block (kept from call to call, not allocated per call)."""
    (step,) = program.steps
    kernel = step.launch
    assert kernel.kind == "attention" and kernel.grid[2] == kernel.tiles["kv_splits"] > 1
    allocated = program.buffer_specs[len(program.input_positions) :]
    assert not any(shape[-1] == s_kv for shape, _ in allocated), "an S_q x S_kv buffer is allocated"
    *partials, counter = kernel.scratch
    assert allocated[1:] == [(s.shape, np.float32) for s in partials] and len(partials) == 3
    assert all(s.shape[0] == kernel.grid[2] for s in partials)
    assert counter.counter and program.counters == (counter.shape,) == ((kernel.grid[0] * kernel.grid[1],),)


@pytest.mark.parametrize("s_kv", [1000, 2048, 3001])
def test_one_query_row_splits_the_kv_loop(s_kv):
    rng = np.random.default_rng(s_kv)
    q, k, v = randn(rng, 2, 2, 1, 64), randn(rng, 2, 2, s_kv, 64), randn(rng, 2, 2, s_kv, 64)
    program = batched_attention.compile(q, k, v, 0.125)
    assert_split(program, s_kv)
    np.testing.assert_allclose(program(q, k, v, 0.125), reference(q, k, v, 0.125), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("s_q, s_kv", [(1, 1500), (5, 1100), (16, 777)])
def test_causal_decoding_with_a_few_queries(s_q, s_kv):
    rng = np.random.default_rng(s_q)
    q, k, v = randn(rng, 3, s_q, 32), randn(rng, 3, s_kv, 32), randn(rng, 3, s_kv, 32)
    program = causal_attention.compile(q, k, v)
    assert_split(program, s_kv)
    np.testing.assert_allclose(program(q, k, v), causal_reference(q, k, v, 0.125), rtol=1e-4, atol=1e-5)


def test_grouped_query_heads_split_too():
    rng = np.random.default_rng(7)
    q = randn(rng, 1, 2, 4, 1, 64)  # 2 kv heads, 4 query heads each
    k, v = randn(rng, 1, 2, 1, 1200, 64), randn(rng, 1, 2, 1, 1200, 64)
    program = batched_attention.compile(q, k, v, 0.125)
    assert_split(program, 1200)
    np.testing.assert_allclose(program(q, k, v, 0.125), reference(q, k, v, 0.125), rtol=1e-4, atol=1e-5)


def test_bias_and_masks_with_rows_masked_whole_give_nan():
    """A row masked whole gives NaN as the one-kernel path does (every chunk of it is empty, the combine
    divides 0 by 0); a row whose keys all lie in one chunk gets nothing from the others."""
    rng = np.random.default_rng(8)
    s_q, s_kv = 4, 1300
    q, k, v = randn(rng, 2, s_q, 64), randn(rng, 2, s_kv, 64), randn(rng, 2, s_kv, 64)
    bias = randn(rng, s_q, s_kv)
    keep = rng.random((s_q, s_kv)) > 0.3
    keep[1] = False
    keep[2, 100:] = False  # every key of row 2 lies in the first chunk: the other chunks add nothing
    program = masked_attention.compile(q, k, v, bias, keep)
    assert_split(program, s_kv)
    out = program(q, k, v, bias, keep)
    expected = reference(q, k, v, 1 / 8.0, bias, keep)
    assert np.isnan(out[:, 1]).all() and np.isnan(expected[:, 1]).all()
    np.testing.assert_allclose(np.delete(out, 1, axis=1), np.delete(expected, 1, axis=1), rtol=1e-4, atol=1e-5)


def test_float16_decoding_splits_and_matches():
    rng = np.random.default_rng(9)
    q, k, v = (randn(rng, 1, 4, s, 128, dtype=np.float16) for s in (1, 2500, 2500))
    program = batched_attention.compile(q, k, v, 128**-0.5)
    assert_split(program, 2500)
    out = program(q, k, v, 128**-0.5)
    np.testing.assert_allclose(out.astype(np.float64), reference(q, k, v, 128**-0.5), rtol=2e-2, atol=2e-3)


@tt.jit
def position_attention(q, k, v, pos):
    visible = tt.arange(k.shape[-2]) <= pos  # a KV cache filled up to a run-time position
    s = tt.where(visible, q @ tt.swapaxes(k, -1, -2) * 0.125, float("-inf"))
    e = tt.exp(s - s.max(axis=-1, keepdims=True))
    return (e / e.sum(axis=-1, keepdims=True)) @ v


@pytest.mark.parametrize("pos", [0, 300, 1999])
def test_run_time_position_mask_splits_and_empty_chunks_add_nothing(pos):
    """Chunks past the position see only -inf scores: their partials add nothing to the combine."""
    rng = np.random.default_rng(pos)
    q, k, v = randn(rng, 2, 1, 64), randn(rng, 2, 2000, 64), randn(rng, 2, 2000, 64)
    at = np.array([pos], np.int32)
    program = position_attention.compile(q, k, v, at)
    assert_split(program, 2000)
    keep = np.broadcast_to(np.arange(2000) <= pos, (1, 2000))
    np.testing.assert_allclose(program(q, k, v, at), reference(q, k, v, 0.125, 0.0, keep), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("pos", [-1, 0, 63, 64, 250, 499, 700])
def test_run_time_position_ends_the_kv_loop(pos):
    """Unsplit (300 heads fill the GPU): the KV loop stops at the end of the key block holding `pos`, so a
    cache longer than its filled part is not read past it; no key visible (pos -1) is NumPy's NaN row, a
    position past the cache sees it all."""
    rng = np.random.default_rng(pos + 1)
    q, k, v = randn(rng, 300, 1, 64), randn(rng, 300, 500, 64), randn(rng, 300, 500, 64)
    at = np.array([pos], np.int32)
    program = position_attention.compile(q, k, v, at)
    assert program.num_launches == 1
    keep = np.broadcast_to(np.arange(500) <= pos, (1, 500))
    with np.errstate(invalid="ignore"):
        want = reference(q, k, v, 0.125, 0.0, keep)
    np.testing.assert_allclose(program(q, k, v, at), want, rtol=1e-4, atol=1e-5)


def test_enough_programs_or_short_caches_keep_one_kernel():
    rng = np.random.default_rng(10)
    q, k = randn(rng, 2, 1, 16), randn(rng, 2, 100, 16)  # 2 key blocks: nothing to share out
    assert batched_attention.compile(q, k, k, 0.25).num_launches == 1
    blocks = Blocks(16, 64, 4)
    many = AttentionProblem(8 * 32, 1, 4096, 128, 128, "float16", False)
    assert kv_split(many, blocks, 132) is None, "256 programs fill 132 SMs twice (264 would be the target)"
    assert kv_split(many, blocks, 1024) == KVSplit(8, 512)
    prefill = AttentionProblem(1, 512, 4096, 128, 128, "float16", True)
    assert kv_split(prefill, default_blocks(prefill), 132) is None


def test_split_sizes_fill_the_gpu():
    """B=1, H=8, S_kv=32768, D=128 on an H100: 8 programs become 32 chunks of 1024 keys each."""
    p = AttentionProblem(8, 1, 32768, 128, 128, "float16", False)
    split = kv_split(p, default_blocks(p), 132)
    assert split == KVSplit(32, 1024) and split.count * p.batch <= 2 * 132


def test_sm_count_comes_from_the_gpu(monkeypatch):
    class Device:
        sm_count = 7

    monkeypatch.setattr(compiler_program.driver, "is_available", lambda: True)
    monkeypatch.setattr(compiler_program.driver, "device", lambda: Device())
    assert compiler_program.sm_count() == 7
    monkeypatch.setattr(compiler_program.driver, "is_available", lambda: False)
    assert compiler_program.sm_count() == 132


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("b, h, s_q, s_kv", [(1, 8, 1, 32768), (2, 4, 1, 4099), (1, 2, 7, 3000)])
def test_flash_decoding_on_the_gpu(b, h, s_q, s_kv, causal, dtype):
    import ml_dtypes

    np_dtype = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.float16
    rng = np.random.default_rng(s_kv)
    q, k, v = (randn(rng, b, h, s, 128).astype(np_dtype) for s in (s_q, s_kv, s_kv))
    program = (causal_attention.compile(q, k, v) if causal else batched_attention.compile(q, k, v, 0.125))
    assert [s.launch.kind for s in program.steps] == ["attention"] and program.steps[0].grid[2] > 1
    got = (program(q, k, v) if causal else program(q, k, v, 0.125)).astype(np.float64)
    want = causal_reference(q, k, v, 0.125) if causal else reference(q, k, v, 0.125)
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-2


@pytest.mark.skipif(find_tool("ptxas") is None, reason="ptxas not found")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_both_kernels_assemble(arch):
    """The bench's small-batch decode (B=1, H=8, S_kv=32768, D=128, fp16): the split kernel with its combine."""
    q, kv = np.zeros((1, 8, 1, 128), np.float16), np.zeros((1, 8, 32768, 128), np.float16)
    steps = batched_attention.compile(q, kv, kv, 128**-0.5).steps
    assert steps[0].grid == (1, 8, 32)
    for step in steps:
        ptx = compile_module(step.launch.module.clone(), num_warps=step.launch.num_warps, arch=arch).asm["ptx"]
        assert assemble_ptx(ptx, arch)
