"""Differential test of the Triton language surface: every case of language_kernels.py and
memory_kernels.py (descriptors, atomics, random numbers, float8 dots) compiled once, run on the simulator
and on the GPU, the two compared with each other (integers and random bits exactly) and with NumPy."""

from __future__ import annotations

import numpy as np
import pytest
from indexing_kernels import INDEXING_CASES
from language_kernels import ALL_CASES
from memory_kernels import MEMORY_CASES

from tinyton.frontend.arguments import runtime_values
from tinyton.runtime import driver

pytestmark = pytest.mark.gpu

GPU_TOLERANCE = {
    "unary-sin": 1e-5,
    "unary-cos": 1e-5,
    "unary-exp": 1e-5,
    "unary-exp2": 1e-5,
    "unary-log2": 1e-5,
    "unary-sigmoid": 1e-5,
    "unary-erf": 1e-5,
}
"""Absolute tolerance where the GPU uses approximate instructions (the simulator computes in float64)."""


CASES = {**ALL_CASES, **MEMORY_CASES, **INDEXING_CASES}


@pytest.mark.parametrize("name", sorted(CASES))
def test_simulator_and_gpu_agree(name):
    case = CASES[name]()
    kernel = case.kernel.compile(*case.inputs, case.out, **case.constexprs)
    sim, gpu = np.zeros_like(case.out), np.zeros_like(case.out)
    kernel.simulate((1,), runtime_values([*case.inputs, sim]))
    kernel.launch((1,), runtime_values([*case.inputs, gpu]))
    driver.synchronize()
    atol = GPU_TOLERANCE.get(name, case.atol)
    if sim.dtype.kind in "iu" or case.atol == 0:
        np.testing.assert_array_equal(gpu.view(np.uint8), sim.view(np.uint8))  # bit for bit
    np.testing.assert_allclose(gpu, sim, rtol=case.rtol, atol=atol)
    want = case.reference(*case.inputs)
    np.testing.assert_allclose(gpu.reshape(want.shape), want, rtol=case.rtol, atol=atol)


def test_device_print_on_the_gpu(capfd):
    from test_language import print_kernel

    kernel = print_kernel.compile(np.array([3, 4], np.int32), N=2)
    kernel.launch((1,), [np.array([3, 4], np.int32)])
    driver.synchronize()
    lines = sorted(capfd.readouterr().out.splitlines())
    assert lines == ["pid (0, 0, 0) idx (0) x: 3", "pid (0, 0, 0) idx (1) x: 4"]


def test_device_assert_traps_on_the_gpu():
    from test_language import assert_kernel

    kernel = assert_kernel.compile(np.arange(8, dtype=np.int32), N=8)
    kernel.launch((1,), [np.arange(8, dtype=np.int32)])
    driver.synchronize()  # passes: no lane fails
