"""Model blocks as array programs (issue 19): GELU-tanh MLP epilogue, SwiGLU, RoPE, cross-entropy, top-p sampling.

Each is written as a user writes it in NumPy spelling; tinyton fuses it (launch counts in the table) and is
timed against torch eager and torch.compile in the same process, fp32 and bf16. `bench_fusion.py --blocks`
prints the table.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from common import DEVICE, check_close, median_ms, peer, pick

import tinyton as tt

GELU_C = math.sqrt(2 / math.pi)


@tt.jit
def gelu_mlp(x, w, b):
    h = x @ w.T + b
    return 0.5 * h * (1 + tt.tanh(GELU_C * (h + 0.044715 * h**3)))


@tt.jit
def swiglu(x, w1, w3):
    a = x @ w1.T
    return tt.sigmoid(a) * a * (x @ w3.T)


@tt.jit
def rope(x, cos, sin):
    h = x.shape[-1] // 2
    return tt.concatenate([-x[..., h:], x[..., :h]], axis=-1) * sin + x * cos


@tt.jit
def cross_entropy(logits, labels):
    logp = logits - tt.logsumexp(logits, axis=-1, keepdims=True)
    return -tt.take_along_axis(logp, labels[:, None], axis=-1).mean()


@tt.jit
def top_p_count(logits, u):
    """How many tokens, most likely first, the draw `u` passes in the unsorted CDF (the sampling scan)."""
    e = tt.exp(logits - logits.max(axis=-1, keepdims=True))
    c = tt.cumsum(e / e.sum(axis=-1, keepdims=True), axis=-1)
    return (c < u).sum(axis=-1)


def torch_gelu_mlp(x, w, b):
    return F.gelu(x @ w.T + b, approximate="tanh")


def torch_swiglu(x, w1, w3):
    return F.silu(x @ w1.T) * (x @ w3.T)


def torch_rope(x, cos, sin):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1) * sin + x * cos


def torch_cross_entropy(logits, labels):
    return F.cross_entropy(logits.float(), labels.long()).to(logits.dtype)


def torch_top_p_count(logits, u):
    c = torch.cumsum(torch.softmax(logits.float(), -1), -1)
    return (c < u).sum(-1)


def _inputs(name: str, dtype: torch.dtype) -> list[torch.Tensor]:
    torch.manual_seed(0)  # the same inputs in every run and on every backend
    r = lambda *s: torch.randn(*s, device=DEVICE, dtype=dtype)
    m, k, n = pick((4096, 4096, 4096), (33, 64, 48))
    if name == "gelu_mlp":
        return [r(m, k), r(n, k) / k**0.5, r(n)]
    if name == "swiglu":
        return [r(m, k), r(n, k) / k**0.5, r(n, k) / k**0.5]
    if name == "rope":
        b, h, t, d = pick((8, 32, 1024, 128), (2, 3, 5, 16))
        angles = torch.rand(t, d, device=DEVICE) * 6.28
        return [r(b, h, t, d), angles.cos().to(dtype), angles.sin().to(dtype)]
    rows, vocab = pick((4096, 32000), (7, 1000)) if name == "cross_entropy" else pick((32, 128256), (3, 3000))
    if name == "cross_entropy":
        return [r(rows, vocab), torch.randint(0, vocab, (rows,), device=DEVICE, dtype=torch.int32)]
    return [r(rows, vocab) * 3, torch.rand(rows, 1, device=DEVICE, dtype=torch.float32)]


BLOCKS: dict[str, tuple[Callable, Callable]] = {
    "gelu_mlp": (gelu_mlp, torch_gelu_mlp),
    "swiglu": (swiglu, torch_swiglu),
    "rope": (rope, torch_rope),
    "cross_entropy": (cross_entropy, torch_cross_entropy),
    "top_p_count": (top_p_count, torch_top_p_count),
}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
TOLERANCE = {torch.float32: 2e-3, torch.bfloat16: 5e-2}
CDF_TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 1e-2}  # bf16: the scan's outputs round to 8 bits (NumPy's)


def bench_block(name: str, dtype: torch.dtype) -> list[object]:
    program, eager = BLOCKS[name]
    args = _inputs(name, dtype)
    got, want = program(*args), eager(*[a.double() if a.is_floating_point() else a for a in args])
    if name == "top_p_count":  # rounded sums of 128k tiny probabilities: the count is right if the exact CDF
        p = torch.softmax(args[0].double(), -1)  # crosses u within the dtype's rounding of it at that count
        c = torch.cumsum(p, -1)
        n = got.long().clamp(1, c.shape[-1] - 1)[:, None]
        u, tol = args[1].double(), CDF_TOLERANCE[dtype]
        assert (c.gather(1, n - 1) <= u + tol).all() and (c.gather(1, n) >= u - tol).all(), (dtype, got, want)
    else:
        check_close(f"tinyton {name} {dtype}", got, want.to(got.dtype), TOLERANCE[dtype])
    compiled = torch.compile(eager, dynamic=False)
    ms = {"tinyton": median_ms(lambda: program(*args)), "torch eager": peer(median_ms, lambda: eager(*args))}
    try:
        ms["torch.compile"] = peer(median_ms, lambda: compiled(*args))
    except Exception as e:  # inductor's own failures (a split scan over 128k columns, torch 2.11) are its row's
        print(f"  torch.compile failed on {name}: {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)
        ms["torch.compile"] = math.nan
    best = min((v for k, v in ms.items() if k != "tinyton" and not math.isnan(v)), default=math.nan)  # one-shot: NaN
    shape = "x".join(str(s) for s in args[0].shape)
    return [name, shape, *(f"{ms[k] * 1e3:.1f}" for k in ("tinyton", "torch eager", "torch.compile")),
            f"{100 * best / ms['tinyton']:.0f}%", program.compile(*args).num_launches]  # fmt: skip


BLOCK_HEADER = ["block", "shape", "tinyton µs", "torch eager µs", "torch.compile µs", "of best peer", "launches"]
