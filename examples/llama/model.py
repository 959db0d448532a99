"""The Llama-3 architecture as array programs: written once, run by NumPy (the reference) or traced by tinyton.

Every function takes an `ops` class first (`NumpyOps` or `TinytonOps`) for the few functions NumPy and
tinyton spell differently; the rest is operators, slicing and array methods both understand.

A layer: RMSNorm, q/k/v projections (grouped-query heads), RoPE (Llama 3's frequencies and scaling), causal
attention over the KV cache (each step assigns its new key and value rows into the caches, `kc[:, :, pos] =
k`: in place, the caller's arrays, in NumPy and in tinyton alike), o-projection + residual, RMSNorm, SwiGLU
MLP (`silu(x @ gate.T) * (x @ up.T)`, then `@ down.T`) + residual. Then the final norm and `lm_head`. Weights are bf16 as Hugging Face stores them
(`(out, in)`); activations are float32, rounded to bf16 where they enter a matmul (as tensor cores take
them) and where they are stored in the bf16 KV cache.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from config import Config
from weights import BF16, LAYER_WEIGHTS

import tinyton as tt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "shared"))
import array_ops


class NumpyOps(array_ops.NumpyOps):
    """The CPU reference."""

    @staticmethod
    def bf16(x: np.ndarray) -> np.ndarray:
        return x.astype(BF16)

    @staticmethod
    def linear(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        """What a tensor core computes: bf16 operands, exact products, float32 sums, one bf16 rounding."""
        return (x.astype(BF16).astype(np.float32) @ w.astype(np.float32).T).astype(BF16).astype(np.float32)


class TinytonOps(array_ops.TinytonOps):
    """The same functions on traced arrays (inside `@tt.jit` array programs)."""

    @staticmethod
    def bf16(x):
        return x.to(tt.bfloat16)

    @staticmethod
    def linear(x, w):
        """`x @ w.T` on bf16 operands (a bf16 result, float32 inside the matmul), widened to float32."""
        return (x.to(tt.bfloat16) @ w.T).to(tt.float32)


# ---- host-side tables -----------------------------------------------------------------------------


def rope_frequencies(cfg: Config) -> np.ndarray:
    """The inverse frequencies `(head_dim // 2,)`, with Llama 3's scaling of the long wavelengths."""
    d = cfg.head_dim
    inv_freq = 1.0 / cfg.rope_theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
    s = cfg.rope_scaling
    if s is None:
        return inv_freq
    low_wavelen = s.original_max_position_embeddings / s.low_freq_factor
    high_wavelen = s.original_max_position_embeddings / s.high_freq_factor
    wavelen = 2 * np.pi / inv_freq
    smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) / (
        s.high_freq_factor - s.low_freq_factor)  # fmt: skip
    scaled = np.where(wavelen > low_wavelen, inv_freq / s.factor, inv_freq)
    mid = (wavelen <= low_wavelen) & (wavelen >= high_wavelen)
    return np.where(mid, (1 - smooth) * inv_freq / s.factor + smooth * inv_freq, scaled)


def rope_tables(cfg: Config, length: int) -> tuple[np.ndarray, np.ndarray]:
    """`cos, sin` of shape `(length, head_dim)` for positions `0..length-1` (Hugging Face's half-split
    layout: the two halves of a head share a frequency)."""
    angles = np.outer(np.arange(length, dtype=np.float64), rope_frequencies(cfg))
    angles = np.concatenate([angles, angles], axis=-1)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


# ---- building blocks ------------------------------------------------------------------------------


def rmsnorm(ops, cfg: Config, x, w):
    return x * ops.rsqrt((x * x).mean(axis=-1, keepdims=True) + cfg.rms_norm_eps) * ops.f32(w)


def rope(ops, x, cos, sin):
    """Rotate `(..., T, D)` by position: `x * cos + rotate_half(x) * sin`."""
    h = x.shape[-1] // 2
    return x * cos + ops.concatenate([-x[..., h:], x[..., :h]], axis=-1) * sin


def silu(ops, x):
    return x / (1.0 + ops.exp(-x))


def softmax(ops, s):
    e = ops.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def heads(ops, x, n: int, d: int):
    """`(B, T, n * d)` -> `(B, n, T, d)`."""
    b, t, _ = x.shape
    return ops.swapaxes(x.reshape(b, t, n, d), 1, 2)


def attention(ops, q, k, v, keep):
    """Grouped-query attention: q `(B, H, T, D)`, k and v `(B, KV, S, D)` (H a multiple of KV), `keep`
    broadcasting to `(T, S)`; returns `(B, T, H * D)`."""
    b, h, t, d = q.shape
    kv = k.shape[1]
    q = q.reshape(b, kv, h // kv, t, d)
    k, v = k.reshape(b, kv, 1, -1, d), v.reshape(b, kv, 1, -1, d)
    p = softmax(ops, ops.where(keep, q @ k.mT * (1.0 / float(np.sqrt(d))), float("-inf")))
    o = (p @ v).reshape(b, h, t, d)
    return ops.swapaxes(o, 1, 2).reshape(b, t, h * d)


def qkv(ops, cfg: Config, x, layer, cos, sin):
    """The layer's normed input projected to rotated queries and keys and values `(B, heads, T, D)`. The head
    counts come from the weights, so a tensor-parallel shard (some of the heads) runs the same code."""
    d = cfg.head_dim
    h = rmsnorm(ops, cfg, x, layer["input_layernorm"])
    q = rope(ops, heads(ops, ops.linear(h, layer["q_proj"]), layer["q_proj"].shape[0] // d, d), cos, sin)
    k = rope(ops, heads(ops, ops.linear(h, layer["k_proj"]), layer["k_proj"].shape[0] // d, d), cos, sin)
    v = heads(ops, ops.linear(h, layer["v_proj"]), layer["v_proj"].shape[0] // d, d)
    return q, k, v


def decode_attention(ops, cfg: Config, x, layer, cos, sin, kc, vc, pos, visible):
    """One decode step's attention with the output projection (the residual is the caller's): the new key and
    value rows are written into the caches `kc`, `vc` `(B, KV, S, D)` at position `pos` (in place: the
    caller's arrays), then the attention reads the caches (`visible`: the positions up to `pos`)."""
    q, k, v = qkv(ops, cfg, x, layer, cos, sin)
    kc[:, :, pos] = ops.bf16(k)
    vc[:, :, pos] = ops.bf16(v)
    return ops.linear(attention(ops, q, ops.f32(kc), ops.f32(vc), visible), layer["o_proj"])


def mlp(ops, x, layer):
    return ops.linear(silu(ops, ops.linear(x, layer["gate_proj"])) * ops.linear(x, layer["up_proj"]),
                  layer["down_proj"])  # fmt: skip


def unflatten(cfg: Config, flat):
    """`Weights.flat()` back into `(embed, norm, lm_head, layers)`."""
    n = len(LAYER_WEIGHTS)
    layers = [dict(zip(LAYER_WEIGHTS, flat[3 + n * i : 3 + n * (i + 1)])) for i in range(cfg.num_hidden_layers)]
    return flat[0], flat[1], flat[2], layers


def weights_and_caches(cfg: Config, arrays):
    """`(*Weights.flat(), *key caches, *value caches)` into `(embed, norm, lm_head, layers, kcache, vcache)`."""
    n = 3 + len(LAYER_WEIGHTS) * cfg.num_hidden_layers
    layers = cfg.num_hidden_layers
    return (*unflatten(cfg, arrays[:n]), arrays[n : n + layers], arrays[n + layers :])


# ---- prefill and decode ---------------------------------------------------------------------------


def prefill(ops, cfg: Config, tokens, cos, sin, *arrays):
    """The prompt `tokens (B, P)` at positions `0..P-1` (`cos`, `sin`: `(P, D)`). `arrays`: the weights, then
    each layer's key cache, then value cache `(B, KV, S, D)`, whose positions `0..P-1` it fills (in place).
    Returns the logits of the last position `(B, vocab)`."""
    embed, norm, lm_head, layers, kcache, vcache = weights_and_caches(cfg, arrays)
    x = ops.f32(ops.take(embed, tokens, 0))
    p = tokens.shape[1]
    keep = ops.arange(p)[:, None] >= ops.arange(p)[None, :]
    for layer, kc, vc in zip(layers, kcache, vcache):
        q, k, v = qkv(ops, cfg, x, layer, cos, sin)
        kc[:, :, :p] = ops.bf16(k)
        vc[:, :, :p] = ops.bf16(v)
        x = x + ops.linear(attention(ops, q, k, v, keep), layer["o_proj"])
        x = x + mlp(ops, rmsnorm(ops, cfg, x, layer["post_attention_layernorm"]), layer)
    last = rmsnorm(ops, cfg, x[:, -1, :], norm)
    return ops.linear(last, lm_head)


def decode(ops, cfg: Config, token, pos, cos_table, sin_table, *arrays):
    """One token per sequence, `token (B,)` at position `pos` (shape `(1,)`). `arrays`: the weights, then
    each layer's key cache, then value cache `(B, KV, S, D)` (positions `< pos` filled; the step writes
    position `pos`, in place). Returns the logits `(B, vocab)`."""
    embed, norm, lm_head, layers, kcache, vcache = weights_and_caches(cfg, arrays)
    b = token.shape[0]
    x = ops.f32(ops.take(embed, token, 0)).reshape(b, 1, cfg.hidden_size)
    cos, sin = ops.take(cos_table, pos, 0), ops.take(sin_table, pos, 0)
    visible = ops.arange(kcache[0].shape[2]) <= pos
    for layer, kc, vc in zip(layers, kcache, vcache):
        x = x + decode_attention(ops, cfg, x, layer, cos, sin, kc, vc, pos, visible)
        x = x + mlp(ops, rmsnorm(ops, cfg, x, layer["post_attention_layernorm"]), layer)
    return ops.linear(rmsnorm(ops, cfg, x, norm), lm_head).reshape(b, cfg.vocab_size)


@tt.jit
def prefill_program(cfg, tokens, cos, sin, *arrays):
    return prefill(TinytonOps, cfg, tokens, cos, sin, *arrays)


@tt.jit
def decode_program(cfg, token, pos, cos_table, sin_table, *arrays):
    return decode(TinytonOps, cfg, token, pos, cos_table, sin_table, *arrays)
