"""tinyton: a hackable GPU kernel compiler and fusion optimizer on xDSL. `import tinyton as tt`."""

import importlib
from typing import Any

from tinyton import language
from tinyton.language import *  # noqa: F403
from tinyton.language import __all__ as _language

SUBMODULES = ("testing", "tools")
"""Submodules that `import tinyton as triton` reaches as attributes, as Triton's (`triton.testing`)."""


def __getattr__(name: str) -> Any:
    """`tt.OutOfBoundsError`, imported with the simulator only when asked for; `tt.testing`, `tt.tools`;
    the language's lazily served names (`tt.tensor_descriptor`)."""
    if name in language.LAZY:
        return getattr(language, name)
    if name == "OutOfBoundsError":
        from tinyton.runtime.simulator import OutOfBoundsError

        return OutOfBoundsError
    if name in SUBMODULES:
        return importlib.import_module(f"tinyton.{name}")
    raise AttributeError(f"module 'tinyton' has no attribute {name!r}")


__all__ = [*_language, *language.LAZY, "OutOfBoundsError"]  # noqa: F405 - served lazily by `__getattr__`
