"""Every spelling of a causal mask is the one causal flash-attention kernel (issue 23): `where(keep, s, -inf)`,
the dropped keys chosen instead (`where(i < j, -inf, s)`, `~keep`, `tt.triu(..., 1)`), a float `tt.tril`
compared, an additive -inf mask (`s + where(keep, 0, -inf)`, `tt.triu(tt.full(-inf), 1)`), the scale after
the mask (tinyton/rewrites/attention_masks.py, tinyton/analysis/index_masks.py): the same tt text as the
canonical spelling, so the same causal loop bounds. Checked against NumPy in float64 on the simulator,
fully masked rows (a mask shifted below the diagonal) NaN as NumPy's softmax gives them."""

from __future__ import annotations

import math

import numpy as np
import pytest
from attention_reference import attention_reference
from test_attention_spellings import SCALE, inputs, kernel_text, softmax

import tinyton as tt


def causal(n: int, shift: int):
    """Query i keeps the keys j <= i + shift."""
    return tt.arange(n)[:, None] + shift >= tt.arange(n)[None, :]


@tt.jit
def canonical(q, k, v, shift):
    return softmax(tt.where(causal(q.shape[-2], shift), q @ k.mT * SCALE, float("-inf"))) @ v


@tt.jit
def reshaped_aranges(q, k, v, shift):
    n = q.shape[-2]
    keep = tt.arange(n).reshape(n, 1) + shift >= tt.arange(n)
    return softmax(tt.where(keep, q @ k.mT * SCALE, float("-inf"))) @ v


@tt.jit
def dropped_keys_chosen(q, k, v, shift):
    n = q.shape[-2]
    drop = tt.arange(n)[:, None] + shift < tt.arange(n)[None, :]
    return softmax(tt.where(drop, float("-inf"), q @ k.mT * SCALE)) @ v


@tt.jit
def negated_mask(q, k, v, shift):
    return softmax(tt.where(~causal(q.shape[-2], shift), float("-inf"), q @ k.mT * SCALE)) @ v


@tt.jit
def numpy_logical_not(q, k, v, shift):
    return softmax(np.where(np.logical_not(causal(q.shape[-2], shift)), -np.inf, q @ k.mT * SCALE)) @ v


@tt.jit
def tril_of_bools(q, k, v, shift):
    n = q.shape[-2]
    return softmax(tt.where(tt.tril(tt.ones((n, n), tt.int1), shift), q @ k.mT * SCALE, float("-inf"))) @ v


@tt.jit
def triu_chooses_minus_inf(q, k, v, shift):
    n = q.shape[-2]
    return softmax(tt.where(tt.triu(tt.ones((n, n), tt.int1), shift + 1), float("-inf"), q @ k.mT * SCALE)) @ v


@tt.jit
def float_tril_compared(q, k, v, shift):  # torch's `masked_fill(tril(ones) == 0, -inf)`
    n = q.shape[-2]
    return softmax(tt.where(tt.tril(tt.ones((n, n)), shift) == 0, float("-inf"), q @ k.mT * SCALE)) @ v


@tt.jit
def additive_where(q, k, v, shift):
    mask = tt.where(causal(q.shape[-2], shift), 0.0, float("-inf")).astype(q.dtype)
    return softmax(q @ k.mT * SCALE + mask) @ v


@tt.jit
def additive_triu(q, k, v, shift):  # nn.Transformer's square subsequent mask
    n = q.shape[-2]
    return softmax(tt.triu(tt.full((n, n), float("-inf"), q.dtype), shift + 1) + q @ k.mT * SCALE) @ v


@tt.jit
def scaled_after_the_mask(q, k, v, shift):
    return softmax(tt.where(causal(q.shape[-2], shift), q @ k.mT, float("-inf")) / math.sqrt(q.shape[-1])) @ v


@tt.jit
def logsumexp_after_the_mask(q, k, v, shift):
    s = tt.where(causal(q.shape[-2], shift), q @ k.mT * SCALE, float("-inf"))
    return tt.exp(s - tt.logsumexp(s, axis=-1, keepdims=True)) @ v


SPELLINGS = [reshaped_aranges, dropped_keys_chosen, negated_mask, numpy_logical_not, tril_of_bools,
             triu_chooses_minus_inf, float_tril_compared, additive_where, additive_triu, scaled_after_the_mask,
             logsumexp_after_the_mask]


@pytest.mark.parametrize("shift", [0, -1, 5])
@pytest.mark.parametrize("spelling", SPELLINGS, ids=lambda f: f.__name__)
def test_every_mask_spelling_is_the_causal_kernel(spelling, shift):
    q, k, v = inputs(11, 2, 130, 64, dtype=np.float16)
    assert kernel_text(spelling, q, k, v, shift) == kernel_text(canonical, q, k, v, shift)


@pytest.mark.parametrize("shift", [0, -1, -3])
@pytest.mark.parametrize("spelling", SPELLINGS, ids=lambda f: f.__name__)
def test_every_mask_spelling_matches_numpy_fully_masked_rows_too(spelling, shift):
    q, k, v = inputs(12, 2, 75, 64)
    keep = np.arange(75)[:, None] + shift >= np.arange(75)[None, :]
    got, want = spelling(q, k, v, shift), attention_reference(q, k, v, SCALE, keep=keep)
    assert np.isnan(got[:, : -shift]).all() and np.isnan(want[:, : -shift]).all()  # rows without a key
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_an_additive_mask_hides_what_it_masks():
    """A NaN key under an additive mask: NumPy's `s + -inf` keeps the NaN (rows before the key read NaN);
    the causal kernel never computes the blocks the mask drops, so it gives the `where` mask's answer
    (docs/fusion.md, "Attention spellings")."""
    q, k, v = inputs(13, 1, 70, 64)
    k[0, 50, 0] = np.nan
    keep = np.tril(np.ones((70, 70), bool))
    got = additive_where(q, k, v, 0)
    seen = attention_reference(q, np.nan_to_num(k), v, SCALE, keep=keep)  # rows before key 50 never see it
    np.testing.assert_allclose(got[:, :50], seen[:, :50], rtol=1e-4, atol=1e-5)
    assert np.isnan(got[:, 50:]).all()


@pytest.mark.gpu
@pytest.mark.parametrize("shift", [0, -1])
@pytest.mark.parametrize("spelling", SPELLINGS, ids=lambda f: f.__name__)
def test_mask_spellings_on_the_gpu(spelling, shift):
    q, k, v = inputs(14, 2, 300, 64, dtype=np.float16)
    keep = np.arange(300)[:, None] + shift >= np.arange(300)[None, :]
    got = spelling(q, k, v, shift).astype(np.float64)
    np.testing.assert_allclose(got, attention_reference(q, k, v, SCALE, keep=keep), rtol=2e-2, atol=2e-3)
