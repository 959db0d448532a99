"""CUDA's libdevice (`nvvm/libdevice/libdevice.10.bc`): the f64 math functions (`__nv_exp`, `__nv_sin`, ...)
that PTX has no instruction for, linked into a kernel that calls them.

The lowering calls `__nv_<name>` only for f64 transcendentals (tinyton/lowering/tt_to_llvm/libdevice.py); a
module without such calls never looks for the file. Its `__nvvm_reflect` queries (flush denormals to zero?
which architecture?) are answered 0 by LLVM's NVVMReflect pass, which the NVPTX target adds to the O3
pipeline of both paths: IEEE denormals and the generic code, as nvcc's defaults.
"""

from __future__ import annotations

import glob
import importlib.util
import os
from functools import cache
from pathlib import Path

from xdsl.dialects import llvm
from xdsl.dialects.builtin import ModuleOp

from tinyton.lowering.ptx.toolchain import ToolchainError

PREFIX = "__nv_"
NAME = "libdevice.10.bc"


def calls_libdevice(module: ModuleOp) -> bool:
    """Whether the module declares a libdevice function."""
    return any(isinstance(op, llvm.FuncOp) and op.sym_name.data.startswith(PREFIX) for op in module.ops)


def _triton_bundled() -> str | None:
    spec = importlib.util.find_spec("triton")
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.join(spec.submodule_search_locations[0], "backends", "nvidia", "lib", NAME)


@cache
def libdevice_path() -> Path:
    """`$TINYTON_LIBDEVICE`, else `$CUDA_HOME`'s or `$CUDA_PATH`'s, else the newest CUDA install under
    /usr/local or /opt, else the copy Triton's wheel bundles (found without importing Triton)."""
    candidates = [os.environ.get("TINYTON_LIBDEVICE")]
    candidates += [os.path.join(os.environ[v], "nvvm", "libdevice", NAME) for v in ("CUDA_HOME", "CUDA_PATH")
                   if v in os.environ]  # fmt: skip
    candidates += sorted(glob.glob(f"/usr/local/cuda*/nvvm/libdevice/{NAME}"), reverse=True)
    candidates += sorted(glob.glob(f"/opt/cuda*/nvvm/libdevice/{NAME}"), reverse=True)
    candidates.append(_triton_bundled())
    for c in candidates:
        if c and os.path.isfile(c):
            return Path(c)
    raise ToolchainError(
        "this kernel computes an f64 math function (exp, log, sin, tanh, ...), which PTX has no instruction "
        f"for: it needs CUDA's {NAME} (nvvm/libdevice in a CUDA toolkit); set TINYTON_LIBDEVICE to its path "
        "or CUDA_HOME to the toolkit, or compute in float32 (x.astype(tt.float32))"
    )
