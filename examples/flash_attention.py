"""Flash attention forward, hand-written with `@tt.jit` in Triton's style.

Each program owns BLOCK_M queries of one (batch, head): it keeps their q block in registers and walks the
keys and values BLOCK_N at a time, keeping a running row maximum `m`, a running sum `l` of exponentials and
the output accumulator, rescaled whenever the maximum grows (online softmax). The scale is folded into
log2(e) so the exponentials are `tt.exp2`. A causal program's loop bound depends on its `program_id`: it
stops at the diagonal, and only blocks that cross it need the mask. Runs on the simulator and the GPU and
is checked against NumPy in float64.

The same computation written naively as an array program (`softmax(q @ k.mT * scale) @ v`) is rewritten
into such a kernel automatically: see tests/test_attention.py and bench/bench_attention.py.
"""

import math

import numpy as np

import tinyton as tt


@tt.jit
def flash_attention(
    q_ptr, k_ptr, v_ptr, o_ptr, seq_len, scale_log2,
    HEAD_DIM: tt.constexpr, BLOCK_M: tt.constexpr, BLOCK_N: tt.constexpr, CAUSAL: tt.constexpr,
):
    start_m = tt.program_id(0) * BLOCK_M
    base = tt.program_id(1) * seq_len * HEAD_DIM  # one (batch, head) slice of (B, H, S, D) contiguous arrays
    rows = start_m + tt.arange(0, BLOCK_M)
    dims = tt.arange(0, HEAD_DIM)
    q = tt.load(q_ptr + base + rows[:, None] * HEAD_DIM + dims[None, :], mask=rows[:, None] < seq_len, other=0.0)
    m = tt.full((BLOCK_M,), float("-inf"), tt.float32)
    l = tt.zeros((BLOCK_M,), tt.float32)
    acc = tt.zeros((BLOCK_M, HEAD_DIM), tt.float32)
    end = tt.minimum(seq_len, start_m + BLOCK_M) if CAUSAL else seq_len
    for start_n in range(0, end, BLOCK_N):
        cols = start_n + tt.arange(0, BLOCK_N)
        kt = tt.load(k_ptr + base + cols[None, :] * HEAD_DIM + dims[:, None], mask=cols[None, :] < seq_len, other=0.0)
        s = tt.dot(q, kt) * scale_log2
        keep = cols[None, :] < seq_len
        if CAUSAL:
            keep = keep & (rows[:, None] >= cols[None, :])
        s = tt.where(keep, s, float("-inf"))
        m_new = tt.maximum(m, tt.max(s, axis=1))
        p = tt.exp2(s - m_new[:, None])
        alpha = tt.exp2(m - m_new)
        l = l * alpha + tt.sum(p, axis=1)
        v = tt.load(v_ptr + base + cols[:, None] * HEAD_DIM + dims[None, :], mask=cols[:, None] < seq_len, other=0.0)
        acc = tt.dot(p.to(tt.float16), v, acc * alpha[:, None])
        m = m_new
    out = acc / l[:, None]
    tt.store(o_ptr + base + rows[:, None] * HEAD_DIM + dims[None, :], out.to(tt.float16), mask=rows[:, None] < seq_len)


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool, block_m: int = 64, block_n: int = 32):
    b, h, s, d = q.shape
    out = np.empty_like(q)
    grid = (tt.cdiv(s, block_m), b * h)
    scale_log2 = d**-0.5 * math.log2(math.e)
    flash_attention[grid](q, k, v, out, s, scale_log2, HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal)
    return out


def reference(q, k, v, causal):
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    for causal in (False, True):
        q, k, v = (rng.standard_normal((2, 3, 100, 64)).astype(np.float16) for _ in range(3))
        got = attention(q, k, v, causal)
        np.testing.assert_allclose(got.astype(np.float64), reference(q, k, v, causal), rtol=2e-2, atol=2e-3)
    print("OK")
