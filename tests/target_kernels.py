"""A representative kernel of each kind, compiled for the current target (`TINYTON_ARCH`): the examples'
elementwise add, row softmax, tt.dot matmul and flash attention, a TMA-fed matmul, a float8 matmul and an atomics
histogram.
Shared by the cross-compilation and PTX-toolchain tests."""

from __future__ import annotations

import runpy
from collections.abc import Callable
from pathlib import Path

import numpy as np

from tinyton.compiler import CompiledKernel

EXAMPLES = Path(__file__).parent.parent / "examples"
F16 = np.float16


def example(name: str) -> dict:
    """An example's namespace without running its script part."""
    return runpy.run_path(str(EXAMPLES / f"{name}.py"), run_name="example")


def vector_add() -> CompiledKernel:
    a = np.zeros(1000, np.int32)
    return example("vector_add")["vector_add"].compile(a, a, a, 1000)


def softmax() -> CompiledKernel:
    x = np.zeros((8, 1000), np.float32)
    return example("softmax")["softmax_kernel"].compile(x, x, 1000, 1000, BLOCK=1024, num_warps=4)


def matmul(dtype=F16) -> CompiledKernel:
    a, c = np.zeros((256, 256), dtype), np.zeros((256, 256), np.float32)
    return example("matmul")["matmul_kernel"].compile(a, a, c, 256, 256, 256, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64,
                                                      num_warps=4)


def attention() -> CompiledKernel:
    q = np.zeros((1, 2, 256, 64), F16)
    kernel = example("flash_attention")["flash_attention"]
    return kernel.compile(q, q, q, q, 256, 0.18, HEAD_DIM=64, BLOCK_M=64, BLOCK_N=64, CAUSAL=True, num_warps=4)


def tma_matmul() -> CompiledKernel:
    from test_tma import made_matmul  # the TMA tests' kernel on in-kernel descriptors

    a = np.zeros((256, 256), F16)
    return made_matmul.compile(a, a, np.zeros((256, 256), np.float32), 256, 256, 256, BM=128, BN=128, BK=64,
                               num_warps=4)


def fp8_matmul() -> CompiledKernel:
    from test_fp8_matmul import _kernel  # e4m3 x e5m2, B given K-major (x @ w.T)

    return _kernel(True)


def atomics() -> CompiledKernel:
    from test_atomics import histogram

    x = np.zeros(1000, np.int32)
    return histogram.compile(x, np.zeros(16, np.int32), x, 1000, BLOCK=256)


KERNELS: dict[str, Callable[[], CompiledKernel]] = {
    "vector_add": vector_add, "softmax": softmax, "matmul": matmul, "attention": attention,
    "tma_matmul": tma_matmul, "fp8_matmul": fp8_matmul, "atomics": atomics,
}
DOTS = ("matmul", "attention", "tma_matmul", "fp8_matmul")
"""The kernels with tensor-core dots."""
