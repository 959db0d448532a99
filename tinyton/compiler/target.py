"""The architecture kernels are compiled for: `TINYTON_ARCH` when set, else the GPU's.

`TINYTON_ARCH` (`tinyton compile --arch`) stands in for the GPU, so kernels cross-compile (and ptxas checks
them) on any machine: each kernel is compiled as it would be for a device of that architecture. `sm_90` is
an H100 (sm_90a, whose PTX loads on Hopper only, for kernels whose dots fit wgmma; sm_90 otherwise),
`sm_90a` compiles every kernel for sm_90a, `sm_80`-`sm_89` use mma.sync. Without it, the GPU's
architecture (`runtime.driver.default_arch`: sm_90 where there is no GPU). An explicit `arch=` given to
`compile_module` wins over both.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from tinyton.errors import CompilationError

ENV = "TINYTON_ARCH"
ARCHS = ("sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a")
"""What tinyton compiles for: the Ampere, Ada and Hopper targets its lowering knows."""


def check_arch(arch: str, what: str = ENV) -> str:
    """`arch` if tinyton compiles for it; else a `CompilationError` naming `what` and the choices."""
    if arch not in ARCHS:
        raise CompilationError(
            f"{what}={arch!r} is not an architecture tinyton compiles for; use one of {', '.join(ARCHS)} "
            "(sm_90a: Hopper's wgmma and TMA, sm_80-sm_89: mma.sync)"
        )
    return arch


def requested_arch() -> str | None:
    """`$TINYTON_ARCH`, checked; None when unset or empty."""
    value = os.environ.get(ENV, "").strip()
    return check_arch(value) if value else None



@contextmanager
def requesting(arch: str | None, what: str = ENV) -> Iterator[None]:
    """`TINYTON_ARCH=arch` (checked; unchanged when None) for the compiles inside, restored after."""
    if arch is None:
        yield
        return
    before = os.environ.get(ENV)
    os.environ[ENV] = check_arch(arch, what)
    try:
        yield
    finally:
        if before is None:
            del os.environ[ENV]
        else:
            os.environ[ENV] = before
