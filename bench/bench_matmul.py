"""Issue 6 benchmark: fp16 matmul TFLOPS of tinyton's tensor-core `tt.dot` next to cuBLAS and Triton.

    python bench/bench_matmul.py            # on a GPU host with torch and Triton; prints a Markdown table
    python bench/bench_matmul.py 4096 16x4096x4096   # only these rows (M=N=K, or MxNxK)
    TINYTON_BENCH_CONFIGS=all python bench/bench_matmul.py 4096   # also print every configuration's TFLOPS

A hand-written tinyton kernel in Triton's style (grouped program order for L2 reuse, f32 accumulator, fp16
output) runs at each shape with the best of a few tile configurations (picked per shape, time of the best
shown), next to `torch.matmul` (cuBLAS) and Triton's tutorial matmul (autotuned over the same kind of set).
"""

from __future__ import annotations

import os
import sys
import time

import torch

import tinyton as tt
from common import check_close, median_ms, print_table
import triton_reference


@tt.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    BLOCK_M: tt.constexpr, BLOCK_N: tt.constexpr, BLOCK_K: tt.constexpr, GROUP_M: tt.constexpr,
):
    pid = tt.program_id(0)
    num_pid_m = (M + BLOCK_M - 1) // BLOCK_M
    num_pid_n = (N + BLOCK_N - 1) // BLOCK_N
    in_group = GROUP_M * num_pid_n
    first_m = pid // in_group * GROUP_M
    group_m = tt.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + pid % in_group % group_m
    pid_n = pid % in_group // group_m
    rows = pid_m * BLOCK_M + tt.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tt.arange(0, BLOCK_N)
    ks = tt.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rows[:, None] * K + ks[None, :]
    b_ptrs = b_ptr + ks[:, None] * N + cols[None, :]
    acc = tt.zeros((BLOCK_M, BLOCK_N), tt.float32)
    for k in range(0, K, BLOCK_K):
        a = tt.load(a_ptrs, mask=(rows[:, None] < M) & (k + ks[None, :] < K), other=0.0)
        b = tt.load(b_ptrs, mask=(k + ks[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc += tt.dot(a, b)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * N
    c = acc.to(tt.float16)
    tt.store(c_ptr + rows[:, None] * N + cols[None, :], c, mask=(rows[:, None] < M) & (cols[None, :] < N))


CONFIGS = [  # (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages)
    (128, 256, 64, 8, 3),
    (256, 128, 64, 8, 3),
    (128, 256, 32, 8, 4),
    (128, 128, 64, 8, 4),
    (128, 128, 64, 4, 4),
    (128, 128, 32, 8, 4),
    (128, 128, 32, 4, 4),
    (128, 64, 64, 4, 4),
    (64, 128, 64, 4, 4),
    (64, 64, 32, 4, 4),
    (16, 64, 64, 4, 4),
]


def tinyton_matmul(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, config: tuple[int, ...]) -> None:
    (m, k), (_, n) = a.shape, b.shape
    bm, bn, bk, warps, stages = config
    grid = (tt.cdiv(m, bm) * tt.cdiv(n, bn),)
    matmul_kernel[grid](a, b, c, m, n, k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, num_warps=warps,
                        num_stages=stages)


def tflops(m: int, n: int, k: int, ms: float) -> float:
    return 2 * m * n * k / (ms * 1e-3) / 1e12


def best_tinyton(a: torch.Tensor, b: torch.Tensor, want: torch.Tensor) -> tuple[float, tuple[int, ...]]:
    """The fastest configuration that fits the shape (each checked against `want` first)."""
    (m, _), (_, n) = a.shape, b.shape
    best: tuple[float, tuple[int, ...]] = (float("inf"), ())
    for config in CONFIGS:
        if config[0] > max(16, m) or config[1] > n:
            continue
        c = torch.full_like(want, float("nan"))
        tinyton_matmul(a, b, c, config)
        check_close(f"tinyton {config}", c, want, tol=1e-2)
        ms = median_ms(lambda config=config, c=c: tinyton_matmul(a, b, c, config))
        if os.environ.get("TINYTON_BENCH_CONFIGS") == "all":
            print(f"  {m}x{n}x{a.shape[1]} {config}: {tflops(m, n, a.shape[1], ms):.1f} TFLOPS", flush=True)
        best = min(best, (ms, config))
    return best


def row(m: int, n: int, k: int) -> list[object]:
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    want = torch.matmul(a, b)
    c_triton = torch.empty_like(want)
    triton_reference.matmul(a, b, c_triton)
    check_close("triton", c_triton, want, tol=1e-2)
    ms_tt, config = best_tinyton(a, b, want)
    ms_cublas = median_ms(lambda: torch.matmul(a, b))
    ms_triton = median_ms(lambda: triton_reference.matmul(a, b, c_triton))
    t_tt, t_cublas, t_triton = (tflops(m, n, k, ms) for ms in (ms_tt, ms_cublas, ms_triton))
    shape = f"{m}x{n}x{k}"
    return [shape, t_tt, t_cublas, t_triton, f"{100 * t_tt / t_cublas:.0f}%", f"{100 * t_tt / t_triton:.0f}%",
            "x".join(map(str, config[:3])) + f" w{config[3]} s{config[4]}"]


SHAPES = [(s, s, s) for s in (1024, 2048, 4096, 8192)] + [(16, 4096, 4096), (4096, 14336, 4096)]


def main(argv: list[str]) -> None:
    device = torch.cuda.get_device_name()
    print(f"device: {device}; torch {torch.__version__}; date {time.strftime('%Y-%m-%d')}\n")
    shapes = [tuple(int(d) for d in s.split("x")) * (3 if "x" not in s else 1) for s in argv] or SHAPES
    print_table(
        "fp16 matmul, f32 accumulate (TFLOPS, median; tinyton: best of its configurations)",
        ["M x N x K", "tinyton", "cuBLAS", "Triton", "tinyton/cuBLAS", "tinyton/Triton", "tinyton config"],
        [row(*shape) for shape in shapes],
    )


if __name__ == "__main__":
    main(sys.argv[1:])
