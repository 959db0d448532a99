"""What a cold compile skips (issue 10 point 4): pattern files that cannot match, the llvm dialect's text when
only the PTX is wanted, cuda-python where no driver is installed. Each skip must leave the results unchanged."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import tinyton as tt
from tinyton.frontend.programs import compile_array_program
from tinyton.rewrites import patterns
from tinyton.runtime import driver

SOFTMAX_OPS = {"tta.exp", "tta.reduce_max", "tta.reduce_sum", "tta.sub", "tta.div"}
RMSNORM_OPS = {"tta.mul", "tta.reduce_mean", "tta.constant", "tta.add", "tta.rsqrt"}


def test_a_pattern_naming_an_absent_op_cannot_match() -> None:
    text = patterns._pattern_text("softmax.pdl.mlir")
    assert patterns.may_match(text, SOFTMAX_OPS | {"func.func"})
    assert not patterns.may_match(text, (SOFTMAX_OPS - {"tta.exp"}) | RMSNORM_OPS)
    two = '// pdl.operation "tta.gone" in a comment\npdl.pattern @a {\n  %o = pdl.operation "tta.x"\n}\n' \
          'pdl.pattern @b {\n  %o = pdl.operation "tta.y"\n  %p = pdl.operation\n}\n'
    assert patterns.may_match(two, {"tta.y"}) and patterns.may_match(two, {"tta.x"})
    assert not patterns.may_match(two, {"tta.z"})


def test_only_the_files_that_can_match_are_chosen() -> None:
    chosen = patterns.load_patterns(patterns.PATTERN_FILES, RMSNORM_OPS)
    assert [p.pattern.sym_name.data for p in chosen] == ["rmsnorm"]
    everything = patterns.load_patterns()
    both = patterns.load_patterns(patterns.PATTERN_FILES, RMSNORM_OPS | SOFTMAX_OPS)
    assert [p.pattern.sym_name.data for p in both] == [
        p.pattern.sym_name.data for p in everything if not p.pattern.sym_name.data.startswith("attention")
    ]  # attention.pdl.mlir's patterns need a tta.matmul


def _rmsnorm(x, w):
    return x * tt.rsqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6) * w


def test_llvm_text_after_a_ptx_only_compile_matches_a_full_one(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINYTON_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TINYTON_TOOLCHAIN", "llvmlite")  # the mlir tools read the text: printed there anyway
    args = [np.ones((4, 96), np.float32), np.ones(96, np.float32)]
    (first,) = compile_array_program(tt.jit(_rmsnorm), args).kernels()
    ptx = first.asm["ptx"]
    assert "llvm-mlir" not in first._texts  # the PTX alone was asked for: not printed
    assert "llvm.func" in first.asm["llvm-mlir"] and first.asm["ptx"] == ptx


@pytest.mark.skipif(driver.is_available(), reason="a GPU is present: cuda-python is needed")
def test_no_driver_is_learned_without_cuda_python() -> None:
    code = "import sys; from tinyton.runtime import driver; print(driver.is_available(), 'cuda.bindings' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]
