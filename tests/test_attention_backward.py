"""The attention backward rewrite (issue 23): the textbook gradient math of an array program becomes
FlashAttention-2's backward (tinyton/analysis/attention_backward.py, rewrites/attention_backward.py,
lowering/fusion/attention_backward.py): a delta kernel, a dk/dv kernel and a dq kernel, after the forward
kernel that saves the logsumexp when the program computes the softmax itself; no S x S buffer. Checked
against the same math in NumPy float64 on the simulator: causal, bias, grouped-query, S not a multiple of
the blocks, fully masked rows; and `tinyton.compiler.attention_backward`, the entry point of the torch
backend."""

from __future__ import annotations

import weakref

import ml_dtypes
import numpy as np
import pytest
from attention_reference import attention_gradients_reference, masked_scores
from toolchains import needs_ptxas

import tinyton as tt
from tinyton.compiler import compile_module
from tinyton.compiler.attention_backward import attention_backward, backward_program
from tinyton.frontend import programs
from tinyton.lowering.fusion.attention_backward import DQ_ENV
from tinyton.lowering.ptx import assemble_ptx
from tinyton.lowering.ptx.toolchain import find_tool
from tinyton.lowering.ptx.usage import ptxas_report

SCALE = 0.125
BACKWARD = ["attention_delta", "attention_dkdv", "attention_dq"]


def softmax(s):
    e = tt.exp(s - tt.max(s, axis=-1, keepdims=True))
    return e / tt.sum(e, axis=-1, keepdims=True)


@tt.jit
def training_step(q, k, v, do):
    p = softmax(q @ k.mT * SCALE)
    o = p @ v
    dv = p.mT @ do
    dp = do @ v.mT
    ds = p * (dp - tt.sum(dp * p, axis=-1, keepdims=True))
    return o, ds @ k * SCALE, ds.mT @ q * SCALE, dv


@tt.jit
def training_step_delta_from_o(q, k, v, do, bias):
    p = softmax(q @ k.mT * SCALE + bias)
    o = p @ v
    ds = p * (do @ v.mT - tt.sum(do * o, axis=-1, keepdims=True))
    return o, ds @ k * SCALE, ds.mT @ q * SCALE, p.mT @ do


@tt.jit
def causal_step(q, k, v, do):
    s_q, s_kv = q.shape[-2], k.shape[-2]
    keep = tt.arange(s_q).reshape(s_q, 1) + (s_kv - s_q) >= tt.arange(s_kv)
    p = softmax(tt.where(keep, q @ k.mT / 8.0, float("-inf")))
    o = p @ v
    dp = do @ v.mT
    ds = p * (dp - tt.sum(dp * p, axis=-1, keepdims=True))
    return o, ds @ k / 8.0, ds.mT @ q / 8.0, p.mT @ do


@tt.jit
def grouped_query_step(q, k, v, do):  # q (B, H_kv, G, S, D), k and v (B, H_kv, 1, S, D)
    p = softmax(q @ k.mT * SCALE)
    o = p @ v
    dp = do @ v.mT
    ds = p * (dp - tt.sum(dp * p, axis=-1, keepdims=True))
    dk = tt.sum(ds.mT @ q, axis=2, keepdims=True) * SCALE
    return o, ds @ k * SCALE, dk, tt.sum(p.mT @ do, axis=2, keepdims=True)


@tt.jit
def backward_from_lse(q, k, v, o, lse, do):
    p = tt.exp(q @ k.mT * SCALE - lse)
    ds = p * (do @ v.mT - tt.sum(do * o, axis=-1, keepdims=True))
    return ds @ k * SCALE, ds.mT @ q * SCALE, p.mT @ do


def randn(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def check(program, args, want, s_q, s_kv, kinds, rtol=1e-4, atol=1e-5):
    compiled = program.compile(*args)
    assert [step.launch.kind for step in compiled.steps] == kinds
    allocated = compiled.buffer_specs[len(compiled.input_positions) :]
    assert not any(shape[-2:] == (s_q, s_kv) for shape, _ in allocated), "an S x S buffer is allocated"
    results = compiled(*args)
    for got, expected in zip(results if isinstance(results, tuple) else (results,), want, strict=True):
        np.testing.assert_allclose(np.asarray(got, np.float64), expected, rtol=rtol, atol=atol)


@pytest.mark.parametrize("b, s, d", [(2, 64, 32), (1, 70, 16), (2, 33, 40), (1, 1, 16)])
def test_training_step_is_forward_and_three_backward_kernels(b, s, d):
    rng = np.random.default_rng(s)
    q, k, v, do = (randn(rng, b, s, d) for _ in range(4))
    check(training_step, (q, k, v, do), attention_gradients_reference(q, k, v, do, SCALE), s, s, ["attention", *BACKWARD])


def test_delta_from_the_output_and_a_bias_with_a_fully_masked_row():
    rng = np.random.default_rng(1)
    q, k, v, do = randn(rng, 2, 40, 16), randn(rng, 2, 50, 16), randn(rng, 2, 50, 16), randn(rng, 2, 40, 16)
    bias = randn(rng, 40, 50)
    bias[:, 45:] = -np.inf
    bias[5] = -np.inf  # row 5 sees no key: NaN, as NumPy's math gives (its dk and dv reach every key)
    want = attention_gradients_reference(q, k, v, do, SCALE, bias=bias)
    assert np.isnan(want[1][:, 5]).all() and np.isnan(want[2]).all()
    check(training_step_delta_from_o, (q, k, v, do, bias), want, 40, 50, ["attention", *BACKWARD])


@pytest.mark.parametrize("s_q, s_kv", [(64, 64), (70, 70), (37, 100), (1, 77)])
def test_causal_backward_skips_blocks_and_matches(s_q, s_kv):
    rng = np.random.default_rng(s_q + s_kv)
    q, k, v, do = randn(rng, 2, s_q, 32), randn(rng, 2, s_kv, 32), randn(rng, 2, s_kv, 32), randn(rng, 2, s_q, 32)
    keep = np.arange(s_q)[:, None] + (s_kv - s_q) >= np.arange(s_kv)[None, :]
    check(causal_step, (q, k, v, do), attention_gradients_reference(q, k, v, do, SCALE, keep=keep), s_q, s_kv, ["attention", *BACKWARD])


def test_grouped_query_gradients_sum_over_the_group():
    rng = np.random.default_rng(3)
    q, do = randn(rng, 2, 2, 3, 45, 16), randn(rng, 2, 2, 3, 45, 16)
    k, v = randn(rng, 2, 2, 1, 45, 16), randn(rng, 2, 2, 1, 45, 16)
    want = attention_gradients_reference(q, k, v, do, SCALE, group_axis=2)
    check(grouped_query_step, (q, k, v, do), want, 45, 45, ["attention", *BACKWARD])
    program = grouped_query_step.compile(q, k, v, do)
    dkdv = next(step for step in program.steps if step.launch.kind == "attention_dkdv")
    assert dkdv.grid[1] == 4, "one program per key block of each key/value head: K and V read once"


def test_dq_walking_the_key_blocks_matches_too(monkeypatch):
    """`TINYTON_ATTENTION_DQ=walk`: the dq kernel walks the key blocks itself, recomputing `s` and `dp` (the form to
    measure beside the dk/dv kernel's reduction): the same gradients, causal, ragged and grouped, and no dq sum added
    or zeroed."""
    monkeypatch.setenv(DQ_ENV, "walk")
    monkeypatch.setattr(programs, "_PROGRAMS", weakref.WeakKeyDictionary())
    rng = np.random.default_rng(7)
    q, k, v, do = randn(rng, 2, 70, 32), randn(rng, 2, 100, 32), randn(rng, 2, 100, 32), randn(rng, 2, 70, 32)
    keep = np.arange(70)[:, None] + 30 >= np.arange(100)[None, :]
    want = attention_gradients_reference(q, k, v, do, SCALE, keep=keep)
    check(causal_step, (q, k, v, do), want, 70, 100, ["attention", *BACKWARD])
    modules = [str(step.launch.module) for step in causal_step.compile(q, k, v, do).steps[1:]]
    assert not any("tt.descriptor_reduce" in m for m in modules) and "scf.for" in modules[-1]
    q, do = randn(rng, 2, 2, 3, 45, 16), randn(rng, 2, 2, 3, 45, 16)
    k, v = randn(rng, 2, 2, 1, 45, 16), randn(rng, 2, 2, 1, 45, 16)
    check(grouped_query_step, (q, k, v, do), attention_gradients_reference(q, k, v, do, SCALE, group_axis=2), 45, 45,
          ["attention", *BACKWARD])


def forward_lse(q, k, scale=SCALE, bias=None, keep=None):
    s = masked_scores(q, k, scale, bias, keep)
    m = s.max(-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return m + np.log(np.exp(s - np.where(np.isfinite(m), m, 0)).sum(-1, keepdims=True)) - np.where(np.isfinite(m), 0, m) * 0


def test_backward_from_a_saved_logsumexp_is_three_launches():
    rng = np.random.default_rng(4)
    q, k, v, do = (randn(rng, 2, 50, 32) for _ in range(4))
    o, dq, dk, dv = attention_gradients_reference(q, k, v, do, SCALE)
    lse = forward_lse(q, k).astype(np.float32)
    check(backward_from_lse, (q, k, v, o.astype(np.float32), lse, do), (dq, dk, dv), 50, 50, BACKWARD)


def _heads(x, heads):
    b, s, c = x.shape
    return tt.swapaxes(x.reshape(b, s, heads, c // heads), 1, 2)


@tt.jit
def backward_in_model_layout(qkv, o, lse, do, heads):
    return _gradients_in_model_layout(qkv, o, lse, do, heads)


def _gradients_in_model_layout(qkv, o, lse, do, heads):
    """A training step's backward as a model lays its operands out: q, k and v windows of one projection `(B, S, 3C)`,
    o and do `(B, S, C)`, each with its heads split."""
    c = qkv.shape[-1] // 3
    q, k, v = (_heads(qkv[:, :, i * c : (i + 1) * c], heads) for i in range(3))
    o, do = _heads(o, heads), _heads(do, heads)
    p = tt.exp(q @ k.mT * SCALE - lse)
    ds = p * (do @ v.mT - tt.sum(do * o, axis=-1, keepdims=True))
    return ds @ k * SCALE, ds.mT @ q * SCALE, p.mT @ do


@tt.jit
def packed_gradient(qkv, o, lse, do, heads):
    """The gradient of the packed projection's output: dq, dk and dv with their heads merged, side by side."""
    b, s, _ = qkv.shape
    grads = _gradients_in_model_layout(qkv, o, lse, do, heads)
    return tt.concatenate([tt.swapaxes(g, 1, 2).reshape(b, s, -1) for g in grads], axis=-1)


@tt.jit
def gradient_beside_another_array(qkv, o, lse, do, heads, other):
    b, s, _ = qkv.shape
    dq = _gradients_in_model_layout(qkv, o, lse, do, heads)[0]
    return tt.concatenate([tt.swapaxes(dq, 1, 2).reshape(b, s, -1), other], axis=-1)


def _model_layout_case(rng, b=2, s=24, heads=3, d=16):
    qkv, do = randn(rng, b, s, 3 * heads * d), randn(rng, b, s, heads * d)
    split = lambda x: np.swapaxes(x.reshape(b, s, heads, d), 1, 2)  # noqa: E731
    q, k, v = (split(qkv[:, :, i * heads * d : (i + 1) * heads * d]) for i in range(3))
    o_ref, *grads = attention_gradients_reference(q, k, v, split(do), SCALE)
    lse = forward_lse(q, k).astype(np.float32)
    merged = lambda g: np.swapaxes(g, 1, 2).reshape(b, s, -1)  # noqa: E731
    return (qkv, merged(o_ref).astype(np.float32), lse, do, heads), grads, merged


def test_the_backward_reads_its_operands_where_the_model_wrote_them():
    """No kernel copies the windows or transposes the heads first: the three backward kernels read them through
    their strides, as the forward kernel does."""
    args, grads, _ = _model_layout_case(np.random.default_rng(5))
    check(backward_in_model_layout, args, grads, 24, 24, BACKWARD)


def test_the_gradients_are_stored_side_by_side_where_the_model_reads_them():
    """Merged heads concatenated (a packed projection's gradient): the dk/dv and dq kernels store each gradient in its
    window of the one array, no transpose or concatenation kernel after them."""
    args, grads, merged = _model_layout_case(np.random.default_rng(6))
    check(packed_gradient, args, (np.concatenate([merged(g) for g in grads], axis=-1),), 24, 24, BACKWARD)


def test_a_gradient_concatenated_with_another_array_is_still_right():
    rng = np.random.default_rng(7)
    args, grads, merged = _model_layout_case(rng)
    other = randn(rng, 2, 24, 5)
    got = gradient_beside_another_array(*args, other)
    np.testing.assert_allclose(got, np.concatenate([merged(grads[0]), other], axis=-1), rtol=1e-4, atol=1e-5)


# ---- the entry point of the torch backend ---------------------------------------------------------------


def torch_layout_reference(q, k, v, do, scale, causal=False, bias=None):
    """o, lse, dq, dk, dv over (B, H, S, D) with grouped-query heads (query head h reads kv head h // G)."""
    g = q.shape[1] // k.shape[1]
    kk, vv = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    keep = np.tril(np.ones((q.shape[2], k.shape[2]), bool)) if causal else None
    o, dq, dk, dv = attention_gradients_reference(q, kk, vv, do, scale, bias, keep)
    lse = forward_lse(q, kk, scale, bias, keep)[..., 0]
    fold = lambda x: x.reshape(x.shape[0], k.shape[1], g, *x.shape[2:]).sum(2)  # noqa: E731
    return o, lse, dq, fold(dk), fold(dv)


@pytest.mark.parametrize("h, h_kv, s_q, s_kv, causal, with_bias", [
    (4, 4, 64, 64, False, False), (4, 2, 70, 70, True, False), (6, 2, 33, 90, False, True), (2, 1, 96, 96, True, True),
])
def test_attention_backward_entry_point(h, h_kv, s_q, s_kv, causal, with_bias):
    rng = np.random.default_rng(h * 100 + s_q)
    q, do = randn(rng, 2, h, s_q, 32), randn(rng, 2, h, s_q, 32)
    k, v = randn(rng, 2, h_kv, s_kv, 32), randn(rng, 2, h_kv, s_kv, 32)
    bias = randn(rng, 1, h, s_q, s_kv) if with_bias else None
    o, lse, *want = torch_layout_reference(q, k, v, do, 0.2, causal, bias)
    got = attention_backward(q, k, v, o.astype(np.float32), lse.astype(np.float32), do, 0.2, causal=causal, bias=bias)
    bias5 = None if bias is None else (1, h_kv, h // h_kv, s_q, s_kv)
    program = backward_program((2, h_kv, h // h_kv, s_q, 32), (2, h_kv, 1, s_kv, 32), 32, "float32", 0.2,
                               0 if causal else None, bias5, None if bias is None else "float32")
    assert [step.launch.kind for step in program.steps] == BACKWARD
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float16, np.dtype(ml_dtypes.bfloat16)], ids=["fp16", "bf16"])
def test_attention_backward_in_16_bits_computes_in_float32(dtype):
    rng = np.random.default_rng(7)
    q, k, v, do = (randn(rng, 1, 2, 48, 32).astype(dtype) for _ in range(4))
    o, lse, *want = torch_layout_reference(*(a.astype(np.float64) for a in (q, k, v, do)), 0.125, True)
    got = attention_backward(q, k, v, o.astype(dtype), lse.astype(np.float32), do, 0.125, causal=True)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == dtype
        np.testing.assert_allclose(g.astype(np.float64), w, rtol=5e-2, atol=5e-2)


def test_attention_backward_names_bad_shapes():
    q = np.zeros((1, 3, 8, 16), np.float32)
    k = np.zeros((1, 2, 8, 16), np.float32)
    with pytest.raises(tt.CompilationError, match="multiple of H_kv"):
        attention_backward(q, k, k, q, np.zeros((1, 3, 8), np.float32), q, 0.25)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("b, h, h_kv, s, d, causal", [(2, 8, 8, 1024, 64, True), (1, 8, 2, 777, 128, False)])
def test_attention_backward_on_the_gpu(dtype, b, h, h_kv, s, d, causal):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU for torch")
    gen = torch.Generator(device="cuda").manual_seed(0)
    make = lambda *shape: torch.randn(*shape, device="cuda", dtype=getattr(torch, dtype), generator=gen)  # noqa: E731
    q, k, v, do = make(b, h, s, d), make(b, h_kv, s, d), make(b, h_kv, s, d), make(b, h, s, d)
    ref = [x.detach().double().requires_grad_() for x in (q, k, v)]
    out = torch.nn.functional.scaled_dot_product_attention(*ref, is_causal=causal, enable_gqa=h != h_kv)
    out.backward(do.double())
    scores = ref[0] @ ref[1].repeat_interleave(h // h_kv, 1).mT * d ** -0.5
    if causal:
        scores = scores.masked_fill(~torch.ones(s, s, dtype=torch.bool, device="cuda").tril(), float("-inf"))
    lse = torch.logsumexp(scores, -1).float().detach()
    got = attention_backward(q, k, v, out.detach().to(q.dtype), lse, do, d ** -0.5, causal=causal)
    for g, r in zip(got, ref, strict=True):
        torch.testing.assert_close(g.double(), r.grad, rtol=3e-2, atol=3e-2)


@pytest.mark.skipif(find_tool("ptxas") is None, reason="ptxas not found")
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_backward_kernels_assemble(arch):
    """The forward (storing the logsumexp), delta, dk/dv and dq kernels of an fp16 causal training step
    lower to PTX that ptxas accepts: wgmma on sm_90a, mma.sync on sm_80."""
    q = np.zeros((2, 256, 64), np.float16)
    program = causal_step.compile(q, q, q, q)
    assert [step.launch.kind for step in program.steps] == ["attention", *BACKWARD]
    _assert_assembles(program, arch)


def _assert_assembles(program, arch: str) -> None:
    """Every kernel of `program` assembles for `arch`, the gradient products on its tensor cores."""
    for step in program.steps:
        launch = step.launch
        ptx = compile_module(launch.module.clone(), num_warps=launch.num_warps, arch=arch).asm["ptx"]
        assemble_ptx(ptx, arch)
        if launch.kind == "attention_dkdv":
            assert ("wgmma" if arch == "sm_90a" else "mma.sync") in ptx


@pytest.mark.skipif(find_tool("ptxas") is None, reason="ptxas not found")
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_backward_kernels_in_the_models_layout_assemble(arch):
    """The three kernels reading q, k, v, o and do through their views and storing the gradients side by side, in
    fp16 and bf16: PTX that ptxas accepts, on the tensor cores."""
    for dtype in (np.float16, ml_dtypes.bfloat16):
        qkv, o, do = np.zeros((2, 128, 3 * 128), dtype), np.zeros((2, 128, 128), dtype), np.zeros((2, 128, 128), dtype)
        lse = np.zeros((2, 2, 128, 1), np.float32)
        program = packed_gradient.compile(qkv, o, lse, do, 2)
        assert [step.launch.kind for step in program.steps] == BACKWARD
        _assert_assembles(program, arch)


@needs_ptxas
@pytest.mark.parametrize("d, spilled", [(64, 0), (128, 0), (256, 8)])
def test_the_gradient_kernels_keep_their_accumulators_in_registers(d, spilled):
    """sm_90a: dk and dv (the dk/dv kernel's whole-kernel accumulators) fit the registers beside a step's scores
    and its share of dq (at D = 256 but for a few registers, `spilled` at most); the dk/dv kernel's five products
    all run on wgmma, pᵀ and dsᵀ read from registers, ds's product adding to dq's sum with one TMA reduction;
    a step costs no NaN guard on p's exp2, no shared-memory round trip of -delta and no barrier of its own for
    ds's staging or dq's reduction (the barriers before them order the previous step's reads); ptxas keeps every kernel's
    wgmmas in flight (no C7514: it serialises them all where registers a wgmma writes are read before its wait)
    and injects no wait inside the dk/dv kernel's step (C7517)."""
    q = np.zeros((2, 512, d), np.float16)
    program = causal_step.compile(q, q, q, q)
    for step in program.steps:
        launch = step.launch
        kernel = compile_module(launch.module.clone(), num_warps=launch.num_warps, arch="sm_90a", toolchain="llvmlite")
        ptx = kernel.asm["ptx"]
        report = ptxas_report(ptx, "sm_90a")
        assert report is not None, "ptxas rejected the PTX"
        assert "C7514" not in report, f"{launch.kind} at D = {d}: {report}"
        if launch.kind in ("attention", "attention_delta"):
            continue
        allowed = spilled if launch.kind == "attention_dkdv" else 0
        assert kernel.n_spills <= allowed, f"{launch.kind} at D = {d} spills {kernel.n_spills} registers"
        if launch.kind == "attention_dkdv":
            # ptxas's one injected wait is at the loop's back edge, after the step's own waits: none inside the step
            assert report.count("C7517") <= 1, report
            assert ptx.count("wgmma.commit_group") >= 5 and "mma.sync" not in ptx
            assert "cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group" in ptx
            assert "setp.nan" not in ptx, "p's exp2 feeds only products and dq's TMA sum: no NaN guard"
            # three before the loop, three a step: the ring slot's, ds published for its product with k (the leader
            # waiting there for the previous dq reduction's reads), dq's block published for its reduction; D = 256
            # has q and do one stage, loaded (`backward_blocks`)
            barriers = 6 if d <= 128 else 10
            assert ptx.count("bar.sync") <= barriers, "delta in the scores' layout, ds staged after the step's first barrier"
