"""Launching kernels on host tensor descriptors: a descriptor on device memory takes the launch fast path, as
pointers do. The slow path cost ~100 µs of host time per launch, which made bench_matmul's descriptor kernel
read 85 TFLOPS at 2048³ (a ~40 µs kernel, host-bound under do_bench) where it read 619 at 4096³ (the same
compiled variant, TMA in both). Checked on the stand-in GPU (tests/standin_gpu.py): the plan is fast, its
values are the descriptor spread into base address, shape and strides, a host base is never fast; on the
GPU: results against torch on a side stream, launched twice (the second by the fast path)."""

from __future__ import annotations

import numpy as np
import pytest
from standin_gpu import device_array, standin_gpu
from test_tma import desc_matmul as tma_desc_matmul

import tinyton as tt
from tinyton.frontend import arguments
from tinyton.runtime import driver
from tinyton.tools.tensor_descriptor import TensorDescriptor

desc_matmul = tt.jit(tma_desc_matmul.fn)
"""test_tma's descriptor matmul as a jit function of its own: these tests read its plans."""


BLOCK = (128, 128, 64)


def _descriptors(a, b):
    bm, bn, bk = BLOCK
    return TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(b, [bk, bn])


def _device_operands(size: int):
    a, b = (device_array((size, size), np.float16, (i + 1) << 32) for i in range(2))
    return (*_descriptors(a, b), device_array((size, size), np.float32, 3 << 32))


def test_sizes_multiple_of_16_share_one_variant():
    """2048 and 4096 specialise alike (multiples of 16): one compiled kernel, so the slowdown at 2048 was
    not in the code."""
    kernels = []
    for size in (2048, 4096):
        a, b, c = np.zeros((size, size), np.float16), np.zeros((size, size), np.float16), np.zeros((size, size), np.float32)
        kernels.append(desc_matmul.compile(*_descriptors(a, b), c, size, size, size, *BLOCK, num_warps=4))
    assert kernels[0] is kernels[1]


def test_device_descriptors_launch_on_the_fast_path():
    size = 2048
    ad, bd, c = _device_operands(size)
    grid = (size // BLOCK[0], size // BLOCK[1])
    with standin_gpu(desc_matmul, record=True) as launches:
        for _ in range(2):
            desc_matmul[grid](ad, bd, c, size, size, size, *BLOCK, num_warps=4)
        (plan,) = desc_matmul._plans.values()
        assert plan.fast  # its speed is measured by bench/host_overhead.py, not timed here
    (_, _, first), (_, _, second) = launches[:2]
    assert first == second == (1 << 32, size, size, size, 1, 2 << 32, size, size, size, 1, 3 << 32, size, size, size)


def test_host_base_is_never_fast():
    """A descriptor on host memory is staged by the slow path: its value has no address, and its key differs
    from a device descriptor's of the same dtype, shape and alignment (whose plan may be fast)."""
    types = [TensorDescriptor, TensorDescriptor, np.ndarray, *[int] * 6]
    shape = arguments.classifier(desc_matmul.params, types, {}, {})
    host, c = np.zeros((256, 256), np.float16), np.zeros((256, 256), np.float32)
    ad, bd = _descriptors(host, host)
    host_key, host_values = shape.classify((ad, bd, c, 256, 256, 256, *BLOCK), {})
    assert host_values[0] is None
    dad, dbd, _ = _device_operands(256)
    device_key, device_values = shape.classify((dad, dbd, c, 256, 256, 256, *BLOCK), {})
    assert device_values[:5] == (1 << 32, 256, 256, 256, 1) and host_key != device_key


def test_descriptor_ints_beyond_i32_are_refused_by_the_slow_path():
    big = TensorDescriptor(_device_operands(256)[0].base, [1 << 31, 256], [256, 1], [128, 64])
    assert arguments.descriptor_values(big)[0] is None
    with pytest.raises(Exception, match="fit int32"):
        arguments.runtime_values([big])


@pytest.mark.gpu
@pytest.mark.skipif(not driver.is_available(), reason="needs a CUDA GPU")
def test_gpu_fast_descriptor_launches_follow_torchs_stream():
    torch = pytest.importorskip("torch")
    size = 512
    a = torch.randn(size, size, device="cuda", dtype=torch.float16)
    b = torch.randn(size, size, device="cuda", dtype=torch.float16)
    ad, bd = _descriptors(a, b)
    want = a.float() @ b.float()
    grid = (size // BLOCK[0], size // BLOCK[1])
    side = torch.cuda.Stream()
    for _ in range(2):  # the first launch compiles (slow path), the second takes the fast path
        c = torch.empty_like(want)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.cuda._sleep(10_000_000)
            c.fill_(float("nan"))  # a launch on another stream would run before this fill, and be undone by it
            desc_matmul[grid](ad, bd, c, size, size, size, *BLOCK, num_warps=4)
        torch.cuda.current_stream().wait_stream(side)
        torch.testing.assert_close(c, want, rtol=1e-2, atol=1e-2)
    assert all(p.fast and p.torch_inputs for p in desc_matmul._plans.values())
