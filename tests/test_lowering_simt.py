"""The GPU lowering of scans, sorts, flips, gathers and histograms run without a GPU: program 0 of each case's
llvm-dialect kernel on the lockstep SIMT interpreter (tests/simt.py), against NumPy. It checks the lowering's
arithmetic, shuffles and shared-memory addressing; barriers and timing are the GPU tests' part."""

from __future__ import annotations

import numpy as np
import pytest
from indexing_kernels import INDEXING_CASES
from language_kernels import ALL_CASES
from simt import run_program

from tinyton.frontend.arguments import runtime_values

CASES = {**{n: c for n, c in ALL_CASES.items() if n.startswith(("scan-", "shape-", "reduce-keep_dims"))}, **INDEXING_CASES}


@pytest.mark.parametrize("name", sorted(CASES))
def test_lowered_kernel_matches_numpy(name):
    case = CASES[name]()
    kernel = case.kernel.compile(*case.inputs, case.out, **case.constexprs)
    out = np.zeros_like(case.out)
    run_program(kernel, runtime_values([*case.inputs, out]))
    want = case.reference(*case.inputs)
    np.testing.assert_allclose(out.reshape(want.shape), want, rtol=case.rtol, atol=case.atol)
