"""The spelling table of bench_attention.py (issue 23): one shape under every spelling of attention a user
may write, each rewritten into the same flash-attention kernel (tinyton/rewrites/attention_canonical.py,
attention_masks.py, attention_groups.py): the figures should agree within noise, and the launches be one
(four for a training step: the forward and FlashAttention-2's three backward kernels; ALiBi's bias computed in the
kernel from the block's indices and a slope per head). Kinds: full, causal (every mask spelling), alibi (causal with ALiBi's bias), gqa (k and v repeated over `GQA_GROUP` query heads) and training (forward and
backward written as the textbook math, causal)."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from common import DEVICE, check_close, median_ms, pick, print_table

import tinyton as tt

SPELLING_SHAPE = pick((4, 16, 2048, 128), (1, 4, 100, 64))
GQA_GROUP = 4


def _softmax(s):
    e = tt.exp(s - tt.max(s, axis=-1, keepdims=True))
    return e / tt.sum(e, axis=-1, keepdims=True)


def _causal(q, s):
    n = q.shape[-2]
    return tt.where(tt.arange(n).reshape(n, 1) >= tt.arange(n), s, float("-inf"))


@tt.jit
def scaled(q, k, v):
    return _softmax((q @ k.mT) * (q.shape[-1] ** -0.5)) @ v


@tt.jit
def divided(q, k, v):
    return _softmax(q @ k.mT / math.sqrt(q.shape[-1])) @ v


@tt.jit
def scaled_q(q, k, v):
    return _softmax((q * q.shape[-1] ** -0.5) @ k.mT) @ v


@tt.jit
def divided_q(q, k, v):
    return _softmax((q / math.sqrt(q.shape[-1])) @ k.swapaxes(-1, -2)) @ v


@tt.jit
def scaled_k(q, k, v):
    return _softmax(q @ (k * q.shape[-1] ** -0.5).mT) @ v


@tt.jit
def runtime_scale(q, k, v, scale):
    return _softmax((q @ k.mT) * scale) @ v


@tt.jit
def through_logsumexp(q, k, v):
    s = q @ k.mT / math.sqrt(q.shape[-1])
    m = s.max(-1, keepdims=True)
    return tt.exp(s - m - tt.log(tt.exp(s - m).sum(-1, keepdims=True))) @ v


@tt.jit
def by_hand(q, k, v):
    s = q @ k.mT / math.sqrt(q.shape[-1])
    e = tt.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v


@tt.jit
def runtime_divisor(q, k, v, divisor):
    return _softmax((q @ k.mT) / divisor) @ v


@tt.jit
def runtime_scale_on_q(q, k, v, scale):
    return _softmax((q * scale) @ k.mT) @ v


@tt.jit
def tt_logsumexp(q, k, v):
    s = q @ k.mT / math.sqrt(q.shape[-1])
    return tt.exp(s - tt.logsumexp(s, axis=-1, keepdims=True)) @ v


@tt.jit
def normalised_after(q, k, v):
    s = q @ k.mT / math.sqrt(q.shape[-1])
    e = tt.exp(s - s.max(-1, keepdims=True))
    return (e @ v) / e.sum(-1, keepdims=True)


@tt.jit
def numpy_functions(q, k, v):
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * q.shape[-1] ** -0.5
    e = np.exp(s - np.max(s, axis=-1, keepdims=True))
    return np.matmul(e / np.sum(e, axis=-1, keepdims=True), v)


@tt.jit
def causal_where(q, k, v):
    return _softmax(_causal(q, (q @ k.mT) * (q.shape[-1] ** -0.5))) @ v


@tt.jit
def causal_where_divided(q, k, v):
    return _softmax(_causal(q, q @ k.mT / math.sqrt(q.shape[-1]))) @ v


@tt.jit
def causal_where_scaled_q(q, k, v):
    return _softmax(_causal(q, (q * q.shape[-1] ** -0.5) @ k.mT)) @ v


@tt.jit
def causal_tril(q, k, v):
    n = q.shape[-2]
    return _softmax(tt.where(tt.tril(tt.ones((n, n), tt.int1)), q @ k.mT / math.sqrt(q.shape[-1]), float("-inf"))) @ v


@tt.jit
def causal_bias(q, k, v, bias):
    return _softmax(q @ k.mT / math.sqrt(q.shape[-1]) + bias) @ v


def _keys_after(n: int):
    return tt.arange(n)[:, None] < tt.arange(n)[None, :]


@tt.jit
def causal_dropped_keys(q, k, v):
    return _softmax(tt.where(_keys_after(q.shape[-2]), float("-inf"), q @ k.mT / math.sqrt(q.shape[-1]))) @ v


@tt.jit
def causal_negated(q, k, v):
    n = q.shape[-2]
    keep = tt.arange(n)[:, None] >= tt.arange(n)[None, :]
    return _softmax(tt.where(~keep, float("-inf"), q @ k.mT / math.sqrt(q.shape[-1]))) @ v


@tt.jit
def causal_tril_compared(q, k, v):
    n = q.shape[-2]
    return _softmax(tt.where(tt.tril(tt.ones((n, n))) == 0, float("-inf"), q @ k.mT / math.sqrt(q.shape[-1]))) @ v


@tt.jit
def causal_additive_triu(q, k, v):
    n = q.shape[-2]
    return _softmax(q @ k.mT / math.sqrt(q.shape[-1]) + tt.triu(tt.full((n, n), float("-inf"), q.dtype), 1)) @ v


@tt.jit
def causal_scaled_after(q, k, v):
    n = q.shape[-2]
    return _softmax(tt.where(tt.arange(n)[:, None] >= tt.arange(n), q @ k.mT, float("-inf")) / math.sqrt(q.shape[-1])) @ v


@tt.jit
def causal_logsumexp(q, k, v):
    s = _causal(q, q @ k.mT / math.sqrt(q.shape[-1]))
    return tt.exp(s - tt.logsumexp(s, axis=-1, keepdims=True)) @ v


@tt.jit
def grouped(q, k, v):
    b, h, s, d = q.shape
    h_kv = k.shape[1]
    out = _softmax(q.reshape(b, h_kv, h // h_kv, s, d) @ k[:, :, None].mT / math.sqrt(d)) @ v[:, :, None]
    return out.reshape(b, h, s, d)


@tt.jit
def grouped_repeat(q, k, v):
    g = q.shape[1] // k.shape[1]
    return _softmax(q @ tt.repeat(k, g, axis=1).mT / math.sqrt(q.shape[-1])) @ tt.repeat(v, g, axis=1)


@tt.jit
def grouped_broadcast(q, k, v):
    b, h = q.shape[:2]
    wide = (b, k.shape[1], h // k.shape[1], *k.shape[2:])
    kr = tt.broadcast_to(k[:, :, None], wide).reshape(b, h, *k.shape[2:])
    vr = tt.broadcast_to(v[:, :, None], wide).reshape(b, h, *v.shape[2:])
    return _softmax(q @ kr.mT / math.sqrt(q.shape[-1])) @ vr


def _gradients(p, q, k, v, do, scale):
    o = p @ v
    dp = do @ v.mT
    ds = p * (dp - tt.sum(dp * p, axis=-1, keepdims=True))
    return o, ds @ k * scale, ds.mT @ q * scale, p.mT @ do


@tt.jit
def training_scaled(q, k, v, do):
    scale = q.shape[-1] ** -0.5
    return _gradients(_softmax(_causal(q, (q @ k.mT) * scale)), q, k, v, do, scale)


@tt.jit
def training_divided(q, k, v, do):
    d = math.sqrt(q.shape[-1])
    p = _softmax(_causal(q, q @ k.mT / d))
    dp = do @ v.mT
    ds = p * (dp - tt.sum(dp * p, axis=-1, keepdims=True))
    return p @ v, ds @ k / d, ds.mT @ q / d, p.mT @ do


@tt.jit
def training_scaled_q(q, k, v, do):
    scale = q.shape[-1] ** -0.5
    qs = q * scale
    p = _softmax(_causal(q, qs @ k.mT))
    dp = do @ v.mT
    ds = p * (dp - tt.sum(dp * p, axis=-1, keepdims=True))
    return p @ v, ds @ k * scale, ds.mT @ qs, p.mT @ do


@tt.jit
def training_logsumexp(q, k, v, do):
    s = _causal(q, q @ k.mT / math.sqrt(q.shape[-1]))
    return _gradients(tt.exp(s - tt.logsumexp(s, axis=-1, keepdims=True)), q, k, v, do, q.shape[-1] ** -0.5)


@tt.jit
def training_additive(q, k, v, do):
    n, scale = q.shape[-2], q.shape[-1] ** -0.5
    mask = tt.triu(tt.full((n, n), float("-inf"), q.dtype), 1)
    return _gradients(_softmax(q @ k.mT * scale + mask), q, k, v, do, scale)



def _alibi(q, s, bias):
    """ALiBi's causal scores: `s + bias` where the key is not after the query."""
    n = q.shape[-2]
    return tt.where(tt.arange(n).reshape(1, n) <= tt.arange(n).reshape(n, 1), s + bias, float("-inf"))


def _distance(q):
    n = q.shape[-2]
    return tt.arange(n).reshape(n, 1), tt.arange(n).reshape(1, n)


@tt.jit
def alibi_keys(q, k, v, slopes):
    _, j = _distance(q)
    return _softmax(_alibi(q, q @ k.mT / math.sqrt(q.shape[-1]), slopes * j.astype(q.dtype))) @ v


@tt.jit
def alibi_difference(q, k, v, slopes):
    i, j = _distance(q)
    return _softmax(_alibi(q, q @ k.mT / math.sqrt(q.shape[-1]), slopes * (j - i).astype(q.dtype))) @ v


@tt.jit
def alibi_negated(q, k, v, slopes):
    i, j = _distance(q)
    return _softmax(_alibi(q, q @ k.mT / math.sqrt(q.shape[-1]), -(slopes * (i - j).astype(q.dtype)))) @ v


SPELLINGS = {
    "full": [("s = (q @ k.mT) * scale", scaled, ()), ("q @ k.mT / math.sqrt(d)", divided, ()),
             ("(q * scale) @ k.mT", scaled_q, ()), ("(q / math.sqrt(d)) @ k.swapaxes(-1, -2)", divided_q, ()),
             ("q @ (k * scale).mT", scaled_k, ()), ("* scale, a 0-d array argument", runtime_scale, ("scale",)),
             ("/ divisor, a 0-d array argument", runtime_divisor, ("divisor",)),
             ("(q * scale) @ k.mT, a 0-d array", runtime_scale_on_q, ("scale",)),
             ("exp(s - m - log(sum(exp(s - m))))", through_logsumexp, ()),
             ("exp(s - tt.logsumexp(s, -1, keepdims=True))", tt_logsumexp, ()),
             ("softmax by hand (methods)", by_hand, ()), ("(e @ v) / e.sum(-1, keepdims=True)", normalised_after, ()),
             ("np.matmul, np.swapaxes, np.exp, np.max, np.sum", numpy_functions, ())],
    "causal": [("where(i >= j, (q @ k.mT) * scale, -inf)", causal_where, ()),
               ("where(i >= j, q @ k.mT / math.sqrt(d), -inf)", causal_where_divided, ()),
               ("where(i >= j, (q * scale) @ k.mT, -inf)", causal_where_scaled_q, ()),
               ("where(tril(ones), ..., -inf)", causal_tril, ()),
               ("where(i < j, -inf, s)", causal_dropped_keys, ()),
               ("where(~keep, -inf, s)", causal_negated, ()),
               ("where(tril(ones(float)) == 0, -inf, s)", causal_tril_compared, ()),
               ("s + triu(full(-inf), 1)", causal_additive_triu, ()),
               ("where(i >= j, q @ k.mT, -inf) / math.sqrt(d)", causal_scaled_after, ()),
               ("exp(s - tt.logsumexp(s, ...)), masked s", causal_logsumexp, ()),
               ("+ bias (0 / -inf array, reads S x S)", causal_bias, ("bias",))],
    "alibi": [("slope * j (the row shift dropped by hand)", alibi_keys, ("slopes",)),
              ("slope * (j - i)", alibi_difference, ("slopes",)),
              ("-(slope * (i - j))", alibi_negated, ("slopes",))],
    "gqa": [("q.reshape(B, H_kv, G, S, D) @ k[:, :, None].mT", grouped, ()),
            ("q @ tt.repeat(k, G, axis=1).mT", grouped_repeat, ()),
            ("broadcast_to(k[:, :, None], ...).reshape(B, H, S, D)", grouped_broadcast, ())],
    "training": [("causal, * scale", training_scaled, ()), ("causal, / math.sqrt(d)", training_divided, ()),
                 ("causal, q * scale shared with dk", training_scaled_q, ()),
                 ("causal, exp(s - tt.logsumexp(s))", training_logsumexp, ()),
                 ("causal, + triu(full(-inf), 1)", training_additive, ())],
}  # fmt: skip
"""Kind: (spelling, program, extra arguments); the first of each kind is its canonical spelling."""


def _references(q, k, v, do, kind: str, slopes: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """float64 SDPA (and its gradients for a training step) on the same tensors; ALiBi's bias as its mask."""
    leaves = [x.double().requires_grad_() for x in (q, k, v)]
    kv = [x.repeat_interleave(GQA_GROUP, 1) for x in leaves[1:]] if kind == "gqa" else leaves[1:]
    mask = None
    if kind == "alibi":
        position = torch.arange(q.shape[-2], device=q.device)
        mask = (slopes.double() * (position[None, :] - position[:, None])).masked_fill(
            position[None, :] > position[:, None], float("-inf"))
    o = F.scaled_dot_product_attention(leaves[0], *kv, attn_mask=mask, is_causal=kind in ("causal", "training"))
    if kind != "training":
        return (o.detach(),)
    return (o.detach(), *torch.autograd.grad(o, leaves, do.double()))


def spelling_table(dtype: torch.dtype) -> None:
    b, h, s, d = SPELLING_SHAPE
    q, v_full, do = (torch.randn(b, h, s, d, device=DEVICE, dtype=dtype) for _ in range(3))
    k = torch.randn(b, h, s, d, device=DEVICE, dtype=dtype)
    extras = {"scale": torch.tensor(d**-0.5, device=DEVICE, dtype=dtype),
              "divisor": torch.tensor(math.sqrt(d), device=DEVICE, dtype=dtype),
              "slopes": (2.0 ** -torch.arange(1, h + 1, device=DEVICE, dtype=torch.float32)).to(dtype).reshape(h, 1, 1),
              "bias": torch.zeros(s, s, device=DEVICE, dtype=dtype).masked_fill(
                  ~torch.ones(s, s, dtype=torch.bool, device=DEVICE).tril(), float("-inf"))}
    rows = []
    for kind, spellings in SPELLINGS.items():
        keys, values = (k[:, :: GQA_GROUP].contiguous(), v_full[:, :: GQA_GROUP].contiguous()) if kind == "gqa" else (k, v_full)
        inputs = (q, keys, values, do) if kind == "training" else (q, keys, values)
        references = _references(q, keys, values, do, kind, extras["slopes"])
        first = None
        for name, program, extra in spellings:
            args = (*inputs, *(extras[e] for e in extra))
            results = program(*args)
            for got, want in zip(results if kind == "training" else (results,), references, strict=True):
                check_close(f"{name}", got, want, tol=2e-2)
            ms = median_ms(lambda program=program, args=args: program(*args))
            flops = 4 * b * h * s * s * d * (0.5 if kind in ("causal", "training", "alibi") else 1.0)
            flops *= 3.5 if kind == "training" else 1.0  # FlashAttention's convention: backward 2.5x the forward
            tf = flops / (ms * 1e-3) / 1e12
            first = tf if first is None else first
            share = f"{100 * tf / first:.0f}%" if math.isfinite(tf) else "n/a"
            rows.append([kind, f"`{name}`", tf, share, program.compile(*args).num_launches])
            print(f"# {rows[-1]}", flush=True)
    print_table(f"Attention spellings, {SPELLING_SHAPE} {str(dtype).split('.')[-1]} (TFLOPS; % of the first of its kind)",
                ["kind", "spelling", "tinyton", "% of first", "launches"], rows)
