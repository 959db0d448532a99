"""The compiler driver: tt kernel modules and traced array programs in, runnable artifacts out.

`compile_module` lowers a tt kernel module (tt -> llvm -> PTX, on demand and cached); `build_program`
fuses a traced tta program, generates its kernels and plans its buffers. Both run on the GPU through
tinyton.runtime, or on its NumPy simulator. The frontend (tracing, `@tt.jit`) sits above this layer.
"""

from tinyton.compiler.kernel import (
    STAGES,
    CompiledKernel,
    compile_module,
    normalize_grid,
)
from tinyton.compiler.program import (
    ArrayProgram,
    build_program,
    fused_module,
    fusion_enabled,
)

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
