"""What a flash-attention kernel stores: its output through the layout a model gives it next
(`o.swapaxes(1, 2).reshape(B, S, H * D)`, heads merged back before the output projection, written as `[B, S, H, D]`
directly: no kernel copies or transposes it; tinyton/analysis/strided_views.py `output_views`,
tinyton/lowering/fusion/attention_output.py), in several layouts when the program reads several, and each row's
logsumexp when the program keeps it (a training step's forward). Flash-decoding's combine and query heads packed as
rows store the same way. NumPy-checked; a layout that moves the head dim off the last axis is left to its consumer."""

from __future__ import annotations

import numpy as np
import pytest

from test_attention import randn, reference
from toolchains import needs_ptxas

import tinyton as tt
from tinyton.compiler import compile_module


def _softmax_pv(s, v):
    e = tt.exp(s - tt.max(s, axis=-1, keepdims=True))
    return (e / tt.sum(e, axis=-1, keepdims=True)) @ v


@tt.jit
def heads_merged(q, k, v):
    b, h, s, d = q.shape
    return tt.swapaxes(_softmax_pv((q @ tt.swapaxes(k, -1, -2)) * 0.25, v), 1, 2).reshape(b, s, h * d)


@tt.jit
def heads_merged_then_projected(q, k, v, w):
    b, h, s, d = q.shape
    return tt.swapaxes(_softmax_pv((q @ tt.swapaxes(k, -1, -2)) * 0.25, v), 1, 2).reshape(b, s, h * d) @ w


@tt.jit
def grouped_heads_merged(q, k, v):
    """Grouped-query heads `(B, KV, G, S, D)` (packed as rows for few queries) merged back to `(B, S, KV*G*D)`."""
    b, kv, g, s, d = q.shape
    o = _softmax_pv((q @ tt.swapaxes(k, -1, -2)) * 0.125, v)
    return tt.transpose(o, (0, 3, 1, 2, 4)).reshape(b, s, kv * g * d)


@tt.jit
def kept_and_merged(q, k, v):
    """A training step's forward: `o` as computed (kept for the backward) and its heads merged for the projection."""
    b, h, s, d = q.shape
    o = _softmax_pv((q @ tt.swapaxes(k, -1, -2)) * 0.25, v)
    return o, tt.swapaxes(o, 1, 2).reshape(b, s, h * d)


@tt.jit
def grouped_kept_and_merged(q, k, v):
    """Grouped heads `(B, KV, G, S, D)` reshaped back to `(B, H, S, D)`, that kept and also merged: the layouts
    branch after the reshape."""
    b, kv, g, s, d = q.shape
    o = _softmax_pv((q @ tt.swapaxes(k, -1, -2)) * 0.125, v).reshape(b, kv * g, s, d)
    return o, tt.swapaxes(o, 1, 2).reshape(b, s, kv * g * d)


@tt.jit
def value_dim_first(q, k, v):
    return tt.swapaxes(_softmax_pv((q @ tt.swapaxes(k, -1, -2)) * 0.25, v), -1, -2)


def _merged(o: np.ndarray) -> np.ndarray:
    b, h, s, d = o.shape
    return np.swapaxes(o, 1, 2).reshape(b, s, h * d)


@pytest.mark.parametrize("b, h, s, d", [(2, 3, 16, 8), (1, 2, 37, 16), (2, 4, 70, 32)])
def test_heads_merged_back_are_stored_by_the_attention_kernel(b, h, s, d):
    rng = np.random.default_rng(b * s + d)
    q, k, v = randn(rng, b, h, s, d), randn(rng, b, h, s, d), randn(rng, b, h, s, d)
    program = heads_merged.compile(q, k, v)
    assert [step.launch.kind for step in program.steps] == ["attention"]
    np.testing.assert_allclose(program(q, k, v), _merged(reference(q, k, v, 0.25)), rtol=1e-4, atol=1e-5)


def test_the_output_projection_reads_the_stored_rows_with_no_copy_between():
    rng = np.random.default_rng(1)
    q, k, v = randn(rng, 2, 4, 24, 8), randn(rng, 2, 4, 24, 8), randn(rng, 2, 4, 24, 8)
    w = randn(rng, 32, 16) / 4
    program = heads_merged_then_projected.compile(q, k, v, w)
    assert [step.launch.kind for step in program.steps] == ["attention", "matmul_epilogue"]
    want = _merged(reference(q, k, v, 0.25)) @ w
    np.testing.assert_allclose(program(q, k, v, w), want, rtol=1e-4, atol=1e-5)


def test_a_split_kv_loop_combines_into_the_merged_heads():
    """Few queries over many keys: flash-decoding's last program per row block stores the merged layout."""
    rng = np.random.default_rng(2)
    q, k, v = randn(rng, 1, 2, 3, 32), randn(rng, 1, 2, 2048, 32), randn(rng, 1, 2, 2048, 32)
    program = heads_merged.compile(q, k, v)
    (step,) = program.steps
    assert step.launch.kind == "attention" and step.launch.grid[2] == step.launch.tiles["kv_splits"] > 1
    np.testing.assert_allclose(program(q, k, v), _merged(reference(q, k, v, 0.25)), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("s_q, s_kv", [(1, 40), (3, 50), (4, 1500)])
def test_packed_query_heads_are_stored_to_their_merged_rows(s_q, s_kv):
    """A group's query heads are rows of one program; merged back, consecutive rows are not one stride apart
    (head, then query), so each row's offset is computed from its head and query."""
    rng = np.random.default_rng(s_q + s_kv)
    q = randn(rng, 2, 2, 4, s_q, 16)
    k, v = randn(rng, 2, 2, 1, s_kv, 16), randn(rng, 2, 2, 1, s_kv, 16)
    program = grouped_heads_merged.compile(q, k, v)
    assert [step.launch.kind for step in program.steps] == ["attention"]
    assert program.steps[0].launch.grid[1] == 4, "one program per key/value head: the group's rows packed"
    o = reference(q, k, v, 0.125)
    want = np.transpose(o, (0, 3, 1, 2, 4)).reshape(2, s_q, 2 * 4 * 16)
    np.testing.assert_allclose(program(q, k, v), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("s_kv", [24, 2048])
def test_one_kernel_stores_the_output_in_both_layouts_a_program_reads(s_kv):
    """Both from the registers (and from flash-decoding's combine): no copy kernel for the second."""
    rng = np.random.default_rng(s_kv)
    q, k, v = randn(rng, 1, 2, 3, 16), randn(rng, 1, 2, s_kv, 16), randn(rng, 1, 2, s_kv, 16)
    program = kept_and_merged.compile(q, k, v)
    assert [step.launch.kind for step in program.steps] == ["attention"]
    kept, merged = program(q, k, v)
    o = reference(q, k, v, 0.25)
    np.testing.assert_allclose(kept, o, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(merged, _merged(o), rtol=1e-4, atol=1e-5)


def test_layouts_that_branch_after_a_reshape_are_both_stored():
    rng = np.random.default_rng(9)
    q = randn(rng, 2, 2, 3, 8, 16)
    k, v = randn(rng, 2, 2, 1, 8, 16), randn(rng, 2, 2, 1, 8, 16)
    program = grouped_kept_and_merged.compile(q, k, v)
    assert [step.launch.kind for step in program.steps] == ["attention"]
    kept, merged = program(q, k, v)
    o = reference(q, k, v, 0.125).reshape(2, 6, 8, 16)
    np.testing.assert_allclose(kept, o, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(merged, _merged(o), rtol=1e-4, atol=1e-5)


def test_a_layout_that_moves_the_head_dim_is_left_to_its_consumer():
    rng = np.random.default_rng(4)
    q, k, v = randn(rng, 2, 16, 8), randn(rng, 2, 16, 8), randn(rng, 2, 16, 8)
    program = value_dim_first.compile(q, k, v)
    assert program.steps[0].launch.kind == "attention" and program.num_launches == 2
    want = np.swapaxes(reference(q, k, v, 0.25), -1, -2)
    np.testing.assert_allclose(program(q, k, v), want, rtol=1e-4, atol=1e-5)


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
@pytest.mark.parametrize("program", [heads_merged, kept_and_merged], ids=["merged", "kept-and-merged"])
def test_the_stores_assemble(program, arch):
    rng = np.random.default_rng(5)
    q, k, v = (randn(rng, 2, 4, 128, 64, dtype=np.float16) for _ in range(3))
    attention = program.compile(q, k, v).steps[0].launch
    kernel = compile_module(attention.module, num_warps=attention.num_warps, arch=arch, toolchain="llvmlite")
    assert "st.global" in kernel.asm["ptx"] and kernel.n_spills == 0


@needs_ptxas
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_the_logsumexp_store_assembles(arch):
    rng = np.random.default_rng(6)
    q, k, v = (randn(rng, 2, 4, 128, 64, dtype=np.float16) for _ in range(3))
    attention = attention_and_logsumexp.compile(q, k, v).steps[0].launch
    kernel = compile_module(attention.module, num_warps=attention.num_warps, arch=arch, toolchain="llvmlite")
    assert kernel.n_spills == 0


@tt.jit
def attention_and_logsumexp(q, k, v):
    """A training step's forward: the output and each row's logsumexp (`m + log(l)` of its own softmax), kept for
    the backward."""
    s = (q @ tt.swapaxes(k, -1, -2)) * 0.25
    m = tt.max(s, axis=-1, keepdims=True)
    e = tt.exp(s - m)
    total = tt.sum(e, axis=-1, keepdims=True)
    return (e / total) @ v, (m + tt.log(total))[..., 0]


@pytest.mark.parametrize("s_q, s_kv", [(16, 16), (37, 50), (3, 2048)])
def test_the_rows_logsumexp_is_stored_by_the_attention_kernel(s_q, s_kv):
    """One kernel stores both (its KV loop unsplit even for few queries: the logsumexp is the whole row's)."""
    rng = np.random.default_rng(s_q)
    q, k, v = randn(rng, 2, 3, s_q, 16), randn(rng, 2, 3, s_kv, 16), randn(rng, 2, 3, s_kv, 16)
    program = attention_and_logsumexp.compile(q, k, v)
    assert [step.launch.kind for step in program.steps] == ["attention"]
    out, lse = program(q, k, v)
    s = q.astype(np.float64) @ np.swapaxes(k, -1, -2) * 0.25
    want_lse = s.max(-1) + np.log(np.exp(s - s.max(-1, keepdims=True)).sum(-1))
    np.testing.assert_allclose(out, reference(q, k, v, 0.25), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=1e-5)
