"""The spelling table of bench_attention.py (issue 23): one shape under every spelling of attention a user
may write, each rewritten into the same flash-attention kernel (tinyton/rewrites/attention_canonical.py):
the figures should agree within noise, and the launches be one."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

import tinyton as tt
from common import DEVICE, check_close, median_ms, pick, print_table

SPELLING_SHAPE = pick((4, 16, 2048, 128), (1, 2, 100, 64))


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


SPELLINGS = {
    "full": [("s = (q @ k.mT) * scale", scaled, ()), ("q @ k.mT / math.sqrt(d)", divided, ()),
             ("(q * scale) @ k.mT", scaled_q, ()), ("(q / math.sqrt(d)) @ k.swapaxes(-1, -2)", divided_q, ()),
             ("q @ (k * scale).mT", scaled_k, ()), ("* scale, a 0-d array argument", runtime_scale, ("scale",)),
             ("exp(s - m - log(sum(exp(s - m))))", through_logsumexp, ()), ("softmax by hand (methods)", by_hand, ())],
    "causal": [("where(i >= j, (q @ k.mT) * scale, -inf)", causal_where, ()),
               ("where(i >= j, q @ k.mT / math.sqrt(d), -inf)", causal_where_divided, ()),
               ("where(i >= j, (q * scale) @ k.mT, -inf)", causal_where_scaled_q, ()),
               ("where(tril(ones), ..., -inf)", causal_tril, ()),
               ("+ bias (0 / -inf array, reads S x S)", causal_bias, ("bias",))],
}  # fmt: skip


def spelling_table(dtype: torch.dtype) -> None:
    b, h, s, d = SPELLING_SHAPE
    q, k, v = (torch.randn(b, h, s, d, device=DEVICE, dtype=dtype) for _ in range(3))
    extras = {"scale": torch.tensor(d**-0.5, device=DEVICE, dtype=dtype),
              "bias": torch.zeros(s, s, device=DEVICE, dtype=dtype).masked_fill(
                  ~torch.ones(s, s, dtype=torch.bool, device=DEVICE).tril(), float("-inf"))}
    rows = []
    for kind, spellings in SPELLINGS.items():
        reference = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=kind == "causal")
        first = None
        for name, program, extra in spellings:
            args = (q, k, v, *(extras[e] for e in extra))
            check_close(f"{name}", program(*args), reference, tol=2e-2)
            ms = median_ms(lambda program=program, args=args: program(*args))
            flops = 4 * b * h * s * s * d * (0.5 if kind == "causal" else 1.0)
            tf = flops / (ms * 1e-3) / 1e12
            first = tf if first is None else first
            share = f"{100 * tf / first:.0f}%" if math.isfinite(tf) else "n/a"
            rows.append([kind, f"`{name}`", tf, share, program.compile(*args).num_launches])
            print(f"# {rows[-1]}", flush=True)
    print_table(f"Attention spellings, {SPELLING_SHAPE} {str(dtype).split('.')[-1]} (TFLOPS; % of the first of its kind)",
                ["mask", "spelling", "tinyton", "% of first", "launches"], rows)
