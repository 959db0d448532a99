"""The vendor anchors of probe_matmul_tiles.py's blocks, in bf16: cuBLAS `F.linear`, SwiGLU and GELU-tanh MLP
epilogues in torch eager and torch.compile (CUDA events, median of 50 after a warm-up), at 4096^3 and at
Qwen2.5-7B's gate/up projection over 512 tokens. Run it in the same call as the probe.

    python bench/probes/block_anchors.py
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

SHAPES = ((4096, 4096, 4096), (512, 18944, 3584))


def median_us(fn: Callable[[], object], reps: int = 50) -> float:
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for start, end in events:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return sorted(start.elapsed_time(end) for start, end in events)[reps // 2] * 1e3


def main() -> None:
    for m, n, k in SHAPES:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w1, w3 = (torch.randn(n, k, device="cuda", dtype=torch.bfloat16) * 0.05 for _ in range(2))
        b = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        tflop = 2 * m * n * k / 1e12
        linear = median_us(lambda: F.linear(x, w1))
        swiglu = lambda: F.silu(F.linear(x, w1)) * F.linear(x, w3)  # noqa: E731
        gelu = lambda: F.gelu(F.linear(x, w1, b), approximate="tanh")  # noqa: E731
        swiglu_compiled = median_us(torch.compile(swiglu))
        swiglu_tflops = 2 * tflop / swiglu_compiled * 1e6
        print(f"{m}x{n}x{k} bf16: cuBLAS x @ w.T {linear:.1f} µs ({tflop / linear * 1e6:.0f} TFLOPS) | SwiGLU eager "
              f"{median_us(swiglu):.1f}, compile {swiglu_compiled:.1f} µs ({swiglu_tflops:.0f} TFLOPS) | "
              f"GELU eager {median_us(gelu):.1f}, compile {median_us(torch.compile(gelu)):.1f} µs", flush=True)


if __name__ == "__main__":
    main()
