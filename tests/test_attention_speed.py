"""The flash-attention kernel's fast structure (issue 7): the causal loop split at the diagonal, exp2 with
log2(e) folded into the scale, keys loaded as stored and read K-major, q copied to shared memory once and
the key/value blocks pipelined; the PTX assembles for wgmma (sm_90a, probabilities from registers) and
mma.sync (sm_80); on a GPU it matches NumPy in float64 for S from 1 to 16384, head dims 16 to 256, fp16 and
bf16, causal, grouped-query, bias and decoding."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from attention_reference import attention_reference
from test_attention import batched_attention, causal_attention, masked_attention

from tinyton.compiler import compile_module
from tinyton.lowering.ptx import assemble_ptx
from tinyton.lowering.tt_to_llvm.pipeline import pipeline_module
from toolchains import needs_ptxas

BF16 = np.dtype(ml_dtypes.bfloat16)


def kernel_of(program, *args):
    compiled = program.compile(*args)
    assert compiled.num_launches == 1 and compiled.steps[0].launch.kind == "attention"
    return compiled.steps[0].launch


def test_causal_kernel_splits_its_loop_and_uses_exp2():
    q = np.zeros((2, 300, 64), np.float16)
    launch = kernel_of(causal_attention, q, q, q)
    text = str(launch.module)
    assert text.count("scf.for") == 2, "an unmasked loop below the diagonal, a masked one across it"
    assert "tt.exp2" in text and "tt.exp " not in text
    assert "tt.trans" in text, "key blocks are loaded as stored and transposed for the dot"
    assert launch.num_warps == 8 and launch.grid[0] == 3  # 128 queries per program


def test_full_attention_of_whole_blocks_has_one_loop():
    q = np.zeros((1, 256, 64), np.float16)
    text = str(kernel_of(batched_attention, q, q, q, 0.125).module)
    assert text.count("scf.for") == 1 and "tt.select %" not in text.split("tt.dot")[1].split("tt.reduce_max")[0]


def test_pipeline_copies_q_once_and_pipelines_transposed_keys():
    q = np.zeros((1, 4, 512, 128), np.float16)
    module = kernel_of(causal_attention, q, q, q).module.clone()
    pipeline_module(module, 227 * 1024)
    text = str(module)
    assert text.count("tt.local_alloc : memref<1x128x128xf16") == 1, "q: one slot, filled once"
    assert text.count("tt.load") == 0, "q, k and v all come through cp.async"
    assert "tt.trans" in text


def _ptx(program, args, arch):
    launch = kernel_of(program, *args)
    return compile_module(launch.module.clone(), num_warps=launch.num_warps, arch=arch).asm["ptx"]


@needs_ptxas
@pytest.mark.parametrize("dtype", [np.float16, BF16], ids=["f16", "bf16"])
@pytest.mark.parametrize("d", [64, 128])
def test_wgmma_attention_reads_p_from_registers_and_k_major_keys(d, dtype):
    q = np.zeros((1, 2, 1024, d), dtype)
    ptx = _ptx(causal_attention, (q, q, q), "sm_90a")
    kind = "bf16" if dtype == BF16 else "f16"
    qk = [line for line in ptx.splitlines() if f"m64n64k16.f32.{kind}.{kind}" in line and "}, {" not in line]
    pv = [line for line in ptx.splitlines() if f"m64n{d}k16.f32.{kind}.{kind}" in line and "}, {" in line]
    assert qk and all(line.rstrip().endswith("1, 1, 0, 0;") for line in qk), "K-major B: imm-trans-b 0"
    assert pv, "p @ v takes p's fragment from registers"
    assert "ex2.approx" in ptx and "st.shared" not in ptx.split("wgmma.mma_async")[1]
    assert assemble_ptx(ptx, "sm_90a")


@needs_ptxas
@pytest.mark.parametrize("s_q", [1, 300])
def test_mma_sync_attention_assembles(s_q):
    """Decoding (one query, two heads, 8 key blocks) splits its KV loop (the combine in the same kernel)."""
    q, kv = np.zeros((1, 2, s_q, 64), np.float16), np.zeros((1, 2, 500, 64), np.float16)
    steps = causal_attention.compile(q, kv, kv).steps
    assert [s.launch.kind for s in steps] == ["attention"] and (steps[0].grid[2] > 1) == (s_q == 1)
    ptxs = [compile_module(s.launch.module.clone(), num_warps=s.launch.num_warps, arch="sm_80").asm["ptx"] for s in steps]
    assert "mma.sync.aligned.m16n8k16" in ptxs[0] and "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptxs[0]
    assert all(assemble_ptx(ptx, "sm_80") for ptx in ptxs)


# ---- on the GPU: against NumPy in float64 ---------------------------------------------------------


def reference(q, k, v, scale, causal=False, bias=None, rows=512):
    """softmax(q kᵀ scale + bias, causal bottom-right aligned) v in float64, `rows` queries at a time."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))  # once, not per chunk
    s_q, s_kv = q.shape[-2], k.shape[-2]
    out = np.empty(np.broadcast_shapes(q.shape[:-1], k.shape[:-2] + (1,)) + (v.shape[-1],))
    for r in range(0, s_q, rows):
        chunk_bias = None if bias is None else bias[..., r : r + rows, :]
        keep = np.arange(r, min(s_q, r + rows))[:, None] + (s_kv - s_q) >= np.arange(s_kv)[None, :] if causal else None
        out[..., r : r + rows, :] = attention_reference(q[..., r : r + rows, :], k, v, scale, chunk_bias, keep)
    return out


def _inputs(seed, shapes, dtype):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32).astype(dtype) for s in shapes]


def _check(got, want):
    got = np.asarray(got).astype(np.float64)
    err = np.linalg.norm(got - want) / np.linalg.norm(want)
    assert np.isfinite(got).all() and err < 1e-2, f"relative error {err:.2e}"


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float16, BF16], ids=["f16", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("bh, s, d", [
    ((1, 2), 1, 64), ((1, 2), 17, 16), ((2, 3), 100, 40), ((1, 2), 1000, 128), ((1, 1), 4097, 64),
    ((1, 1), 16384, 64), ((1, 2), 700, 256), ((2, 2), 2048, 128), ((1, 4), 333, 96),
])
def test_attention_matches_float64_on_the_gpu(bh, s, d, causal, dtype):
    q, k, v = _inputs(s + d, [(*bh, s, d)] * 3, dtype)
    scale = d**-0.5
    got = causal_attention(q, k, v) if causal else batched_attention(q, k, v, scale)
    _check(got, reference(q, k, v, 0.125 if causal else scale, causal))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float16, BF16], ids=["f16", "bf16"])
@pytest.mark.parametrize("s_q, s_kv", [(1, 4096), (1, 4099), (7, 3000), (128, 5000)])
def test_decoding_against_a_kv_cache_on_the_gpu(s_q, s_kv, dtype):
    q, = _inputs(1, [(8, 32, s_q, 128)], dtype)
    k, v = _inputs(2, [(8, 32, s_kv, 128)] * 2, dtype)
    _check(batched_attention(q, k, v, 128**-0.5), reference(q, k, v, 128**-0.5))
    _check(causal_attention(q, k, v), reference(q, k, v, 0.125, causal=True))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float16, BF16], ids=["f16", "bf16"])
def test_grouped_query_and_bias_on_the_gpu(dtype):
    b, h_kv, group, s, d = 2, 2, 4, 600, 64
    q, = _inputs(3, [(b, h_kv, group, s, d)], dtype)
    k, v = _inputs(4, [(b, h_kv, 1, s, d)] * 2, dtype)
    _check(batched_attention(q, k, v, 0.125), reference(q, k, v, 0.125))
    bias, = _inputs(5, [(s, s)], np.float32)
    keep = np.tril(np.ones((s, s), bool))
    q3, k3, v3 = (x.reshape(b * h_kv, -1, s, d)[:, 0] for x in (q, k, v))
    want = reference(q3, k3, v3, 1 / 8.0, causal=True, bias=bias)
    _check(masked_attention(q3, k3, v3, bias, keep), want)
