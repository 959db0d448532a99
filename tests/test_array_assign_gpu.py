"""`x[key] = value` into inputs on the GPU: DeviceArrays and torch CUDA tensors are updated in place (one row
stored), a strided or misaligned torch input through the copy the call makes, which is copied back; a host
array staged on the GPU is copied back too; and the step can be captured in a CUDA graph."""

from __future__ import annotations

import numpy as np
import pytest

import tinyton as tt

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")


@tt.jit
def write_row(cache, row, pos):
    cache[:, :, pos] = row.astype(cache.dtype)
    return cache[:, :, :4].astype(np.float32).sum()


def _expected(cache: np.ndarray, row: np.ndarray, pos: int) -> np.ndarray:
    out = cache.copy()
    out[:, :, pos] = row[:, :, 0]
    return out


def test_device_arrays_are_updated_in_place():
    rng = np.random.default_rng(0)
    cache, row = rng.standard_normal((2, 4, 64, 16)).astype(np.float32), rng.standard_normal((2, 4, 1, 16)).astype(np.float32)
    d_cache, d_row, d_pos = tt.to_device(cache), tt.to_device(row), tt.to_device(np.array([9], np.int32))
    write_row(d_cache, d_row, d_pos)
    np.testing.assert_array_equal(d_cache.numpy(), _expected(cache, row, 9))


@pytest.mark.parametrize("layout", ["contiguous", "strided", "misaligned"])
def test_torch_tensors_are_updated(layout):
    full = torch.randn(2, 4, 64, 32, device="cuda")
    cache = {"contiguous": full[..., :16].contiguous(), "strided": full[..., ::2],
             "misaligned": torch.randn(2 * 4 * 64 * 16 + 1, device="cuda")[1:].view(2, 4, 64, 16)}[layout]
    row = torch.randn(2, 4, 1, 16, device="cuda")
    want = _expected(cache.cpu().numpy(), row.cpu().numpy(), 17)
    write_row(cache, row, torch.tensor([17], dtype=torch.int32, device="cuda"))
    np.testing.assert_array_equal(cache.cpu().numpy(), want)


def test_host_arrays_are_copied_back():
    cache, row = np.zeros((1, 2, 8, 16), np.float32), np.ones((1, 2, 1, 16), np.float32)
    write_row(cache, row, np.array([3], np.int32))
    np.testing.assert_array_equal(cache, _expected(np.zeros_like(cache), row, 3))


def test_llama_greedy_tokens_on_the_gpu_match_numpy():
    """The whole decode step with its in-place cache rows, as one CUDA-graph replay per token."""
    pytest.importorskip("safetensors", reason="the `safetensors` package (llama checkpoints) is not installed")
    from example_modules import import_example

    generate, weights, config = import_example("llama", "generate", "weights", "config")
    w = weights.random_weights(config.CONFIGS["tiny"])
    prompt = generate.random_prompt(config.CONFIGS["tiny"], 2, 8, seed=0)
    want = generate.NumpyEngine(w, 2, 24, generate.Sampling()).generate(prompt, 16)
    got = generate.TinytonEngine(w, 2, 24, generate.Sampling(), graph=True).generate(prompt, 16)
    np.testing.assert_array_equal(got, want)
