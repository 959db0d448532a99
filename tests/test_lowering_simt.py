"""The GPU lowering of scans, sorts, flips, gathers, histograms and shape ops run without a GPU: program 0 of
each case's llvm-dialect kernel on the lockstep SIMT interpreter (tests/simt.py), against NumPy. It checks the lowering's
arithmetic, shuffles and shared-memory addressing; barriers and timing are the GPU tests' part."""

from __future__ import annotations

import numpy as np
import pytest
from indexing_kernels import INDEXING_CASES
from language_kernels import ALL_CASES
from ml_dtypes import bfloat16
from simt import run_program

import tinyton as tt
from tinyton.frontend.arguments import runtime_values
from tinyton.frontend.programs import compile_array_program

CASES = {**{n: c for n, c in ALL_CASES.items() if n.startswith(("scan-", "shape-", "reduce-keep_dims"))}, **INDEXING_CASES}


@pytest.mark.parametrize("name", sorted(CASES))
def test_lowered_kernel_matches_numpy(name):
    case = CASES[name]()
    kernel = case.kernel.compile(*case.inputs, case.out, **case.constexprs)
    out = np.zeros_like(case.out)
    run_program(kernel, runtime_values([*case.inputs, out]))
    want = case.reference(*case.inputs)
    np.testing.assert_allclose(out.reshape(want.shape), want, rtol=case.rtol, atol=case.atol)


def _cumsum(x):
    return tt.cumsum(x, axis=-1)


@pytest.mark.parametrize("n", [2048, 4096])
def test_long_row_scan_of_an_array_program(n):
    """A row longer than a register scan is cut into runs by reshapes (`Emitter.scan`), which keep their
    registers (`Layout.reshape`): the kernel's scan matches NumPy's."""
    x = np.random.default_rng(n).standard_normal((1, n)).astype(np.float32)
    (kernel,) = compile_array_program(tt.jit(_cumsum), (x,)).kernels()
    assert "tt.reshape" in str(kernel.module)
    out = np.zeros_like(x)
    run_program(kernel, runtime_values([x, out]))
    np.testing.assert_allclose(out, np.cumsum(x, axis=-1), rtol=1e-5, atol=1e-4)


def _widen(x):
    return x.astype(np.float32) * 2.0


def test_bf16_halves_of_a_loaded_word_widen_by_integer_ops():
    """bf16 elements loaded as 16-byte vectors widen to f32 by one shift or mask of the loaded word each (their
    bits are f32's top half), no `cvt.f32.bf16`: every bit pattern kept, subnormals, signed zeros and NaN too."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 256)).astype(bfloat16)
    x.view(np.uint16)[0, :6] = [0x0001, 0x8000, 0x7F80, 0xFF80, 0x7FC1, 0x0080]  # subnormal, -0, ±inf, NaN, min normal
    (kernel,) = compile_array_program(tt.jit(_widen), (x,)).kernels()
    assert "cvt.f32.bf16" not in kernel.asm["ptx"]
    out = np.zeros((4, 256), np.float32)
    run_program(kernel, runtime_values([x, out]))
    np.testing.assert_array_equal(out, x.astype(np.float32) * 2.0)
