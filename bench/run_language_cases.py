"""Run every Triton-language case of the tests (tests/language_kernels.py, memory_kernels.py,
indexing_kernels.py: math, atomics, descriptors, random numbers, sort, flip, gather, histogram, long scans) once
on the current backend and check each against NumPy, for bench/sanitize.py: one process, so one sanitizer start
covers every kernel of the language surface.

    python bench/run_language_cases.py              # every case
    python bench/run_language_cases.py sort gather  # the cases whose names contain one of these
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from indexing_kernels import INDEXING_CASES  # noqa: E402
from language_kernels import ALL_CASES  # noqa: E402
from memory_kernels import MEMORY_CASES  # noqa: E402

from tinyton.frontend.arguments import runtime_values  # noqa: E402
from tinyton.runtime import driver  # noqa: E402

CASES = {**ALL_CASES, **MEMORY_CASES, **INDEXING_CASES}
APPROXIMATE = 1e-5
"""Absolute tolerance of the cases whose GPU instructions are approximate (tests/test_language_gpu.py's)."""


def main(filters: list[str]) -> None:
    names = [n for n in sorted(CASES) if not filters or any(f in n for f in filters)]
    for name in names:
        case = CASES[name]()
        out = np.zeros_like(case.out)
        kernel = case.kernel.compile(*case.inputs, out, **case.constexprs)
        if driver.backend() == "cuda":
            kernel.launch((1,), runtime_values([*case.inputs, out]))
            driver.synchronize()
        else:
            kernel.simulate((1,), runtime_values([*case.inputs, out]))
        want = case.reference(*case.inputs)
        atol = max(case.atol, APPROXIMATE) if name.startswith("unary-") else case.atol
        np.testing.assert_allclose(out.reshape(want.shape), want, rtol=case.rtol, atol=atol, err_msg=name)
    print(f"{len(names)} language cases ran and matched NumPy")


if __name__ == "__main__":
    main(sys.argv[1:])
