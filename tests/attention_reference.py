"""Softmax attention in NumPy float64: the reference the attention tests compare tinyton's kernels with.

`keep` masks scores to -inf; a row with nothing kept is NaN, as NumPy computes it (the tests check that
tinyton gives NaN there too)."""

from __future__ import annotations

import numpy as np


def masked_scores(q, k, scale, bias=None, keep=None) -> np.ndarray:
    """`q kᵀ scale + bias` in float64, -inf where `keep` is False."""
    s = np.asarray(q, np.float64) @ np.swapaxes(np.asarray(k, np.float64), -1, -2) * scale
    if bias is not None:
        s = s + bias
    if keep is not None:
        s = np.where(keep, s, -np.inf)
    return s


def _softmax(s: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)


def attention_reference(q, k, v, scale, bias=None, keep=None) -> np.ndarray:
    """`softmax(q kᵀ scale + bias, masked) v`."""
    with np.errstate(invalid="ignore"):
        return _softmax(masked_scores(q, k, scale, bias, keep)) @ np.asarray(v, np.float64)


def attention_gradients_reference(q, k, v, do, scale, bias=None, keep=None, group_axis=None):
    """`o, dq, dk, dv` of `o = softmax(q kᵀ scale + bias, masked) v` with output gradient `do`; with
    `group_axis`, dk and dv summed over that axis (grouped-query heads sharing one k and v)."""
    q, k, v, do = (np.asarray(a, np.float64) for a in (q, k, v, do))
    p = _softmax(masked_scores(q, k, scale, bias, keep))
    with np.errstate(invalid="ignore"):
        o = p @ v
        dp = do @ np.swapaxes(v, -1, -2)
        ds = p * (dp - (dp * p).sum(-1, keepdims=True))
        dq = ds @ k * scale
        dk = np.swapaxes(ds, -1, -2) @ q * scale
        dv = np.swapaxes(p, -1, -2) @ do
    if group_axis is not None:
        dk, dv = dk.sum(group_axis, keepdims=True), dv.sum(group_axis, keepdims=True)
    return o, dq, dk, dv
