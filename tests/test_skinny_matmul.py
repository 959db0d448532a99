"""Skinny matmuls (a decode step's few rows against a weight matrix): the tiles the tuner may pick for them
are correct on the simulator and on the GPU, compile without spills and keep four K steps in flight; and a
decode-shaped product is worth measuring although its FLOPs are few (its bytes are not); a decode batch against
shared weights is the rows of one product, not a batch of one-row products."""

from __future__ import annotations

import numpy as np
import pytest
from toolchains import ptx_loops

import tinyton as tt
from tinyton.compiler import compile_module, matmul_tuning, program
from tinyton.dtypes import BF16
from tinyton.lowering.fusion import fusion_to_kernels
from tinyton.lowering.fusion.matmul_tiles import (
    gemv_registers,
    GEMV_CANDIDATES,
    GEMV_REGISTERS,
    SKINNY_CANDIDATES,
    SKINNY_SHARED,
    MatmulProblem,
    PADDED_SKINNY_CANDIDATES,
    MatmulTiles,
    candidates,
    stage_bytes,
)
from tinyton.lowering.ptx.toolchain import find_tool
from tinyton.lowering.ptx.usage import register_usage
from tinyton.rewrites.pipeline import fuse_module

F32 = np.float32


def _normed_projection(x, norm, w, residual):
    """RMSNorm into `x @ w.T` (bf16 operands) plus a residual: a Llama decode step's pattern."""
    h = x * tt.rsqrt(tt.mean(x * x, axis=-1, keepdims=True) + 1e-5) * norm
    return (h.to(tt.bfloat16) @ w.T).to(tt.float32) + residual


def _reference(x, norm, w, residual):
    h = (x * (1 / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5)) * norm).astype(BF16).astype(F32)
    return (h @ w.astype(F32).T).astype(BF16).astype(F32) + residual


def _inputs(m: int, n: int, k: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, k)).astype(F32), rng.standard_normal(k).astype(F32),
            (rng.standard_normal((n, k)) * 0.05).astype(BF16), rng.standard_normal((m, n)).astype(F32))  # fmt: skip


@pytest.mark.parametrize("backend", ["sim", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("tiles", [*SKINNY_CANDIDATES, *PADDED_SKINNY_CANDIDATES],
                         ids=lambda t: f"{t.block_m}x{t.block_n}x{t.block_k}s{t.num_stages}{'p' if t.padded_rows else ''}")
def test_skinny_tiles_compute_the_product(monkeypatch, backend, tiles):
    """Every skinny candidate, on a problem none of its blocks divides (3 rows, 300 columns, K = 1000)."""
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    monkeypatch.setattr(program, "matmul_tiles", lambda _: tiles)
    args = _inputs(3, 300, 1000)
    fresh = tt.jit(lambda *a: _normed_projection(*a))  # a program of its own: compiled with these tiles
    assert fresh.compile(*args).steps[0].grid == (-(-300 // tiles.block_n), 1, 1)
    got = fresh(*args)
    np.testing.assert_allclose(np.asarray(got), _reference(*args), rtol=2e-2, atol=2e-2)


def _decode_projection_kernels(tiles):
    """Each of `tiles` on the 4096 x 4096 normed decode projection, compiled for sm_90a: (tiles, PTX, shared
    bytes), after checking with ptxas -v that none spills more than one register: the GEMV form's 1 x 4 x 1024
    tile three steps deep takes 255 registers and spills 4 bytes with its products as FMAs (253 and none as
    separate multiplies and adds; a SwiGLU's two GEMV products went from 192 registers to 133)."""
    args = _inputs(1, 4096, 4096)
    graph = tt.jit(_normed_projection).compile(*args).graph
    for t in tiles:
        (spec,) = fusion_to_kernels(fuse_module(graph.clone(), fuse=True), choose_tiles=lambda p, t=t: t.fit(p))
        kernel = compile_module(spec.module, num_warps=spec.num_warps, arch="sm_90a")
        usage = register_usage(kernel.asm["ptx"], "sm_90a")
        assert usage is not None and usage[1] <= 1, (t, usage)
        yield t, kernel.asm["ptx"], kernel.shared_bytes


@pytest.mark.skipif(find_tool("ptxas") is None, reason="ptxas not found")
def test_skinny_tiles_stream_without_spills():
    """ptxas -v (sm_90a) on the decode projection of each skinny candidate: no spills, and the shared memory
    of four K steps of the weights in flight (TMA copies of `w`'s `[BN, BK]` blocks)."""
    for t, ptx, shared in _decode_projection_kernels(SKINNY_CANDIDATES):
        assert "cp.async.bulk.tensor" in ptx, t
        assert shared >= t.num_stages * t.block_n * t.block_k * 2, (t, shared)


@pytest.mark.skipif(find_tool("ptxas") is None, reason="ptxas not found")
def test_padded_skinny_tiles_run_on_wgmma():
    """The 64-row tiles of a one-row decode projection keep their rows (padding) on a Hopper GPU's candidates, and
    run on wgmma with the weights copied by TMA, without spills."""
    decode = MatmulProblem(1, 1, 4096, 4096, "bfloat16")
    padded = [t for t in candidates(decode, hopper=True) if t.padded_rows]
    assert {t.block_m for t in padded} == {64} and {t.split_k for t in padded} >= {1, 2, 4}
    assert not any(t.padded_rows for t in candidates(decode)), "Hopper's only"
    for t, ptx, _ in _decode_projection_kernels(PADDED_SKINNY_CANDIDATES):
        assert "wgmma.mma_async" in ptx and "cp.async.bulk.tensor" in ptx, t


def test_decode_shapes_are_tuned_over_skinny_tiles():
    decode = MatmulProblem(1, 1, 2048, 2048, "bfloat16")  # 8M FLOPs, 8 MiB of weights
    assert matmul_tuning.worth_tuning(decode) and not matmul_tuning.worth_tuning(MatmulProblem(1, 64, 64, 64, "float16"))
    assert {t.fit(decode) for t in SKINNY_CANDIDATES} <= set(candidates(decode))
    square = MatmulProblem(1, 4096, 4096, 4096, "bfloat16")
    assert not {t.fit(square) for t in SKINNY_CANDIDATES} & set(candidates(square)), "only for few rows"
    k_and_v = MatmulProblem(1, 128, 256, 2048, "bfloat16", dots=2)  # TinyLlama's k and v: one left operand
    assert not matmul_tuning.worth_tuning(MatmulProblem(1, 128, 256, 2048, "bfloat16"))
    assert matmul_tuning.worth_tuning(k_and_v), "sibling dots count: both weights are read"
    key_value = MatmulProblem(8, 1, 64, 2048, "bfloat16", dots=4)  # Llama-3.2-1B's k/v + RoPE + cache write
    assert {MatmulTiles(16, 32, 128, 2, 4), MatmulTiles(16, 32, 128, 4, 4)} <= set(candidates(key_value))
    assert MatmulTiles(16, 32, 256, 4, 4) not in candidates(key_value), "295 KiB of stages"
    swiglu = MatmulProblem(1, 1, 8192, 2048, "float32", dots=2)
    assert all(stage_bytes(swiglu, t) <= SKINNY_SHARED for t in candidates(swiglu) if t.num_stages == 4)
    assert MatmulTiles(16, 32, 256, 4, 4) not in candidates(swiglu), "320 KiB of stages"


@pytest.mark.parametrize("backend", ["sim", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("tiles", GEMV_CANDIDATES, ids=lambda t: f"gemv{t.block_n}x{t.block_k}w{t.num_warps}")
def test_gemv_form_computes_one_row_products(monkeypatch, backend, tiles):
    """The GEMV form (one row, CUDA-core lanes, tiles loaded a K step ahead) on the normed projection and on
    `x @ w` with a K-major and an N-major `w`, none of whose blocks divides the problem (300 x 1000)."""
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    monkeypatch.setattr(program, "matmul_tiles", lambda p: tiles.fit(p))
    args = _inputs(1, 300, 1000)
    fresh = tt.jit(lambda *a: _normed_projection(*a))
    assert fresh.compile(*args).steps[0].grid == (-(-300 // tiles.block_n), 1, 1)
    np.testing.assert_allclose(np.asarray(fresh(*args)), _reference(*args), rtol=2e-2, atol=2e-2)
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((1, 1000)).astype(F32), rng.standard_normal((1000, 300)).astype(F32)
    for b in (w, np.ascontiguousarray(w.T).T):  # N-major and K-major
        got = tt.jit(lambda x, w: tt.tanh(x @ w))(x, b)
        np.testing.assert_allclose(np.asarray(got), np.tanh(x @ w), rtol=1e-4, atol=1e-4)


def test_gemv_form_is_a_candidate_of_one_row_only():
    one, few = MatmulProblem(1, 1, 2048, 2048, "bfloat16"), MatmulProblem(1, 8, 2048, 2048, "bfloat16")
    assert {t.fit(one) for t in GEMV_CANDIDATES} <= set(candidates(one))
    assert not any(t.gemv for t in candidates(few)), "rows of a batch take tensor-core tiles"
    swiglu = MatmulProblem(1, 1, 8192, 2048, "bfloat16", dots=2, fingerprint="swiglu")
    assert all(gemv_registers(swiglu, t) <= GEMV_REGISTERS for t in candidates(swiglu) if t.gemv)
    kv = MatmulProblem(8, 1, 64, 2048, "bfloat16", dots=4, fingerprint="rope")  # k, its two halves, v
    assert MatmulTiles(1, 4, 512, 4, 3) not in candidates(kv), "spilled 4 bytes (ptxas, sm_90a)"
    assert MatmulTiles(1, 4, 256, 4, 4) in candidates(kv)


def test_one_row_products_are_tuned_at_their_own_width_and_depth():
    """GEMV programs fill the SMs by the exact N: TinyLlama's 5632-wide gate/up projection is no class of
    Llama-3.2-1B's 8192; products of more rows still share power-of-two classes."""
    tiny, one_b = (MatmulProblem(1, 1, n, 2048, "bfloat16", dots=2) for n in (5632, 8192))
    assert tiny.shape_class() == (1, 1, 5632, 2048) != one_b.shape_class()
    assert MatmulProblem(1, 1, 2048, 5632, "bfloat16").shape_class() == (1, 1, 2048, 5632)
    assert MatmulProblem(1, 16, 5632, 2048, "bfloat16").shape_class() == (1, 16, 8192, 2048)


@pytest.mark.skipif(find_tool("ptxas") is None, reason="ptxas not found")
def test_gemv_form_compiles_without_spills():
    """ptxas -v (sm_90a) on the decode projection in each GEMV form: no spills, no dot, the weights read by
    16-byte vector loads, and its K loop works in the layout the tiles are loaded in: no tile goes through
    shared memory there (the RMSNorm's row scale is broadcast in registers, the tiles loaded a step ahead are
    loaded in the layout the products want; each step converted x and w through shared memory, three
    barriers, until 2026-12-03)."""
    for t, ptx, _ in _decode_projection_kernels(GEMV_CANDIDATES):
        assert "mma" not in ptx and "ld.global.v4" in ptx, t
        k_loop = max(ptx_loops(ptx), key=lambda body: body.count("ld.global"))
        assert "bar.sync" not in k_loop and "st.shared" not in k_loop, t


def _problem(fn, *args) -> tuple[int, int, int, int]:
    """(batch, m, n, k) of the matmul problem of `fn`'s one region, as the tuner is asked it."""
    seen = []
    graph = tt.jit(fn).compile(*args).graph
    fusion_to_kernels(fuse_module(graph.clone(), fuse=True), choose_tiles=lambda p: seen.append(p) or MatmulTiles(16, 32, 32, 4))
    (p,) = seen
    return p.batch, p.m, p.n, p.k


@pytest.mark.parametrize("backend", ["sim", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("batch", [1, 3, 8, 32])
def test_a_decode_batch_is_the_rows_of_one_product(monkeypatch, backend, batch: int):
    """A decode step's `(B, 1, K)` against shared weights is one `[B, K]` product (`row_axes`): the weights read
    once, not once per sequence (as B one-row products, 1B's `lm_head` took 972 µs at batch 8 on an H200,
    141 µs at batch 1)."""
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    x, norm, w, residual = _inputs(batch, 300, 1000)
    x, residual = x[:, None, :], residual[:, None, :]
    assert _problem(_normed_projection, x, norm, w, residual) == (1, batch, 300, 1000)
    got = tt.jit(lambda *a: _normed_projection(*a))(x, norm, w, residual)
    np.testing.assert_allclose(np.asarray(got), _reference(x[:, 0], norm, w, residual[:, 0])[:, None], rtol=2e-2,
                               atol=2e-2)


@pytest.mark.parametrize("backend", ["sim", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_only_the_batch_axes_the_weights_share_fold(monkeypatch, backend):
    """Per-head weights `[G, K, D]` under a decode batch `(B, 1, 1, K)`: B folds into the rows, G stays a batch
    (a program index); weights of their own per batch element fold nothing."""
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    rng = np.random.default_rng(2)
    x, heads = rng.standard_normal((5, 1, 1, 64)).astype(F32), rng.standard_normal((3, 64, 16)).astype(F32)
    assert _problem(lambda x, w: tt.exp(x @ w), x, heads) == (3, 5, 16, 64)
    np.testing.assert_allclose(np.asarray(tt.jit(lambda x, w: tt.exp(x @ w))(x, heads)), np.exp(x @ heads), rtol=1e-4)
    a, b = rng.standard_normal((4, 8, 64)).astype(F32), rng.standard_normal((4, 64, 16)).astype(F32)
    assert _problem(lambda a, b: a @ b, a, b) == (4, 8, 16, 64)
    np.testing.assert_allclose(np.asarray(tt.jit(lambda a, b: a @ b)(a, b)), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("backend", ["sim", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_a_left_operand_broadcast_over_a_folded_batch_repeats_its_rows(monkeypatch, backend):
    """`a @ broadcast_to(b, (3, K, N))`: the weights do not vary along the batch, so it folds into the rows, along
    which `a` (2-D) is broadcast: its rows repeat per batch element. Read as a descriptor of `a`'s 40 rows, the
    rows past 40 came back as zeros (found beside the fold); such a left operand now takes plain loads."""
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((40, 64)).astype(np.float16), rng.standard_normal((64, 48)).astype(np.float16)
    want = np.broadcast_to(a.astype(F32) @ b.astype(F32), (3, 40, 48))
    right = tt.jit(lambda a, b: a @ tt.broadcast_to(b, (3, 64, 48)))
    left = tt.jit(lambda a, b: tt.broadcast_to(a, (3, 40, 64)) @ b)
    for fn in (right, left):
        np.testing.assert_allclose(np.asarray(fn(a, b)).astype(F32), want, rtol=2e-2, atol=2e-2)
