"""Issue 7 benchmark: the naive attention array program, rewritten into one flash-attention kernel.

    python bench/bench_attention.py         # on a GPU host with torch and Triton; prints Markdown tables

TFLOPS (4·B·H·S_q·S_kv·D, halved when causal) of tinyton's rewritten program next to torch's
scaled_dot_product_attention (flash and cuDNN backends where present), a Triton flash-attention kernel
(bench/triton_attention.py) and tinyton unfused (the same program with fuse=False, which builds the S x S
scores), all on the same tensors; then one decode step (S_q = 1 against a KV cache) in µs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import tinyton as tt
import triton_attention
from common import check_close, median_ms, print_table

SHAPES = [((1, 28, 2048, 128), True), ((4, 16, 4096, 64), False), ((8, 32, 1024, 128), True)]
DECODE = (8, 32, 4096, 128)


@tt.jit
def attention(q, k, v, scale):
    s = (q @ tt.swapaxes(k, -1, -2)) * scale
    e = tt.exp(s - tt.max(s, axis=-1, keepdims=True))
    return (e / tt.sum(e, axis=-1, keepdims=True)) @ v


@tt.jit
def causal_attention(q, k, v, scale):
    n = q.shape[-2]
    keep = tt.arange(n).reshape(n, 1) >= tt.arange(n)
    s = tt.where(keep, (q @ tt.swapaxes(k, -1, -2)) * scale, float("-inf"))
    e = tt.exp(s - tt.max(s, axis=-1, keepdims=True))
    return (e / tt.sum(e, axis=-1, keepdims=True)) @ v


def sdpa(backend: SDPBackend):
    def run(q, k, v, causal):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return run


def tflops(shape: tuple[int, ...], s_kv: int, causal: bool, ms: float) -> float:
    b, h, s_q, d = shape
    flops = 4 * b * h * s_q * s_kv * d * (0.5 if causal else 1.0)
    return flops / (ms * 1e-3) / 1e12


def measure(fn, *args) -> float | str:
    try:
        return median_ms(lambda: fn(*args))
    except Exception as e:  # a backend the GPU or torch build lacks
        return f"n/a ({type(e).__name__})"


def main() -> None:
    device = torch.cuda.get_device_name()
    print(f"device: {device}; torch {torch.__version__}\n")
    for dtype in (torch.float16, torch.bfloat16):
        rows = []
        for shape, causal in SHAPES:
            b, h, s, d = shape
            q, k, v = (torch.randn(shape, device="cuda", dtype=dtype) for _ in range(3))
            scale = d**-0.5
            program = causal_attention if causal else attention
            reference = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
            print(f"# {dtype} {shape} causal={causal}: compiling", flush=True)
            got = program(q, k, v, scale)
            check_close(f"tinyton {shape}", got, reference, tol=2e-2)
            compiled = program.compile(q, k, v, scale)
            launches = compiled.num_launches
            candidates = {
                "tinyton": lambda: program(q, k, v, scale),
                "SDPA flash": lambda: sdpa(SDPBackend.FLASH_ATTENTION)(q, k, v, causal),
                "SDPA cuDNN": lambda: sdpa(SDPBackend.CUDNN_ATTENTION)(q, k, v, causal),
                "Triton": lambda: triton_attention.attention(q, k, v, causal),
            }
            check_close(f"Triton {shape}", candidates["Triton"](), reference, tol=2e-2)
            times = {name: measure(fn) for name, fn in candidates.items()}
            if b * h * s * s * 2 <= 4 << 30:  # unfused materialises the scores: only where they fit
                unfused = program.compile(q, k, v, scale, fuse=False)
                times["tinyton unfused"] = measure(unfused, q, k, v, scale)
            else:
                times["tinyton unfused"] = "skipped (S x S too large)"
            figures = {n: (tflops(shape, s, causal, t) if isinstance(t, float) else t) for n, t in times.items()}
            best_sdpa = max((f for n, f in figures.items() if n.startswith("SDPA") and isinstance(f, float)), default=None)
            ratio = f"{100 * figures['tinyton'] / best_sdpa:.0f}%" if best_sdpa else "n/a"
            rows.append([f"{shape} {'causal' if causal else 'full'}", *figures.values(), ratio, launches])
            print(f"# {rows[-1]}", flush=True)
        print_table(
            f"Attention forward, {str(dtype).split('.')[-1]} (TFLOPS)",
            ["(B, H, S, D)", "tinyton", "SDPA flash", "SDPA cuDNN", "Triton", "tinyton unfused", "tinyton / best SDPA", "launches"],
            rows,
        )
    b, h, s_kv, d = DECODE
    q = torch.randn(b, h, 1, d, device="cuda", dtype=torch.float16)
    k, v = (torch.randn(b, h, s_kv, d, device="cuda", dtype=torch.float16) for _ in range(2))
    check_close("decode", attention(q, k, v, d**-0.5), F.scaled_dot_product_attention(q.double(), k.double(), v.double()), tol=2e-2)
    decode = {
        "tinyton": measure(attention, q, k, v, d**-0.5),
        "SDPA (default backend)": measure(lambda: F.scaled_dot_product_attention(q, k, v)),
        "Triton": measure(lambda: triton_attention.attention(q, k, v, False)),
    }
    print_table(
        f"Decode step (B={b}, H={h}, S_kv={s_kv}, D={d}, fp16), µs",
        list(decode),
        [[t * 1e3 if isinstance(t, float) else t for t in decode.values()]],
    )


if __name__ == "__main__":
    main()
