"""Karpathy's microgpt as array programs: one model, written once, run by NumPy or traced by tinyton.

Every function takes an `ops` class first (`NumpyOps` or `TinytonOps`): the handful of functions that
NumPy and tinyton spell differently. Everything else is operators and array methods both understand, so
`forward(NumpyOps, ...)` is the CPU reference and the same code under `@tt.jit` is the traced program.

The architecture (no biases): token + position embeddings (`take`), RMSNorm (eps 1e-5, no scale), then per
layer RMSNorm, multi-head causal self-attention, output projection, residual, RMSNorm, MLP (4x, ReLU),
residual; finally `lm_head`. Weights are stored `(in, out)`, so a projection is `x @ w`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import tinyton as tt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "shared"))
import array_ops

NumpyOps, TinytonOps = array_ops.NumpyOps, array_ops.TinytonOps
"""The models' `ops` (examples/shared/array_ops.py): microgpt needs no other function."""

EPS = 1e-5
INIT_STD = 0.08
LAYER_PARAMS = ("wq", "wk", "wv", "wo", "fc1", "fc2")


@dataclass(frozen=True)
class Config:
    n_layer: int = 1
    n_embd: int = 16
    n_head: int = 4
    block_size: int = 16
    vocab: int = 27

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    @property
    def n_params(self) -> int:
        """Number of weight arrays: wte, wpe, lm_head, then six per layer."""
        return 3 + len(LAYER_PARAMS) * self.n_layer


def param_shapes(cfg: Config) -> dict[str, tuple[int, int]]:
    c, v = cfg.n_embd, cfg.vocab
    shapes = {"wte": (v, c), "wpe": (cfg.block_size, c), "lm_head": (c, v)}
    for i in range(cfg.n_layer):
        layer = {"wq": (c, c), "wk": (c, c), "wv": (c, c), "wo": (c, c), "fc1": (c, 4 * c), "fc2": (4 * c, c)}
        shapes.update({f"h{i}.{name}": shape for name, shape in layer.items()})
    return shapes


def init_params(cfg: Config, seed: int = 0) -> list[np.ndarray]:
    """Gaussian weights (std 0.08, as microgpt), in `param_shapes` order."""
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(s) * INIT_STD).astype(np.float32) for s in param_shapes(cfg).values()]


# ---- building blocks ------------------------------------------------------------------------------


def rmsnorm(ops, x):
    """`(x * r, r)` with `r = 1 / sqrt(mean(x^2) + eps)` (r is kept for the backward pass)."""
    r = ops.rsqrt((x * x).mean(axis=-1, keepdims=True) + EPS)
    return x * r, r


def softmax(ops, s):
    e = ops.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def split_heads(ops, cfg: Config, x):
    """`(..., T, C)` -> `(..., H, T, D)`."""
    *lead, t, _ = x.shape
    return ops.swapaxes(x.reshape(*lead, t, cfg.n_head, cfg.head_dim), -2, -3)


def merge_heads(ops, cfg: Config, x):
    """`(..., H, T, D)` -> `(..., T, C)`."""
    *lead, _, t, _ = x.shape
    return ops.swapaxes(x, -2, -3).reshape(*lead, t, cfg.n_embd)


def layer_params(params, i: int):
    return params[3 + len(LAYER_PARAMS) * i : 3 + len(LAYER_PARAMS) * (i + 1)]


def causal_mask(ops, t: int):
    return ops.arange(t)[:, None] >= ops.arange(t)[None, :]


# ---- the forward pass over whole sequences (training, evaluation) --------------------------------


def forward(ops, cfg: Config, params, idx, saved: list | None = None):
    """Logits `(B, T, vocab)` of token rows `idx` `(B, T)`, T = block_size. With `saved`, the
    activations the backward pass needs are appended to it."""
    wte, wpe, lm_head = params[:3]
    x, r0 = rmsnorm(ops, ops.take(wte, idx, 0) + wpe)
    keep = causal_mask(ops, cfg.block_size)
    scale = 1.0 / float(np.sqrt(cfg.head_dim))
    layers = []
    for i in range(cfg.n_layer):
        wq, wk, wv, wo, fc1, fc2 = layer_params(params, i)
        h, r1 = rmsnorm(ops, x)
        q, k, v = (split_heads(ops, cfg, h @ w) for w in (wq, wk, wv))
        p = softmax(ops, ops.where(keep, q @ k.mT * scale, float("-inf")))
        a = merge_heads(ops, cfg, p @ v)
        x2 = x + a @ wo
        h2, r2 = rmsnorm(ops, x2)
        u = h2 @ fc1
        g = ops.maximum(u, 0.0)
        layers.append((h, r1, q, k, v, p, a, h2, r2, u, g))
        x = x2 + g @ fc2
    if saved is not None:
        saved += [x, r0, layers]
    return x @ lm_head


def one_hot(ops, idx, n: int):
    return ops.f32(idx[..., None] == ops.arange(n)[None, None, :])


def log_softmax(ops, logits):
    z = logits - logits.max(axis=-1, keepdims=True)
    return z - ops.log(ops.exp(z).sum(axis=-1, keepdims=True))


def loss_of(ops, cfg: Config, logits, targets, mask):
    """Mean cross-entropy over the unmasked positions, shape (1,)."""
    nll = -(one_hot(ops, targets, cfg.vocab) * log_softmax(ops, logits)).sum(axis=-1)
    return ((nll * mask).sum() / mask.sum()).reshape(1)


def evaluate(ops, cfg: Config, idx, targets, mask, *params):
    """The loss of a batch (validation)."""
    return loss_of(ops, cfg, forward(ops, cfg, params, idx), targets, mask)


@tt.jit
def evaluate_program(cfg, idx, targets, mask, *params):
    return evaluate(TinytonOps, cfg, idx, targets, mask, *params)
