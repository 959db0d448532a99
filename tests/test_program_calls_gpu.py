"""The array-program call fast path on a GPU: torch CUDA tensors (contiguous, strided, misaligned, on a
side stream), DeviceArrays, one and two launches, mixed devices refused; kernel[grid] stages CPU tensors."""

from __future__ import annotations

import numpy as np
import pytest

import tinyton as tt
from tinyton.runtime import arrays

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")


@tt.jit
def softmax(x):
    e = tt.exp(x - tt.max(x, axis=-1, keepdims=True))
    return e / tt.sum(e, axis=-1, keepdims=True)


@tt.jit
def softmax_colsum(x):
    e = tt.exp(x - tt.max(x, axis=-1, keepdims=True))
    return (e / tt.sum(e, axis=-1, keepdims=True)).sum(axis=0)


@tt.jit
def scaled(x, w):
    return x * w


def test_torch_inputs_of_every_layout() -> None:
    x = torch.randn(32, 2048, device="cuda")
    flat = torch.randn(32 * 2048 + 1, device="cuda")
    for view in [x, x.t().contiguous().t(), flat[1:].view(32, 2048), x.half(), x[:, :1024], x]:
        torch.testing.assert_close(softmax(view), torch.softmax(view.float(), -1).to(view.dtype),
                                   rtol=2e-3 if view.dtype == torch.half else 1e-5, atol=1e-6)
        torch.testing.assert_close(softmax_colsum(view).float(), torch.softmax(view.float(), -1).sum(0),
                                   rtol=2e-3, atol=2e-3)


def test_side_stream_and_back_to_back_calls() -> None:
    x = torch.randn(64, 512, device="cuda")
    expected = torch.softmax(x, -1).sum(0)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        results = [softmax_colsum(x) for _ in range(100)]
    stream.synchronize()
    for y in results:
        torch.testing.assert_close(y, expected, rtol=1e-4, atol=1e-4)
    assert len({y.data_ptr() for y in results[-2:]}) == 2  # live results never share memory


def test_mixed_devices_are_refused() -> None:
    x = torch.randn(4, 8, device="cuda")
    with pytest.raises(TypeError, match="every input must be one"):
        scaled(x, torch.randn(8))


def test_device_arrays() -> None:
    x = np.random.default_rng(0).standard_normal((16, 256)).astype(np.float32)
    y = softmax(arrays.to_device(x))
    assert isinstance(y, arrays.DeviceArray)
    e = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_allclose(y.numpy(), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_kernel_stages_cpu_tensors() -> None:
    @tt.jit
    def double(src, dst, n, BLOCK: tt.constexpr):
        offsets = tt.arange(0, BLOCK)
        tt.store(dst + offsets, tt.load(src + offsets, mask=offsets < n) * 2, mask=offsets < n)

    src, dst = torch.arange(16, dtype=torch.float32), torch.zeros(16)
    double[(1,)](src, dst, 16, BLOCK=16)
    torch.testing.assert_close(dst, src * 2)
