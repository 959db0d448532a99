"""Every device of a host: calls run on the device their arrays live on, `tt.device(n)` and
`torch.cuda.set_device` choose the device of host data, mixed devices are refused, one compile serves every
device. The selection logic runs anywhere; the `gpu` tests need two GPUs (skipped, with the reason, on fewer)."""

from __future__ import annotations

import numpy as np
import pytest

import tinyton as tt
from tinyton.runtime import devices, driver


def test_current_device_follows_tt_device_and_nests():
    assert devices.current_device() == 0
    with tt.device(1):
        assert devices.current_device() == 1
        with tt.device("cuda:2"):
            assert devices.current_device() == 2
        assert driver.active.get_current_device() == 1
    assert devices.current_device() == 0


def test_device_names_are_parsed():
    assert devices.index_of(3) == 3 and devices.index_of("cuda:1") == 1
    with pytest.raises(ValueError, match="not a CUDA device: 'cpu'"):
        devices.index_of("cpu")


class _OnDevice:
    """Stands for a DeviceArray of another GPU (only its device is read)."""

    def __init__(self, ordinal: int):
        self.device_ordinal = ordinal


def test_call_device_comes_from_its_arrays():
    assert devices.device_of_call([np.ones(3), 2.0, _OnDevice(1)]) == 1
    with tt.device(3):
        assert devices.device_of_call([np.ones(3)]) == 3  # host data: the current device
        assert devices.device_of_call([_OnDevice(0)]) == 0  # arrays win over the choice


def test_mixed_devices_name_both():
    with pytest.raises(devices.MixedDevicesError, match="argument 0 is on cuda:0, argument 2 on cuda:1"):
        devices.device_of_call([_OnDevice(0), 1, _OnDevice(1)], "add_kernel[grid]")


# ---- two GPUs ---------------------------------------------------------------------------------------

two_gpus = pytest.mark.skipif(not driver.is_available() or driver.device_count() < 2,
                              reason="needs two CUDA devices")  # fmt: skip


@tt.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tt.constexpr):
    offs = tt.program_id(0) * BLOCK + tt.arange(0, BLOCK)
    mask = offs < n
    tt.store(out_ptr + offs, tt.load(x_ptr + offs, mask=mask) + tt.load(y_ptr + offs, mask=mask), mask=mask)


@tt.jit
def softmax(x):
    e = tt.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.gpu
@two_gpus
def test_kernel_and_program_on_cuda_1_with_torch():
    torch = pytest.importorskip("torch")
    x, y = (torch.randn(3000, device="cuda:1") for _ in range(2))
    out = torch.empty_like(x)
    for _ in range(2):  # slow path, then the fast path
        add_kernel[(3,)](x, y, out, 3000, BLOCK=1024)
    torch.testing.assert_close(out, x + y)
    s = torch.randn(64, 1000, device="cuda:1")
    got = softmax(s)
    assert got.device == s.device
    torch.testing.assert_close(got, torch.softmax(s, -1), rtol=1e-5, atol=1e-6)
    s0 = s.to("cuda:0")  # the same program and kernels on device 0 afterwards
    torch.testing.assert_close(softmax(s0), torch.softmax(s0, -1), rtol=1e-5, atol=1e-6)


@pytest.mark.gpu
@two_gpus
def test_device_arrays_know_their_device():
    a = np.random.default_rng(0).standard_normal((16, 300)).astype(np.float32)
    with tt.device(1):
        x = tt.to_device(a)
    assert x.device == "cuda:1" and "cuda:1" in repr(x)
    got = softmax(x)  # runs on device 1, where x is
    assert got.device == "cuda:1"
    e = np.exp(a - a.max(-1, keepdims=True))
    np.testing.assert_allclose(got.numpy(), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)
    y = tt.to_device(a, device="cuda:1")
    out = tt.to_device(np.zeros_like(a), device=1)
    add_kernel[(5,)](x, y, out, a.size, BLOCK=1024)
    np.testing.assert_allclose(out.numpy(), 2 * a)


@pytest.mark.gpu
@two_gpus
def test_mixed_device_call_is_refused():
    torch = pytest.importorskip("torch")
    x, y = torch.ones(8, device="cuda:0"), torch.ones(8, device="cuda:1")
    with pytest.raises(ValueError, match="cuda:0.*cuda:1"):
        add_kernel[(1,)](x, y, torch.empty_like(x), 8, BLOCK=8)


@pytest.mark.gpu
@two_gpus
def test_torch_set_device_places_host_data():
    torch = pytest.importorskip("torch")
    previous = torch.cuda.current_device()
    torch.cuda.set_device(1)
    try:
        assert tt.to_device(np.ones(4, np.float32)).device == "cuda:1"
        a = np.arange(10, dtype=np.float32)
        out = np.zeros_like(a)
        add_kernel[(1,)](a, a, out, 10, BLOCK=16)  # staged on device 1
        np.testing.assert_array_equal(out, 2 * a)
    finally:
        torch.cuda.set_device(previous)


@pytest.mark.gpu
@two_gpus
def test_one_compile_serves_both_devices():
    torch = pytest.importorskip("torch")
    x0 = torch.ones(100, device="cuda:0")
    x1 = x0.to("cuda:1")
    k0 = add_kernel[(1,)](x0, x0, torch.empty_like(x0), 100, BLOCK=128)
    k1 = add_kernel[(1,)](x1, x1, torch.empty_like(x1), 100, BLOCK=128)
    assert k0 is k1 and sorted(k0._launchers) == [0, 1]


@pytest.mark.parametrize("choice", ["sim", "cuda", "sim"])
def test_each_test_resolves_its_own_backend(monkeypatch, choice: str) -> None:
    """`driver.backend()` is cached per process; conftest resolves it again for each test, so a test choosing its
    backend with `TINYTON_BACKEND` gets that one whatever the test before it chose (nothing is launched here)."""
    monkeypatch.setenv("TINYTON_BACKEND", choice)
    assert driver.backend() == choice
