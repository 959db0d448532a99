"""Block sizes of the flash-attention kernel, swept on the GPU (fp16): which (BM, BN, warps, stages) is fastest
per benchmark shape. Each candidate replaces the compiler's block chooser and compiles a fresh program.
(Programs tune their blocks themselves on first use: tinyton/compiler/attention_tuning.py.)

    python bench/probes/sweep_attention.py        # prints one Markdown table
"""

from __future__ import annotations

import time

import torch

import tinyton as tt
import tinyton.compiler.program as compiler
from tinyton.lowering.fusion.attention_blocks import Blocks
import bench_path

bench_path.add()  # bench/ on sys.path, for the imports below

from bench_attention import CASES, DECODES, tflops
from common import check_close, median_ms, print_table

PREFILL = [(128, 64, 8, 3, 2), (128, 128, 8, 2, 2), (128, 32, 8, 3, 2), (64, 64, 4, 3, 2), (128, 64, 8, 2, 2),
           (64, 128, 4, 2, 2)]
DECODING = [(16, 64, 4, 3, 2), (16, 128, 4, 3, 2), (64, 64, 4, 3, 2), (16, 32, 4, 4, 2)]


def program(causal: bool):
    """A fresh array program (the frontend caches compiled programs per function)."""
    if causal:
        def causal_attention(q, k, v, scale):
            n = q.shape[-2]
            keep = tt.arange(n).reshape(n, 1) >= tt.arange(n)
            s = tt.where(keep, (q @ tt.swapaxes(k, -1, -2)) * scale, float("-inf"))
            e = tt.exp(s - tt.max(s, axis=-1, keepdims=True))
            return (e / tt.sum(e, axis=-1, keepdims=True)) @ v
        return tt.jit(causal_attention)

    def attention(q, k, v, scale):
        s = (q @ tt.swapaxes(k, -1, -2)) * scale
        e = tt.exp(s - tt.max(s, axis=-1, keepdims=True))
        return (e / tt.sum(e, axis=-1, keepdims=True)) @ v
    return tt.jit(attention)


def run(shape, s_kv, causal, candidates):
    q = torch.randn(shape, device="cuda", dtype=torch.float16)
    k, v = (torch.randn((*shape[:2], s_kv, shape[3]), device="cuda", dtype=torch.float16) for _ in range(2))
    reference = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
    rows = []
    for bm, bn, warps, stages, masked in candidates:
        compiler.attention_blocks = lambda _, c=(bm, bn, warps, stages, masked): Blocks(*c)
        fn = program(causal)
        try:
            check_close("sweep", fn(q, k, v, shape[3] ** -0.5), reference, tol=2e-2)
            ms = median_ms(lambda fn=fn: fn(q, k, v, shape[3] ** -0.5), warmup_ms=20, rep_ms=60)
            figure = f"{tflops(shape, s_kv, causal, ms):.1f} TFLOPS, {ms * 1e3:.0f} µs"
        except Exception as e:  # noqa: BLE001 - a configuration that does not fit or is wrong
            figure = f"failed: {type(e).__name__}: {str(e)[:80]}"
        rows.append([f"{shape} s_kv={s_kv} {'causal' if causal else 'full'}", f"{bm}x{bn}, {warps} warps, {stages}/{masked} stages", figure])
        print("#", rows[-1], flush=True)
    return rows


def main() -> None:
    began = time.perf_counter()
    rows = []
    for shape, kind in CASES:
        if kind in ("full", "causal"):
            rows += run(shape, shape[2], kind == "causal", PREFILL)
    b, h, s_kv, d = DECODES[0]
    rows += run((b, h, 1, d), s_kv, False, DECODING)
    print_table(f"Attention block sizes, fp16 ({torch.cuda.get_device_name()}, {time.perf_counter() - began:.0f} s)",
                ["problem", "blocks", "speed"], rows)


if __name__ == "__main__":
    main()
