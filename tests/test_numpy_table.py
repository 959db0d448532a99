"""The README's table of NumPy functions is what scripts/numpy_table.py makes from the registry, and every
refused function raises its reason at the user's line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tinyton as tt
from tinyton.errors import CompilationError
from tinyton.frontend.refused import REFUSED

ROOT = Path(__file__).resolve().parent.parent


def test_readme_table_is_current():
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "numpy_table.py"), "--check"],
                            capture_output=True, text=True)  # fmt: skip
    assert result.returncode == 0, result.stderr


@tt.jit
def _nonzero(x):
    return np.nonzero(x)


def test_refused_function_names_the_reason():
    with pytest.raises(CompilationError, match="np.nonzero is not supported in array programs: the result's shape"):
        _nonzero(np.ones(4, np.float32))
    assert "nonzero" in REFUSED
