"""Issue 22's matmul suite: 24 shapes in the spellings models use, tinyton against cuBLAS and Triton in one run.

    python bench/bench_matmul_suite.py                          # bf16 and fp16, then fp8 where torch takes it
    python bench/bench_matmul_suite.py --dtypes bf16 --only 8B  # rows whose name contains "8B"

Per shape: tinyton's array program in the shape's spelling (`a @ b` for the squares, odd and batched shapes,
`x @ w.T` for the layers of Llama-3-8B and -70B, w stored [N, K] as torch's weights are, and a 25th row of 4096^3
as `a.T @ b`, a stored [K, M] as a weight gradient's is; tiles tuned on first use), tinyton's hand-written kernel on tensor descriptors (bench_matmul.py's, one configuration per shape class,
on b = w.T for the layers), cuBLAS in the same spelling (`torch.matmul`, `F.linear`), and Triton's persistent TMA
kernel (triton_reference.py, the best of its configurations, on w = b.T for the others). fp8: e4m3 `x @ w.T` with
per-tensor scales and a bf16 result, `tt.scaled_matmul` against `torch._scaled_mm` (whose dimensions must be
multiples of 16). Every result is checked against torch's before it is timed. The last lines give the geomean
and the worst row of the array program over cuBLAS, per dtype.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

import tinyton as tt

from bench_matmul import CONFIGS, linear_program, matmul_program, scaled_program, tflops, tinyton_matmul
from common import DEVICE, check_close, device_name, median_ms, peer, print_table
import triton_reference

LLAMA_LAYERS = {  # (N, K) of x @ w.T
    "Llama-3-8B qkv": (6144, 4096), "Llama-3-8B gate/up": (14336, 4096), "Llama-3-8B down": (4096, 14336),
    "Llama-3-70B qkv": (10240, 8192), "Llama-3-70B down": (8192, 28672),
}
SUITE: list[tuple[str, int, int, int, int]] = [  # (name, batch, M, N, K); batch 0: a 2-D product
    *((f"square {s}", 0, s, s, s) for s in (512, 1024, 2048, 4096, 8192)),
    *((f"Llama-3-8B gate/up M={m}", 0, m, *LLAMA_LAYERS["Llama-3-8B gate/up"]) for m in (1, 16, 128, 4096)),
    *((f"Llama-3-70B down M={m}", 0, m, *LLAMA_LAYERS["Llama-3-70B down"]) for m in (1, 16, 128, 4096)),
    ("Llama-3-8B qkv M=128", 0, 128, *LLAMA_LAYERS["Llama-3-8B qkv"]),
    ("Llama-3-8B qkv M=4096", 0, 4096, *LLAMA_LAYERS["Llama-3-8B qkv"]),
    ("Llama-3-8B down M=16", 0, 16, *LLAMA_LAYERS["Llama-3-8B down"]),
    ("Llama-3-70B qkv M=16", 0, 16, *LLAMA_LAYERS["Llama-3-70B qkv"]),
    ("Llama-3-70B qkv M=4096", 0, 4096, *LLAMA_LAYERS["Llama-3-70B qkv"]),
    ("odd 3000x5000x4000", 0, 3000, 5000, 4000),
    ("odd 1000x1000x1000", 0, 1000, 1000, 1000),
    ("odd 4095x4097x4096", 0, 4095, 4097, 4096),
    ("K-heavy 2048x2048x16384", 0, 2048, 2048, 16384),
    ("batched 8x1024x1024x1024", 8, 1024, 1024, 1024),
    ("batched 32x512x512x128", 32, 512, 512, 128),
    ("square 4096, a.T @ b", 0, 4096, 4096, 4096),  # the weight-gradient spelling: A stored K x M
]
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def _linear(name: str) -> bool:
    return name.startswith("Llama")


def _spelling(name: str) -> str:
    return "x @ w.T" if _linear(name) else "a.T @ b" if "a.T @ b" in name else "a @ b"


@tt.jit
def transposed_program(at, b):
    """`a.T @ b` with a stored [K, M] (a weight gradient `x.T @ dy`)."""
    return at.T @ b


def _best(run: Callable[[tuple], None], configs: list[tuple], check: Callable[[tuple], object]) -> float:
    """The least median time over `configs` (each checked first); NaN when none runs (a shape it refuses)."""
    best = math.nan
    for config in configs:
        try:
            check(config)
        except Exception as e:  # noqa: BLE001 - a configuration the kernel cannot take is reported, not fatal
            print(f"    skipped {config}: {type(e).__name__}: {str(e).splitlines()[0][:120]}", flush=True)
            continue
        ms = median_ms(lambda config=config: run(config))
        best = ms if math.isnan(best) else min(best, ms)
    return best


def row(dtype: str, name: str, batch: int, m: int, n: int, k: int) -> list[object]:
    dt = DTYPES[dtype]
    lead = (batch,) if batch else ()
    a = torch.randn(*lead, m, k, device=DEVICE, dtype=dt)
    if _linear(name):
        w = torch.randn(n, k, device=DEVICE, dtype=dt) / k**0.5
        b = w.T.contiguous()
        ours, cublas = (lambda: linear_program(a, w)), (lambda: F.linear(a, w))
    else:
        b = torch.randn(*lead, k, n, device=DEVICE, dtype=dt) / k**0.5
        w = b.mT.contiguous()
        ours, cublas = (lambda: matmul_program(a, b)), (lambda: torch.matmul(a, b))
        if _spelling(name) == "a.T @ b":
            at = a.T.contiguous()
            ours, cublas = (lambda: transposed_program(at, b)), (lambda: torch.matmul(at.T, b))
    want = cublas()
    check_close(f"tinyton {name}", ours(), want, tol=2e-2)
    t_ours = tflops(m, n, k * max(batch, 1), median_ms(ours))
    t_cublas = tflops(m, n, k * max(batch, 1), peer(median_ms, cublas))
    t_kernel = t_triton = math.nan
    if not batch and _spelling(name) != "a.T @ b":  # (the kernel columns read A row-major)
        c = torch.empty(m, n, device=DEVICE, dtype=dt)
        config = CONFIGS["decode" if m <= 16 else "16-bit"][0]

        def kernel(config: tuple[int, ...] = config) -> None:
            tinyton_matmul(a, b, c, config, "ieee", desc=True)

        def checked(run: Callable[[tuple], None]) -> Callable[[tuple], object]:
            return lambda config: (run(config), check_close(f"{name} {config}", c, want, tol=2e-2))

        t_kernel = tflops(m, n, k, _best(kernel, [config], checked(kernel)))
        persistent = lambda config: triton_reference.persistent_linear(a, w, c, config)  # noqa: E731
        t_triton = tflops(m, n, k, peer(_best, persistent, triton_reference.PERSISTENT_CONFIGS, checked(persistent)))
    return [dtype, name, _spelling(name), t_ours, t_kernel, t_cublas, t_triton,
            f"{100 * t_ours / t_cublas:.0f}%"]


def fp8_row(name: str, m: int, n: int, k: int) -> list[object]:
    a = torch.randn(m, k, device=DEVICE).to(torch.float8_e4m3fn)
    w = (torch.randn(n, k, device=DEVICE) / 4).to(torch.float8_e4m3fn)
    scale_a, scale_b = torch.tensor(0.5, device=DEVICE), torch.tensor(2.0, device=DEVICE)
    scaled_mm = lambda: torch._scaled_mm(a, w.T, scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16)  # noqa: E731
    ours = lambda: scaled_program(a, w, scale_a, scale_b)  # noqa: E731
    check_close(f"tinyton fp8 {name}", ours(), scaled_mm(), tol=2e-2)
    t_ours, t_cublas = tflops(m, n, k, median_ms(ours)), tflops(m, n, k, peer(median_ms, scaled_mm))
    return ["fp8", name, "x @ w.T, scaled", t_ours, math.nan, t_cublas, math.nan, f"{100 * t_ours / t_cublas:.0f}%"]


def summary(rows: list[list[object]]) -> None:
    for dtype in dict.fromkeys(r[0] for r in rows):
        ratios = [(r[3] / r[5], r[1]) for r in rows if r[0] == dtype and r[5] > 0]
        geomean = math.exp(sum(math.log(x) for x, _ in ratios) / len(ratios))
        worst = min(ratios)
        print(f"{dtype}: tinyton @ / cuBLAS geomean {100 * geomean:.0f}% over {len(ratios)} rows; "
              f"worst {100 * worst[0]:.0f}% ({worst[1]})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtypes", default="bf16,fp16,fp8")
    parser.add_argument("--only", default="", help="rows whose name contains this")
    args = parser.parse_args()
    print(f"device: {device_name()}; torch {torch.__version__}; date {time.strftime('%Y-%m-%d')}\n", flush=True)
    rows = []
    for dtype in args.dtypes.split(","):
        for name, batch, m, n, k in SUITE:
            if args.only not in name:
                continue
            if dtype == "fp8":
                if batch or m % 16 or _spelling(name) == "a.T @ b":
                    continue
                rows.append(fp8_row(name, m, n, k))
            else:
                rows.append(row(dtype, name, batch, m, n, k))
            print("  " + " | ".join(f"{c:.1f}" if isinstance(c, float) else str(c) for c in rows[-1]), flush=True)
    print_table(
        "matmul suite (TFLOPS, median of do_bench; kernel: tinyton's hand-written kernel on descriptors; Triton: "
        "its persistent TMA kernel; fp8: the cuBLAS column is torch._scaled_mm)",
        ["dtype", "shape", "spelling", "tinyton", "tinyton kernel", "cuBLAS", "Triton persistent", "tinyton/cuBLAS"],
        rows,
    )
    summary(rows)


if __name__ == "__main__":
    main()
