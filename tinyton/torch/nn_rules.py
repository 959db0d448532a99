"""ATen's reductions, matrix products and the composite NN ops core ATen keeps (softmax, layer norm,
dropout) as array-program builtins, one short rule per op.

Softmax is written in the canonical form the fusion patterns and the flash-attention rewrite recognise
(`e = exp(x - max x); e / sum e`), so a model's attention written out, or `F.scaled_dot_product_attention`
(rewritten to the same math, tinyton/torch/attention.py), becomes one flash-attention kernel.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import torch

import tinyton.language as tt
from tinyton.frontend.traced import Traced
from tinyton.torch.common import Unsupported, array_dtype, prefer

aten = torch.ops.aten


def _axes(dims: int | Sequence[int] | None) -> int | tuple[int, ...] | None:
    """torch's `dim` argument as NumPy's `axis` (an empty list means every axis, as None does)."""
    if dims is None or isinstance(dims, int):
        return dims
    return tuple(dims) or None


def _typed(x: Traced, dtype: torch.dtype | None) -> Traced:
    return x if dtype is None else x.astype(array_dtype(dtype))


def _sum_operand(x: Traced) -> Traced:
    """torch sums integers in int64 (a padding mask's lengths, `mask.sum(-1)`), and so do array programs that hold
    int64; where they hold it as int32 the sum runs in torch. Counts of bools stay exact in int32."""
    if x.dtype.kind in "iu":
        if array_dtype(torch.int64) != np.int64:
            raise Unsupported("sum of an integer tensor (torch accumulates in int64)")
        return x.astype(np.int64)
    return x


def sum_(x: Traced, dims: Any = None, keepdim: bool = False, dtype: torch.dtype | None = None) -> Traced:
    return tt.sum(_sum_operand(_typed(x, dtype)), axis=_axes(dims), keepdims=keepdim)


def sum_all(x: Traced, dtype: torch.dtype | None = None) -> Traced:
    return sum_(x, None, False, dtype)


def mean(x: Traced, dims: Any = None, keepdim: bool = False, dtype: torch.dtype | None = None) -> Traced:
    return tt.mean(_typed(x, dtype), axis=_axes(dims), keepdims=keepdim)


def mean_all(x: Traced, dtype: torch.dtype | None = None) -> Traced:
    return mean(x, None, False, dtype)


def vector_norm(x: Traced, order: float = 2, dims: Any = None, keepdim: bool = False,
                dtype: torch.dtype | None = None) -> Traced:
    """`torch.linalg.vector_norm` (`F.normalize`, `Tensor.norm`): the p-norm over `dims`; inf and -inf the largest
    and smallest magnitude, 0 the count of non-zeros."""
    a, axis = tt.abs(_typed(x, dtype)), _axes(dims)
    if order == 2:
        return tt.sqrt(tt.sum(a * a, axis=axis, keepdims=keepdim))
    if order in (math.inf, -math.inf):
        return (tt.max if order > 0 else tt.min)(a, axis=axis, keepdims=keepdim)
    if order == 0:
        return tt.sum((a != 0).astype(a.dtype), axis=axis, keepdims=keepdim)
    if order == 1:
        return tt.sum(a, axis=axis, keepdims=keepdim)
    return tt.sum(a ** order, axis=axis, keepdims=keepdim) ** (1.0 / order)


def amax(x: Traced, dims: Any = (), keepdim: bool = False) -> Traced:
    return tt.max(x, axis=_axes(dims), keepdims=keepdim)


def amin(x: Traced, dims: Any = (), keepdim: bool = False) -> Traced:
    return tt.min(x, axis=_axes(dims), keepdims=keepdim)


def _any(x: Traced, axis: Any = None, keepdims: bool = False) -> Traced:
    """Any nonzero: the maximum of `x != 0` (bools reduce as ints)."""
    return tt.max(x != 0, axis=axis, keepdims=keepdims)


def _all(x: Traced, axis: Any = None, keepdims: bool = False) -> Traced:
    return tt.min(x != 0, axis=axis, keepdims=keepdims)


any_, all_ = prefer("any", _any), prefer("all", _all)


def any_dims(x: Traced, dims: Any = None, keepdim: bool = False) -> Traced:
    return any_(x, axis=_axes(dims), keepdims=keepdim)


def all_dims(x: Traced, dims: Any = None, keepdim: bool = False) -> Traced:
    return all_(x, axis=_axes(dims), keepdims=keepdim)


def var(x: Traced, dims: Any = None, correction: float | None = None, keepdim: bool = False) -> Traced:
    """The mean squared deviation, rescaled by n / (n - correction) (torch's default correction is 1)."""
    axes = _axes(dims)
    count = x.size if axes is None else math.prod(x.shape[a] for a in ((axes,) if isinstance(axes, int) else axes))
    centred = x - tt.mean(x, axis=axes, keepdims=True)
    correction = 1 if correction is None else correction
    return tt.mean(centred * centred, axis=axes, keepdims=keepdim) * (count / max(count - correction, 0))


def var_mean(x: Traced, dims: Any = None, correction: float | None = None,
             keepdim: bool = False) -> tuple[Traced, Traced]:
    """`torch.var_mean` (and `std_mean`, the square root of its variance): the variance and the mean."""
    return var(x, dims, correction, keepdim), mean(x, dims, keepdim)


def argmax(x: Traced, dim: int | None = None, keepdim: bool = False) -> Traced:
    return tt.argmax(x, axis=dim, keepdims=keepdim)


def argmin(x: Traced, dim: int | None = None, keepdim: bool = False) -> Traced:
    return tt.argmin(x, axis=dim, keepdims=keepdim)


def max_all(x: Traced) -> Traced:
    return tt.max(x)


def min_all(x: Traced) -> Traced:
    return tt.min(x)


def max_dim(x: Traced, dim: int, keepdim: bool = False) -> tuple[Traced, Traced]:
    return tt.max(x, axis=dim, keepdims=keepdim), argmax(x, dim, keepdim)


def min_dim(x: Traced, dim: int, keepdim: bool = False) -> tuple[Traced, Traced]:
    return tt.min(x, axis=dim, keepdims=keepdim), argmin(x, dim, keepdim)


def cumsum(x: Traced, dim: int, dtype: torch.dtype | None = None) -> Traced:
    return tt.cumsum(_typed(x, dtype), axis=dim)


def cumprod(x: Traced, dim: int, dtype: torch.dtype | None = None) -> Traced:
    return tt.cumprod(_typed(x, dtype), axis=dim)


def prod(x: Traced, dim: int | None = None, keepdim: bool = False, dtype: torch.dtype | None = None) -> Traced:
    return tt.prod(_typed(x, dtype), axis=dim, keepdims=keepdim)


# ---- matrix products -----------------------------------------------------------------------------


def matmul(a: Traced, b: Traced) -> Traced:
    return tt.matmul(a, b)


def addmm(bias: Traced, a: Traced, b: Traced, beta: Any = 1, alpha: Any = 1) -> Traced:
    product = tt.matmul(a, b) if alpha == 1 else tt.matmul(a, b) * alpha
    return product + (bias if beta == 1 else bias * beta)


def baddbmm(bias: Traced, a: Traced, b: Traced, beta: Any = 1, alpha: Any = 1) -> Traced:
    return addmm(bias, a, b, beta, alpha)


# ---- softmax, normalisation, dropout -------------------------------------------------------------


def softmax(x: Traced, dim: int, half_to_float: bool = False) -> Traced:
    e = tt.exp(x - tt.max(x, axis=dim, keepdims=True))
    return e / tt.sum(e, axis=dim, keepdims=True)


def log_softmax(x: Traced, dim: int, half_to_float: bool = False) -> Traced:
    shifted = x - tt.max(x, axis=dim, keepdims=True)
    return shifted - tt.log(tt.sum(tt.exp(shifted), axis=dim, keepdims=True))


def softmax_backward(grad: Traced, out: Traced, dim: int, input_dtype: Any = None) -> Traced:
    return out * (grad - tt.sum(grad * out, axis=dim, keepdims=True))


def log_softmax_backward(grad: Traced, out: Traced, dim: int, input_dtype: Any = None) -> Traced:
    return grad - tt.exp(out) * tt.sum(grad, axis=dim, keepdims=True)


def logsumexp(x: Traced, dims: Any, keepdim: bool = False) -> Traced:
    axes = _axes(dims)
    top = tt.max(x, axis=axes, keepdims=True)
    top = tt.where(top == float("-inf"), 0, top)  # all -inf rows give -inf, not nan
    total = tt.sum(tt.exp(x - top), axis=axes, keepdims=keepdim)
    return tt.log(total) + (top if keepdim else tt.max(top, axis=axes))


class Standardised(NamedTuple):
    """`xf` centred and divided by its std over some axes, and its statistics (keeping those axes as 1s)."""

    out: Traced
    mean: Traced
    var: Traced  # biased
    rstd: Traced


def _standardised(xf: Traced, axes: int | tuple[int, ...], eps: float) -> Standardised:
    mu = tt.mean(xf, axis=axes, keepdims=True)
    centred = xf - mu
    var = tt.mean(centred * centred, axis=axes, keepdims=True)
    rstd = tt.rsqrt(var + eps)
    return Standardised(centred * rstd, mu, var, rstd)


def _affine(out: Traced, weight: Traced | None, bias: Traced | None, shape: tuple[int, ...] | None = None) -> Traced:
    """`out * weight + bias` (either may be absent), both reshaped to `shape` when given (per channel)."""
    if weight is not None:
        out = out * (weight if shape is None else weight.reshape(shape))
    if bias is not None:
        out = out + (bias if shape is None else bias.reshape(shape))
    return out


def _per_channel(x: Traced) -> tuple[int, ...]:
    """The shape that broadcasts a per-channel vector over `x` `[N, C, ...]`."""
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


def native_layer_norm(x: Traced, shape: Sequence[int], weight: Traced | None, bias: Traced | None,
                      eps: float) -> tuple[Traced, Traced, Traced]:
    """(normalised, mean, 1 / std): the statistics keep the normalised dims as 1s, as torch's."""
    norm = _standardised(x.astype("float32"), tuple(range(x.ndim - len(shape), x.ndim)), eps)
    return _affine(norm.out, weight, bias), norm.mean, norm.rstd


def native_group_norm(x: Traced, weight: Traced | None, bias: Traced | None, n: int, c: int, hw: int, groups: int,
                      eps: float) -> tuple[Traced, Traced, Traced]:
    """(normalised, mean, 1 / std) of `groups` groups of channels per sample; the statistics `[N, groups]`."""
    norm = _standardised(x.astype("float32").reshape(n, groups, (c // groups) * hw), -1, eps)
    out = _affine(norm.out.reshape(x.shape), weight, bias, _per_channel(x))
    return out, norm.mean.reshape(n, groups), norm.rstd.reshape(n, groups)


def batch_norm_inference(x: Traced, weight: Traced | None, bias: Traced | None, mean: Traced, var: Traced,
                         momentum: float, eps: float) -> tuple[Traced, Traced, Traced]:
    """Batch norm with the running statistics (eval): channels on dim 1; the saved statistics are empty, as torch's."""
    channel = _per_channel(x)
    rstd = tt.rsqrt(var.astype("float32") + eps)
    out = _affine((x.astype("float32") - mean.reshape(channel)) * rstd.reshape(channel), weight, bias, channel)
    nothing = tt.full((0,), 0.0, "float32")
    return out, nothing, nothing


def batch_norm_training(x: Traced, weight: Traced | None, bias: Traced | None, running_mean: Traced,
                        running_var: Traced, training: bool, momentum: float,
                        eps: float) -> tuple[Traced, Traced, Traced, Traced, Traced]:
    """Batch norm over the batch (a training step): each channel (dim 1) standardised by its mean and biased variance
    over every other dim; (output, mean, 1 / std, and the running mean and variance moved by `momentum` towards the
    batch's, its variance unbiased), as torch's functional form returns them."""
    if not training:
        raise Unsupported("batch norm's functional form outside training")
    channels = x.shape[1]
    n = math.prod(x.shape) // channels
    out, norm = _batch_standardised(x, weight, bias, eps)
    mu, var, rstd = (t.reshape(channels) for t in (norm.mean, norm.var, norm.rstd))
    moved = [(stat * (1 - momentum) + batch * momentum).astype(stat.dtype)
             for stat, batch in ((running_mean, mu), (running_var, var * (n / (n - 1))))]
    return out, mu, rstd, *moved


def batch_norm_no_stats(x: Traced, weight: Traced | None, bias: Traced | None, training: bool, momentum: float,
                        eps: float) -> tuple[Traced, Traced, Traced]:
    """Batch norm on the batch's statistics with no running ones (`track_running_stats=False`, and instance norm,
    torch's batch norm of `[1, N * C, ...]`): (output, mean, 1 / std) per channel."""
    if not training:
        raise Unsupported("batch norm without running statistics outside training")
    out, norm = _batch_standardised(x, weight, bias, eps)
    return out, norm.mean.reshape(x.shape[1]), norm.rstd.reshape(x.shape[1])


def _batch_standardised(x: Traced, weight: Traced | None, bias: Traced | None,
                        eps: float) -> tuple[Traced, Standardised]:
    """Batch norm's output and statistics: each channel (dim 1) standardised over every other dim, then scaled and
    shifted."""
    norm = _standardised(x.astype("float32"), (0, *range(2, x.ndim)), eps)
    return _affine(norm.out, weight, bias, _per_channel(x)), norm


def weight_norm_backward(grad_w: Traced, v: Traced, g: Traced, norms: Traced, dim: int) -> tuple[Traced, Traced]:
    """The gradients of weight norm's `v` and `g` (`w = g v / |v|`, the norm over every dim but `dim`, over all for
    -1): `g`'s is `grad_w` along `v`'s direction, `v`'s the rest of `grad_w` scaled by `g / |v|`; in float32."""
    grad_w, v, g, norms = (t.astype("float32") for t in (grad_w, v, g, norms))
    axes = tuple(a for a in range(v.ndim) if a != dim % v.ndim) if dim != -1 else None
    along = tt.sum(grad_w * v, axis=axes, keepdims=True)
    return g / norms * (grad_w - v * (along / (norms * norms))), tt.reshape(along / norms, g.shape)


def native_dropout(x: Traced, p: float, train: bool | None) -> tuple[Traced, Traced]:
    if train and p > 0:
        raise Unsupported("dropout in training draws torch's random numbers")
    return x, tt.full(x.shape, True, "bool")


RULES = {
    aten.sum.dim_IntList: sum_,
    aten.sum.default: sum_all,
    aten.mean.dim: mean,
    aten.mean.default: mean_all,
    aten.amax.default: amax,
    aten.linalg_vector_norm.default: vector_norm,
    aten.amin.default: amin,
    **{op: any_dims for op in (aten.any.dim, aten.any.dims, aten.any.default)},
    **{op: all_dims for op in (aten.all.dim, aten.all.dims, aten.all.default)},
    aten.var.correction: var,
    aten.var_mean.correction: var_mean,
    aten.argmax.default: argmax,
    aten.argmin.default: argmin,
    aten.max.default: max_all,
    aten.min.default: min_all,
    aten.max.dim: max_dim,
    aten.min.dim: min_dim,
    aten.cumsum.default: cumsum,
    aten.cumprod.default: cumprod,
    **{op: prod for op in (aten.prod.default, aten.prod.dim_int)},
    **{op: matmul for op in (aten.mm.default, aten.bmm.default, aten.matmul.default)},
    aten.addmm.default: addmm,
    aten.baddbmm.default: baddbmm,
    aten._softmax.default: softmax,
    aten._log_softmax.default: log_softmax,
    aten._softmax_backward_data.default: softmax_backward,
    aten._log_softmax_backward_data.default: log_softmax_backward,
    aten.logsumexp.default: logsumexp,
    aten.native_layer_norm.default: native_layer_norm,
    aten.native_group_norm.default: native_group_norm,
    aten._native_batch_norm_legit_no_training.default: batch_norm_inference,
    aten._native_batch_norm_legit_functional.default: batch_norm_training,
    aten._native_batch_norm_legit.no_stats: batch_norm_no_stats,
    aten._weight_norm_interface_backward.default: weight_norm_backward,
    aten.native_dropout.default: native_dropout,
}  # fmt: skip
"""ATen overload -> rule, for reductions, matrix products and the NN composites."""
