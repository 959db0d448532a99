"""The torch backend op by op and its contracts: attention forms, fallbacks with reasons, shapes, graph breaks,
the entry point and explain (CPU tensors on the simulator)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the torch backend's tests need torch (pip install torch)")
F = torch.nn.functional

from torch_checks import Lambda, check_forward_backward, kernel_kinds
from torch_models import rope, rope_tables

import tinyton.torch as ttt
from tinyton.runtime import driver
from tinyton.torch.common import Unsupported, array_dtype
from tinyton.torch.support import device_reason

ROOT = Path(__file__).resolve().parent.parent
TOL = {"atol": 1e-4, "rtol": 1e-4}


def check(fn, *args, fallbacks=frozenset()) -> ttt.Explanation:
    e = ttt.explain(fn, *args)
    torch.testing.assert_close(e.output, fn(*args), **TOL)
    assert set(e.fallbacks) == set(fallbacks), e.reasons
    return e


def _qkv(b: int = 1, h: int = 2, kv: int = 2, t: int = 8, d: int = 16) -> tuple[torch.Tensor, ...]:
    torch.manual_seed(0)
    return torch.randn(b, h, t, d), torch.randn(b, kv, t, d), torch.randn(b, kv, t, d)


@pytest.mark.parametrize("kwargs", [{}, {"is_causal": True}, {"scale": 0.3}], ids=["plain", "causal", "scale"])
def test_sdpa_is_one_flash_attention_kernel(kwargs: dict) -> None:
    e = check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **kwargs), *_qkv())
    assert e.num_launches == 1, str(e)
    assert "attention" in str(e)


def test_sdpa_masks_and_gqa() -> None:
    q, k, v = _qkv(h=4, kv=2)
    keep = torch.rand(8, 8) > 0.3
    keep[:, 0] = True
    bias = torch.randn(8, 8)
    check(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True), q, k, v, keep)
    check(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True), q, k, v, bias)
    check(lambda q, k, v: F.scaled_dot_product_attention(q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1),
                                                         is_causal=True), q, k, v)


FLASH_BACKWARD = ["attention_delta", "attention_dkdv", "attention_dq"]  # the forward saved o and the logsumexp
MASKED = ["row_reduction", "elementwise"]  # the rows whose mask keeps no key, and their output (or gradient) zeroed


def _mask(kind: str) -> torch.Tensor:
    keep = torch.rand(40, 40, generator=torch.Generator().manual_seed(1)) > 0.3
    keep[:, 0], keep[7] = True, False  # row 7 keeps no key
    return keep if kind == "bool" else torch.zeros(40, 40).masked_fill(~keep, float("-inf")) + 0.1 * keep


@pytest.mark.parametrize("kwargs,kv,mask", [({}, 2, None), ({"is_causal": True}, 2, None),
                                            ({"scale": 0.3, "is_causal": True}, 2, None),
                                            ({"is_causal": True, "enable_gqa": True}, 1, None),
                                            ({}, 2, "bool"), ({}, 2, "additive")],
                         ids=["plain", "causal", "scale", "gqa", "bool-mask", "additive-mask"])
def test_training_sdpa_is_flash_attention_forward_and_backward(kwargs: dict, kv: int, mask: str | None) -> None:
    """A training step's SDPA saves q, k and v, not the probabilities: its forward is one flash-attention kernel,
    its backward (the scores recomputed, autograd's gradient math) FlashAttention-2's kernels; gradients as eager's,
    0 for a row whose mask keeps no key."""
    q, k, v = (t.requires_grad_() for t in _qkv(h=2, kv=kv, t=40))
    if mask is not None:
        kwargs = {**kwargs, "attn_mask": _mask(mask)}
    sdpa = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **kwargs)  # noqa: E731
    e = ttt.explain(sdpa, q, k, v)
    weights = torch.randn_like(e.output)
    (e.output * weights).sum().backward()
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    want = sdpa(*leaves)
    (want * weights).sum().backward()
    torch.testing.assert_close(e.output, want, **TOL)
    for got, expected in zip((q, k, v), leaves):
        torch.testing.assert_close(got.grad, expected.grad, **TOL)
    kinds = {group.graph: [step.launch.kind for step in group.last.steps] for group in e.report.groups}
    masked = MASKED if mask is not None else []
    assert kinds == {"forward": [*masked[:1], "attention", *masked[1:]], "backward": [*masked, *FLASH_BACKWARD]}, str(e)


def test_attention_written_out_stays_flash_attention_when_sizes_turn_dynamic() -> None:
    """dynamo marks sizes symbolic once a frame has run with two sequence lengths; the graph rewrites read a symbolic
    size by its hint, so the second compile still undoes torch's batched-matmul decomposition and forms one
    flash-attention kernel (a convolution test run first had turned an encoder layer's sizes dynamic)."""
    def attention(q, k, v):
        return torch.softmax(q @ k.transpose(-2, -1) * 0.25, dim=-1) @ v

    for t in (8, 12):
        e = check(attention, *_qkv(t=t))
        assert kernel_kinds(e) == ["attention"], str(e)


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_sdpa_rows_without_a_key_give_zero_as_torch_does(kind: str) -> None:
    """torch's math gives 0 for a query row whose mask keeps no key (its `_safe_softmax`), and 0 gradients there;
    a softmax gives NaN. Such rows attend to every key and are zeroed: outputs and gradients match eager's."""
    q, k, v = (t.requires_grad_() for t in _qkv(t=8))
    keep = torch.rand(8, 8) > 0.3
    keep[:, 0], keep[2], keep[5] = True, False, False
    mask = keep if kind == "bool" else torch.zeros(8, 8).masked_fill(~keep, float("-inf"))
    sdpa = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # noqa: E731
    out = torch.compile(sdpa, backend="tinyton")(q, k, v)
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    want = sdpa(*leaves)
    torch.testing.assert_close(out, want, **TOL)
    assert out[:, :, [2, 5]].abs().max() == 0
    weights = torch.randn_like(want)
    (out * weights).sum().backward()
    (want * weights).sum().backward()
    for got, expected in zip((q, k, v), leaves):
        assert torch.isfinite(got.grad).all()
        torch.testing.assert_close(got.grad, expected.grad, **TOL)


def test_multi_head_attention_module_is_flash_attention() -> None:
    """`nn.MultiheadAttention` (dynamo keeps `F.multi_head_attention_forward` as one call) runs its SDPA as
    tinyton's math: one flash-attention kernel reading q, k and v in place (it was 15 launches, its attention
    three, before)."""
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(32, 4, batch_first=True).eval()
    x = torch.randn(2, 16, 32)
    with torch.no_grad():
        e = check(lambda x: mha(x, x, x, need_weights=False)[0], x)
    kinds = kernel_kinds(e)
    assert kinds.count("attention") == 1 and "softmax" not in kinds and e.num_launches <= 8, str(e)


def test_multi_head_attention_module_trains_as_flash_attention() -> None:
    """In a training step `nn.MultiheadAttention`'s attention (its math written out around a softmax) is recomputed
    in the backward: one flash-attention kernel forward, FlashAttention-2's kernels backward, eager's gradients."""
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(64, 4, batch_first=True)
    e = check_forward_backward(_SelfAttention(mha), torch.randn(2, 16, 64, requires_grad=True))
    kinds = {g.graph: [step.launch.kind for step in g.last.steps] for g in e.report.groups}
    assert kinds["forward"].count("attention") == 1 and "softmax" not in kinds["forward"], str(e)
    assert {"attention_dkdv", "attention_dq"} <= set(kinds["backward"]), str(e)
    assert "take" not in kinds["forward"] and len(kinds["forward"]) <= 6, str(e)  # q, k, v read where projected


class _SelfAttention(torch.nn.Module):
    def __init__(self, mha: torch.nn.MultiheadAttention) -> None:
        super().__init__()
        self.mha = mha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mha(x, x, x, need_weights=False)[0]


@pytest.mark.parametrize("options", [{}, {"activation": "gelu", "norm_first": True}], ids=["relu", "gelu-norm-first"])
@pytest.mark.parametrize("masks", ["none", "padding", "causal"])
def test_transformer_encoder_layer_in_inference_runs_in_tinyton(options: dict, masks: str) -> None:
    """In inference `nn.TransformerEncoderLayer` calls one fused op (`torch._transformer_encoder_layer_fwd`), which
    ran in torch whole; it is written out as the layer's math: results as eager's, one flash-attention kernel."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True, **options).eval()
    x = torch.randn(2, 12, 32)
    padding = torch.zeros(2, 12, dtype=torch.bool)
    padding[1, 9:] = True
    args = {"none": (x,), "padding": (x, None, padding),
            "causal": (x, torch.nn.Transformer.generate_square_subsequent_mask(12))}[masks]
    with torch.no_grad():
        e = check(layer, *args)
    kinds = kernel_kinds(e)
    assert kinds.count("attention") == 1, str(e)


CONVOLUTIONS = {
    "1d-padded": (lambda: torch.nn.Conv1d(8, 16, 3, padding=1), (2, 8, 20)),
    "1d-depthwise-causal": (lambda: torch.nn.Conv1d(8, 8, 4, padding=3, groups=8), (2, 8, 20)),
    "1d-strided-dilated": (lambda: torch.nn.Conv1d(8, 6, 3, stride=2, dilation=2), (2, 8, 21)),
    "2d-3x3": (lambda: torch.nn.Conv2d(3, 8, 3, padding=1), (2, 3, 10, 9)),
    "2d-patches": (lambda: torch.nn.Conv2d(3, 16, 4, stride=4), (2, 3, 16, 18)),
    "2d-grouped": (lambda: torch.nn.Conv2d(4, 8, (3, 2), stride=(2, 1), groups=2, bias=False), (1, 4, 9, 7)),
    "1d-transposed": (lambda: torch.nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1), (2, 4, 9)),
    "2d-transposed-grouped": (lambda: torch.nn.ConvTranspose2d(4, 6, (3, 2), stride=(2, 3), groups=2, dilation=(1, 2)),
                              (1, 4, 5, 4)),
    "1d-transposed-cropped": (lambda: torch.nn.ConvTranspose1d(3, 2, 2, padding=1), (2, 3, 7)),
    "2d-patches-16x16": (lambda: torch.nn.Conv2d(3, 8, 16, stride=16), (1, 3, 32, 40)),
    "2d-transposed-tiles": (lambda: torch.nn.ConvTranspose2d(8, 4, 2, stride=2), (2, 8, 3, 5)),
    "2d-transposed-tiles-grouped": (lambda: torch.nn.ConvTranspose2d(4, 6, (2, 3), stride=(2, 3), groups=2,
                                                                     output_padding=1), (1, 4, 3, 2)),
}


@pytest.mark.parametrize("name", CONVOLUTIONS)
def test_convolutions_are_windows_and_a_matmul(name: str) -> None:
    """Convolutions (1-d and 2-d, padded, strided, dilated, grouped, depthwise, a ViT's patches, transposed) run in
    tinyton: windows of the input gathered into columns, one matmul per group (a transposed one's input spread by
    the stride first, or, for tiles, each input position's block put in place). A ViT's 16 x 16 patches, 256 kernel
    positions, are a reshape: only overlapping windows are limited to `MAX_KERNEL_POSITIONS` (it ran in torch)."""
    torch.manual_seed(0)
    make, shape = CONVOLUTIONS[name]
    conv = make().eval()
    with torch.no_grad():
        e = check(conv, torch.randn(*shape))
    assert 0 < e.num_launches <= (8 if "transposed" in name else 4) and "matmul" in str(e)


@pytest.mark.parametrize("name", ["1d-padded", "2d-3x3", "2d-patches"])
def test_a_convolutions_bias_and_activation_run_in_its_epilogue(name: str) -> None:
    """The product `[B, 1, C, H * W]` of a convolution of one group is viewed as `[B, C, H, W]`: its bias and an
    activation move onto the product's shape, into its epilogue (a kernel of their own for 2-d convolutions, whose
    reshape also drops the group's size-1 dim: 3 launches)."""
    torch.manual_seed(0)
    make, shape = CONVOLUTIONS[name]
    model = torch.nn.Sequential(make(), torch.nn.GELU()).eval()
    with torch.no_grad():
        e = check(model, torch.randn(*shape))
    assert e.num_launches == 2 and kernel_kinds(e)[-1] == "matmul_epilogue", str(e)


@pytest.mark.parametrize("name", CONVOLUTIONS)
def test_convolutions_train_in_tinyton(name: str) -> None:
    """`convolution_backward` (the input gradient a transposed convolution, or a convolution for a transposed one;
    the weight gradient `dy` times the windows; the bias gradient a sum) runs in tinyton: eager's gradients, no
    ATen op in torch."""
    torch.manual_seed(0)
    make, shape = CONVOLUTIONS[name]
    check_forward_backward(make(), torch.randn(*shape, requires_grad=True))


def test_fmod_and_remainder_run_in_tinyton() -> None:
    """`torch.fmod` (the dividend's sign, exact) and `torch.remainder` (the divisor's), of floats and ints, tensors and
    scalars: one kernel, eager's values."""
    torch.manual_seed(0)

    def f(x: torch.Tensor, y: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
        ints = torch.fmod(i, 3) + i % 4 + torch.remainder(i, -3)
        return torch.fmod(x, y) + torch.fmod(x, 1.5) + torch.remainder(x, y) * 2 + ints.float()

    e = check(f, torch.randn(4, 8) * 5, torch.randn(4, 8) + 0.5, torch.randint(-20, 20, (4, 8)))
    assert e.num_launches == 1, str(e)


def test_float_floor_division_is_torchs() -> None:
    """`a // b` and `torch.div(rounding_mode="floor")` of floats as torch's (NumPy's): `(a - fmod(a, b)) / b` rounded,
    so `1.0 // 0.1` is 9 and `2.0 // -inf` is -1; the rule's `floor(a / b)` gave 10 and -0, silently."""
    a = torch.tensor([1.0, 0.3, -1.0, 7.0, 1e-30, 5.0, -0.0, 2.0, -7.5, 3.0])
    b = torch.tensor([0.1, 0.1, 0.1, 0.7, 3.0, float("inf"), 3.0, -float("inf"), 2.0, 0.0])
    e = check(lambda a, b: (a // b, torch.div(a, b, rounding_mode="floor"), a // 0.1), a, b)
    for got, want in zip(e.output, (a // b, a // b, a // 0.1), strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


def test_division_rounded_toward_zero_and_trunc() -> None:
    """`torch.div(rounding_mode="trunc")` of floats (`trunc(a / b)`, as torch) and of ints (exact: the rounded-down
    quotient, one more where negative and inexact), and `torch.trunc` / `torch.frac`: they ran in torch."""
    a, b = torch.tensor([-3.5, 3.5, 7.0, -0.2, 1.0]), torch.tensor([2.0, -2.0, 0.7, 3.0, 0.1])
    i, j = torch.tensor([-7, 7, -6, 6, 0, -1]), torch.tensor([2, -2, 3, -4, 5, 3])

    def f(a: torch.Tensor, b: torch.Tensor, i: torch.Tensor, j: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (torch.div(a, b, rounding_mode="trunc"), torch.div(i, j, rounding_mode="trunc"),
                torch.div(i, 4, rounding_mode="trunc"), torch.trunc(a * 1.7), torch.frac(a * 1.7))

    e = ttt.explain(f, a, b, i, j)
    for got, want in zip(e.output, f(a, b, i, j), strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert not e.fallbacks, e.reasons


def test_scatter_add_and_index_add_run_in_tinyton() -> None:
    """`scatter_add` along any dim (an index shorter than its source: the source read over the index's extent), and
    `index_add` (an accumulating `index_put`): one-hot sums, eager's values, nothing in torch."""
    torch.manual_seed(0)

    def f(base, idx, src, idx2, src2, b3, i3, s3):
        return (base.scatter_add(1, idx, src), base.scatter_add(0, idx2, src2), b3.scatter_add(-1, i3, s3),
                base.index_add(0, torch.tensor([0, 2, 2]), src2[:3] * 0.5))

    args = (torch.randn(4, 6), torch.randint(0, 6, (4, 9)), torch.randn(4, 9), torch.randint(0, 4, (7, 6)),
            torch.randn(8, 6), torch.randn(2, 3, 5), torch.randint(0, 5, (2, 3, 4)), torch.randn(2, 3, 4))
    e = ttt.explain(f, *args)
    for got, want in zip(e.output, f(*args), strict=True):
        torch.testing.assert_close(got, want, **TOL)
    assert not e.fallbacks, e.reasons


def test_erfinv_runs_in_tinyton() -> None:
    """`torch.erfinv` (`nn.init.trunc_normal_`'s): float32-accurate, ±1 to ±inf."""
    x = torch.cat([torch.linspace(-0.999, 0.999, 101), torch.tensor([-1.0, 1.0, 0.0])])
    e = check(torch.erfinv, x)
    assert e.num_launches == 1, str(e)


def test_explain_compiles_past_dynamos_recompile_limit() -> None:
    """dynamo compiles one code object (`nn.Linear.forward`) at most `recompile_limit` (8) times in a process and then
    runs it eagerly: an explanation always compiles its call (the suite's ninth `nn.Conv1d` explained nothing)."""
    for width in range(4, 4 + torch._dynamo.config.recompile_limit + 2):
        with torch.no_grad():
            e = ttt.explain(torch.nn.Linear(width, 8), torch.randn(2, width))
        assert e.num_launches == 1, width


def test_attention_written_out_is_flash_attention() -> None:
    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        t = q.size(-2)
        s = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))
        s = s.masked_fill(torch.triu(torch.ones(t, t, dtype=torch.bool), 1), float("-inf"))
        return torch.softmax(s, dim=-1) @ v

    e = check(attention, *_qkv())
    assert e.num_launches == 1, str(e)


def test_norms_activations_losses() -> None:
    torch.manual_seed(0)
    x, w, b = torch.randn(4, 32), torch.randn(32), torch.randn(32)
    check(lambda x, w, b: F.layer_norm(x, (32,), w, b), x, w, b)
    check(lambda x, w: F.rms_norm(x, (32,), w, eps=1e-6), x, w)
    check(lambda x: F.silu(x) * F.gelu(x, approximate="tanh") + torch.sigmoid(x) + torch.tanh(x) + F.relu(x), x)
    check(lambda x: F.log_softmax(x, -1) + F.softmax(x, 0), x)
    targets = torch.randint(0, 32, (4,))
    check(lambda x, t: F.cross_entropy(x, t), x, targets)
    check(lambda x: F.dropout(x, 0.5, training=False) * 2, x)


def test_var_mean_and_std_mean() -> None:
    """`torch.var_mean` and `torch.std_mean` (unbiased or not, over a dim or all), forward and backward: the variance
    and the mean (`aten.var_mean` ran in torch)."""
    torch.manual_seed(0)

    def stats(x: torch.Tensor) -> torch.Tensor:
        var, mean = torch.var_mean(x, -1)
        std, mean0 = torch.std_mean(x, -1, correction=0)
        return torch.stack([var, mean, std, mean0, torch.var_mean(x)[0].expand(6)])

    check_forward_backward(Lambda(stats), torch.randn(6, 16, requires_grad=True))


def test_views_splits_and_rope() -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 6, 8)

    def shapes(x: torch.Tensor) -> torch.Tensor:
        a, b, c = x.split([2, 2, 4], dim=-1)
        y = torch.cat([-c[..., 2:], c[..., :2], a * b], dim=-1).permute(1, 0, 2).contiguous()
        return y.view(6, -1).t().unsqueeze(0).squeeze(0)[::2] + x[:, 1].flatten()[:6, None]

    check(shapes, x)


def test_diagonals_and_their_gradient() -> None:
    """`torch.diagonal` (einsum's `ii->i`; any offset, any two dims) is a strided window of the two dims merged, and its
    gradient, `diagonal_scatter`, a scatter into that window; a diagonal of an input is torch's view of it, no kernel
    (both ran in torch)."""
    torch.manual_seed(0)
    check_forward_backward(Lambda(lambda a: torch.diagonal(a, 1, -2, -1) * 2), torch.randn(2, 4, 5, requires_grad=True))
    check_forward_backward(Lambda(lambda a: torch.diagonal(a.exp(), -2, 0, 2)), torch.randn(5, 3, 4, requires_grad=True))
    check_forward_backward(Lambda(lambda a, s: torch.diagonal_scatter(a, s * 2, -1)), torch.randn(4, 3),
                           torch.randn(3, requires_grad=True))
    view = ttt.explain(lambda a: torch.einsum("ii->i", a), torch.randn(4, 4))
    assert view.num_launches == 0 and not view.fallbacks, view.reasons


def test_unsupported_op_runs_in_torch_with_the_rest_in_tinyton() -> None:
    torch.manual_seed(0)
    x = torch.randn(4, 16)
    e = check(lambda x: torch.cummax(torch.softmax(x, -1), dim=-1).values * 2 + 1, x,
              fallbacks={"aten.cummax.default"})
    assert e.reasons["aten.cummax.default"] == "no tinyton rule"
    assert e.num_launches == 2  # softmax before the cummax, the epilogue after it
    assert "fallback aten.cummax.default" in str(e)


def test_a_dtype_tinyton_lacks_falls_back_with_the_reason() -> None:
    x = torch.randn(4, 8, dtype=torch.float64)
    e = ttt.explain(lambda x: torch.exp(x) * 2, x)
    torch.testing.assert_close(e.output, torch.exp(x) * 2)  # float64 precision: exactly torch's numbers
    for op in e.fallbacks:
        assert "float64" in e.reasons[op]
    if not _holds(torch.float64):
        assert e.fallbacks == ["aten.exp.default", "aten.mul.Tensor"]


def _holds(dtype: torch.dtype) -> bool:
    try:
        return array_dtype(dtype) is not None
    except Unsupported:
        return False


def test_int64_arithmetic_runs_in_torch_but_int64_indices_run_in_tinyton() -> None:
    table, ids = torch.randn(10, 4), torch.tensor([[1, 2**33 % 10, 9]])
    e = check(lambda t, i: t[(i + 2**40) - 2**40] * 2 + t[i].sum(-1, keepdim=True), table, ids,
              fallbacks={"aten.add.Tensor", "aten.sub.Tensor"} if array_dtype(torch.int64).itemsize == 4 else set())
    for op in e.fallbacks:
        assert "int64" in e.reasons[op]
    assert e.num_launches >= 1


def test_integer_sums_accumulate_in_int64() -> None:
    """Sums of integer tensors (a padding mask's lengths, `mask.sum(-1)`; int32 and bool ones too) accumulate in int64
    as torch's, past 2**31 exactly; in tinyton where array programs hold int64 (they ran in torch)."""
    mask, big = torch.randint(0, 2, (4, 16)), torch.full((3, 4), 2**40) + torch.arange(4)
    small = torch.randint(-5, 5, (4, 16), dtype=torch.int32)
    def sums(m: torch.Tensor, b: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return m.sum(-1), b.sum(), b.sum(0, keepdim=True), s.sum(0), (m > 0).sum()

    e = ttt.explain(sums, mask, big, small)
    for got, want in zip(e.output, sums(mask, big, small), strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    narrowed = array_dtype(torch.int64).itemsize == 4
    assert set(e.fallbacks) == ({"aten.sum.dim_IntList", "aten.sum.default"} if narrowed else set()), e.reasons


def test_embedding_takes_int64_token_ids_forward_and_backward() -> None:
    """torch's token ids are int64: the gather takes them as they are (the H200 run refused them with "take
    indices must be int32"), forward and backward, with nothing in torch."""
    torch.manual_seed(0)
    table = torch.randn(96, 16, requires_grad=True)
    ids = torch.randint(0, 96, (4, 8))
    assert ids.dtype == torch.int64
    e = check(lambda t, i: F.embedding(i, t) * 2, table, ids)
    e.output.sum().backward()
    expected = torch.zeros_like(table).index_add_(0, ids.flatten(), torch.full((32, 16), 2.0))
    torch.testing.assert_close(table.grad, expected, **TOL)
    assert not e.fallbacks, e.reasons


@pytest.mark.parametrize("dim", [0, 1])
def test_negative_indices_gradients_count_from_the_end(dim: int) -> None:
    """`x[idx]` and `x[:, idx]` with negative indices (torch's from-the-end) read the rows eager reads, and their
    gradient (an accumulating `index_put`, a one-hot matmul) adds back into those rows: the one-hot of a negative index
    had matched no row, and its share of the gradient was silently lost."""
    torch.manual_seed(0)
    x = torch.randn(5, 6, requires_grad=True)
    if dim == 0:
        check_forward_backward(Lambda(lambda x, i: x[i]), x, torch.tensor([[-1, 0], [-5, 3], [-1, -2]]))
    else:
        check_forward_backward(Lambda(lambda x, i: x[:, i]), x, torch.tensor([-1, 0, -6, 3, -1]))


@pytest.mark.parametrize("pad,shape", [((1, 2, 2, 1), (2, 3, 5, 6)), ((3, 0), (2, 3, 5)), ((4, 4), (2, 3, 2)),
                                       ((1, 1, 0, 2, 2, 1), (2, 3, 4, 3, 5)), ((1, 2, 2, 1), (3, 5, 6))],
                         ids=["2d", "1d-one-side", "1d-wider-than-input", "3d", "unbatched"])
def test_replicate_padding_forward_and_backward(pad: tuple[int, ...], shape: tuple[int, ...]) -> None:
    """`F.pad(mode="replicate")` (a convolution's `padding_mode="replicate"`): its gradient adds each padded copy's
    share into the edge it copies, corners included (`replication_pad*d_backward` ran in torch)."""
    torch.manual_seed(0)
    check_forward_backward(Lambda(lambda x: F.pad(x, pad, mode="replicate")), torch.randn(*shape, requires_grad=True))


INTERPOLATIONS = {
    "nearest-2x": ({"scale_factor": 2}, (2, 3, 4, 5)),
    "nearest-size": ({"size": (7, 9)}, (2, 3, 4, 5)),
    "nearest-down": ({"size": (3, 2)}, (2, 3, 7, 5)),
    "nearest-exact": ({"scale_factor": 2, "mode": "nearest-exact"}, (2, 3, 4, 5)),
    "nearest-3d": ({"scale_factor": (2, 1, 3)}, (2, 3, 2, 3, 4)),
    "bilinear": ({"scale_factor": 2, "mode": "bilinear"}, (2, 3, 4, 5)),
    "bilinear-corners": ({"size": (7, 9), "mode": "bilinear", "align_corners": True}, (2, 3, 4, 5)),
}


@pytest.mark.parametrize("name", INTERPOLATIONS)
def test_interpolation_gathers_rows_and_columns_and_sums_them_back(name: str) -> None:
    """`F.interpolate` (nearest, up and down, 2-d and 3-d; bilinear's corners) reads `x[:, :, rows, cols]`, index arrays
    that broadcast together (`[Ho, 1]` and `[Wo]`), as eager does; its gradient, an accumulating `index_put` by them,
    sums each output row into its input row and then each column into its column (one one-hot matmul a dim, no
    transposes). Both ran in torch ("several index arrays")."""
    torch.manual_seed(0)
    kwargs, shape = INTERPOLATIONS[name]
    check_forward_backward(Lambda(lambda x: F.interpolate(x, **kwargs)), torch.randn(*shape, requires_grad=True))


def test_several_index_arrays_and_their_gradient() -> None:
    """`x[:, rows, cols]` with negative indices, both as an outer product (the gradient summed a dim at a time) and
    paired (`x[range, labels]`: its gradient, by indices that are no outer product, one one-hot matmul on the
    indexed dims flattened)."""
    torch.manual_seed(0)
    rows, cols = torch.tensor([[-1], [0], [2]]), torch.tensor([1, -1, -4, 1])
    check_forward_backward(Lambda(lambda x: x[:, rows, cols]), torch.randn(2, 5, 4, requires_grad=True))
    check_forward_backward(Lambda(lambda x, t: x[torch.arange(4), t]), torch.randn(4, 6, requires_grad=True),
                           torch.tensor([5, 0, -1, 2]))


def test_reduce_overhead_mode_runs_without_a_gpu() -> None:
    compiled = torch.compile(lambda x: torch.softmax(x, -1) * 3, backend=ttt.backend, mode="reduce-overhead")
    for _ in range(3):
        x = torch.randn(4, 8)
        torch.testing.assert_close(compiled(x), torch.softmax(x, -1) * 3, **TOL)


def test_a_group_tinyton_fails_to_compile_runs_in_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    from tinyton.errors import CompilationError
    from tinyton.torch import compiled_partition

    def refuse(*args: object, **kwargs: object) -> None:
        raise CompilationError("no kernel for this (simulated)")

    monkeypatch.setattr(compiled_partition, "build_program", refuse)
    x = torch.randn(4, 8)
    e = check(lambda x: torch.softmax(x, -1) * 3, x, fallbacks={"aten._softmax.default", "aten.mul.Tensor"})
    assert "did not compile" in e.reasons["aten.mul.Tensor"] and "simulated" in e.reasons["aten.mul.Tensor"]
    assert e.num_launches == 0


def test_unsupported_devices_are_named() -> None:
    assert "meta" in device_reason(torch.device("meta"))
    if not driver.is_available():
        assert "sees no GPU" in device_reason(torch.device("cuda", 1))
    elif driver.device_count() < 2:
        assert "sees 1 GPU" in device_reason(torch.device("cuda", 1))
    else:  # every device of the host runs in tinyton
        assert device_reason(torch.device("cuda", 1)) is None
    assert device_reason(torch.device("cpu")) is None


def test_new_shapes_compile_new_variants() -> None:
    torch.manual_seed(0)
    w = torch.randn(16, 16)

    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x @ w, -1)

    e = ttt.explain(fn, torch.randn(2, 3, 16))
    for shape in [(2, 3, 16), (4, 3, 16), (4, 5, 16), (1, 7, 16)]:
        x = torch.randn(shape)
        torch.testing.assert_close(e.compiled(x), fn(x), **TOL)
    programs = {key for g in e.report.groups for key in g.programs}
    assert len(programs) >= 3  # one per distinct shape, whether dynamo recompiled or passed sizes in
    assert not e.fallbacks


def test_data_dependent_control_flow_breaks_the_graph() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        y = torch.softmax(x, -1)
        if y.max() > 0.5:  # data-dependent: dynamo breaks the graph here
            return y * 2
        return y - 1

    for x in (torch.zeros(2, 8), torch.tensor([[10.0] + [0.0] * 7] * 2)):
        e = check(fn, x)
        assert e.num_launches >= 1


def test_explain_summary_lists_groups_and_kernels() -> None:
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    text = str(ttt.explain(lambda x, w: torch.softmax(x @ w, -1), x, w))
    assert "1 kernel launches" not in text and "2 kernel launches per forward call" in text
    assert "kernel 0: matmul" in text and "softmax" in text


def test_backend_is_found_by_name_through_its_entry_point(tmp_path: Path) -> None:
    """What `pip install` writes (an entry_points.txt in a dist-info) is what torch.compile(backend="tinyton") reads."""
    entry = [line for line in (ROOT / "pyproject.toml").read_text().splitlines() if line.startswith("tinyton = \"tinyton.torch")]
    assert entry == ['tinyton = "tinyton.torch:backend"']
    info = tmp_path / "tinyton_entry-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tinyton-entry\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[torch_dynamo_backends]\ntinyton = tinyton.torch:backend\n")
    script = textwrap.dedent("""
        import torch
        f = torch.compile(lambda x: torch.softmax(x, -1) * 2, backend="tinyton")
        x = torch.randn(3, 5)
        torch.testing.assert_close(f(x), torch.softmax(x, -1) * 2)
        print("ok")
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.stdout.strip().endswith("ok"), done.stderr[-3000:]


def test_unknown_mode_is_a_clear_error() -> None:
    with pytest.raises(Exception, match="unknown mode"):
        torch.compile(lambda x: x * 2, backend=ttt.backend, mode="fastest")(torch.ones(2))


def test_outputs_never_share_an_inputs_memory() -> None:
    x = torch.randn(4, 8)

    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return x.clone(), x.reshape(2, 16).clone(), x * 2

    e = ttt.explain(fn, x)
    for out in e.output:
        out.add_(1)  # writing a result must not change the input
    torch.testing.assert_close(e.output[2], x * 2 + 1)
    torch.testing.assert_close(e.output[0], x + 1)


def test_zero_dimensional_results_keep_their_shape() -> None:
    """A program computing 0-d tensors from sizes alone (an interpolation's scale under dynamic shapes, `scalar_tensor`
    of a size) returns them 0-d, as torch's graph has them: its NumPy results were made contiguous by
    `np.ascontiguousarray`, which returns a 0-d array as `[1]`: the graph's outputs had the wrong shape, and a partition
    reading them refused its inputs."""
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        n = torch.scalar_tensor(x.shape[0], dtype=torch.float64)
        return n, n * 2.0, torch.scalar_tensor(3)

    x = torch.randn(6, 4)
    e = ttt.explain(fn, x)
    for got, want in zip(e.output, fn(x), strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)  # shapes and dtypes too
    assert not e.fallbacks, e.reasons


def test_later_calls_convert_as_the_first_did() -> None:
    """Each signature decides on its first call which arguments are narrowed (int64 ids), which results are
    converted and which alias an input (copied): the later calls, which skip those checks, give the same."""
    x, ids = torch.randn(4, 8), torch.tensor([3, 0, 2], dtype=torch.int64)

    def fn(x: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return x.clone(), x[ids] * 2

    compiled = torch.compile(fn, backend="tinyton")
    for call in range(3):
        copy, rows = compiled(x, ids)
        copy.add_(1)  # never the input's memory, on any call
        torch.testing.assert_close(copy, x + 1)
        torch.testing.assert_close(rows, x[ids] * 2)
        assert rows.dtype == torch.float32 and copy.data_ptr() != x.data_ptr(), call


def test_views_of_inputs_are_made_by_torch() -> None:
    """A partition's output that is a view of its input (the flattened activations and the weight's transpose
    AOTAutograd saves for a linear layer's backward) is torch's view of the argument, not a copy by a kernel: a
    training forward of a linear layer and SiLU is one kernel, the product's epilogue storing it (saved too) and
    the activation, computed on the product's rows before they are reshaped to `[2, 6, 8]` (two kernels when the
    reshape stood between them)."""
    torch.manual_seed(0)
    x, w = torch.randn(2, 6, 16), torch.randn(8, 16, requires_grad=True)
    e = check(lambda x, w: F.silu(x @ w.T), x, w)
    assert e.num_launches == 1 and "reshape: reshape" not in str(e) and "transpose: transpose" not in str(e), str(e)
    loss = torch.compile(lambda x, w: F.silu(x @ w.T).square().sum(), backend=ttt.backend)(x, w)
    loss.backward()
    want = torch.func.grad(lambda w: F.silu(x @ w.T).square().sum())(w.detach())
    torch.testing.assert_close(w.grad, want, **TOL)


def test_permuted_inputs_are_passed_without_a_copy() -> None:
    """A transposed input (the weight's transpose a backward receives) is passed as the contiguous weight and
    transposed back inside the program; a contiguous call of the same shapes is a variant of its own."""
    from tinyton.torch.compiled_partition import _permutations

    torch.manual_seed(0)
    x, w = torch.randn(6, 16), torch.randn(8, 16)
    assert _permutations([x, w.T, w[:, :4]]) == {1: (1, 0)}  # a column slice is no permutation: copied
    f = torch.compile(lambda a, b: torch.tanh(a @ b), backend=ttt.backend)
    torch.testing.assert_close(f(x, w.T), torch.tanh(x @ w.T), **TOL)
    torch.testing.assert_close(f(x, w.T.contiguous()), torch.tanh(x @ w.T), **TOL)
    t = torch.randn(2, 3, 4).permute(2, 0, 1)
    g = torch.compile(lambda t: t * 2 + 1, backend=ttt.backend)
    torch.testing.assert_close(g(t), t * 2 + 1)


def test_explain_lists_each_launch_with_its_programs_and_tiles() -> None:
    """The summary names each launch as profilers do, with its programs, warps and tiles: a projection that
    leaves the GPU idle shows on the CPU already."""
    torch.manual_seed(0)
    e = check(lambda x, w: torch.relu(x @ w.T), torch.randn(40, 64), torch.randn(48, 64))
    line = next(line for line in str(e).splitlines() if "kernel 0:" in line)
    assert "matmul_epilogue" in line and "torch_partition_0_matmul_epilogue" in line, line
    assert "1 program of 4 warps, BM 64, BN 64, BK 32, STAGES 3" in line, line  # the default tiles: 40 x 48 in one


@pytest.mark.parametrize("start, end, step", [(2, 6, 1), (-5, None, 1), (1, 8, 3), (None, None, 1)])
def test_slice_scatter(start, end, step) -> None:
    """`aten.slice_scatter` (what a slice's gradient becomes) as torch writes it: a window of the source (or, with a
    step, a gather of it) where the index is in the slice, the base elsewhere."""
    torch.manual_seed(0)
    base = torch.randn(3, 8, 4)
    n = len(range(*slice(start, end, step).indices(8)))
    src = torch.randn(3, n, 4)
    e = check(lambda b, s: torch.ops.aten.slice_scatter(b, s, 1, start, end, step), base, src)
    assert e.num_launches == 1, str(e)


def test_rope_backward_is_one_elementwise_kernel() -> None:
    """RoPE's `cat((-x2, x1))` of the halves: its gradient (two slice_scatters of the halves, a window each) is one
    elementwise kernel with the products by cos and sin (four kernels and a gather of a computed array before)."""
    torch.manual_seed(0)
    cos, sin = rope_tables(8, 16)
    x = torch.randn(2, 2, 8, 16, requires_grad=True)
    dy = torch.randn(2, 2, 8, 16)
    e = ttt.explain(lambda t: rope(t, cos, sin), x)
    e.output.backward(dy)
    reference = x.detach().requires_grad_()
    rope(reference, cos, sin).backward(dy)
    torch.testing.assert_close(x.grad, reference.grad, **TOL)
    backward = [step.launch.kind for g in e.report.groups if g.graph == "backward" for step in g.last.steps]
    assert backward == ["elementwise"], str(e)


def test_sort_and_topk_run_in_tinyton() -> None:
    """`torch.sort` (ascending, descending, stable, any dim; NaN as the largest value) and `torch.topk` (largest and
    smallest, odd row lengths): eager's values; the indices of a stable sort are eager's, and every index gathers
    its value (torch's CPU sort without `stable` and topk order ties their own way)."""
    torch.manual_seed(0)
    x = torch.randint(-3, 4, (3, 5, 37)).float()
    x[0, 0, 3] = x[1, 2, 0] = float("nan")

    def f(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (*torch.sort(x, stable=True), *torch.sort(x, dim=1, descending=True, stable=True), *torch.sort(x),
                *torch.topk(x, 5), *torch.topk(x, 2, dim=0, largest=False), *torch.topk(x.half(), 3, sorted=False))

    e = ttt.explain(f, x)
    assert not e.fallbacks, e.reasons
    got, want = e.output, f(x)
    for values in range(0, len(want), 2):
        torch.testing.assert_close(got[values], want[values], equal_nan=True, rtol=0, atol=0)
        assert got[values + 1].dtype == torch.int64
    for stable in (1, 3):
        torch.testing.assert_close(got[stable], want[stable], rtol=0, atol=0)
    for values, indices, dim, source in ((4, 5, -1, x), (6, 7, -1, x), (8, 9, 0, x), (10, 11, -1, x.half())):
        torch.testing.assert_close(source.gather(dim, got[indices]), got[values], equal_nan=True, rtol=0, atol=0)


def test_scatters_of_several_elements_a_row_and_topks_gradient() -> None:
    """`scatter` of k elements a row (a tensor or a scalar source, along any dim) is k selects, one kernel per output
    shape, its index's check in it (a user's scatter: `checked_index`, an elementwise `tta.check_index`), and top-k's
    gradient (a scatter of the k values' gradients into zeros: an MoE router's backward, unchecked) runs in tinyton
    with the softmax's gradient around it, one kernel (the scatter ran in torch, with a kernel storing the zeros it
    scattered into)."""
    torch.manual_seed(0)
    base, src = torch.randn(4, 6), torch.randn(4, 3)
    index = torch.stack([torch.randperm(6)[:3] for _ in range(4)])  # torch leaves repeated indices' order open

    def f(base: torch.Tensor, index: torch.Tensor, src: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return base.scatter(1, index, src), base.T.scatter(0, index.T, 2.5), base.scatter(1, index, src * 2) * 3

    e = check(f, base, index, src)
    assert e.num_launches == 2, str(e)  # one a shape; the checks of `index` and `index.T` fused in
    x = torch.randn(8, 5, requires_grad=True)
    e = ttt.explain(lambda x: (x.softmax(-1).topk(2, dim=-1).values ** 2).sum(), x)
    e.output.backward()
    reference = x.detach().clone().requires_grad_()
    (reference.softmax(-1).topk(2, dim=-1).values ** 2).sum().backward()
    torch.testing.assert_close(x.grad, reference.grad, **TOL)
    backward = [step.launch.kind for g in e.report.groups if g.graph == "backward" for step in g.last.steps]
    assert not e.fallbacks and len(backward) == 1, e.reasons or str(e)


def test_topk_over_a_vocabulary_runs_in_tinyton() -> None:
    """`torch.topk` over Llama 3's 128256 logits, a row longer than one program sorts (sorted in chunks and
    merged), and the median of such a row: eager's values and indices (no ties), no fallback."""
    torch.manual_seed(0)
    logits = torch.randn(2, 128256)

    def f(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (*torch.topk(x, 50), *torch.median(x, dim=-1))

    e = ttt.explain(f, logits)
    assert not e.fallbacks, e.reasons
    for got, want in zip(e.output, f(logits), strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_kthvalue_and_medians_run_in_tinyton() -> None:
    """`torch.kthvalue`, `torch.median` (whole tensor and along a dim: the lower median) and `torch.nanmedian`, odd
    and even rows, keepdim: eager's values and, on rows without ties, eager's indices; a row holding one NaN: NaN at
    its index for median (eager's first NaN), the median of the rest for nanmedian; an all-NaN row NaN."""
    torch.manual_seed(0)
    x = torch.randn(4, 6, 7)
    x[0, 1, 3] = x[2, 0, 5] = float("nan")
    clean = torch.randn(5, 8)

    def f(x: torch.Tensor, clean: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (*torch.kthvalue(x, 3), *torch.kthvalue(x, 2, dim=1, keepdim=True), *torch.kthvalue(x, 7, dim=-1),
                *torch.median(x, dim=-1), *torch.median(x, dim=1, keepdim=True), *torch.median(clean, dim=0),
                *torch.nanmedian(x, dim=-1), *torch.nanmedian(clean, dim=1, keepdim=True), torch.median(x),
                torch.median(clean), torch.nanmedian(x), torch.nanmedian(clean),
                *torch.median((clean * 1000).int(), dim=1))

    e = ttt.explain(f, x, clean)
    assert not e.fallbacks, e.reasons
    for got, want in zip(e.output, f(x, clean), strict=True):
        torch.testing.assert_close(got, want, equal_nan=True, rtol=0, atol=0)
    rows = torch.full((3, 5), float("nan"))
    rows[1] = torch.arange(5.0)
    e = ttt.explain(lambda r: (torch.nanmedian(r, dim=1).values, torch.nanmedian(r), torch.median(r)), rows)
    for got, want in zip(e.output, (torch.nanmedian(rows, dim=1).values, torch.nanmedian(rows), torch.median(rows))):
        torch.testing.assert_close(got, want, equal_nan=True, rtol=0, atol=0)
