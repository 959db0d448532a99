"""FlashAttention-3's intra-warpgroup overlap (`Blocks.overlap`, tinyton/lowering/fusion/attention.py
`_overlapped_block`): each KV step issues its scores and the previous step's `p @ v` together, the last `p @ v`
after the loops. The same results as the plain loop on every form of the kernel (masks, ragged and causal ends,
grouped heads, a split KV loop, the logsumexp), on the simulator and the GPU; lowered for sm_90a both dots stay in
flight within the step (tinyton/lowering/tt_to_llvm/dot_overlap.py)."""

from __future__ import annotations

import numpy as np
import pytest
from test_attention import batched_attention, causal_attention, causal_reference, masked_attention, randn, reference
from test_attention_outputs import attention_and_logsumexp
from toolchains import needs_ptxas

from tinyton.compiler import compile_module
from tinyton.lowering.fusion.attention_blocks import Blocks

BACKENDS = ["sim", pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.isolated])]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("s_q, s_kv", [(128, 256), (100, 77), (64, 64), (1, 300)])
def test_full_attention_matches(monkeypatch, attention_blocks, backend, dtype, s_q, s_kv):
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    attention_blocks(Blocks(64, 32, 4, overlap=True))
    rng = np.random.default_rng(s_q + s_kv)
    q, k, v = (randn(rng, 2, 3, s, 64, dtype=dtype) for s in (s_q, s_kv, s_kv))
    tol = 2e-2 if dtype == np.float16 else 1e-4
    program = batched_attention.compile(q, k, v, 0.125)
    np.testing.assert_allclose(program(q, k, v, 0.125), reference(q, k, v, 0.125), rtol=tol, atol=tol)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("s", [128, 200, 33])
def test_causal_attention_matches(monkeypatch, attention_blocks, backend, s):
    """The unmasked loop hands its last probabilities to the masked one: both loops' steps and the last product."""
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    attention_blocks(Blocks(64, 32, 4, overlap=True))
    rng = np.random.default_rng(s)
    q, k, v = (randn(rng, 1, 2, s, 64, dtype=np.float16) for _ in range(3))
    want = causal_reference(q, k, v, 0.125)
    np.testing.assert_allclose(causal_attention.compile(q, k, v)(q, k, v), want, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_masks_bias_and_fully_masked_rows(monkeypatch, attention_blocks, backend):
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    attention_blocks(Blocks(64, 32, 4, overlap=True))
    rng = np.random.default_rng(3)
    q, k, v = randn(rng, 2, 70, 64), randn(rng, 2, 90, 64), randn(rng, 2, 90, 64)
    bias = randn(rng, 70, 90)
    keep = rng.random((2, 70, 90)) < 0.7
    keep[:, 5] = False  # a row with no key: NaN, as NumPy's softmax gives
    with np.errstate(invalid="ignore"):
        want = reference(q, k, v, 0.125, bias, keep)
        got = masked_attention.compile(q, k, v, bias, keep)(q, k, v, bias, keep)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert np.isnan(got[:, 5]).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_grouped_query_heads_and_a_split_kv_loop(monkeypatch, attention_blocks, backend):
    """Decoding with the KV loop cut in chunks: each chunk's last product before its partials are stored; a chunk
    past the keys stores nothing of them."""
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    attention_blocks(Blocks(16, 32, 4, splits=5, overlap=True))
    rng = np.random.default_rng(4)
    q, k, v = randn(rng, 2, 8, 1, 64), randn(rng, 2, 1, 300, 64), randn(rng, 2, 1, 300, 64)
    program = batched_attention.compile(q, k, v, 0.125)
    assert program.steps[0].launch.tiles["kv_splits"] == 5
    np.testing.assert_allclose(program(q, k, v, 0.125), reference(q, k, v, 0.125), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_logsumexp_is_of_every_block(monkeypatch, attention_blocks, backend):
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    attention_blocks(Blocks(64, 32, 4, overlap=True))
    rng = np.random.default_rng(5)
    q, k, v = (randn(rng, 2, 4, 150, 64) for _ in range(3))
    out, lse = attention_and_logsumexp.compile(q, k, v)(q, k, v)
    s = (q @ np.swapaxes(k, -1, -2)).astype(np.float64) * 0.25
    want_lse = np.log(np.exp(s - s.max(-1, keepdims=True)).sum(-1)) + s.max(-1)
    np.testing.assert_allclose(out, reference(q, k, v, 0.25), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=1e-5)


@needs_ptxas
@pytest.mark.parametrize("program, causal", [(batched_attention, False), (causal_attention, True)],
                         ids=["full", "causal"])
def test_both_dots_stay_in_flight_on_sm90a(attention_blocks, program, causal):
    """Lowered for sm_90a (128 queries on two warpgroups, D = 128): the step's scores wait for themselves only
    (`wait_group 1`: `p @ v` runs on), `p @ v` is waited for where `alpha` rescales it, and nothing spills."""
    attention_blocks(Blocks(128, 64, 8, overlap=True))
    rng = np.random.default_rng(6)
    q, k, v = (randn(rng, 1, 2, 512, 128, dtype=np.float16) for _ in range(3))
    args = (q, k, v) if causal else (q, k, v, 0.088)
    launch = program.compile(*args).steps[0].launch
    kernel = compile_module(launch.module, num_warps=launch.num_warps, arch="sm_90a", toolchain="llvmlite")
    ptx = kernel.asm["ptx"]
    assert "wgmma.wait_group.sync.aligned 1;" in ptx
    assert kernel.n_spills == 0
