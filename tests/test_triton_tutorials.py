"""The runner of Triton's tutorials (scripts/run_triton_tutorials.py): only import lines change, a
tutorial's top-level test calls are found for `--size small`; and, where Triton's tutorial files have been
copied into the git-ignored `.tutorials/`, every one runs and matches on this machine's backend."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from run_triton_tutorials import TUTORIALS, rewrite_imports, top_level_tests

SOURCE = """\
import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor
from triton.runtime import driver
try:
    import triton.profiler as proton
except ImportError:
    pass
x = triton.cdiv(3, 2)  # import triton here is not an import line


@triton.jit
def k(x):
    pass


def test_thing(n):
    pass


test_thing(1000)
k[(1,)](1)
"""


def test_only_import_lines_change():
    rewritten, changed = rewrite_imports(SOURCE)
    assert rewritten.splitlines() == [
        "import torch",
        "import tinyton as triton",
        "import tinyton.language as tl",
        "from tinyton.tools.tensor_descriptor import TensorDescriptor",
        "from tinyton.runtime import driver",
        "try:",
        "    import tinyton.profiler as proton",
        *SOURCE.splitlines()[7:],
    ]
    assert len(changed) == 5


def test_top_level_test_calls_are_found():
    assert top_level_tests(SOURCE) == [(22, "test_thing(1000)")]


@pytest.mark.skipif(not all((ROOT / ".tutorials" / f"{n}.py").exists() for n in TUTORIALS), reason="Triton's tutorials are not in .tutorials/")
def test_triton_tutorials_run_and_match(tmp_path):
    done = subprocess.run(
        [str(ROOT / "scripts" / "run-triton-tutorials.sh"), "--logs", str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(TUTORIALS)}/{len(TUTORIALS)} tutorials OK" in done.stdout
