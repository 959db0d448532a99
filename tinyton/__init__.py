"""tinyton: a hackable GPU kernel compiler and fusion optimizer on xDSL. `import tinyton as tt`."""

from typing import Any

from tinyton.language import *  # noqa: F403
from tinyton.language import __all__ as _language


def __getattr__(name: str) -> Any:
    """`tt.OutOfBoundsError`, imported with the simulator only when asked for."""
    if name == "OutOfBoundsError":
        from tinyton.runtime.simulator import OutOfBoundsError

        return OutOfBoundsError
    raise AttributeError(f"module 'tinyton' has no attribute {name!r}")


__all__ = [*_language, "OutOfBoundsError"]  # noqa: F405 - served lazily by `__getattr__`
