"""Every spelling of attention is one kernel at one speed (issue 23): scales on the scores, on q or on k,
divisions by constants or runtime scalars, softmax through logsumexp or by hand, masks from `where`, `tril`
or -inf bias arrays all become the canonical kernel of `softmax((q @ k.mT) * scale) @ v`
(tinyton/rewrites/attention_canonical.py): the same tt text, or for a runtime scale the same ops per score."""

from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np
import pytest
from attention_reference import attention_reference

import tinyton as tt
from tinyton.compiler import compile_module

D = 64
SCALE = 1 / math.sqrt(D)  # 0.125: exact, so every spelling folds to the very same constant


def softmax(s):
    e = tt.exp(s - tt.max(s, axis=-1, keepdims=True))
    return e / tt.sum(e, axis=-1, keepdims=True)


@tt.jit
def canonical(q, k, v):
    return softmax((q @ k.mT) * SCALE) @ v


@tt.jit
def divided_scores(q, k, v):
    return softmax(q @ k.mT / math.sqrt(q.shape[-1])) @ v


@tt.jit
def scale_first(q, k, v):
    return softmax(SCALE * (q @ k.mT)) @ v


@tt.jit
def scaled_q(q, k, v):
    return softmax((q * SCALE) @ k.mT) @ v


@tt.jit
def divided_q_swapaxes(q, k, v):
    return softmax((q / math.sqrt(q.shape[-1])) @ k.swapaxes(-1, -2)) @ v


@tt.jit
def scaled_k(q, k, v):
    return softmax(q @ (k * SCALE).mT) @ v


@tt.jit
def two_constants(q, k, v):
    return softmax((q * 0.5) @ k.mT * 0.25) @ v


@tt.jit
def scale_argument(q, k, v, scale):  # a Python float: specialised, a constant
    return softmax((q @ k.mT) * scale) @ v


@tt.jit
def softmax_through_logsumexp(q, k, v):
    s = q @ k.mT * SCALE
    m = tt.max(s, axis=-1, keepdims=True)
    return tt.exp(s - m - tt.log(tt.sum(tt.exp(s - m), axis=-1, keepdims=True))) @ v


@tt.jit
def softmax_minus_lse(q, k, v):
    s = q @ k.mT * SCALE
    m = tt.max(s, axis=-1, keepdims=True)
    lse = m + tt.log(tt.sum(tt.exp(s - m), axis=-1, keepdims=True))
    return tt.exp(s - lse) @ v


@tt.jit
def softmax_by_hand_methods(q, k, v):
    s = q @ tt.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    e = tt.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v


@tt.jit
def softmax_by_reciprocal(q, k, v):
    s = q @ k.mT * SCALE
    e = tt.exp(s - s.max(-1, keepdims=True))
    return (e * (1.0 / e.sum(-1, keepdims=True))) @ v


@tt.jit
def softmax_by_tt_logsumexp(q, k, v):  # scipy's guards of infinite row maxima: where(m == inf, inf, ...)
    s = q @ k.mT * SCALE
    return tt.exp(s - tt.logsumexp(s, axis=-1, keepdims=True)) @ v


@tt.jit
def tt_logsumexp_without_keepdims(q, k, v):
    s = q @ k.mT * SCALE
    return tt.exp(s - tt.logsumexp(s, axis=-1)[..., None]) @ v


@tt.jit
def normalised_after_the_product(q, k, v):  # FlashAttention's own order: (e @ v) / sum(e)
    s = q @ k.mT * SCALE
    e = tt.exp(s - s.max(-1, keepdims=True))
    return (e @ v) / e.sum(-1, keepdims=True)


@tt.jit
def numpy_functions(q, k, v):  # np.* on traced arrays: NumPy's dispatch
    s = np.matmul(q, np.swapaxes(k, -1, -2)) / math.sqrt(q.shape[-1])  # np.sqrt: a float64 scalar (NEP 50)
    e = np.exp(s - np.max(s, axis=-1, keepdims=True))
    return np.matmul(e / np.sum(e, axis=-1, keepdims=True), v)


@tt.jit
def transposed_by_permutation(q, k, v):
    return softmax(tt.matmul(q, tt.transpose(k, (0, 2, 1))) * q.shape[-1] ** -0.5) @ v


@tt.jit
def scaled_k_before_the_transpose(q, k, v):
    return softmax(q @ (k.mT / math.sqrt(q.shape[-1]))) @ v


SPELLINGS = [divided_scores, scale_first, scaled_q, divided_q_swapaxes, scaled_k, two_constants,
             softmax_through_logsumexp, softmax_minus_lse, softmax_by_hand_methods, softmax_by_reciprocal,
             softmax_by_tt_logsumexp, tt_logsumexp_without_keepdims, normalised_after_the_product, numpy_functions,
             transposed_by_permutation, scaled_k_before_the_transpose]


def kernel_text(program, *args) -> str:
    """The tt text of the program's one attention kernel, its name left out."""
    compiled = program.compile(*args)
    kinds = [step.launch.kind for step in compiled.steps]
    assert kinds == ["attention"], kinds
    return re.sub(r"@\w+_\d+_attention", "@kernel", str(compiled.steps[0].launch.module))


def inputs(seed, *shape, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(shape).astype(dtype) for _ in range(3))


@pytest.mark.parametrize("spelling", SPELLINGS, ids=lambda f: f.__name__)
def test_every_spelling_is_the_canonical_kernel(spelling):
    q, k, v = inputs(0, 2, 100, D, dtype=np.float16)
    assert kernel_text(spelling, q, k, v) == kernel_text(canonical, q, k, v)


@pytest.mark.parametrize("spelling", SPELLINGS, ids=lambda f: f.__name__)
def test_every_spelling_matches_numpy(spelling):
    q, k, v = inputs(1, 2, 70, D)
    np.testing.assert_allclose(spelling(q, k, v), attention_reference(q, k, v, SCALE), rtol=1e-4, atol=1e-5)


@tt.jit
def single_head(q, k, v):
    return softmax((q @ k.mT) * SCALE) @ v


@tt.jit
def single_head_k_T(q, k, v):  # `.T` reverses every axis: the transpose of a matrix
    return softmax(q @ k.T / math.sqrt(q.shape[-1])) @ v


def test_k_T_of_one_head_is_the_canonical_kernel():
    q, k, v = inputs(9, 100, D, dtype=np.float16)
    assert kernel_text(single_head_k_T, q, k, v) == kernel_text(single_head, q, k, v)
    q, k, v = inputs(10, 70, D)
    np.testing.assert_allclose(single_head_k_T(q, k, v), attention_reference(q, k, v, 1 / math.sqrt(D)), rtol=1e-4, atol=1e-5)


def test_a_python_float_scale_is_the_canonical_kernel():
    q, k, v = inputs(2, 1, 64, D, dtype=np.float16)
    assert kernel_text(scale_argument, q, k, v, SCALE) == kernel_text(canonical, q, k, v)


@tt.jit
def runtime_scale(q, k, v, scale):
    return softmax((q @ k.mT) * scale) @ v


@tt.jit
def runtime_divisor(q, k, v, divisor):
    return softmax((q @ k.mT) / divisor) @ v


@tt.jit
def runtime_scale_on_q(q, k, v, scale):
    return softmax((q * scale) @ k.mT) @ v


def loop_ops(text: str) -> Counter:
    """The tt ops from the first KV loop on but constants: what each score block costs."""
    return Counter(re.findall(r"= (tt\.(?!constant)\w+)", text[text.index("scf.for") :]))


@pytest.mark.parametrize("program, scalar, effective", [(runtime_scale, 0.3, 0.3), (runtime_divisor, 4.0, 0.25),
                                                        (runtime_scale_on_q, 0.3, 0.3)])
def test_a_runtime_scalar_is_read_once_and_folded(program, scalar, effective):
    """A runtime scale waits for the softmax's FMA as a constant one does (attention_scores._deferred_scale), the
    ragged last key block masked as it would be scaled."""
    q, k, v = inputs(3, 2, 90, D)
    scale = np.array(scalar, np.float32)  # a 0-d array: a value known only at run time
    ops = loop_ops(kernel_text(program, q, k, v, scale))
    # what a score costs is the constant scale's, the scale in the softmax's FMA (`exp2(s * c - m)`); its sign
    # unknown, each block's softmax is emitted twice, on its rows' maxima or (under a negative scale) minima, and
    # a branch picks one (`attention._softmax_step`): no division, no op a constant scale has not
    constant = loop_ops(kernel_text(canonical, q, k, v))
    assert not constant - ops, "nothing a constant scale does more"
    assert set(ops - constant) <= {*constant, "tt.cmp", "tt.reduce_min"}, ops - constant
    assert ops["tt.div"] == constant["tt.div"], "a division an element"
    np.testing.assert_allclose(program(q, k, v, scale), attention_reference(q, k, v, effective), rtol=1e-4, atol=1e-5)


@tt.jit
def causal_where_divided(q, k, v):
    n = q.shape[-2]
    keep = tt.arange(n).reshape(n, 1) >= tt.arange(n)
    return softmax(tt.where(keep, q @ k.mT / math.sqrt(q.shape[-1]), float("-inf"))) @ v


@tt.jit
def causal_where_scaled_q(q, k, v):
    n = q.shape[-2]
    keep = tt.arange(n).reshape(n, 1) >= tt.arange(n)
    return softmax(tt.where(keep, (q * SCALE) @ k.mT, float("-inf"))) @ v


@tt.jit
def causal_where(q, k, v):
    n = q.shape[-2]
    keep = tt.arange(n).reshape(n, 1) >= tt.arange(n)
    return softmax(tt.where(keep, (q @ k.mT) * SCALE, float("-inf"))) @ v


@tt.jit
def causal_tril_divided(q, k, v):
    n = q.shape[-2]
    s = tt.where(tt.tril(tt.ones((n, n), tt.int1)), q @ k.mT, float("-inf"))
    return softmax(s / math.sqrt(q.shape[-1])) @ v


@tt.jit
def causal_tril(q, k, v):
    n = q.shape[-2]
    s = tt.where(tt.tril(tt.ones((n, n), tt.int1)), q @ k.mT, float("-inf"))
    return softmax(s * SCALE) @ v


@pytest.mark.parametrize("spelling, canonical_form", [(causal_where_divided, causal_where),
                                                      (causal_where_scaled_q, causal_where),
                                                      (causal_tril_divided, causal_tril)],
                         ids=["where_divided", "where_scaled_q", "tril_divided"])
def test_causal_spellings_are_the_canonical_kernel(spelling, canonical_form):
    q, k, v = inputs(4, 2, 130, D, dtype=np.float16)
    assert kernel_text(spelling, q, k, v) == kernel_text(canonical_form, q, k, v)
    q, k, v = inputs(5, 2, 75, D)
    keep = np.tril(np.ones((75, 75), bool))
    np.testing.assert_allclose(spelling(q, k, v), attention_reference(q, k, v, SCALE, keep=keep), rtol=1e-4, atol=1e-5)


@tt.jit
def bias_divided(q, k, v, bias):
    return softmax(q @ k.mT / math.sqrt(q.shape[-1]) + bias) @ v


@tt.jit
def bias_scaled_k(q, k, v, bias):
    return softmax(q @ (k * SCALE).mT + bias) @ v


@tt.jit
def bias_canonical(q, k, v, bias):
    return softmax((q @ k.mT) * SCALE + bias) @ v


@pytest.mark.parametrize("spelling", [bias_divided, bias_scaled_k], ids=lambda f: f.__name__)
def test_minus_inf_bias_arrays_with_any_scale(spelling):
    q, k, v = inputs(6, 2, 60, D)
    bias = np.where(np.tril(np.ones((60, 60), bool)), 0.0, -np.inf).astype(np.float32)
    bias[7] = -np.inf  # a fully masked row: NaN, as NumPy's softmax gives
    assert kernel_text(spelling, q, k, v, bias) == kernel_text(bias_canonical, q, k, v, bias)
    got, want = spelling(q, k, v, bias), attention_reference(q, k, v, SCALE, bias=bias)
    assert np.isnan(got[:, 7]).all() and np.isnan(want[:, 7]).all()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_scaled_operands_used_elsewhere_stay():
    @tt.jit
    def scaled_q_returned(q, k, v):
        qs = q * SCALE
        return softmax(qs @ k.mT) @ v, qs

    q, k, v = inputs(7, 1, 40, D)
    out, qs = scaled_q_returned(q, k, v)
    np.testing.assert_allclose(qs, q * np.float32(SCALE))
    np.testing.assert_allclose(out, attention_reference(q, k, v, SCALE), rtol=1e-4, atol=1e-5)


def test_divisions_outside_attention_keep_numpy_rounding():
    @tt.jit
    def divide(x):
        return x / 3.0

    x = np.linspace(-5, 5, 1000, dtype=np.float32)
    np.testing.assert_array_equal(divide(x), x / np.float32(3.0))


def test_the_divided_spelling_compiles_to_the_canonical_ptx():
    q, k, v = inputs(8, 1, 256, D, dtype=np.float16)

    def ptx(program):
        launch = program.compile(q, k, v).steps[0].launch
        text = compile_module(launch.module.clone(), num_warps=launch.num_warps, arch="sm_90a").asm["ptx"]
        return re.sub(r"[ \t]+", " ", re.sub(r"\w+_0_attention", "kernel", text))  # comments align to the name

    assert ptx(divided_scores) == ptx(canonical)
