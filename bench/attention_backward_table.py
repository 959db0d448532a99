"""The backward table of bench_attention.py (issue 23): FlashAttention-2's backward as tinyton generates it
(`tinyton.compiler.attention_backward`, three launches from the forward's saved output and logsumexp)
next to torch's SDPA backward (the backend it picks by default, and its flash and cuDNN backends), on the same
tensors; and the whole training step
as one array program (the textbook forward and backward math, rewritten into the forward kernel plus the
three backward kernels) next to SDPA's forward + backward.

TFLOPS: FlashAttention's convention, the backward 2.5 times the forward's 4·B·H·S²·D (halved when causal).
"""

from __future__ import annotations

from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import tinyton as tt
from common import DEVICE, check_close, median_ms, peer, pick, print_table
from tinyton.compiler.attention_backward import attention_backward

BACKWARD_CASES = pick(
    [((4, 16, 2048, 64), "full"), ((4, 16, 2048, 64), "causal"), ((8, 32, 1024, 128), "full"),
     ((1, 28, 2048, 128), "causal"), ((2, 16, 4096, 128), "causal"), ((2, 32, 2048, 128), "gqa")],
    [((1, 3, 100, 64), "full"), ((1, 2, 77, 64), "causal"), ((1, 4, 90, 64), "gqa")],
)  # fmt: skip
"""(B, H, S, D) and kind (gqa: each key/value head serves `GQA_GROUP` query heads, causal)."""
GQA_GROUP = 4


@tt.jit
def training_step(q, k, v, do, scale):
    """o and the gradients of causal attention, written as the textbook math."""
    n = q.shape[-2]
    keep = tt.arange(n).reshape(n, 1) >= tt.arange(n)
    s = tt.where(keep, (q @ tt.swapaxes(k, -1, -2)) * scale, float("-inf"))
    e = tt.exp(s - tt.max(s, axis=-1, keepdims=True))
    p = e / tt.sum(e, axis=-1, keepdims=True)
    o = p @ v
    dp = do @ tt.swapaxes(v, -1, -2)
    ds = p * (dp - tt.sum(dp * p, axis=-1, keepdims=True))
    return o, (ds @ k) * scale, (tt.swapaxes(ds, -1, -2) @ q) * scale, tt.swapaxes(p, -1, -2) @ do


def _logsumexp(q: torch.Tensor, k: torch.Tensor, scale: float, causal: bool) -> torch.Tensor:
    """Each row's logsumexp of its scaled (masked) scores, float32, one batch entry at a time."""
    group = q.shape[1] // k.shape[1]
    rows = []
    for b in range(q.shape[0]):
        s = (q[b].float() @ k[b].float().repeat_interleave(group, 0).mT) * scale
        if causal:
            s = s.masked_fill(~torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).tril(), float("-inf"))
        rows.append(torch.logsumexp(s, -1))
    return torch.stack(rows)


def _backend(backend: SDPBackend | None):
    """SDPA restricted to `backend`, or (None) left to pick its own, as a user's call does."""
    return nullcontext() if backend is None else sdpa_kernel(backend)


def _sdpa_backward(backend: SDPBackend | None, q, k, v, do, options):
    """A function running SDPA's backward alone (its forward done once, outside the timing)."""
    leaves = [x.detach().requires_grad_() for x in (q, k, v)]
    with _backend(backend):
        out = F.scaled_dot_product_attention(*leaves, **options)
    return lambda: torch.autograd.grad(out, leaves, do, retain_graph=True)


def _sdpa_training(backend: SDPBackend | None, q, k, v, do, options):
    leaves = [x.detach().requires_grad_() for x in (q, k, v)]

    def run():
        with _backend(backend):
            out = F.scaled_dot_product_attention(*leaves, **options)
        return torch.autograd.grad(out, leaves, do)

    return run


def _measure(make, *args):
    try:
        return median_ms(make(*args))
    except Exception as e:  # a backend the GPU or torch build lacks
        return f"n/a ({type(e).__name__})"


def backward_table(dtype: torch.dtype) -> None:
    rows = []
    for shape, kind in BACKWARD_CASES:
        b, h, s, d = shape
        causal = kind in ("causal", "gqa")
        h_kv = h // GQA_GROUP if kind == "gqa" else h
        q, do = (torch.randn(b, h, s, d, device=DEVICE, dtype=dtype) for _ in range(2))
        k, v = (torch.randn(b, h_kv, s, d, device=DEVICE, dtype=dtype) for _ in range(2))
        scale = d**-0.5
        options = {"is_causal": causal, **({"enable_gqa": True} if h_kv != h else {})}
        wide = [x.double().requires_grad_() for x in (q, k, v)]
        out = F.scaled_dot_product_attention(*wide, **options)
        want = torch.autograd.grad(out, wide, do.double())
        o, lse = out.detach().to(dtype), _logsumexp(q, k, scale, causal)
        print(f"# backward {dtype} {shape} {kind}: compiling", flush=True)
        got = attention_backward(q, k, v, o, lse, do, scale, causal=causal)
        for name, g, w in zip(("dq", "dk", "dv"), got, want, strict=True):
            check_close(f"tinyton backward {shape} {kind} {name}", g, w, tol=3e-2)
        times = {
            "tinyton": median_ms(lambda: attention_backward(q, k, v, o, lse, do, scale, causal=causal)),
            "SDPA default": peer(_measure, _sdpa_backward, None, q, k, v, do, options),
            "SDPA flash": peer(_measure, _sdpa_backward, SDPBackend.FLASH_ATTENTION, q, k, v, do, options),
            "SDPA cuDNN": peer(_measure, _sdpa_backward, SDPBackend.CUDNN_ATTENTION, q, k, v, do, options),
        }
        flops = 2.5 * 4 * b * h * s * s * d * (0.5 if causal else 1.0)
        figures = {n: (flops / (t * 1e-3) / 1e12 if isinstance(t, float) else t) for n, t in times.items()}
        best = max((f for n, f in figures.items() if n.startswith("SDPA") and isinstance(f, float)), default=None)
        ratios = [f"{100 * figures['tinyton'] / f:.0f}%" if isinstance(f, float) else "n/a"
                  for f in (figures["SDPA default"], best)]
        rows.append([f"{shape} {kind}", *figures.values(), *ratios, 3])
        print(f"# {rows[-1]}", flush=True)
    print_table(f"Attention backward, {str(dtype).split('.')[-1]} (TFLOPS, from the saved o and logsumexp)",
                ["(B, H, S, D)", "tinyton", "SDPA default", "SDPA flash", "SDPA cuDNN", "tinyton / SDPA default",
                 "tinyton / best SDPA", "launches"], rows)


def training_table(dtype: torch.dtype) -> None:
    """The textbook forward + backward as one array program (causal) against SDPA's forward + backward."""
    rows = []
    for shape, kind in BACKWARD_CASES:
        if kind != "causal":
            continue
        b, h, s, d = shape
        q, k, v, do = (torch.randn(shape, device=DEVICE, dtype=dtype) for _ in range(4))
        scale = d**-0.5
        program = training_step.compile(q, k, v, do, scale)
        wide = [x.double().requires_grad_() for x in (q, k, v)]
        out = F.scaled_dot_product_attention(*wide, is_causal=True)
        want = (out, *torch.autograd.grad(out, wide, do.double()))
        for name, g, w in zip(("o", "dq", "dk", "dv"), program(q, k, v, do, scale), want, strict=True):
            check_close(f"tinyton training step {shape} {name}", g, w.detach(), tol=3e-2)
        times = {
            "tinyton": median_ms(lambda: program(q, k, v, do, scale)),
            "SDPA default": peer(_measure, _sdpa_training, None, q, k, v, do, {"is_causal": True}),
            "SDPA flash": peer(_measure, _sdpa_training, SDPBackend.FLASH_ATTENTION, q, k, v, do, {"is_causal": True}),
            "SDPA cuDNN": peer(_measure, _sdpa_training, SDPBackend.CUDNN_ATTENTION, q, k, v, do, {"is_causal": True}),
        }
        flops = 3.5 * 4 * b * h * s * s * d * 0.5
        figures = {n: (flops / (t * 1e-3) / 1e12 if isinstance(t, float) else t) for n, t in times.items()}
        rows.append([f"{shape} causal", *figures.values(), program.num_launches])
        print(f"# {rows[-1]}", flush=True)
    print_table(f"Attention forward + backward as one array program, {str(dtype).split('.')[-1]} (TFLOPS)",
                ["(B, H, S, D)", "tinyton", "SDPA default", "SDPA flash", "SDPA cuDNN", "launches"], rows)
