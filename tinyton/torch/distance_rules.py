"""`torch.cdist` as array programs: the p-norm of every row pair's difference (`[..., P, R, M]`, reduced over `M` in
the kernel that makes it), and its gradient: eager's per-norm formulas (ATen's cpu/DistanceOpsKernel.cpp) summed
over the other rows.
"""

from __future__ import annotations

import math
from typing import Any

import torch

import tinyton.language as tt
from tinyton.frontend.traced import Traced
from tinyton.torch.common import Unsupported

aten = torch.ops.aten


def _differences(x1: Traced, x2: Traced) -> Traced:
    """`x1[..., p, :] - x2[..., r, :]` for every row pair: `[..., P, R, M]`, the batch dims broadcast."""
    return tt.reshape(x1, (*x1.shape[:-1], 1, x1.shape[-1])) - tt.reshape(x2, (*x2.shape[:-2], 1, *x2.shape[-2:]))


def _sign(x: Traced) -> Traced:
    """-1, 0 or 1 (eager's `(0 < x) - (x < 0)`)."""
    return (x > 0).astype(x.dtype) - (x < 0).astype(x.dtype)


def cdist_forward(x1: Traced, x2: Traced, p: float, compute_mode: Any = None) -> Traced:
    """`torch.cdist(x1, x2, p)`: each row pair's p-norm distance, computed directly (eager's matmul form for p=2 on
    more than 25 rows rounds otherwise, within float32's error): p=0 the count of differing coordinates, p=inf the
    largest difference."""
    if x1.dtype.kind != "f":
        raise Unsupported(f"cdist of {x1.dtype} (eager's error)")
    diff = tt.abs(_differences(x1, x2))
    if p == 0:
        return tt.sum((diff != 0).astype(diff.dtype), axis=-1)
    if math.isinf(p):
        return tt.max(diff, axis=-1)
    if p == 1:
        return tt.sum(diff, axis=-1)
    if p == 2:
        return tt.sqrt(tt.sum(diff * diff, axis=-1))
    return tt.sum(diff**p, axis=-1) ** (1 / p)


def _pair_gradient(diff: Traced, grad: Traced, dist: Traced, p: float) -> Traced:
    """Each pair's share of the gradient of x1's row, eager's formula for the norm: zero where the distance is 0."""
    if p == 1:
        return grad * _sign(diff)
    if math.isinf(p):
        return tt.where(tt.abs(diff) == dist, grad * _sign(diff), 0)
    if p == 2:
        share = grad * diff / dist
    elif p < 2:
        share = _sign(diff) * tt.abs(diff) ** (p - 1) * grad / dist ** (p - 1)
        share = tt.where(diff == 0, 0, share) if p < 1 else share
    else:
        share = diff * tt.abs(diff) ** (p - 2) * grad / dist ** (p - 1)
    return tt.where(dist == 0, 0, share)


def cdist_backward(grad: Traced, x1: Traced, x2: Traced, p: float, dist: Traced) -> Traced:
    """The gradient of `cdist` for `x1` (autograd asks for x2's with the arguments swapped), in the broadcast batch
    shape (autograd sums it down): each pair's share summed over x2's rows; p=0's is zero."""
    diff = _differences(x1, x2)
    if p == 0:
        return tt.full((*diff.shape[:-2], diff.shape[-1]), 0, diff.dtype)
    grad, dist = (tt.reshape(t, (*t.shape, 1)) for t in (grad, dist))
    return tt.sum(_pair_gradient(diff, grad, dist, p), axis=-2)


RULES = {
    aten._cdist_forward.default: cdist_forward,
    aten._cdist_backward.default: cdist_backward,
}
"""ATen overload -> rule, for the distances."""
