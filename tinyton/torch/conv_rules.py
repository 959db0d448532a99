"""ATen's convolution as array-program builtins: the input's windows gathered into columns (im2col), then one
matmul per group of channels, whose epilogue adds the bias.

Non-overlapping windows (a vision transformer's patch embedding: stride equal to the kernel, no padding or
dilation) are a reshape and a transpose of the input; other windows are strided slices of the padded input, one a
kernel position, stacked. Transposed convolutions and kernels of more than `MAX_KERNEL_POSITIONS` positions run in
torch.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from math import prod

import torch

import tinyton.language as tt
from tinyton.frontend.traced import Traced
from tinyton.torch.common import Unsupported

aten = torch.ops.aten

MAX_KERNEL_POSITIONS = 64
"""Most kernel positions (a 7 x 7 kernel has 49) gathered as slices: each is a window of the input in the columns."""


def _patches(x: Traced, kernel: Sequence[int], out: Sequence[int]) -> Traced:
    """Non-overlapping windows `[B, C, k..., o...]` of `x` `[B, C, L...]` (stride equal to the kernel)."""
    n = len(kernel)
    x = x[(slice(None), slice(None), *(slice(0, k * o) for k, o in zip(kernel, out)))]
    split = tt.reshape(x, (*x.shape[:2], *(d for k, o in zip(kernel, out) for d in (o, k))))  # [B, C, o1, k1, ...]
    order = (0, 1, *(3 + 2 * i for i in range(n)), *(2 + 2 * i for i in range(n)))
    return tt.transpose(split, order)


def _windows(x: Traced, kernel: Sequence[int], out: Sequence[int], stride: Sequence[int],
             dilation: Sequence[int]) -> Traced:
    """The windows `[B, C, K, o...]` of `x` (padded), one strided slice a kernel position (K = prod(kernel))."""
    slices = [x[(slice(None), slice(None), *(slice(i * d, i * d + s * (o - 1) + 1, s) for i, d, s, o in
                                            zip(p, dilation, stride, out)))]
              for p in itertools.product(*map(range, kernel))]  # fmt: skip
    return tt.stack(slices, axis=2)


def convolution(x: Traced, weight: Traced, bias: Traced | None, stride: Sequence[int], padding: Sequence[int],
                dilation: Sequence[int], transposed: bool, output_padding: Sequence[int], groups: int) -> Traced:
    if transposed:
        raise Unsupported("transposed convolution")
    kernel, n = tuple(weight.shape[2:]), x.ndim - 2
    if prod(kernel) > MAX_KERNEL_POSITIONS:
        raise Unsupported(f"a convolution kernel of {prod(kernel)} positions (at most {MAX_KERNEL_POSITIONS})")
    stride, padding, dilation = (tuple(v) * (n if len(v) == 1 else 1) for v in (stride, padding, dilation))
    sizes = [length + 2 * p for length, p in zip(x.shape[2:], padding)]
    out = tuple((size - d * (k - 1) - 1) // s + 1 for size, d, k, s in zip(sizes, dilation, kernel, stride))
    if stride == kernel and not any(padding) and set(dilation) == {1}:
        columns = _patches(x, kernel, out)
    else:
        if any(padding):
            x = tt.pad(x, [(0, 0), (0, 0), *((p, p) for p in padding)])
        columns = _windows(x, kernel, out, stride, dilation)
    b, c, o = x.shape[0], x.shape[1], weight.shape[0]
    columns = tt.reshape(columns, (b, groups, c // groups * prod(kernel), prod(out)))  # [B, G, C/G * K, P]
    result = tt.reshape(weight, (groups, o // groups, -1)) @ columns  # [B, G, O/G, P]
    result = tt.reshape(result, (b, o, *out))
    return result if bias is None else result + tt.reshape(bias, (o, *(1,) * n))


RULES = {aten.convolution.default: convolution}
"""ATen overload -> rule, for convolutions."""
