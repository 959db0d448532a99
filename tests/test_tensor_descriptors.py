"""Tensor descriptors made on the host (`tinyton.tools.tensor_descriptor.TensorDescriptor`, Triton's
`triton.tools.tensor_descriptor`) and passed to kernels, beside those made in the kernel: every dimension
bounds-checked (out-of-range elements read the padding and are not written, as TMA does), the block shape
compiled in (an autotuner `pre_hook` may set it per config), `isinstance(x, tl.tensor_descriptor)` telling
the two kinds of argument apart while compiling. Checked on the simulator, through ptxas, and on the GPU
against the simulator."""

from __future__ import annotations

import numpy as np
import pytest
from sim_helpers import run_sim

import tinyton as triton
import tinyton.language as tl
from tinyton.frontend.arguments import runtime_values
from tinyton.lowering.ptx import assemble_ptx
from tinyton.lowering.ptx.toolchain import find_tool
from tinyton.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def _as_descriptor(x, shape, strides, block_shape):
    if isinstance(x, tl.tensor_descriptor):
        return x
    else:
        return tl.make_tensor_descriptor(x, shape, strides, block_shape)


@triton.jit
def scale_blocks(x, y, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """y = 2 x, block by block, through descriptors given or made here."""
    dx = _as_descriptor(x, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    dy = _as_descriptor(y, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    m, n = tl.program_id(0) * BM, tl.program_id(1) * BN
    dy.store([m, n], dx.load([m, n]) * 2)


@triton.jit
def shifted_window(x_desc, out, BM: tl.constexpr, BN: tl.constexpr):
    """The block at (-1, -2): the elements before the array read the descriptor's padding."""
    tile = x_desc.load([-1, -2])
    rows, cols = tl.arange(0, BM)[:, None], tl.arange(0, BN)[None, :]
    tl.store(out + rows * BN + cols, tile)


@triton.jit
def transposed_rows(x_desc, out_desc, N, BN: tl.constexpr):
    """out[:, j-block] = x[j-block, :].T through a loop over blocks (descriptors used in a runtime loop)."""
    for j in range(0, N, BN):
        out_desc.store([0, j], x_desc.load([j, 0]).T)


X = np.arange(10 * 13, dtype=np.float32).reshape(10, 13)


def test_host_descriptor_matches_pointer_path():
    for host in (False, True):
        y = np.full_like(X, -1)
        args = (TensorDescriptor.from_tensor(X, [4, 8]), TensorDescriptor.from_tensor(y, [4, 8])) if host else (X, y)
        run_sim(scale_blocks, (3, 2), *args, 10, 13, BM=4, BN=8)
        np.testing.assert_array_equal(y, 2 * X)


def test_block_shape_set_after_creation_recompiles():
    """Triton's tutorial 06 makes descriptors with a dummy block shape and lets a pre_hook set it."""
    dx, dy = TensorDescriptor.from_tensor(X, [1, 1]), TensorDescriptor.from_tensor(np.zeros_like(X), [1, 1])
    for bm, bn in ((4, 8), (8, 16)):
        dx.block_shape = dy.block_shape = [bm, bn]
        dy.base[:] = 0
        scale_blocks[(triton.cdiv(10, bm), triton.cdiv(13, bn))](dx, dy, 10, 13, BM=bm, BN=bn)
        np.testing.assert_array_equal(dy.base, 2 * X)


@pytest.mark.parametrize("padding, fill", [("zero", 0.0), ("nan", np.nan)])
def test_out_of_range_reads_the_padding(padding, fill):
    out = np.zeros((4, 8), np.float32)
    run_sim(shifted_window, (1,), TensorDescriptor(X, X.shape, [13, 1], [4, 8], padding), out, BM=4, BN=8)
    expected = np.full((4, 8), fill, np.float32)
    expected[1:, 2:] = X[:3, :6]
    np.testing.assert_array_equal(out, expected)


def test_descriptors_of_torch_tensors_in_a_loop():
    torch = pytest.importorskip("torch")
    x = torch.arange(32 * 8, dtype=torch.float16).reshape(32, 8)
    out = torch.zeros(8, 32, dtype=torch.float16)
    transposed_rows[(1,)](TensorDescriptor.from_tensor(x, [16, 8]), TensorDescriptor.from_tensor(out, [8, 16]), 32, BN=16)
    assert torch.equal(out, x.T)


def test_strided_view_descriptor():
    """A descriptor of a view: its own shape and strides, the base passed by its first element."""
    base = np.arange(12 * 20, dtype=np.float32).reshape(12, 20)
    view = base[2:, 4:]
    y = np.zeros((10, 16), np.float32)
    src = TensorDescriptor(view, [10, 16], [20, 1], [4, 8])
    run_sim(scale_blocks, (3, 2), src, TensorDescriptor.from_tensor(y, [4, 8]), 10, 16, BM=4, BN=8)
    np.testing.assert_array_equal(y, 2 * view)


def test_autotune_pre_hook_sets_block_shapes():
    def hook(nargs):
        nargs["x"].block_shape = nargs["y"].block_shape = [nargs["BM"], nargs["BN"]]

    tuned = triton.autotune([triton.Config({"BM": 8, "BN": 8}, pre_hook=hook)], key=["M"])(scale_blocks)
    y = np.zeros_like(X)
    dx, dy = TensorDescriptor.from_tensor(X, [1, 1]), TensorDescriptor.from_tensor(y, [1, 1])
    tuned[lambda meta: (triton.cdiv(10, meta["BM"]), triton.cdiv(13, meta["BN"]))](dx, dy, 10, 13)
    assert dx.block_shape == [8, 8]
    np.testing.assert_array_equal(y, 2 * X)


def test_parameters_and_values():
    d = TensorDescriptor.from_tensor(X, [4, 8])
    assert runtime_values([1, d]) == [1, X, 10, 13, 13, 1]
    ir = scale_blocks.compile(d, d, 10, 13, BM=4, BN=8).asm["tt"]
    assert "x_4" in ir and "!tt.ptr<f32>" in ir


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: TensorDescriptor(X, [10, 13], [1, 10], [4, 8]), "last dimension must be contiguous"),
        (lambda: TensorDescriptor(X, [10, 13], [13, 1], [4]), "one entry per dimension"),
        (lambda: TensorDescriptor(X, [10, 13], [13, 1], [4, 8], "one"), "padding must be"),
    ],
)
def test_bad_descriptors(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_set_allocator_is_accepted():
    assert triton.set_allocator(lambda size, align, stream: None) is None


@pytest.mark.skipif(find_tool("ptxas") is None, reason="ptxas not found")
def test_host_descriptor_ptx_is_accepted_by_ptxas():
    d = TensorDescriptor.from_tensor(X, [4, 8])
    ptx = scale_blocks.compile(d, TensorDescriptor.from_tensor(np.zeros_like(X), [4, 8]), 10, 13, BM=4, BN=8).asm["ptx"]
    assemble_ptx(ptx, "sm_90")


@pytest.mark.gpu
@pytest.mark.parametrize("host", [False, True])
def test_descriptors_gpu_match_simulator(host):
    results = []
    for run in ("sim", "gpu"):
        y = np.full_like(X, -1)
        args = (TensorDescriptor.from_tensor(X, [4, 8]), TensorDescriptor.from_tensor(y, [4, 8])) if host else (X, y)
        if run == "sim":
            run_sim(scale_blocks, (3, 2), *args, 10, 13, BM=4, BN=8)
        else:
            scale_blocks[(3, 2)](*args, 10, 13, BM=4, BN=8)
        results.append(y)
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[1], 2 * X)
