"""The Triton kernels tinyton is compared with: the usual one-program-per-row softmax and rmsnorm."""

import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n_cols
    x = tl.load(x_ptr + row * n_cols + offsets, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * n_cols + offsets, e / tl.sum(e, axis=0), mask=mask)


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, y_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n_cols
    x = tl.load(x_ptr + row * n_cols + offsets, mask=mask, other=0.0)
    w = tl.load(w_ptr + offsets, mask=mask, other=0.0)
    r = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(y_ptr + row * n_cols + offsets, x * r * w, mask=mask)


def num_warps_for(block: int) -> int:
    return 4 if block <= 1024 else 8 if block <= 4096 else 16


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
