"""The Triton kernels tinyton is compared with: one-program-per-row softmax and rmsnorm, the tutorial matmul."""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n_cols
    x = tl.load(x_ptr + row * n_cols + offsets, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * n_cols + offsets, e / tl.sum(e, axis=0), mask=mask)


@triton.jit
def _log_softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n_cols
    x = tl.load(x_ptr + row * n_cols + offsets, mask=mask, other=-float("inf")).to(tl.float32)
    s = x - tl.max(x, axis=0)
    tl.store(y_ptr + row * n_cols + offsets, s - tl.log(tl.sum(tl.exp(s), axis=0)), mask=mask)


@triton.jit
def _layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n_cols
    x = tl.load(x_ptr + row * n_cols + offsets, mask=mask, other=0.0).to(tl.float32)
    d = tl.where(mask, x - tl.sum(x, axis=0) / n_cols, 0.0)
    r = tl.rsqrt(tl.sum(d * d, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + offsets, mask=mask, other=0.0)
    b = tl.load(b_ptr + offsets, mask=mask, other=0.0)
    tl.store(y_ptr + row * n_cols + offsets, d * r * w + b, mask=mask)


@triton.jit
def _silu_gate_kernel(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(a_ptr + offsets, mask=mask).to(tl.float32)
    b = tl.load(b_ptr + offsets, mask=mask)
    tl.store(c_ptr + offsets, a * tl.sigmoid(a) * b, mask=mask)


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, y_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n_cols
    x = tl.load(x_ptr + row * n_cols + offsets, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + offsets, mask=mask, other=0.0)
    r = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(y_ptr + row * n_cols + offsets, x * r * w, mask=mask)


ROW_BLOCK_LIMIT = 32768
"""Longest row the one-program-per-row kernels keep in registers (None past it: no Triton figure)."""


def num_warps_for(block: int) -> int:
    return 4 if block <= 1024 else 8 if block <= 4096 else 16


def log_softmax(x: torch.Tensor, y: torch.Tensor) -> None:
    rows, cols = x.shape
    block = triton.next_power_of_2(cols)
    _log_softmax_kernel[(rows,)](x, y, cols, BLOCK=block, num_warps=num_warps_for(block))


def layernorm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, y: torch.Tensor, eps: float = 1e-5) -> None:
    rows, cols = x.shape
    block = triton.next_power_of_2(cols)
    _layernorm_kernel[(rows,)](x, w, b, y, cols, eps, BLOCK=block, num_warps=num_warps_for(block))


def silu_gate(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
    _silu_gate_kernel[(triton.cdiv(a.numel(), 2048),)](a, b, c, a.numel(), BLOCK=2048, num_warps=8)


def softmax(x: torch.Tensor, y: torch.Tensor) -> None:
    rows, cols = x.shape
    block = triton.next_power_of_2(cols)
    _softmax_kernel[(rows,)](x, y, cols, BLOCK=block, num_warps=num_warps_for(block))


def rmsnorm(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor, eps: float = 1e-6) -> None:
    rows, cols = x.shape
    block = triton.next_power_of_2(cols)
    _rmsnorm_kernel[(rows,)](x, w, y, cols, eps, BLOCK=block, num_warps=num_warps_for(block))


@triton.jit
def _add_kernel(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(c_ptr + offsets, tl.load(a_ptr + offsets, mask=mask) + tl.load(b_ptr + offsets, mask=mask), mask=mask)


def add(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
    _add_kernel[(triton.cdiv(a.numel(), 1024),)](a, b, c, a.numel(), BLOCK=1024)


@triton.jit
def empty_kernel(x_ptr):
    """Does nothing: its launch is Triton's host cost alone (bench/host_overhead.py)."""


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8}, num_stages=3, num_warps=8),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8}, num_stages=4, num_warps=4),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8}, num_stages=4, num_warps=4),
        triton.Config({"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_M": 8}, num_stages=4, num_warps=4),
    ],
    key=["M", "N", "K"],
)
@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """Triton's tutorial matmul (grouped program order), row-major in, f32 accumulate (fp32 operands: tf32,
    Triton's default), out in C's dtype."""
    pid = tl.program_id(0)
    num_pid_m, num_pid_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
    in_group = GROUP_M * num_pid_n
    first_m = pid // in_group * GROUP_M
    group_m = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + pid % in_group % group_m
    pid_n = pid % in_group // group_m
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rows[:, None] * K + ks[None, :]
    b_ptrs = b_ptr + ks[:, None] * N + cols[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=(rows[:, None] < M) & (k + ks[None, :] < K), other=0.0)
        b = tl.load(b_ptrs, mask=(k + ks[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * N
    c = acc.to(c_ptr.dtype.element_ty)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], c, mask=(rows[:, None] < M) & (cols[None, :] < N))


def matmul(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> None:
    (m, k), (_, n) = a.shape, b.shape
    grid = lambda meta: (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)
    _matmul_kernel[grid](a, b, c, m, n, k)



@triton.jit
def _persistent_tma_kernel(a_desc, w_desc, c_desc, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                           NUM_SMS: tl.constexpr, FP16: tl.constexpr):
    """`x @ w.T` as Triton's persistent TMA tutorial builds it: one program per SM walking the tiles in grouped
    order, X and W read and the tile stored through tensor descriptors."""
    GROUP: tl.constexpr = 8
    num_m, num_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
    for tile in tl.range(tl.program_id(0), num_m * num_n, NUM_SMS, flatten=True):
        group = tile // (GROUP * num_n)
        size = min(num_m - group * GROUP, GROUP)
        pid_m = group * GROUP + tile % size
        pid_n = tile % (GROUP * num_n) // size
        acc = tl.zeros((BM, BN), tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            a = a_desc.load([pid_m * BM, k * BK])
            w = w_desc.load([pid_n * BN, k * BK])
            acc = tl.dot(a, w.T, acc)
        c_desc.store([pid_m * BM, pid_n * BN], acc.to(tl.float16 if FP16 else tl.bfloat16))


PERSISTENT_CONFIGS = [(128, 256, 64, 8, 3), (128, 128, 64, 8, 4), (64, 128, 64, 4, 4)]
"""(BM, BN, BK, num_warps, num_stages) the persistent kernel is timed with (the tutorial autotunes over such a set)."""


def persistent_linear(x: torch.Tensor, w: torch.Tensor, c: torch.Tensor, config: tuple[int, ...]) -> None:
    """c = x @ w.T (w [N, K]) by the persistent TMA kernel with `config` (`PERSISTENT_CONFIGS`)."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    bm, bn, bk, warps, stages = config
    (m, k), n = x.shape, w.shape[0]
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 4
    descriptors = (TensorDescriptor.from_tensor(x, [bm, bk]), TensorDescriptor.from_tensor(w, [bn, bk]),
                   TensorDescriptor.from_tensor(c, [bm, bn]))
    grid = (min(sms, triton.cdiv(m, bm) * triton.cdiv(n, bn)),)
    _persistent_tma_kernel[grid](*descriptors, m, n, k, BM=bm, BN=bn, BK=bk, NUM_SMS=sms,
                                 FP16=c.dtype == torch.float16, num_warps=warps, num_stages=stages)
