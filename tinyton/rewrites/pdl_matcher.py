"""xDSL's `PDLMatcher`, without importing the `xdsl.interpreters` package.

`import xdsl.interpreters.pdl` first runs `xdsl/interpreters/__init__.py`, which imports every interpreter
xDSL has (RISC-V, Snitch, linalg, ...): about half a second of a cold compile, for one class. The matcher's
own module only needs xDSL's core, so it is loaded from its file under a private name; when the interpreters
package is already loaded (the simulator uses it), that module is used as is.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import xdsl

_NAME = "xdsl.interpreters.pdl"


def _module() -> ModuleType:
    if _NAME in sys.modules:
        return sys.modules[_NAME]
    path = Path(xdsl.__file__).parent / "interpreters" / "pdl.py"
    spec = importlib.util.spec_from_file_location("tinyton._xdsl_pdl_matcher", path)
    assert spec is not None and spec.loader is not None, f"xDSL's PDL interpreter not found at {path}"
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


PDLMatcher = _module().PDLMatcher

__all__ = ["PDLMatcher"]
