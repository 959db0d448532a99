"""Streams and CUDA graphs: `tt.stream`, `tt.graphed`, `tt.CudaGraph` (tinyton/runtime/streams.py, graphs.py)."""

from __future__ import annotations

import numpy as np
import pytest

import tinyton as tt
from tinyton.runtime import driver, streams


@tt.jit
def scale_add(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tt.constexpr):
    offsets = tt.program_id(0) * BLOCK + tt.arange(0, BLOCK)
    mask = offsets < n
    x = tt.load(x_ptr + offsets, mask=mask)
    y = tt.load(y_ptr + offsets, mask=mask)
    tt.store(out_ptr + offsets, x * alpha + y, mask=mask)


@tt.jit
def rmsnorm(x, w):
    return x * tt.rsqrt(tt.mean(x * x, axis=-1, keepdims=True) + 1e-5) * w


@tt.jit
def bump(counter_ptr):
    tt.store(counter_ptr, tt.load(counter_ptr) + 1)


def step(x, w, counter):
    """One 'decode step': an array program, then a kernel updating state in place."""
    h = rmsnorm(x, w)
    bump[(1,)](counter)
    return h


def reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    return x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + 1e-5) * w


def test_stream_context_sets_and_restores_the_current_stream():
    assert streams.explicit_stream() is None and streams.current_stream() == 0
    with tt.stream(7):
        assert streams.current_stream() == 7
        with tt.stream(9):
            assert streams.current_stream(torch_inputs=True) == 9
        assert streams.explicit_stream() == 7
    assert streams.explicit_stream() is None


def test_stream_handles_of_foreign_streams():
    class TorchLike:
        cuda_stream = 1234

    assert streams.handle_of(TorchLike()) == 1234
    with pytest.raises(TypeError, match="not a CUDA stream"):
        streams.handle_of("stream")


def test_graphed_runs_the_function_on_every_call_without_a_gpu(monkeypatch):
    monkeypatch.setattr(driver, "is_available", lambda: False)
    calls = []
    fn = tt.graphed(lambda x: calls.append(x) or x * 2)
    assert [fn(i) for i in range(3)] == [0, 2, 4] and calls == [0, 1, 2]


@pytest.mark.gpu
def test_launches_go_to_the_chosen_stream():
    n = 5000
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((2, n), dtype=np.float32)
    dx, dy, dout = tt.to_device(x), tt.to_device(y), tt.to_device(np.zeros(n, np.float32))
    s = tt.Stream()
    with tt.stream(s):
        scale_add[(tt.cdiv(n, 1024),)](dx, dy, dout, n, 2.0, BLOCK=1024)
        out = rmsnorm(tt.to_device(x.reshape(5, 1000)), tt.to_device(y[:1000].copy()))
    s.synchronize()
    np.testing.assert_allclose(dout.numpy(), 2 * x + y, rtol=1e-6)
    np.testing.assert_allclose(out.numpy(), reference(x.reshape(5, 1000), y[:1000]), rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
def test_graph_replay_matches_plain_launches_and_keeps_state():
    rng = np.random.default_rng(1)
    w = tt.to_device(rng.standard_normal(256, dtype=np.float32))
    counter = tt.to_device(np.zeros(1, np.int32))
    graphed_step = tt.graphed(step)
    xs = [rng.standard_normal((4, 256), dtype=np.float32) for _ in range(5)]
    captured_x = tt.to_device(xs[0])
    for i, x in enumerate(xs):
        if i == 1:
            captured_x.copy_from_host(x)  # call 2 captures on captured_x
        # calls 1 and 2 pass captured_x; calls 3+ pass new arrays, copied into captured_x before the replay
        h = graphed_step(captured_x if i < 2 else tt.to_device(x), w, counter)
        driver.synchronize()
        np.testing.assert_allclose(h.numpy(), reference(x, w.numpy()), rtol=1e-4, atol=1e-5)
    assert counter.numpy()[0] == 5  # the in-place update ran once per call, replays included
    assert graphed_step.calls == 5 and graphed_step.graph is not None


@pytest.mark.gpu
def test_torch_inputs_follow_torchs_current_stream():
    torch = pytest.importorskip("torch")
    x = torch.randn(64, 128, device="cuda")
    w = torch.randn(128, device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        assert streams.current_stream(torch_inputs=True) == s.cuda_stream
        out = rmsnorm(x, w)
    s.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), reference(x.cpu().numpy(), w.cpu().numpy()), rtol=1e-4, atol=1e-5)


@tt.jit
def softmax_colsum(x):
    """Two launches with an intermediate between them (kept per stream between calls: tinyton/runtime/scratch.py)."""
    e = tt.exp(x - tt.max(x, axis=-1, keepdims=True))
    return (e / tt.sum(e, axis=-1, keepdims=True)).sum(axis=0)


@pytest.mark.gpu
def test_a_torch_graph_and_eager_calls_on_its_stream_never_share_intermediates():
    """The capture stream's kept block is not baked into the graph: replays on the default stream run
    alongside eager calls on the capture stream, each on its own intermediates."""
    torch = pytest.importorskip("torch")
    static_x, other = torch.randn(64, 4096, device="cuda"), torch.randn(64, 4096, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        softmax_colsum(other)  # the side stream's block is kept from here on
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        captured = softmax_colsum(static_x)
    eager = []
    for _ in range(50):
        graph.replay()
        with torch.cuda.stream(side):
            eager.append(softmax_colsum(other))
    torch.cuda.synchronize()
    torch.testing.assert_close(captured, torch.softmax(static_x, -1).sum(0), rtol=1e-4, atol=1e-4)
    for y in eager:
        torch.testing.assert_close(y, torch.softmax(other, -1).sum(0), rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_a_tinyton_graph_keeps_its_own_intermediates():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 512), dtype=np.float32)
    expected = np.exp(x - x.max(-1, keepdims=True))
    expected = (expected / expected.sum(-1, keepdims=True)).sum(0)
    dx = tt.to_device(x)
    graph = tt.CudaGraph()
    with tt.stream(graph.stream):
        softmax_colsum(dx)  # eager on the graph's stream: its block is kept
    graph.synchronize()
    with graph.capture():
        out = softmax_colsum(dx)
    assert len(graph.buffers) == 2  # the result and a fresh intermediates' block, alive with the graph
    for _ in range(3):
        graph.replay()
        with tt.stream(graph.stream):
            softmax_colsum(tt.to_device(rng.standard_normal((64, 512), dtype=np.float32)))
    graph.synchronize()
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_one_cached_launch_on_several_streams_and_in_a_torch_graph():
    """A cached kernel[grid] (its launch bound to the grid, one launch configuration per stream) goes to
    torch's current stream, to tt.stream's, and into a torch CUDA graph being captured."""
    torch = pytest.importorskip("torch")
    n, grid = 4096, (4,)
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    outs = [torch.zeros(n, device="cuda") for _ in range(4)]
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    for _ in range(2):  # the miss, then the fast path
        scale_add[grid](x, y, outs[0], n, 1.0, BLOCK=1024)
        with torch.cuda.stream(s1):
            scale_add[grid](x, y, outs[1], n, 2.0, BLOCK=1024)
        with torch.cuda.stream(s2):
            scale_add[grid](x, y, outs[2], n, 3.0, BLOCK=1024)
        with tt.stream(s1):
            scale_add[grid](x, y, outs[3], n, 4.0, BLOCK=1024)
    torch.cuda.synchronize()
    for out, alpha in zip(outs, (1.0, 2.0, 3.0, 4.0)):
        torch.testing.assert_close(out, x * alpha + y)
    out, graph = torch.zeros(n, device="cuda"), torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        scale_add[grid](x, y, out, n, 5.0, BLOCK=1024)
    for _ in range(2):
        x.add_(1.0)
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, x * 5.0 + y)
