"""Flash-decoding picks its KV split by measurement (issue 23): a decoding problem's tuning candidates
(tinyton/lowering/fusion/attention_blocks.py `candidates`, `split_counts`) carry the number of KV chunks,
timed with the other tilings by the attention tuner (tinyton/compiler/attention_tuning.py); the simulator
and small problems keep the SM-count heuristic."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from ml_dtypes import bfloat16 as BF16
from xdsl.dialects import func
from test_attention import batched_attention, causal_attention, causal_reference, randn, reference
from test_attention_tuning import FakeDevice  # the stand-in GPU of the block tuning tests
from toolchains import needs_ptxas, ptx_loops

import tinyton as tt
from tinyton.compiler import attention_tuning, compile_module
from tinyton.compiler import program as compiler_program
from tinyton.lowering.fusion import fusion_to_kernels
from tinyton.lowering.fusion.attention_blocks import (
    AttentionProblem,
    Blocks,
    candidates,
    default_blocks,
    kv_split,
    split_counts,
)
from tinyton.rewrites.pipeline import fuse_module
from tinyton.runtime.cache import KernelCache

DECODE = AttentionProblem(16, 1, 8192, 128, 128, "float16", False)


def test_decoding_candidates_carry_split_counts():
    heuristic = kv_split(DECODE, default_blocks(DECODE), 132)
    assert heuristic is not None
    counts = split_counts(DECODE, default_blocks(DECODE), 132)
    assert counts == tuple(sorted({1, heuristic.count // 2, heuristic.count, 2 * heuristic.count}))
    assert {b.splits for b in candidates(DECODE, 132)} == set(counts)
    prefill = AttentionProblem(16, 2048, 2048, 128, 128, "float16", False)
    assert {b.splits for b in candidates(prefill)} == {0}, "prefill keeps one KV loop per program"


def test_float32_decoding_measures_key_blocks_and_splits():
    """Llama's decode attention is f32 over a bf16 cache: its key block and split are measured too, on FMAs
    and on TF32x3 tensor cores."""
    decode = AttentionProblem(8, 4, 1024, 64, 64, "float32", False)
    found = candidates(decode, 132)
    dots = [b for b in found if not b.broadcast]
    assert {b.bn for b in dots} == {16, 32, 64} and {b.bm for b in dots} == {16}
    for bn in (16, 32, 64):
        blocks = replace(default_blocks(decode), bn=bn)
        for tf32x3 in (False, True):
            chosen = {b.splits for b in dots if b.bn == bn and b.tf32x3 == tf32x3}
            assert chosen == set(split_counts(decode, blocks, 132))
    # the broadcast products: the 4 query rows alone, key blocks whose [4, 64, BN] tile fits BROADCAST_TILE
    broadcast = [b for b in found if b.broadcast]
    assert {(b.bm, b.bn) for b in broadcast} == {(4, 16), (4, 32)} and not any(b.tf32x3 for b in broadcast)
    assert {b.splits for b in broadcast if b.bn == 32} == set(split_counts(decode, Blocks(4, 32, 4), 132))


FLOAT32_DECODES = [
    (Blocks(16, 16, 4, splits=8), 7, 0.125),
    (Blocks(16, 64, 4, splits=2), 2, 0.5),
    (Blocks(16, 32, 4, splits=4, tf32x3=True), 4, 0.25),
    (Blocks(16, 64, 4, splits=1, tf32x3=True), 0, 0.75),
    (Blocks(1, 32, 4, splits=4, broadcast=True), 4, 0.3),
    (Blocks(1, 16, 4, splits=8, broadcast=True), 7, 0.6),
    (Blocks(1, 64, 4, splits=1, broadcast=True), 0, 0.9),
    (Blocks(1, 32, 1, splits=4, broadcast=True), 4, 0.7),
]
"""Blocks, the chunks they cut 300 keys into (blocks of 16 in 8 chunks of 3 blocks: 7 chunks), a scale of
their own (a program of their own); the broadcast products over the one query row alone too."""


@pytest.mark.parametrize("backend", ["sim", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize(("blocks", "chunks", "scale"), FLOAT32_DECODES)
def test_a_float32_decode_runs_each_measured_form(monkeypatch, backend, blocks, chunks, scale):
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    monkeypatch.setattr(compiler_program, "attention_blocks", lambda p: blocks)
    rng = np.random.default_rng(1)
    q, k, v = randn(rng, 3, 1, 64), randn(rng, 3, 300, 64), randn(rng, 3, 300, 64)
    program = batched_attention.compile(q, k, v, scale)
    assert program.steps[0].launch.tiles.get("kv_splits", 0) == chunks
    np.testing.assert_allclose(program(q, k, v, scale), reference(q, k, v, scale), rtol=1e-4, atol=1e-5)


def test_a_measured_split_count_is_what_the_kernel_runs(monkeypatch):
    monkeypatch.setattr(compiler_program, "attention_blocks", lambda p: Blocks(16, 32, 4, splits=3))
    rng = np.random.default_rng(0)
    q, k, v = randn(rng, 2, 1, 32), randn(rng, 2, 500, 32), randn(rng, 2, 500, 32)
    program = batched_attention.compile(q, k, v, 0.2)
    assert [s.launch.kind for s in program.steps] == ["attention"]
    assert program.steps[0].launch.tiles["kv_splits"] == 3 and program.steps[0].grid[2] == 3
    np.testing.assert_allclose(program(q, k, v, 0.2), reference(q, k, v, 0.2), rtol=1e-4, atol=1e-5)
    monkeypatch.setattr(compiler_program, "attention_blocks", lambda p: Blocks(16, 32, 4, splits=1))
    assert batched_attention.compile(q, k, v, 0.25).num_launches == 1, "a measured 1: no split"


def test_the_tuner_times_the_splits_and_keeps_the_fastest(monkeypatch, tmp_path):
    device = FakeDevice("Pretend H100")
    monkeypatch.setattr(attention_tuning.driver, "is_available", lambda: True)
    monkeypatch.setattr(attention_tuning.driver, "device", lambda: device)
    monkeypatch.setattr(attention_tuning.TUNER, "cache", KernelCache(tmp_path, disk=True))
    timed: list[Blocks] = []

    def timer(p, blocks, sm_count, samples):
        timed.append(blocks)
        return lambda: 1.0 if blocks.splits == 1 else 2.0  # this pretend GPU prefers no split

    monkeypatch.setattr(attention_tuning, "_timer", timer)
    chosen = attention_tuning.attention_blocks(DECODE)
    assert chosen.splits == 1 and {b.splits for b in timed} == set(split_counts(DECODE, default_blocks(DECODE), 132))
    timed.clear()
    attention_tuning.attention_blocks(AttentionProblem(64, 1, 8192, 128, 128, "float16", False))
    assert timed, "batch x heads is part of a decoding problem's key"


def test_a_cast_cache_is_tuned_as_stored():
    """f32 attention over a bf16 cache: the problem carries the cache's type, so the tuner's attention reads keys
    and values as bf16 (the bytes a decode step streams), not f32 arrays twice their size."""
    stored = AttentionProblem(8, 4, 1024, 64, 64, "float32", False, "bfloat16")
    assert stored.kv_element_bytes == 2 and stored.element_bytes == 4
    asked: list[AttentionProblem] = []

    def choose(problem: AttentionProblem) -> Blocks:
        asked.append(problem)
        return default_blocks(problem)

    module = fuse_module(attention_tuning.attention_module(stored))
    specs = fusion_to_kernels(module, choose_blocks=choose)
    assert asked == [stored] and [s.kind for s in specs] == ["attention"]
    kernel = next(op for op in specs[0].module.ops if isinstance(op, func.FuncOp))
    assert [str(a.type) for a in kernel.args[:3]] == ["!tt.ptr<bf16>", "!tt.ptr<bf16>", "!tt.ptr<f32>"]


@tt.jit
def llama_decode_attention(q, kc, vc, pos, scale):
    """Llama's decode step: f32 queries of a group of heads over a bf16 cache filled up to `pos`."""
    b, h, t, d = q.shape
    kv = kc.shape[1]
    q = q.reshape(b, kv, h // kv, t, d)
    k, v = kc.astype(np.float32).reshape(b, kv, 1, -1, d), vc.astype(np.float32).reshape(b, kv, 1, -1, d)
    s = tt.where(tt.arange(k.shape[-2]) <= pos, q @ k.mT * scale, float("-inf"))
    e = tt.exp(s - tt.max(s, axis=-1, keepdims=True))
    return ((e / tt.sum(e, axis=-1, keepdims=True)) @ v).reshape(b, h, t, d)


@pytest.mark.parametrize("backend", ["sim", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("pos", [0, 37, 511])
@pytest.mark.parametrize(("blocks", "scale"), [
    (Blocks(4, 32, 4, splits=8, broadcast=True), 0.125),
    (Blocks(4, 32, 4, splits=16, broadcast=True), 0.13),  # the combine loads all 16 chunks at once
    (Blocks(16, 32, 4, splits=16), 0.14),  # the dot form's [16, 64] accumulators: two groups of 8 chunks
], ids=["broadcast-8", "broadcast-16", "dot-16"])
def test_broadcast_products_over_a_grouped_bf16_cache(monkeypatch, backend, pos, blocks, scale):
    """The broadcast form of a Llama decode step's attention (4 packed heads a program, the cache read as bf16,
    chunks over the keys up to the position) gives the exact result, as the dot form does, however many
    chunks the combining program loads at once (a scale of its own: a program of its own)."""
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    monkeypatch.setattr(compiler_program, "attention_blocks", lambda p: blocks)
    rng = np.random.default_rng(pos)
    q = rng.standard_normal((1, 8, 1, 64)).astype(np.float32)
    kc, vc = (rng.standard_normal((1, 2, 512, 64)).astype(BF16) for _ in range(2))
    at = np.array([pos], np.int32)
    program = llama_decode_attention.compile(q, kc, vc, at, scale)
    assert [s.launch.kind for s in program.steps] == ["attention"]
    assert program.steps[0].launch.tiles.get("kv_splits") == blocks.splits
    k = kc.astype(np.float64).reshape(1, 2, 1, 512, 64)
    v = vc.astype(np.float64).reshape(1, 2, 1, 512, 64)
    s = q.astype(np.float64).reshape(1, 2, 4, 1, 64) @ k.swapaxes(-1, -2) * scale
    s = np.where(np.arange(512) <= pos, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True) @ v).reshape(1, 8, 1, 64)
    np.testing.assert_allclose(program(q, kc, vc, at, scale), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend", ["sim", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("splits", [1, 3])
def test_broadcast_products_of_a_few_causal_queries(monkeypatch, backend, splits):
    """Four speculative queries over 203 keys, causal: the broadcast form's loop loads each block a step ahead and
    nothing past its end, the diagonal's block straddling it (keys past the end read 0, masked in the scores)."""
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    monkeypatch.setattr(compiler_program, "attention_blocks", lambda p: Blocks(4, 32, 4, splits=splits, broadcast=True))
    rng = np.random.default_rng(splits)
    q, k, v = randn(rng, 2, 4, 64), randn(rng, 2, 203 + splits, 64), randn(rng, 2, 203 + splits, 64)
    program = causal_attention.compile(q, k, v)
    assert program.steps[0].launch.tiles.get("kv_splits", 1) == splits
    np.testing.assert_allclose(program(q, k, v), causal_reference(q, k, v, 0.125), rtol=1e-4, atol=1e-5)


@needs_ptxas
def test_broadcast_products_stage_nothing_in_shared_memory():
    """The broadcast form's KV loop holds no barrier and no shared-memory access, and loads a block a step ahead: k
    is loaded in the layout the products read it in (each warp a query row, the key block in every warp), the
    accumulator takes the second product's reduction's layout."""
    stored = AttentionProblem(8, 4, 1024, 64, 64, "float32", False, "bfloat16")
    blocks = Blocks(4, 32, 4, splits=16, broadcast=True)
    spec = fusion_to_kernels(fuse_module(attention_tuning.attention_module(stored)), choose_blocks=lambda _: blocks)[0]
    kernel = compile_module(spec.module, num_warps=spec.num_warps, arch="sm_90a", toolchain="llvmlite")
    kv_loop = max(ptx_loops(kernel.asm["ptx"]), key=lambda body: body.count("ld.global"))
    assert "ld.global" in kv_loop and "bar.sync" not in kv_loop and ".shared" not in kv_loop
    # the next block's k and v are all in flight before this step's softmax (its own came in a step before)
    assert kv_loop.rindex("ld.global") < kv_loop.index("ex2.approx")
    assert kernel.n_spills == 0


@pytest.mark.parametrize("backend", ["sim", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_broadcast_products_of_a_float16_decode(monkeypatch, backend):
    """16-bit decoding has the broadcast form too: products and sums in f32, p rounded to v's type first, as the
    tensor cores' dot does."""
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    monkeypatch.setattr(compiler_program, "attention_blocks", lambda p: Blocks(1, 32, 4, splits=4, broadcast=True))
    rng = np.random.default_rng(3)
    q, k, v = (randn(rng, 3, n, 64, dtype=np.float16) for n in (1, 300, 300))
    program = batched_attention.compile(q, k, v, 0.125)
    assert program.steps[0].launch.tiles.get("kv_splits") == 4
    want = reference(*(a.astype(np.float64) for a in (q, k, v)), 0.125)
    np.testing.assert_allclose(program(q, k, v, 0.125).astype(np.float64), want, rtol=2e-3, atol=2e-3)


def test_sixteen_bit_decoding_candidates_include_the_broadcast_form():
    """One query row: on 4 warps and, where its tile fits a warp's 2,048 elements, on a warp of its own."""
    broadcast = [b for b in candidates(DECODE, 132) if b.broadcast]  # one query row, head dims 128
    assert {(b.bm, b.bn, b.num_warps) for b in broadcast} == {(1, 64, 4), (1, 32, 4), (1, 16, 4), (1, 16, 1)}
    assert not [b for b in candidates(AttentionProblem(16, 1, 8192, 128, 128, "float8e4nv", False), 132) if b.broadcast]
