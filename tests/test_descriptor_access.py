"""Tensor-descriptor loads and stores outside dot loops (issue 8): a descriptor's last stride of 1 (what TMA
and Triton require) is compiled in, so `desc.store(offs, desc.load(offs) * 2)` moves 16-byte vectors like the
same kernel on pointers; an int argument equal to 1 is compiled in the same way (Triton's specialisation),
so a stride argument of 1 makes pointer and in-kernel descriptor accesses contiguous too. Strided views
(a last stride other than 1, in-kernel descriptors only) compile another variant, element by element.
Checked: the simulator against NumPy for both variants, which accesses the PTX holds, ptxas on both PTX
paths, and on the GPU against NumPy at shapes that are and are not multiples of the block."""

from __future__ import annotations

import numpy as np
import pytest
from sim_helpers import run_sim

import tinyton as tt
import tinyton.language as tl
from tinyton.compiler import compile_module
from tinyton.lowering.ptx import assemble_ptx
from tinyton.lowering.ptx.toolchain import find_tool
from tinyton.tools.tensor_descriptor import TensorDescriptor
from toolchains import TOOLCHAINS

VECTOR = ("ld.global.v4.b32", "st.global.v4.b32")


@tt.jit
def scale_desc(x_desc, y_desc, BM: tl.constexpr, BN: tl.constexpr):
    m, n = tl.program_id(0) * BM, tl.program_id(1) * BN
    y_desc.store([m, n], x_desc.load([m, n]) * 2)


@tt.jit
def scale_made(x, y, M, N, S0, S1, BM: tl.constexpr, BN: tl.constexpr):
    """y = 2 x for an M x N view of `x` with strides (S0, S1), through descriptors made here."""
    dx = tl.make_tensor_descriptor(x, [M, N], [S0, S1], [BM, BN])
    dy = tl.make_tensor_descriptor(y, [M, N], [N, 1], [BM, BN])
    m, n = tl.program_id(0) * BM, tl.program_id(1) * BN
    dy.store([m, n], dx.load([m, n]) * 2)


@tt.jit(do_not_specialize=["S1"])
def scale_made_unspecialised(x, y, M, N, S0, S1, BM: tl.constexpr, BN: tl.constexpr):
    dx = tl.make_tensor_descriptor(x, [M, N], [S0, S1], [BM, BN])
    dy = tl.make_tensor_descriptor(y, [M, N], [N, 1], [BM, BN])
    m, n = tl.program_id(0) * BM, tl.program_id(1) * BN
    dy.store([m, n], dx.load([m, n]) * 2)


def _vectorised(compiled) -> bool:
    ptx = compiled.asm["ptx"]
    return all(v in ptx for v in VECTOR)


def _grid(m: int, n: int, bm: int, bn: int) -> tuple[int, int]:
    return tt.cdiv(m, bm), tt.cdiv(n, bn)


@pytest.mark.parametrize("shape", [(64, 64), (10, 13), (33, 40)])
def test_host_descriptors_match_numpy_and_move_vectors(shape):
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    y = np.full_like(x, -1)
    args = TensorDescriptor.from_tensor(x, [32, 32]), TensorDescriptor.from_tensor(y, [32, 32])
    compiled = run_sim(scale_desc, _grid(*shape, 32, 32), *args, BM=32, BN=32)
    np.testing.assert_array_equal(y, 2 * x)
    assert "tt.constant 1 : i32" in compiled.asm["tt"]
    assert _vectorised(compiled) == (shape == (64, 64)), "16-element rows and sizes only: vectors stay aligned"


def test_host_descriptor_of_a_view_with_an_unaligned_row_stride():
    """`base[2:, 4:]`: last stride 1 (compiled in), row stride 20 (not a multiple of 16: not assumed)."""
    base = np.arange(12 * 20, dtype=np.float32).reshape(12, 20)
    view, y = base[2:, 4:], np.zeros((10, 16), np.float32)
    src = TensorDescriptor(view, [10, 16], [20, 1], [4, 8])
    compiled = run_sim(scale_desc, (3, 2), src, TensorDescriptor.from_tensor(y, [4, 8]), BM=4, BN=8)
    np.testing.assert_array_equal(y, 2 * view)
    assert "tt.constant 1 : i32" in compiled.asm["tt"]


@pytest.mark.parametrize("step", [1, 2, 3])
def test_in_kernel_descriptor_of_a_strided_view(step):
    """The source's last stride is an int argument: 1 compiles the contiguous variant, 2 and 3 another."""
    m, n = 32, 32
    base = np.arange(m * n * step, dtype=np.float32).reshape(m, n * step)
    y = np.full((m, n), -1, np.float32)
    compiled = run_sim(scale_made, _grid(m, n, 32, 32), base, y, m, n, n * step, step, BM=32, BN=32)
    np.testing.assert_array_equal(y, 2 * base[:, ::step])
    assert ("tt.constant 1 : i32" in compiled.asm["tt"].split("tt.program_id")[0]) == (step == 1)
    assert _vectorised(compiled) == (step == 1)


def test_int_arguments_equal_to_one_compile_their_own_variant():
    x, y = np.ones((32, 32), np.float32), np.zeros((32, 32), np.float32)
    one = scale_made.compile(x, y, 32, 32, 32, 1, BM=16, BN=16)
    assert scale_made.compile(x, y, 32, 32, 32, 17, BM=16, BN=16) is not one
    assert scale_made.compile(x, y, 32, 32, 32, 17, BM=16, BN=16) is scale_made.compile(x, y, 32, 32, 32, 33, BM=16, BN=16)
    unspecialised = run_sim(scale_made_unspecialised, (1, 1), x, y, 32, 32, 32, 1, BM=32, BN=32)
    np.testing.assert_array_equal(y, 2 * x)
    assert not _vectorised(unspecialised)


@pytest.mark.skipif(find_tool("ptxas") is None, reason="ptxas not found")
@pytest.mark.parametrize("toolchain", TOOLCHAINS)
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_vectorised_descriptor_ptx_assembles(toolchain, dtype):
    x = np.zeros((256, 256), dtype)
    kernel = scale_desc.compile(TensorDescriptor.from_tensor(x, [64, 64]), TensorDescriptor.from_tensor(x, [64, 64]), BM=64, BN=64)
    ptx = compile_module(kernel.module.clone(), num_warps=kernel.num_warps, arch="sm_90a", toolchain=toolchain).asm["ptx"]
    assert all(v in ptx for v in VECTOR) and "ld.global.b16" not in ptx and "ld.global.b32 " not in ptx
    assert assemble_ptx(ptx, "sm_90a")


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(1024, 1024), (1000, 1000), (333, 4099), (4096, 40)])
@pytest.mark.parametrize("block", [(64, 64), (128, 128)])
def test_descriptor_scale_gpu_matches_numpy(shape, block):
    torch = pytest.importorskip("torch")
    x = torch.randn(*shape, device="cuda", dtype=torch.float16)
    y = torch.full_like(x, -1)
    xd, yd = TensorDescriptor.from_tensor(x, list(block)), TensorDescriptor.from_tensor(y, list(block))
    scale_desc[_grid(*shape, *block)](xd, yd, *block)
    assert torch.equal(y, x * 2)


@pytest.mark.gpu
@pytest.mark.parametrize("step", [1, 2])
def test_in_kernel_strided_descriptor_gpu_matches_numpy(step):
    torch = pytest.importorskip("torch")
    m, n = 300, 257
    base = torch.randn(m, n * step, device="cuda", dtype=torch.float16)
    y = torch.full((m, n), -1, device="cuda", dtype=torch.float16)
    scale_made[_grid(m, n, 64, 64)](base, y, m, n, n * step, step, BM=64, BN=64)
    assert torch.equal(y, base[:, ::step] * 2)
