"""The torch backend on CUDA tensors (tinyton's kernels on the GPU, on torch's current stream): the models of
tests/test_torch_models.py forward, backward and training, bf16, CUDA-graph replay, a side stream."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch", reason="the torch backend's tests need torch")

from torch_checks import TOL, check_forward_backward, check_training, expected_fallbacks
from torch_models import GPTBlock, LayerNorm, LlamaBlock, NanoGPT, rope_tables

import tinyton.torch as ttt

CUDA = "cuda"


def test_llama_block_forward_backward_on_the_gpu() -> None:
    torch.manual_seed(0)
    cos, sin = (t.to(CUDA) for t in rope_tables(64, 16))
    x = torch.randn(2, 64, 128, device=CUDA, requires_grad=True)
    check_forward_backward(LlamaBlock(128, 8, 2, 256).to(CUDA), x, cos, sin)


def test_nanogpt_blocks_forward_backward_on_the_gpu() -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 64, 128, device=CUDA, requires_grad=True)
    check_forward_backward(GPTBlock(128, 4).to(CUDA).eval(), x)
    check_forward_backward(GPTBlock(128, 4, gelu="none", norm=LayerNorm).to(CUDA).eval(), x.detach().requires_grad_(),
                           fallbacks=expected_fallbacks(("erf", "aten.gelu.default"), ("erf", "aten.erf.default")))


def test_small_lm_training_on_the_gpu() -> None:
    torch.manual_seed(0)
    model = NanoGPT(vocab=96, block_size=64, dim=64, heads=4, layers=2).to(CUDA)
    idx, targets = (torch.randint(0, 96, (4, 64), device=CUDA) for _ in range(2))
    check_training(model, idx, targets)


def test_llama_block_in_bf16() -> None:
    torch.manual_seed(0)
    block = LlamaBlock(256, 8, 2, 512).to(CUDA, torch.bfloat16).eval()
    cos, sin = (t.to(CUDA, torch.bfloat16) for t in rope_tables(128, 32))
    x = torch.randn(1, 128, 256, device=CUDA, dtype=torch.bfloat16)
    with torch.no_grad():
        e = ttt.explain(block, x, cos, sin)
        torch.testing.assert_close(e.output, block(x, cos, sin), atol=5e-2, rtol=5e-2)
    assert not e.fallbacks, e.reasons


def test_reduce_overhead_replays_a_cuda_graph() -> None:
    torch.manual_seed(0)
    block = GPTBlock(128, 4).to(CUDA).eval()
    compiled = torch.compile(block, backend=ttt.backend, mode="reduce-overhead")
    with torch.no_grad():
        for _ in range(4):  # eager, capture, replays; every call on new inputs
            x = torch.randn(2, 32, 128, device=CUDA)
            torch.testing.assert_close(compiled(x).clone(), block(x), **TOL)


def test_runs_on_torch_current_stream() -> None:
    torch.manual_seed(0)
    w = torch.randn(256, 256, device=CUDA)
    compiled = torch.compile(lambda x: torch.softmax(x @ w, -1), backend=ttt.backend)
    x = torch.randn(512, 256, device=CUDA)
    compiled(x)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y = compiled(x)
        expected = torch.softmax(x @ w, -1)
    side.synchronize()
    torch.testing.assert_close(y, expected, **TOL)
