"""One decode step of microgpt with a KV cache: the array program, the cache write and the sampler kernels.

A token step is `decode_program` (the whole network for one token, every layer, attention over the
cache and the new row), one `kv_write` launch per layer but the last (the new key and value rows into the
caches, in place) and one `last_kernel` launch (the last layer's rows, then the draw: temperature softmax,
cumulative sum, a Philox uniform draw; it writes the next token, advances the position and the draw
counter). Everything stays on the device, so `tt.graphed` captures the
step once and every later token is one CUDA-graph replay.
"""

from __future__ import annotations

import numpy as np
from model import (
    Config,
    TinytonOps,
    layer_params,
    merge_heads,
    rmsnorm,
    softmax,
    split_heads,
)

import tinyton as tt


def decode(ops, cfg: Config, token, pos, *arrays):
    """Logits `(vocab,)` of the next token after `token` at position `pos` (both shape (1,) int32).

    `arrays` are the weights, then each layer's key cache, then each layer's value cache (`(H, T, D)`,
    rows `< pos` filled). Returns `(logits, *keys, *values)`: the new rows `(1, C)` for the caches."""
    n, layers = cfg.n_params, cfg.n_layer
    params, kcache, vcache = arrays[:n], arrays[n : n + layers], arrays[n + layers :]
    wte, wpe, lm_head = params[:3]
    x, _ = rmsnorm(ops, ops.take(wte, token, 0) + ops.take(wpe, pos, 0))
    t = ops.arange(cfg.block_size)
    here, visible = (t == pos)[:, None], t <= pos
    scale = 1.0 / float(np.sqrt(cfg.head_dim))
    keys, values = [], []
    for i in range(layers):
        wq, wk, wv, wo, fc1, fc2 = layer_params(params, i)
        h, _ = rmsnorm(ops, x)
        k_row, v_row = h @ wk, h @ wv
        q = split_heads(ops, cfg, h @ wq)
        k = ops.where(here, split_heads(ops, cfg, k_row), kcache[i])
        v = ops.where(here, split_heads(ops, cfg, v_row), vcache[i])
        p = softmax(ops, ops.where(visible, q @ k.mT * scale, float("-inf")))
        x = x + merge_heads(ops, cfg, p @ v) @ wo
        h2, _ = rmsnorm(ops, x)
        x = x + ops.maximum(h2 @ fc1, 0.0) @ fc2
        keys.append(k_row)
        values.append(v_row)
    return ((x @ lm_head).reshape(cfg.vocab), *keys, *values)


@tt.jit
def decode_program(cfg, token, pos, *arrays):
    return decode(TinytonOps, cfg, token, pos, *arrays)


@tt.jit
def write_rows(kcache_ptr, vcache_ptr, k_ptr, v_ptr, pos, T, D, C, BLOCK):
    """Row `pos` of the `(H, T, D)` caches := the new key and value `(1, C)`, in place."""
    c = tt.arange(0, BLOCK)
    live = c < C
    dst = (c // D) * (T * D) + pos * D + c % D
    tt.store(kcache_ptr + dst, tt.load(k_ptr + c, mask=live), mask=live)
    tt.store(vcache_ptr + dst, tt.load(v_ptr + c, mask=live), mask=live)


@tt.jit
def draw(logits_ptr, token_ptr, pos_ptr, counter_ptr, out_ptr, seed, inv_temperature, V, BLOCK):
    """Draw the next token from `softmax(logits / temperature)` by inverse CDF with a Philox uniform
    (`tt.rand(seed, counter)`), store it as the next input token and at `out[pos]`, advance pos and counter."""
    i = tt.arange(0, BLOCK)
    z = tt.load(logits_ptr + i, mask=i < V, other=float("-inf")) * inv_temperature
    e = tt.exp(z - tt.max(z, axis=0))
    p = e / tt.sum(e, axis=0)
    cdf = tt.sum(tt.where(i[:, None] <= i[None, :], p[:, None], 0.0), axis=0)  # cdf[j] = sum of p[:j+1]
    counter = tt.load(counter_ptr)
    u = tt.rand(seed, counter)
    token = tt.minimum(tt.sum((cdf <= u).to(tt.int32), axis=0), V - 1)
    pos = tt.load(pos_ptr)
    tt.store(token_ptr, token)
    tt.store(out_ptr + pos, token)
    tt.store(pos_ptr, pos + 1)
    tt.store(counter_ptr, counter + 1)


@tt.jit
def kv_write_kernel(kcache_ptr, vcache_ptr, k_ptr, v_ptr, pos_ptr, T: tt.constexpr, D: tt.constexpr,
                    C: tt.constexpr, BLOCK: tt.constexpr):  # fmt: skip
    """One layer's cache rows (every layer but the last: the last one's go with the draw)."""
    write_rows(kcache_ptr, vcache_ptr, k_ptr, v_ptr, tt.load(pos_ptr), T, D, C, BLOCK)


@tt.jit
def last_kernel(logits_ptr, token_ptr, pos_ptr, counter_ptr, out_ptr, seed, inv_temperature, kcache_ptr, vcache_ptr,
                k_ptr, v_ptr, V: tt.constexpr, BLOCK: tt.constexpr, T: tt.constexpr, D: tt.constexpr,
                C: tt.constexpr, ROW_BLOCK: tt.constexpr):  # fmt: skip
    """A token step's last launch: the last layer's cache rows at `pos`, then the draw (which advances
    `pos`). One kernel instead of two: a step at one layer is the decode program plus this."""
    write_rows(kcache_ptr, vcache_ptr, k_ptr, v_ptr, tt.load(pos_ptr), T, D, C, ROW_BLOCK)
    draw(logits_ptr, token_ptr, pos_ptr, counter_ptr, out_ptr, seed, inv_temperature, V, BLOCK)


def sample_numpy(logits: np.ndarray, temperature: float, rng: np.random.Generator) -> int:
    """The CPU reference's draw: the same inverse CDF, NumPy's generator."""
    z = logits.astype(np.float64) / temperature
    p = np.exp(z - z.max())
    cdf = np.cumsum(p / p.sum())
    return int(min(np.searchsorted(cdf, rng.random(), side="right"), len(logits) - 1))
