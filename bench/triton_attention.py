"""A Triton flash-attention forward (FlashAttention-2 style, written for this benchmark) to compare with.

One program per (query block, batch x head): q block in registers, a loop over key/value blocks with a
running max and sum, exp2 with the scale folded into log2(e); causal programs stop at the diagonal.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def _attention_forward(
    q_ptr, k_ptr, v_ptr, o_ptr, seq_q, seq_kv, scale_log2,
    D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
):
    block = tl.program_id(0)
    head = tl.program_id(1).to(tl.int64)
    q_base, kv_base = head * seq_q * D, head * seq_kv * D
    rows = block * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, D)
    q = tl.load(q_ptr + q_base + rows[:, None] * D + dims[None, :], mask=rows[:, None] < seq_q, other=0.0)
    m = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    shift = seq_kv - seq_q
    end = tl.minimum(seq_kv, (block + 1) * BLOCK_M + shift) if CAUSAL else seq_kv
    for start in range(0, end, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        k = tl.load(k_ptr + kv_base + cols[None, :] * D + dims[:, None], mask=cols[None, :] < seq_kv, other=0.0)
        s = tl.dot(q, k) * scale_log2
        keep = cols[None, :] < seq_kv
        if CAUSAL:
            keep = keep & (rows[:, None] + shift >= cols[None, :])
        s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m - m_new)
        l = l * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + kv_base + cols[:, None] * D + dims[None, :], mask=cols[:, None] < seq_kv, other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m = m_new
    out = acc / l[:, None]
    tl.store(o_ptr + q_base + rows[:, None] * D + dims[None, :], out.to(o_ptr.dtype.element_ty), mask=rows[:, None] < seq_q)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """(B, H, S, D) contiguous tensors; the same head count for q and k/v."""
    b, h, s_q, d = q.shape
    s_kv = k.shape[2]
    out = torch.empty_like(q)
    block_m, block_n = (128, 64) if d <= 64 else (128, 32)
    grid = (triton.cdiv(s_q, block_m), b * h)
    _attention_forward[grid](
        q, k, v, out, s_q, s_kv, d**-0.5 * 1.4426950408889634,
        D=d, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal, num_warps=8 if d > 64 else 4, num_stages=3,
    )
    return out
