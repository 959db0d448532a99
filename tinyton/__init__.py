"""tinyton: a hackable GPU kernel compiler and fusion optimizer on xDSL. `import tinyton as tt`."""

import importlib
from typing import Any

from tinyton import language
from tinyton.language import *  # noqa: F403 - the language is the package's namespace (`tt.jit`, `tt.load`)

SUBMODULES = ("testing", "tools")
"""Submodules that `import tinyton as triton` reaches as attributes, as Triton's (`triton.testing`)."""

SIMULATOR_NAMES = ("OutOfBoundsError",)
"""The simulator's names served by `__getattr__`: the simulator (a package, which `lazy_module` does not take:
tinyton/lazy.py) loads only when one is asked for."""


def __getattr__(name: str) -> Any:
    """`tt.OutOfBoundsError`, imported with the simulator only when asked for; `tt.testing`, `tt.tools`;
    the language's lazily served names (`tt.tensor_descriptor`)."""
    if name in language.LAZY:
        return getattr(language, name)
    if name in SIMULATOR_NAMES:
        return getattr(importlib.import_module("tinyton.runtime.simulator"), name)
    if name in SUBMODULES:
        return importlib.import_module(f"tinyton.{name}")
    raise AttributeError(f"module 'tinyton' has no attribute {name!r}")


__all__ = [*language.__all__, *language.LAZY, *SIMULATOR_NAMES]
