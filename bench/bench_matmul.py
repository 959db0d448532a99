"""Issue 6 benchmark: matmul TFLOPS of tinyton's tensor-core `tt.dot` next to cuBLAS and Triton.

    python bench/bench_matmul.py                  # on a GPU host with torch and Triton; prints Markdown tables
    python bench/bench_matmul.py fp16:4096 bf16:16x4096x4096   # only these rows (dtype:M=N=K or dtype:MxNxK)
    TINYTON_BENCH_CONFIGS=all python bench/bench_matmul.py fp16:4096   # also print every configuration's TFLOPS

Per row: a hand-written tinyton kernel in Triton's style, the same kernel reading A and B through host
tensor descriptors (TMA on Hopper; `TINYTON_TMA=0`: cp.async, for comparison) (grouped program order for L2 reuse, f32
accumulator, output in the operands' dtype) with the best of a few tile configurations (picked per shape,
time of the best shown), the array program `a @ b` and its linear-layer spelling `a @ w.T` (w stored [N, K];
tiles tuned on first use), `torch.matmul` and `F.linear(a, w)` (cuBLAS) and Triton's tutorial matmul (autotuned over the same kind of set). fp16 and bf16 operands; tf32
is fp32 operands with `input_precision="tf32"` (torch with `allow_tf32`, Triton's default for fp32 dots);
the array program's fp32 `@` is exact (NumPy's semantics), so the tf32 row leaves it out.

fp8 rows (`fp8:4096`): e4m3 `x @ w.T` with per-tensor scales and a bf16 result, as `torch._scaled_mm` takes
it (w [N, K] row-major: B column-major); the kernel is `fp8_kernel` (wgmma e4m3 on Hopper, scales in the
epilogue), the array program `tt.scaled_matmul`, and the cuBLAS column is `torch._scaled_mm` (Triton: none).
The kernel's `tl.dot` keeps Triton's default, the whole K in one wgmma chain (~13-bit sums); the array program
and `torch._scaled_mm` (without `use_fast_accum`) add partial sums in f32, the array program after every wgmma.
"""

from __future__ import annotations

import os
import sys
import time

import torch

import tinyton as tt
from tinyton.tools.tensor_descriptor import TensorDescriptor
from common import DEVICE, ONESHOT, check_close, device_name, median_ms, peer, pick, print_table
import triton_reference


@tt.jit
def grouped_tile(M, N, BLOCK_M: tt.constexpr, BLOCK_N: tt.constexpr, GROUP_M: tt.constexpr):
    """This program's (tile row, tile column): GROUP_M tile rows walk the columns together (L2 reuse)."""
    pid = tt.program_id(0)
    num_pid_m = (M + BLOCK_M - 1) // BLOCK_M
    num_pid_n = (N + BLOCK_N - 1) // BLOCK_N
    in_group = GROUP_M * num_pid_n
    first_m = pid // in_group * GROUP_M
    group_m = tt.minimum(num_pid_m - first_m, GROUP_M)
    return first_m + pid % in_group % group_m, pid % in_group // group_m


@tt.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K,
    BLOCK_M: tt.constexpr, BLOCK_N: tt.constexpr, BLOCK_K: tt.constexpr, GROUP_M: tt.constexpr,
    PRECISION: tt.constexpr, OUT: tt.constexpr,
):
    pid_m, pid_n = grouped_tile(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rows = pid_m * BLOCK_M + tt.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tt.arange(0, BLOCK_N)
    ks = tt.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rows[:, None] * K + ks[None, :]
    b_ptrs = b_ptr + ks[:, None] * N + cols[None, :]
    acc = tt.zeros((BLOCK_M, BLOCK_N), tt.float32)
    for k in range(0, K, BLOCK_K):
        a = tt.load(a_ptrs, mask=(rows[:, None] < M) & (k + ks[None, :] < K), other=0.0)
        b = tt.load(b_ptrs, mask=(k + ks[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc += tt.dot(a, b, input_precision=PRECISION)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * N
    c = acc.to(OUT)
    tt.store(c_ptr + rows[:, None] * N + cols[None, :], c, mask=(rows[:, None] < M) & (cols[None, :] < N))


@tt.jit
def matmul_desc_kernel(
    a_desc, b_desc, c_ptr, M, N, K,
    BLOCK_M: tt.constexpr, BLOCK_N: tt.constexpr, BLOCK_K: tt.constexpr, GROUP_M: tt.constexpr,
    PRECISION: tt.constexpr, OUT: tt.constexpr,
):
    """`matmul_kernel` reading A and B through host tensor descriptors (TMA on Hopper)."""
    pid_m, pid_n = grouped_tile(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    acc = tt.zeros((BLOCK_M, BLOCK_N), tt.float32)
    for k in range(0, K, BLOCK_K):
        a = a_desc.load([pid_m * BLOCK_M, k])
        b = b_desc.load([k, pid_n * BLOCK_N])
        acc += tt.dot(a, b, input_precision=PRECISION)
    rows = pid_m * BLOCK_M + tt.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tt.arange(0, BLOCK_N)
    tt.store(c_ptr + rows[:, None] * N + cols[None, :], acc.to(OUT), mask=(rows[:, None] < M) & (cols[None, :] < N))


@tt.jit
def fp8_kernel(
    a_ptr, w_ptr, c_ptr, scale, M, N, K,
    BLOCK_M: tt.constexpr, BLOCK_N: tt.constexpr, BLOCK_K: tt.constexpr, GROUP_M: tt.constexpr,
):
    """bf16 `scale * (a @ w.T)` for float8 a [M, K] and w [N, K] (both K-major: wgmma's 8-bit operands)."""
    pid_m, pid_n = grouped_tile(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rows = pid_m * BLOCK_M + tt.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tt.arange(0, BLOCK_N)
    ks = tt.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rows[:, None] * K + ks[None, :]
    w_ptrs = w_ptr + cols[:, None] * K + ks[None, :]
    acc = tt.zeros((BLOCK_M, BLOCK_N), tt.float32)
    for k in range(0, K, BLOCK_K):
        a = tt.load(a_ptrs, mask=(rows[:, None] < M) & (k + ks[None, :] < K), other=0.0)
        w = tt.load(w_ptrs, mask=(cols[:, None] < N) & (k + ks[None, :] < K), other=0.0)
        acc += tt.dot(a, tt.trans(w))
        a_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    c = (acc * scale).to(tt.bfloat16)
    tt.store(c_ptr + rows[:, None] * N + cols[None, :], c, mask=(rows[:, None] < M) & (cols[None, :] < N))


@tt.jit
def scaled_program(a, w, scale_a, scale_b):
    return tt.scaled_matmul(a, w.T, scale_a, scale_b, out_dtype=tt.bfloat16)


CONFIGS = {  # (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages); 16-bit: wgmma on sm_90a (64-row warpgroups)
    "16-bit": [(128, 256, 64, 8, 3), (256, 128, 64, 8, 3), (128, 128, 64, 8, 5), (128, 128, 64, 4, 4)],
    "decode": [(64, 64, 64, 4, 4), (16, 64, 64, 4, 4), (64, 128, 64, 4, 4)],
    "tf32": [(128, 128, 32, 8, 3), (128, 64, 32, 4, 4), (64, 128, 32, 4, 4)],
    "fp8": [(128, 256, 128, 8, 3), (256, 128, 128, 8, 3), (128, 128, 128, 8, 4), (128, 128, 128, 4, 4)],
}
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "tf32": torch.float32}
OUT_DTYPES = {torch.float16: tt.float16, torch.bfloat16: tt.bfloat16, torch.float32: tt.float32}


def tinyton_matmul(
    a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, config: tuple[int, ...], precision: str, desc: bool = False
) -> None:
    """The hand kernel, on pointers or (`desc`) on tensor descriptors of `a` and `b` (made once per config)."""
    (m, k), (_, n) = a.shape, b.shape
    bm, bn, bk, warps, stages = config
    grid = (tt.cdiv(m, bm) * tt.cdiv(n, bn),)
    kernel, x, y = matmul_kernel, a, b
    if desc:
        kernel, x, y = matmul_desc_kernel, *_descriptors(a, b, bm, bn, bk)
    kernel[grid](x, y, c, m, n, k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, PRECISION=precision,
                 OUT=OUT_DTYPES[c.dtype], num_warps=warps, num_stages=stages)


_DESCRIPTORS: dict[tuple, tuple] = {}


def _descriptors(a: torch.Tensor, b: torch.Tensor, bm: int, bn: int, bk: int) -> tuple:
    key = (a.data_ptr(), b.data_ptr(), tuple(a.shape), tuple(b.shape), bm, bn, bk)
    if key not in _DESCRIPTORS:
        _DESCRIPTORS[key] = (TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(b, [bk, bn]))
    return _DESCRIPTORS[key]


@tt.jit
def matmul_program(a, b):
    return a @ b


@tt.jit
def linear_program(x, w):
    """`x @ w.T`, the spelling of a linear layer (w stored [N, K], as torch's weights are)."""
    return x @ w.T


def tflops(m: int, n: int, k: int, ms: float) -> float:
    return 2 * m * n * k / (ms * 1e-3) / 1e12


def best_tinyton(
    a: torch.Tensor, b: torch.Tensor, want: torch.Tensor, dtype: str, desc: bool = False
) -> tuple[float, tuple[int, ...]]:
    """The fastest configuration that fits the shape (each checked against `want` first)."""
    (m, k), (_, n) = a.shape, b.shape
    precision = "tf32" if dtype == "tf32" else "ieee"
    configs = CONFIGS["tf32" if dtype == "tf32" else "decode" if m <= 16 else "16-bit"]
    best: tuple[float, tuple[int, ...]] = (float("inf"), ())
    for config in configs:
        c = torch.full_like(want, float("nan"))
        tinyton_matmul(a, b, c, config, precision, desc)
        check_close(f"tinyton {dtype} {config}{' desc' * desc}", c, want, tol=1e-2)
        ms = median_ms(lambda config=config, c=c: tinyton_matmul(a, b, c, config, precision, desc))
        if os.environ.get("TINYTON_BENCH_CONFIGS") == "all":
            print(f"  {dtype} {m}x{n}x{k} {config}{' desc' * desc}: {tflops(m, n, k, ms):.1f} TFLOPS", flush=True)
        if not best[1] or ms < best[0]:  # (a NaN time in one-shot mode keeps the first)
            best = (ms, config)
    return best


def fp8_row(m: int, n: int, k: int) -> list[object]:
    """e4m3 `a @ w.T` with per-tensor scales, bf16 out: the kernel (best config), `tt.scaled_matmul` and
    `torch._scaled_mm` (the cuBLAS column)."""
    a = torch.randn(m, k, device=DEVICE).to(torch.float8_e4m3fn)
    w = torch.randn(n, k, device=DEVICE).to(torch.float8_e4m3fn)
    scale_a, scale_b = torch.tensor(0.5, device=DEVICE), torch.tensor(2.0, device=DEVICE)
    want = (a.double() @ w.double().T).to(torch.bfloat16)
    best: tuple[float, tuple[int, ...]] = (float("inf"), ())
    for config in CONFIGS["fp8"]:
        bm, bn, bk, warps, stages = config
        c = torch.full((m, n), float("nan"), device=DEVICE, dtype=torch.bfloat16)

        def run(c=c, bm=bm, bn=bn, bk=bk, warps=warps, stages=stages) -> None:
            fp8_kernel[(tt.cdiv(m, bm) * tt.cdiv(n, bn),)](a, w, c, 1.0, m, n, k, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                                                            GROUP_M=8, num_warps=warps, num_stages=stages)

        run()
        check_close(f"tinyton fp8 {config}", c, want, tol=1e-2)
        ms = median_ms(run)
        if not best[1] or ms < best[0]:
            best = (ms, config)
    check_close("tinyton scaled_matmul", scaled_program(a, w, scale_a, scale_b), want, tol=1e-2)
    t_program = tflops(m, n, k, median_ms(lambda: scaled_program(a, w, scale_a, scale_b)))
    scaled_mm = lambda: torch._scaled_mm(a, w.T, scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16)  # noqa: E731
    if not ONESHOT:
        check_close("torch._scaled_mm", scaled_mm(), want, tol=1e-2)
    t_tt, t_cublas = tflops(m, n, k, best[0]), tflops(m, n, k, peer(median_ms, scaled_mm))
    return ["fp8", f"{m}x{n}x{k}", t_tt, "—", t_program, "—", t_cublas, "—", "—", f"{100 * t_tt / t_cublas:.0f}%", "—",
            _config(best[1]), "—"]


def row(dtype: str, m: int, n: int, k: int) -> list[object]:
    if dtype == "fp8":
        return fp8_row(m, n, k)
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    a = torch.randn(m, k, device=DEVICE, dtype=DTYPES[dtype])
    b = torch.randn(k, n, device=DEVICE, dtype=DTYPES[dtype])
    want = torch.matmul(a.double(), b.double()).to(a.dtype)
    c_triton = torch.empty_like(want)
    if not ONESHOT:
        triton_reference.matmul(a, b, c_triton)
        check_close("triton", c_triton, want, tol=1e-2)
    ms_tt, config = best_tinyton(a, b, want, dtype)
    ms_desc, config_desc = best_tinyton(a, b, want, dtype, desc=True)
    w = b.T.contiguous()
    if dtype == "tf32":
        t_program = t_linear = "—"
    else:
        check_close("tinyton a @ b", matmul_program(a, b), want, tol=1e-2)
        t_program = tflops(m, n, k, median_ms(lambda: matmul_program(a, b)))
        check_close("tinyton a @ w.T", linear_program(a, w), want, tol=1e-2)
        t_linear = tflops(m, n, k, median_ms(lambda: linear_program(a, w)))
    ms_cublas = peer(median_ms, lambda: torch.matmul(a, b))
    t_cublas_linear = tflops(m, n, k, peer(median_ms, lambda: torch.nn.functional.linear(a, w)))
    ms_triton = peer(median_ms, lambda: triton_reference.matmul(a, b, c_triton))
    t_tt, t_cublas, t_triton = (tflops(m, n, k, ms) for ms in (ms_tt, ms_cublas, ms_triton))
    return [dtype, f"{m}x{n}x{k}", t_tt, tflops(m, n, k, ms_desc), t_program, t_linear, t_cublas, t_cublas_linear,
            t_triton,
            f"{100 * t_tt / t_cublas:.0f}%", f"{100 * t_tt / t_triton:.0f}%", _config(config), _config(config_desc)]


def _config(config: tuple[int, ...]) -> str:
    return "x".join(map(str, config[:3])) + f" w{config[3]} s{config[4]}"


SHAPES = pick([(s, s, s) for s in (1024, 2048, 4096, 8192)] + [(16, 4096, 4096), (4096, 14336, 4096)], [(200, 300, 130), (5, 300, 130)])
"""One-shot: tails in every dimension of every configuration's tiles; M <= 16 takes the decode configurations."""
FP8_SHAPES = pick([(s, s, s) for s in (4096, 8192)] + [(16, 4096, 4096), (4096, 14336, 4096)], [(256, 256, 256)])
"""torch._scaled_mm takes dimensions that are multiples of 16."""
ROWS = ([(d, *s) for d in ("fp16", "bf16") for s in SHAPES] + [("tf32", *pick((4096, 4096, 4096), SHAPES[0]))]
        + [("fp8", *s) for s in FP8_SHAPES])


def parse(arg: str) -> tuple:
    dtype, _, shape = arg.partition(":")
    dims = [int(d) for d in shape.split("x")]
    return (dtype, *(dims * 3 if len(dims) == 1 else dims))


def main(argv: list[str]) -> None:
    print(f"device: {device_name()}; torch {torch.__version__}; date {time.strftime('%Y-%m-%d')}\n", flush=True)
    rows = []
    for spec in [parse(a) for a in argv] or ROWS:
        rows.append(row(*spec))
        print("  " + " | ".join(f"{c:.1f}" if isinstance(c, float) else str(c) for c in rows[-1]), flush=True)
    print_table(
        "matmul, f32 accumulate (TFLOPS, median; tinyton kernel: best of its configurations; fp8: the cuBLAS "
        "column is torch._scaled_mm, the a @ b column tt.scaled_matmul)",
        ["dtype", "M x N x K", "tinyton kernel", "kernel on descriptors", "tinyton a @ b", "tinyton a @ w.T", "cuBLAS",
         "cuBLAS a @ w.T (F.linear)", "Triton",
         "kernel/cuBLAS", "kernel/Triton", "kernel config", "descriptor kernel config"],
        rows,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
