"""ATen's convolution as array-program builtins: the input's windows gathered into columns (im2col), then one
matmul per group of channels, whose epilogue adds the bias.

Non-overlapping windows (a vision transformer's patch embedding: stride equal to the kernel, no padding or
dilation) are a reshape and a transpose of the input; other windows are strided slices of the padded input, one a
kernel position, stacked. A transposed convolution is a convolution of its input spread by the stride, padded, by
the flipped kernel (for non-overlapping windows, a matmul whose blocks are laid side by side); `convolution_backward`
is one of each kind and a weight gradient (`dy` times the windows). Overlapping windows of more than
`MAX_KERNEL_POSITIONS` positions run in torch. Pooling takes the same windows (a maximum or a sum over the kernel
positions); its gradient is a transposed convolution (by one-hot kernels, or ones for an average).
Adaptive average pooling averages each dim's bins by a bin-weight matrix, one reduction a dim; adaptive max pooling
into even bins is max pooling by tiles (a reshape, for any size).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from math import prod

import torch

import tinyton.language as tt
from tinyton.frontend.traced import Traced
from tinyton.torch.common import Unsupported
from tinyton.torch.shape_rules import constant_pad_nd

aten = torch.ops.aten

MAX_KERNEL_POSITIONS = 64
"""Most kernel positions (a 7 x 7 kernel has 49) gathered as slices: each is a window of the input in the columns.
Non-overlapping windows (a vision transformer's 16 x 16 patches) are a reshape: any kernel."""


def _patches(x: Traced, kernel: Sequence[int], out: Sequence[int]) -> Traced:
    """Non-overlapping windows `[B, C, k..., o...]` of `x` `[B, C, L...]` (stride equal to the kernel)."""
    n = len(kernel)
    x = x[(slice(None), slice(None), *(slice(0, k * o) for k, o in zip(kernel, out)))]
    split = tt.reshape(x, (*x.shape[:2], *(d for k, o in zip(kernel, out) for d in (o, k))))  # [B, C, o1, k1, ...]
    order = (0, 1, *(3 + 2 * i for i in range(n)), *(2 + 2 * i for i in range(n)))
    return tt.transpose(split, order)


def _unpatched(blocks: Traced, sizes: Sequence[int]) -> Traced:
    """`_patches` undone: the blocks `[B, C, k..., o...]` side by side, `[B, C, o * k...]`, then zeros to `sizes` (or
    cropped to them: a last block of a pooling's `ceil_mode` runs past the input)."""
    n = len(sizes)
    kernel, out = blocks.shape[2 : 2 + n], blocks.shape[2 + n :]
    order = (0, 1, *(d for i in range(n) for d in (2 + n + i, 2 + i)))  # [B, C, o1, k1, ...]
    tiled = tt.reshape(tt.transpose(blocks, order), (*blocks.shape[:2], *(o * k for o, k in zip(out, kernel))))
    widths = [v for size, o, k in reversed(list(zip(sizes, out, kernel))) for v in (0, size - o * k)]
    return constant_pad_nd(tiled, widths)


def _non_overlapping(kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                     dilation: Sequence[int]) -> bool:
    """Whether the windows tile the input: stride equal to the kernel, no padding or dilation."""
    return tuple(stride) == tuple(kernel) and not any(padding) and set(dilation) == {1}


def _windows(x: Traced, kernel: Sequence[int], out: Sequence[int], stride: Sequence[int],
             dilation: Sequence[int]) -> Traced:
    """The windows `[B, C, K, o...]` of `x` (padded), one strided slice a kernel position (K = prod(kernel), at most
    `MAX_KERNEL_POSITIONS`: a larger kernel runs in torch)."""
    if prod(kernel) > MAX_KERNEL_POSITIONS:
        raise Unsupported(f"windows of {prod(kernel)} kernel positions as slices (at most {MAX_KERNEL_POSITIONS})")
    slices = [x[(slice(None), slice(None), *(slice(i * d, i * d + s * (o - 1) + 1, s) for i, d, s, o in
                                            zip(p, dilation, stride, out)))]
              for p in itertools.product(*map(range, kernel))]  # fmt: skip
    return tt.stack(slices, axis=2)


def _sizes(values: Sequence[int], n: int) -> tuple[int, ...]:
    """A per-spatial-dim argument (`stride`, `padding`, ...) for `n` dims (torch repeats a single value)."""
    return tuple(values) * (n if len(values) == 1 else 1)


def _columns(x: Traced, kernel: Sequence[int], out: Sequence[int], stride: Sequence[int], padding: Sequence[int],
             dilation: Sequence[int], groups: int) -> Traced:
    """The windows of `x` `[B, C, L...]` (padded) that make the `out` positions, as columns `[B, G, C/G * K, P]`."""
    if _non_overlapping(kernel, stride, padding, dilation):
        columns = _patches(x, kernel, out)
    else:
        if any(padding):
            x = tt.pad(x, [(0, 0), (0, 0), *((p, p) for p in padding)])
        columns = _windows(x, kernel, out, stride, dilation)
    return tt.reshape(columns, (x.shape[0], groups, x.shape[1] // groups * prod(kernel), prod(out)))


def _convolve(x: Traced, weight: Traced, stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int],
              groups: int) -> Traced:
    """`[B, O, out...]`: the convolution of `x` `[B, C, L...]` by `weight` `[O, C/G, k...]`, no bias."""
    kernel = tuple(weight.shape[2:])
    sizes = [length + 2 * p for length, p in zip(x.shape[2:], padding)]
    out = tuple((size - d * (k - 1) - 1) // s + 1 for size, d, k, s in zip(sizes, dilation, kernel, stride))
    columns = _columns(x, kernel, out, stride, padding, dilation, groups)
    o = weight.shape[0]
    result = tt.reshape(weight, (groups, o // groups, -1)) @ columns  # [B, G, O/G, P]
    return tt.reshape(result, (x.shape[0], o, *out))


def _spread(x: Traced, stride: Sequence[int]) -> Traced:
    """`x` `[B, C, L...]` with `stride - 1` zeros between its elements along each spatial dim (`(L - 1) * s + 1`): a
    gather of element `i // s` where `i % s == 0`."""
    for axis, s in enumerate(stride, start=2):
        if s == 1:
            continue
        i = tt.arange(0, (x.shape[axis] - 1) * s + 1)
        shape = tuple(-1 if d == axis else 1 for d in range(x.ndim))
        x = tt.where(tt.reshape(i % s == 0, shape), tt.take(x, i // s, axis=axis), 0)
    return x


def _transposed(x: Traced, weight: Traced, stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int],
                groups: int, sizes: Sequence[int]) -> Traced:
    """The transposed convolution of `x` `[B, C_in, L...]` by `weight` `[C_in, C_out/G, k...]`, of spatial `sizes`:
    what a convolution by `weight` takes back to its input's shape (its input gradient). It is a convolution of `x`
    spread by the stride and padded by `d (k - 1) - p` (cropped where that is negative, and on the right to
    `sizes`), stride 1, by the kernel flipped with its channels swapped within each group. For non-overlapping windows
    (a U-Net's 2 x 2 upsampling, a patch embedding's input gradient) each input position's products with the kernel
    are a block of the output of their own: one matmul a group, the blocks laid side by side, for any kernel."""
    kernel, n = tuple(weight.shape[2:]), len(sizes)
    c_in, c_out = weight.shape[0], weight.shape[1] * groups
    if _non_overlapping(kernel, stride, padding, dilation):
        w = tt.swapaxes(tt.reshape(weight, (groups, c_in // groups, -1)), 1, 2)  # [G, C_out/G * K, C_in/G]
        blocks = w @ tt.reshape(x, (x.shape[0], groups, c_in // groups, -1))  # [B, G, C_out/G * K, P]
        return _unpatched(tt.reshape(blocks, (x.shape[0], c_out, *kernel, *x.shape[2:])), sizes)
    x = _spread(x, stride)
    for axis in range(n):
        before = dilation[axis] * (kernel[axis] - 1) - padding[axis]
        after = sizes[axis] + dilation[axis] * (kernel[axis] - 1) - before - x.shape[axis + 2]
        x = constant_pad_nd(x, [0] * (2 * (n - 1 - axis)) + [before, after])
    flipped = tt.flip(weight, tuple(range(2, 2 + n)))  # [C_in, C_out/G, k...] -> per group [C_out/G, C_in/G, k...]
    flipped = tt.reshape(flipped, (groups, c_in // groups, c_out // groups, *kernel))
    flipped = tt.reshape(tt.swapaxes(flipped, 1, 2), (c_out, c_in // groups, *kernel))
    return _convolve(x, flipped, (1,) * n, (0,) * n, dilation, groups)


def _weight_gradient(dy: Traced, x: Traced, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                     dilation: Sequence[int], groups: int) -> Traced:
    """`[O, C/G, k...]`: the gradient of a convolution's weight, `dy` `[B, O, out...]` times the windows of `x`
    `[B, C, L...]` that made each output position, summed over the batch and the positions (one product a group)."""
    b, o, out = dy.shape[0], dy.shape[1], tuple(dy.shape[2:])
    columns = _columns(x, kernel, out, stride, padding, dilation, groups)  # [B, G, C/G * K, P]
    columns = tt.reshape(tt.transpose(columns, (1, 0, 3, 2)), (groups, b * prod(out), columns.shape[2]))
    dy = tt.reshape(tt.transpose(tt.reshape(dy, (b, groups, o // groups, prod(out))), (1, 2, 0, 3)),
                    (groups, o // groups, b * prod(out)))
    return tt.reshape(dy @ columns, (o, x.shape[1] // groups, *kernel))


def convolution(x: Traced, weight: Traced, bias: Traced | None, stride: Sequence[int], padding: Sequence[int],
                dilation: Sequence[int], transposed: bool, output_padding: Sequence[int], groups: int) -> Traced:
    n = x.ndim - 2
    stride, padding, dilation, output_padding = (_sizes(v, n) for v in (stride, padding, dilation, output_padding))
    if transposed:
        kernel = weight.shape[2:]
        sizes = [(length - 1) * s - 2 * p + d * (k - 1) + op + 1 for length, s, p, d, k, op in
                 zip(x.shape[2:], stride, padding, dilation, kernel, output_padding)]  # fmt: skip
        result = _transposed(x, weight, stride, padding, dilation, groups, sizes)
    else:
        result = _convolve(x, weight, stride, padding, dilation, groups)
    o = result.shape[1]
    return result if bias is None else result + tt.reshape(bias, (o, *(1,) * n))


def convolution_backward(dy: Traced, x: Traced, weight: Traced, bias_sizes: Sequence[int] | None,
                         stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int], transposed: bool,
                         output_padding: Sequence[int], groups: int,
                         output_mask: Sequence[bool]) -> tuple[Traced | None, Traced | None, Traced | None]:
    """(input, weight, bias) gradients, those `output_mask` asks for. A convolution's input gradient is the transposed
    convolution of `dy` by its weight, and a transposed convolution's is the convolution of `dy`; the weight gradient
    is `dy` times the windows of the other operand, of `dy` itself for a transposed convolution."""
    n = x.ndim - 2
    stride, padding, dilation = (_sizes(v, n) for v in (stride, padding, dilation))
    kernel = tuple(weight.shape[2:])
    dx = dw = db = None
    if output_mask[0]:
        dx = (_convolve(dy, weight, stride, padding, dilation, groups) if transposed else
              _transposed(dy, weight, stride, padding, dilation, groups, x.shape[2:]))  # fmt: skip
    if output_mask[1]:
        dw = (_weight_gradient(x, dy, kernel, stride, padding, dilation, groups) if transposed else
              _weight_gradient(dy, x, kernel, stride, padding, dilation, groups))  # fmt: skip
    if output_mask[2]:
        db = tt.sum(dy, axis=(0, *range(2, dy.ndim)))
    return dx, dw, db


def _pool_geometry(n: int, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                   dilation: Sequence[int]) -> tuple[tuple[int, ...], ...]:
    """A pooling's kernel, stride (the kernel's when empty), padding and dilation for each of `n` spatial dims."""
    kernel = _sizes(kernel, n)
    return (kernel, *(_sizes(v, n) for v in (stride or kernel, padding, dilation)))


def _pooled_sizes(sizes: Sequence[int], kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                  dilation: Sequence[int], ceil_mode: bool) -> tuple[int, ...]:
    """torch's pooled sizes: windows from the start of the padded input, each starting inside the input or its left
    padding; `ceil_mode` keeps a last window that runs past the padded input."""
    out = []
    for size, k, s, p, d in zip(sizes, kernel, stride, padding, dilation):
        o = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
        out.append(o - 1 if ceil_mode and (o - 1) * s >= size + p else o)
    return tuple(out)


def _pool_windows(x: Traced, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                  dilation: Sequence[int], out: Sequence[int], value: float) -> Traced:
    """The windows `[B, C, K, out...]` of `x` `[B, C, L...]` padded with `value`, on the right also as far as a last
    window of `ceil_mode` runs."""
    widths = [(p, max(p, (o - 1) * s + d * (k - 1) + 1 - size - p))
              for size, k, s, p, d, o in zip(x.shape[2:], kernel, stride, padding, dilation, out)]
    if any(b or a for b, a in widths):
        x = tt.pad(x, [(0, 0), (0, 0), *widths], constant_values=value)
    return _windows(x, kernel, out, stride, dilation)


def _pool_divisor(sizes: Sequence[int], kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                  out: Sequence[int], count_include_pad: bool) -> Traced:
    """`[out...]`: the number of positions of each window, clipped to the padded input (`count_include_pad`) or to the
    input itself, as torch's average pooling divides by; one factor per spatial dim."""
    divisor, n = 1, len(out)
    for dim, (size, k, s, p, o) in enumerate(zip(sizes, kernel, stride, padding, out)):
        start = tt.arange(o) * s - p
        low, high = (-p, size + p) if count_include_pad else (0, size)
        count = tt.minimum(start + k, high) - tt.maximum(start, low)
        divisor = divisor * tt.reshape(count, (o,) + (1,) * (n - 1 - dim))
    return divisor.astype("float32")


def _batched(x: Traced, n: int) -> Traced:
    """`x` `[B, C, L...]` of `n` spatial dims: an unbatched `[C, L...]` given a batch of one."""
    return tt.reshape(x, (1,) * (n + 2 - x.ndim) + x.shape)


def max_pool_with_indices(x: Traced, kernel: Sequence[int], stride: Sequence[int] = (), padding: Sequence[int] = (0,),
                          dilation: Sequence[int] = (1,), ceil_mode: bool = False, *,
                          n: int) -> tuple[Traced, Traced]:
    """(the windows' maxima, where each is: its flat index in the input's `n` spatial dims), as torch's: the windows
    padded with -inf (never chosen; so is what a last window of `ceil_mode` runs past), the first maximum in scan order
    taken, a NaN as the maximum."""
    sizes = x.shape[-n:]
    kernel, stride, padding, dilation = _pool_geometry(n, kernel, stride, padding, dilation)
    out = _pooled_sizes(sizes, kernel, stride, padding, dilation, ceil_mode)
    batched = _batched(x, n)
    if _non_overlapping(kernel, stride, padding, dilation) and not ceil_mode:  # tiles: any kernel (global pooling)
        windows = tt.reshape(_patches(batched, kernel, out), (*batched.shape[:2], prod(kernel), *out))
    else:
        windows = _pool_windows(batched, kernel, stride, padding, dilation, out, float("-inf"))  # [B, C, K, out...]
    position = tt.argmax(windows, axis=2)  # the kernel position of each window's maximum
    index = 0
    for dim, (k, s, p, d, o) in enumerate(zip(kernel, stride, padding, dilation, out)):
        offset = position // prod(kernel[dim + 1:]) % k  # this dim's kernel offset
        start = tt.reshape(tt.arange(o) * s - p, (o,) + (1,) * (n - 1 - dim))
        index = index * sizes[dim] + start + offset * d
    shape = (*x.shape[:-n], *out)
    return tt.reshape(tt.max(windows, axis=2), shape), tt.reshape(index.astype("int64"), shape)


def max_pool_with_indices_backward(dy: Traced, x: Traced, kernel: Sequence[int], stride: Sequence[int],
                                   padding: Sequence[int], dilation: Sequence[int], ceil_mode: bool,
                                   indices: Traced, *, n: int) -> Traced:
    """The gradient of max pooling: each window's `dy` added where `indices` says its maximum is (overlapping
    windows' shares summed). Per kernel position, the shares of the windows whose maximum it holds, put back in place
    by the transposed convolution of a one-hot kernel a position; for tiles, the shares are the tiles."""
    sizes, out = x.shape[-n:], tuple(dy.shape[-n:])
    kernel, stride, padding, dilation = _pool_geometry(n, kernel, stride, padding, dilation)
    dy, indices = _batched(dy, n), _batched(indices, n)
    position = 0  # the kernel position of each window's maximum, decoded from its flat index in the input
    for dim, (k, s, p, d, o) in enumerate(zip(kernel, stride, padding, dilation, out)):
        coordinate = indices // prod(sizes[dim + 1:]) % sizes[dim]
        start = tt.reshape(tt.arange(o) * s - p, (o,) + (1,) * (n - 1 - dim))
        position = position * k + (coordinate - start) // d
    (b, c), k = dy.shape[:2], prod(kernel)
    at = tt.reshape(tt.arange(k), (1, 1, k) + (1,) * n)
    shares = tt.where(tt.reshape(position, (b, c, 1, *out)) == at, tt.reshape(dy, (b, c, 1, *out)), 0)
    if _non_overlapping(kernel, stride, padding, dilation):
        return tt.reshape(_unpatched(tt.reshape(shares, (b, c, *kernel, *out)), sizes), x.shape)
    one_hot = (tt.reshape(tt.arange(k), (k, 1)) == tt.reshape(tt.arange(k), (1, k))).astype(dy.dtype)
    one_hot = tt.reshape(tt.broadcast_to(tt.reshape(one_hot, (1, k, k)), (c, k, k)), (c * k, 1, *kernel))
    dx = _transposed(tt.reshape(shares, (b, c * k, *out)), one_hot, stride, padding, dilation, c, sizes)
    return tt.reshape(dx, x.shape)


def avg_pool(x: Traced, kernel: Sequence[int], stride: Sequence[int] = (), padding: Sequence[int] = (0,),
             ceil_mode: bool = False, count_include_pad: bool = True, divisor_override: int | None = None, *,
             n: int) -> Traced:
    """torch's average pooling over `n` spatial dims: each window's sum, the padding (and, with `ceil_mode`, what a
    last window runs past) zeros, divided by `divisor_override` or by the window's size (`_pool_divisor`); 16-bit
    floats summed in float32."""
    sizes = x.shape[-n:]
    kernel, stride, padding, _ = _pool_geometry(n, kernel, stride, padding, (1,))
    out = _pooled_sizes(sizes, kernel, stride, padding, (1,) * n, ceil_mode)
    batched = _batched(x.astype("float32") if x.dtype.itemsize < 4 else x, n)
    sums = tt.sum(_pool_windows(batched, kernel, stride, padding, (1,) * n, out, 0.0), axis=2)
    divisor = divisor_override or _pool_divisor(sizes, kernel, stride, padding, out, count_include_pad)
    return tt.reshape(sums / divisor, (*x.shape[:-n], *out))


def avg_pool_backward(dy: Traced, x: Traced, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
                      ceil_mode: bool, count_include_pad: bool, divisor_override: int | None, *, n: int) -> Traced:
    """The gradient of average pooling: each window's `dy` over its divisor, added to every position of the window,
    by the transposed convolution of a kernel of ones a channel."""
    sizes = x.shape[-n:]
    kernel, stride, padding, _ = _pool_geometry(n, kernel, stride, padding, (1,))
    divisor = divisor_override or _pool_divisor(sizes, kernel, stride, padding, dy.shape[-n:], count_include_pad)
    shares = _batched(dy / divisor, n)
    c = shares.shape[1]
    ones = tt.full((c, 1, *kernel), 1.0, shares.dtype)
    return tt.reshape(_transposed(shares, ones, stride, padding, (1,) * n, c, sizes), x.shape)


def _even_bins(sizes: Sequence[int], bins: Sequence[int]) -> tuple[int, ...]:
    """The tile of an adaptive pooling whose counts of bins divide their dims (so its bins are a max pooling's tiles:
    global pooling among them); uneven bins run in torch."""
    if any(size % int(b) for size, b in zip(sizes, bins)):
        raise Unsupported(f"adaptive max pooling of {tuple(sizes)} into uneven bins {tuple(bins)}")
    return tuple(size // int(b) for size, b in zip(sizes, bins))


def adaptive_max_pool(x: Traced, output_size: Sequence[int]) -> tuple[Traced, Traced]:
    """torch's adaptive max pooling into even bins: max pooling by tiles of `L / bins` (maxima and indices)."""
    n = len(output_size)
    kernel = _even_bins(x.shape[-n:], output_size)
    return max_pool_with_indices(x, kernel, kernel, (0,) * n, (1,) * n, False, n=n)


def adaptive_max_pool_backward(dy: Traced, x: Traced, indices: Traced, *, n: int) -> Traced:
    """The gradient of adaptive max pooling into even bins: max pooling's, by tiles."""
    kernel = _even_bins(x.shape[-n:], dy.shape[-n:])
    return max_pool_with_indices_backward(dy, x, kernel, kernel, (0,) * n, (1,) * n, False, indices, n=n)


def _bin_means(length: int, bins: int) -> Traced:
    """`[bins, length]`: row i the mean over adaptive pooling's bin i, elements `floor(i L / bins)` to
    `ceil((i + 1) L / bins)` (neighbouring bins share an element where `bins` does not divide `L`)."""
    i, j = tt.reshape(tt.arange(bins), (bins, 1)), tt.reshape(tt.arange(length), (1, length))
    start, end = i * length // bins, ((i + 1) * length + bins - 1) // bins
    inside = ((j >= start) & (j < end)).astype("float32")
    return inside / (end - start).astype("float32")


def _matrix_along(x: Traced, matrix: Traced, axis: int) -> Traced:
    """`x` with its dim `axis` (`matrix.shape[1]` long) replaced by `matrix @` that dim (`matrix.shape[0]` long): a
    broadcast product summed over the dim, one reduction that computes the matrix's elements where it reads them."""
    rows, length = matrix.shape
    weights = tt.reshape(matrix, (rows, length) + (1,) * (x.ndim - axis - 1))
    return tt.sum(tt.reshape(x, (*x.shape[:axis], 1, *x.shape[axis:])) * weights, axis=axis + 1)


def adaptive_avg_pool(x: Traced, output_size: Sequence[int]) -> Traced:
    """torch's adaptive average pooling of the last `len(output_size)` dims: each dim multiplied by its bins' means
    (`_bin_means`), one reduction a dim; 16-bit floats in float32."""
    x = x.astype("float32") if x.dtype.itemsize < 4 else x
    n = len(output_size)
    for dim, bins in enumerate(output_size):
        x = _matrix_along(x, _bin_means(x.shape[x.ndim - n + dim], int(bins)), x.ndim - n + dim)
    return x


def adaptive_avg_pool_backward(dy: Traced, x: Traced, *, n: int) -> Traced:
    """The gradient of adaptive average pooling: each dim of `dy` multiplied by the transposed bins' means."""
    dy = dy.astype("float32") if dy.dtype.itemsize < 4 else dy
    for dim in range(n):
        axis = dy.ndim - n + dim
        dy = _matrix_along(dy, tt.transpose(_bin_means(x.shape[axis], dy.shape[axis])), axis)
    return dy


RULES = {
    aten.convolution.default: convolution,
    aten.convolution_backward.default: convolution_backward,
    aten.max_pool2d_with_indices.default: functools.partial(max_pool_with_indices, n=2),
    aten.max_pool3d_with_indices.default: functools.partial(max_pool_with_indices, n=3),
    aten.max_pool2d_with_indices_backward.default: functools.partial(max_pool_with_indices_backward, n=2),
    aten.max_pool3d_with_indices_backward.default: functools.partial(max_pool_with_indices_backward, n=3),
    aten.avg_pool2d.default: functools.partial(avg_pool, n=2),
    aten.avg_pool3d.default: functools.partial(avg_pool, n=3),
    aten.avg_pool2d_backward.default: functools.partial(avg_pool_backward, n=2),
    aten.avg_pool3d_backward.default: functools.partial(avg_pool_backward, n=3),
    aten._adaptive_avg_pool2d.default: adaptive_avg_pool,
    aten._adaptive_avg_pool3d.default: adaptive_avg_pool,
    aten._adaptive_avg_pool2d_backward.default: functools.partial(adaptive_avg_pool_backward, n=2),
    aten._adaptive_avg_pool3d_backward.default: functools.partial(adaptive_avg_pool_backward, n=3),
    aten.adaptive_max_pool2d.default: adaptive_max_pool,
    aten.adaptive_max_pool3d.default: adaptive_max_pool,
    aten.adaptive_max_pool2d_backward.default: functools.partial(adaptive_max_pool_backward, n=2),
    aten.adaptive_max_pool3d_backward.default: functools.partial(adaptive_max_pool_backward, n=3),
}
"""ATen overload -> rule, for convolutions and their gradients."""
