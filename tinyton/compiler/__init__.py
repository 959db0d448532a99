"""The compiler driver: tt kernel modules and traced array programs in, runnable artifacts out.

`compile_module` lowers a tt kernel module (tt -> llvm -> PTX, on demand and cached); `build_program`
fuses a traced tta program, generates its kernels and plans its buffers. Both run on the GPU through
tinyton.runtime, or on its NumPy simulator. The frontend (tracing, `@tt.jit`) sits above this layer.

Importing the package loads neither (tinyton/lazy.py): `@tt.jit` reaches `kernel` without loading xDSL, and
the names below load their module on first use.
"""

from typing import Any

from tinyton.lazy import lazy_module

kernel = lazy_module("tinyton.compiler.kernel")
program = lazy_module("tinyton.compiler.program")

_HOMES = {
    "STAGES": kernel, "CompiledKernel": kernel, "compile_module": kernel, "normalize_grid": kernel,
    "ArrayProgram": program, "build_program": program, "fused_module": program, "fusion_enabled": program,
}  # fmt: skip


def __getattr__(name: str) -> Any:
    """The compiler's names, served from their module (PEP 562)."""
    if name in _HOMES:
        return getattr(_HOMES[name], name)
    raise AttributeError(f"module 'tinyton.compiler' has no attribute {name!r}")


__all__ = [
    "STAGES",
    "ArrayProgram",
    "CompiledKernel",
    "build_program",
    "compile_module",
    "fused_module",
    "fusion_enabled",
    "normalize_grid",
]
