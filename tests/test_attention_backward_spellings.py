"""Every spelling of attention's training step is FlashAttention-2's backward (issue 23): the forward kernel
and the delta, dk/dv and dq kernels, no S x S buffer, whatever the scale (`/ math.sqrt(d)`, on q shared with
dk, on ds), the softmax (`tt.logsumexp`), the causal mask (`tt.tril`, the dropped keys chosen, additive) or
grouped-query heads (`tt.repeat`); the kernels are the canonical spelling's. Checked on the simulator
against the program itself run unfused (NumPy's semantics: NaN exactly where NumPy gives NaN), for S not a
multiple of the blocks, fully masked rows (a bias row of -inf, a causal mask that leaves the first queries
without a key: NaN dq rows and NaN dk, dv for every key, as NumPy's math), and a +inf score, where
`tt.logsumexp`'s probabilities differ from the softmax's (NaN only at the +inf)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import tinyton as tt
from tinyton.compiler import compile_module
from tinyton.lowering.ptx import assemble_ptx
from tinyton.lowering.ptx.toolchain import find_tool

SCALE = 0.125
KERNELS = ["attention", "attention_delta", "attention_dkdv", "attention_dq"]


def softmax(s):
    e = tt.exp(s - tt.max(s, axis=-1, keepdims=True))
    return e / tt.sum(e, axis=-1, keepdims=True)


def gradients(p, q, k, v, do, scale):
    """The textbook backward of `o = p @ v`, p the softmax of the scores `q @ kᵀ * scale`."""
    o = p @ v
    dp = do @ v.mT
    ds = p * (dp - tt.sum(dp * p, axis=-1, keepdims=True))
    return o, ds @ k * scale, ds.mT @ q * scale, p.mT @ do


def causal(n: int, shift: int = 0):
    return tt.arange(n)[:, None] + shift >= tt.arange(n)[None, :]


@tt.jit
def canonical(q, k, v, do):
    return gradients(softmax(q @ k.mT * SCALE), q, k, v, do, SCALE)


@tt.jit
def divided(q, k, v, do):
    d = math.sqrt(q.shape[-1])
    p = softmax(q @ k.mT / d)
    dp = do @ v.mT
    ds = p * (dp - tt.sum(dp * p, axis=-1, keepdims=True))
    return p @ v, ds @ k / d, ds.mT @ q / d, p.mT @ do


@tt.jit
def scaled_q_shared(q, k, v, do):  # q * scale once, read by the scores and by dk
    qs = q * SCALE
    p = softmax(qs @ k.mT)
    dp = do @ v.mT
    ds = p * (dp - tt.sum(dp * p, axis=-1, keepdims=True))
    return p @ v, ds @ k * SCALE, ds.mT @ qs, p.mT @ do


@tt.jit
def scaled_ds(q, k, v, do):
    p = softmax(SCALE * (q @ k.mT))
    dp = do @ v.mT
    ds = p * (dp - tt.sum(dp * p, axis=-1, keepdims=True)) * SCALE
    return p @ v, ds @ k, ds.mT @ q, p.mT @ do


@tt.jit
def through_logsumexp(q, k, v, do):
    s = q @ k.mT * SCALE
    return gradients(tt.exp(s - tt.logsumexp(s, axis=-1, keepdims=True)), q, k, v, do, SCALE)


@tt.jit
def causal_where(q, k, v, do):
    return gradients(softmax(tt.where(causal(q.shape[-2]), q @ k.mT * SCALE, float("-inf"))), q, k, v, do, SCALE)


@tt.jit
def causal_tril(q, k, v, do):
    keep = tt.tril(tt.ones((q.shape[-2],) * 2, tt.int1))
    return gradients(softmax(tt.where(keep, q @ k.mT * SCALE, float("-inf"))), q, k, v, do, SCALE)


@tt.jit
def causal_dropped_keys(q, k, v, do):
    drop = tt.triu(tt.ones((q.shape[-2],) * 2, tt.int1), 1)
    return gradients(softmax(tt.where(drop, float("-inf"), q @ k.mT * SCALE)), q, k, v, do, SCALE)


@tt.jit
def causal_additive(q, k, v, do):
    n = q.shape[-2]
    mask = tt.triu(tt.full((n, n), float("-inf"), q.dtype), 1)
    return gradients(softmax(q @ k.mT * SCALE + mask), q, k, v, do, SCALE)


SAME_KERNELS = [(divided, canonical), (scaled_q_shared, canonical), (scaled_ds, canonical),
                (causal_tril, causal_where), (causal_dropped_keys, causal_where), (causal_additive, causal_where)]


def kernel_texts(program, *args) -> list[str]:
    compiled = program.compile(*args)
    assert [step.launch.kind for step in compiled.steps] == KERNELS
    return [re.sub(r"@\w+?_\d+_attention_backward", "@kernel", str(step.launch.module)) for step in compiled.steps]


@pytest.mark.parametrize("spelling, canonical_form", SAME_KERNELS, ids=[f.__name__ for f, _ in SAME_KERNELS])
def test_every_backward_spelling_is_the_canonical_kernels(spelling, canonical_form):
    rng = np.random.default_rng(30)
    args = tuple(rng.standard_normal((2, 70, 64)).astype(np.float16) for _ in range(4))
    assert kernel_texts(spelling, *args) == kernel_texts(canonical_form, *args)


def test_logsumexp_only_stores_its_own_logsumexp():
    """`tt.logsumexp`'s training step: the canonical backward kernels, a forward kernel that stores +inf
    for a row holding +inf (its p is NaN only there)."""
    rng = np.random.default_rng(31)
    args = tuple(rng.standard_normal((2, 70, 64)).astype(np.float16) for _ in range(4))
    texts, canonical_texts = kernel_texts(through_logsumexp, *args), kernel_texts(canonical, *args)
    assert texts[1:] == canonical_texts[1:] and texts[0] != canonical_texts[0]


def assert_matches_the_program(program, args, s_q, s_kv):
    """Fused: the four kernels, no S x S buffer; equal to the program run unfused, NaN for NaN."""
    compiled = program.compile(*args)
    assert [step.launch.kind for step in compiled.steps] == KERNELS
    allocated = compiled.buffer_specs[len(compiled.input_positions) :]
    assert not any(shape[-2:] == (s_q, s_kv) for shape, _ in allocated), "an S x S buffer is allocated"
    unfused = program.compile(*args, fuse=False)
    for got, want in zip(compiled(*args), unfused(*args), strict=True):
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5)


SPELLINGS = [canonical, divided, scaled_q_shared, scaled_ds, through_logsumexp, causal_where, causal_tril,
             causal_dropped_keys, causal_additive]


@pytest.mark.parametrize("s", [70, 33, 129])
@pytest.mark.parametrize("spelling", SPELLINGS, ids=lambda f: f.__name__)
def test_every_backward_spelling_matches_the_program(spelling, s):
    rng = np.random.default_rng(s)
    args = tuple(rng.standard_normal((2, s, 32)).astype(np.float32) for _ in range(4))
    assert_matches_the_program(spelling, args, s, s)


@tt.jit
def alibi(q, k, v, do, slopes):
    """ALiBi's causal training step: its bias computed from the indices and a slope per head in all four kernels."""
    n = q.shape[-2]
    i, j = tt.arange(n)[:, None], tt.arange(n)[None, :]
    s = tt.where(i >= j, q @ k.mT * SCALE + slopes * (j - i).astype(q.dtype), float("-inf"))
    return gradients(softmax(s), q, k, v, do, SCALE)


@pytest.mark.parametrize("s", [70, 129])
def test_an_index_bias_is_computed_in_every_backward_kernel(s):
    rng = np.random.default_rng(s)
    args = tuple(rng.standard_normal((3, s, 32)).astype(np.float32) for _ in range(4))
    slopes = np.array([0.5, 0.25, 0.125], np.float32).reshape(3, 1, 1)
    assert_matches_the_program(alibi, (*args, slopes), s, s)
    inputs = [shape for shape, _ in alibi.compile(*args, slopes).buffer_specs[:5]]
    assert (3, 1, 1) in inputs and not any(shape[-2:] == (s, s) or shape[-2:] == (1, s) for shape in inputs)


@tt.jit
def grouped_alibi(q, k, v, do, slopes):
    """ALiBi's training step over grouped-query heads (k and v repeated, their gradients summed over each group)."""
    b, h, n, d = q.shape
    h_kv = k.shape[1]
    kr, vr = tt.repeat(k, h // h_kv, axis=1), tt.repeat(v, h // h_kv, axis=1)
    i, j = tt.arange(n)[:, None], tt.arange(n)[None, :]
    s = tt.where(i >= j, q @ kr.mT * SCALE + slopes * (j - i).astype(q.dtype), float("-inf"))
    o, dq, dk, dv = gradients(softmax(s), q, kr, vr, do, SCALE)
    return o, dq, dk.reshape(b, h_kv, h // h_kv, n, d).sum(2), dv.reshape(b, h_kv, h // h_kv, n, d).sum(2)


def test_an_index_bias_over_grouped_heads_is_computed_in_every_backward_kernel():
    """The group rule rebuilds the bias over the grouped heads from its slopes (a reshape of the `[H, S, S]` bias
    made the step ten kernels with S x S buffers)."""
    rng = np.random.default_rng(33)
    q, do = (rng.standard_normal((2, 8, 70, 32)).astype(np.float32) for _ in range(2))
    k, v = (rng.standard_normal((2, 2, 70, 32)).astype(np.float32) for _ in range(2))
    slopes = (2.0 ** -np.arange(1, 9, dtype=np.float32)).reshape(8, 1, 1)
    assert_matches_the_program(grouped_alibi, (q, k, v, do, slopes), 70, 70)


@tt.jit
def biased(q, k, v, do, bias):
    return gradients(softmax(q @ k.mT * SCALE + bias), q, k, v, do, SCALE)


@tt.jit
def biased_through_logsumexp(q, k, v, do, bias):
    s = q @ k.mT * SCALE + bias
    return gradients(tt.exp(s - tt.logsumexp(s, axis=-1, keepdims=True)), q, k, v, do, SCALE)


@pytest.mark.parametrize("program", [biased, biased_through_logsumexp], ids=lambda f: f.__name__)
@pytest.mark.parametrize("special", ["masked_row", "plus_inf"])
def test_special_rows_give_numpys_nan(program, special):
    rng = np.random.default_rng(32)
    args = tuple(rng.standard_normal((2, 70, 32)).astype(np.float32) for _ in range(4))
    bias = rng.standard_normal((70, 70)).astype(np.float32)
    if special == "masked_row":
        bias[5] = -np.inf
    else:
        bias[9, 3] = np.inf  # the softmax's p: NaN across row 9; tt.logsumexp's: NaN at key 3 alone
    assert_matches_the_program(program, (*args, bias), 70, 70)


@tt.jit
def causal_shifted(q, k, v, do, shift):
    keep = causal(q.shape[-2], shift)
    return gradients(softmax(tt.where(keep, q @ k.mT * SCALE, float("-inf"))), q, k, v, do, SCALE)


@pytest.mark.parametrize("shift", [-1, -40, -200])
def test_queries_without_a_key_give_nan_gradients(shift):
    """Keys j <= i + shift: the first queries see none, their p is NaN, and NumPy's sums carry it into dk
    and dv of every key, blocks the causal kernels never visit included."""
    rng = np.random.default_rng(33)
    args = tuple(rng.standard_normal((1, 130, 32)).astype(np.float32) for _ in range(4))
    compiled = causal_shifted.compile(*args, shift)
    o, dq, dk, dv = compiled(*args, shift)
    blind = min(130, -shift)
    assert np.isnan(dk).all() and np.isnan(dv).all() and np.isnan(dq[:, :blind]).all()
    assert not np.isnan(dq[:, blind:]).any() and not np.isnan(o[:, blind:]).any()
    unfused = causal_shifted.compile(*args, shift, fuse=False)(*args, shift)
    for got, want in zip((o, dq, dk, dv), unfused, strict=True):
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5)


@tt.jit
def grouped_by_repeat(q, k, v, do):
    b, h, s, d = q.shape
    h_kv = k.shape[1]
    kr, vr = tt.repeat(k, h // h_kv, axis=1), tt.repeat(v, h // h_kv, axis=1)
    o, dq, dk, dv = gradients(softmax(q @ kr.mT * SCALE), q, kr, vr, do, SCALE)
    return o, dq, dk.reshape(b, h_kv, h // h_kv, s, d).sum(2), dv.reshape(b, h_kv, h // h_kv, s, d).sum(2)


@tt.jit
def grouped(q, k, v, do):
    b, h, s, d = q.shape
    h_kv = k.shape[1]
    q5, do5 = q.reshape(b, h_kv, h // h_kv, s, d), do.reshape(b, h_kv, h // h_kv, s, d)
    o, dq, dk, dv = gradients(softmax(q5 @ k[:, :, None].mT * SCALE), q5, k[:, :, None], v[:, :, None], do5, SCALE)
    return o.reshape(b, h, s, d), dq.reshape(b, h, s, d), dk.sum(2), dv.sum(2)


@pytest.mark.parametrize("program", [grouped, grouped_by_repeat], ids=lambda f: f.__name__)
def test_grouped_query_training_step(program):
    rng = np.random.default_rng(34)
    q, do = (rng.standard_normal((2, 4, 45, 32)).astype(np.float32) for _ in range(2))
    k, v = (rng.standard_normal((2, 2, 45, 32)).astype(np.float32) for _ in range(2))
    assert_matches_the_program(program, (q, k, v, do), 45, 45)
    dkdv = next(step for step in program.compile(q, k, v, do).steps if step.launch.kind == "attention_dkdv")
    assert dkdv.grid[1] == 4, "one program per key block of each key/value head: K and V read once"


@pytest.mark.skipif(find_tool("ptxas") is None, reason="ptxas not found")
@pytest.mark.parametrize("program, extra", [(through_logsumexp, ()), (causal_shifted, (-1,))],
                         ids=["guarded_lse_store", "queries_without_a_key"])
def test_the_new_kernel_code_assembles(program, extra):
    """tt.logsumexp's forward (its guarded lse store) and the NaN of queries without a key (dq rows,
    every dk and dv) lower to PTX that ptxas accepts for sm_90a."""
    q = np.zeros((2, 256, 64), np.float16)
    compiled = program.compile(q, q, q, q, *extra)
    for step in compiled.steps:
        launch = step.launch
        assemble_ptx(compile_module(launch.module.clone(), num_warps=launch.num_warps, arch="sm_90a").asm["ptx"], "sm_90a")


@pytest.mark.gpu
@pytest.mark.parametrize("spelling", [*SPELLINGS, grouped_by_repeat], ids=lambda f: f.__name__)
def test_backward_spellings_on_the_gpu(spelling):
    """fp16 training steps on the GPU against torch's float64 autograd of the same attention."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU for torch")
    h_kv = 2 if spelling is grouped_by_repeat else 4
    gen = torch.Generator(device="cuda").manual_seed(1)
    make = lambda *shape: torch.randn(*shape, device="cuda", dtype=torch.float16, generator=gen)
    q, k, v, do = make(2, 4, 333, 64), make(2, h_kv, 333, 64), make(2, h_kv, 333, 64), make(2, 4, 333, 64)
    leaves = [x.detach().double().requires_grad_() for x in (q, k, v)]
    causal_kind = spelling.__name__.startswith("causal")
    out = torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=causal_kind, enable_gqa=h_kv != 4)
    out.backward(do.double())
    want = [out.detach(), *(x.grad for x in leaves)]
    for got, expected in zip(spelling(q, k, v, do), want, strict=True):
        torch.testing.assert_close(torch.as_tensor(got, device=expected.device).double(), expected, rtol=3e-2, atol=3e-2)


@tt.jit
def gradient_from_the_output(q, k, v):
    """A network's training step: the upstream gradient `do` is computed from the attention's output."""
    p = softmax(q @ k.mT * SCALE)
    o = p @ v
    do = o * 2.0 - 1.0
    dp = do @ v.mT
    ds = p * (dp - tt.sum(dp * p, axis=-1, keepdims=True))
    return o, ds @ k * SCALE, ds.mT @ q * SCALE, p.mT @ do


def test_an_upstream_gradient_computed_from_the_output_stays_correct():
    """The forward must run before `do` and the backward after it: no one backward region (it would be a
    cycle), the program computed as written."""
    rng = np.random.default_rng(35)
    args = tuple(rng.standard_normal((2, 40, 16)).astype(np.float32) for _ in range(3))
    compiled = gradient_from_the_output.compile(*args)
    assert "attention_dkdv" not in [step.launch.kind for step in compiled.steps]
    for got, want in zip(compiled(*args), gradient_from_the_output.compile(*args, fuse=False)(*args), strict=True):
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5)
