"""Triton's test_index1d (python/test/unit/language/test_core.py) as Triton writes it: a pointer expression built
per rank, `x[None, :]` / `x[:, None]` / 3-D insertions, int32/uint32/uint16; the matching kernel stores the
broadcast value, the mismatching ones (a dimension of 64, one more rank) must raise a CompilationError (and
nothing else), as on Triton: a value broadcasts to its pointer tile's shape only at the same rank."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from tinyton.errors import CompilationError

KERNEL = """\
import tinyton as triton
import tinyton.language as tl


@triton.jit
def kernel(Z, X, SIZE: tl.constexpr):
    m = tl.arange(0, SIZE)
    n = tl.arange(0, SIZE)
    x = tl.load(X_PTR_EXPR)
    z = GENERATE_TEST_HERE
    tl.store(Z_PTR_EXPR, z)
"""


def make_ptr_str(name: str, shape: list[int]) -> str:
    rank = len(shape)
    offsets, stride = [], 1
    for i in reversed(range(rank)):
        idx = ", ".join([":" if ii == i else "None" for ii in range(rank)])
        offsets += [f"tl.arange(0, {shape[i]})[{idx}]*{stride}"]
        stride *= shape[i]
    return f"{name} + {' + '.join(offsets)}"


def _kernel(tmp_path, expr: str, shape_x: list[int], shape_z: list[int], tag: str):
    source = (KERNEL.replace("X_PTR_EXPR", make_ptr_str("X", shape_x))
              .replace("Z_PTR_EXPR", make_ptr_str("Z", shape_z)).replace("GENERATE_TEST_HERE", expr))
    path = tmp_path / f"index1d_{tag}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"index1d_{tag}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.kernel


@pytest.mark.parametrize("expr", ["x[None, :]", "x[:, None]", "x[None, :, :]", "x[:, :, None]"])
@pytest.mark.parametrize("dtype_str", ["int32", "uint32", "uint16"])
def test_index1d(tmp_path, expr, dtype_str):
    rank_x, rank_y = expr.count(":"), expr.count(",") + 1
    shape_x, shape_z = [32] * rank_x, [32] * rank_y
    info = np.iinfo(dtype_str)
    x = np.random.default_rng(0).integers(info.min, info.max, shape_x, dtype=np.int64).astype(dtype_str)
    z_ref = eval(expr) + np.zeros(shape_z, dtype=dtype_str)
    z = np.empty_like(z_ref)
    tag = f"{dtype_str}_{rank_x}{rank_y}_{expr.index(':')}"
    _kernel(tmp_path, expr, shape_x, shape_z, tag + "_match")[(1,)](z, x, num_warps=1, SIZE=32)
    np.testing.assert_array_equal(z, z_ref)
    for name, shape in (("dim", [64] * rank_y), ("rank", [32] * (rank_y + 1))):
        with pytest.raises(CompilationError):
            _kernel(tmp_path, expr, shape_x, shape, f"{tag}_{name}")[(1,)](z, x, num_warps=1, SIZE=32)
