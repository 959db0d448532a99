"""NumPy's elementwise functions as `tt.<name>` builtins of array programs (their implementations,
registered by NumPy name, are in tinyton/frontend/ufuncs.py and ufunc_math.py) that kernels do not have:
in a kernel they are an error (the math functions both have, `tanh` and the like, are in `math`).
"""

from __future__ import annotations

from typing import Any

from tinyton.errors import CompilationError
from tinyton.language.core import builtin


def _array_only(name: str, doc: str) -> Any:
    def fn(*args: Any, **kwargs: Any) -> Any:
        raise CompilationError(f"tt.{name} is a builtin of array programs (NumPy's {name}); kernels have tt.where, "
                               "tt.maximum, operators and the tl.math functions")

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return builtin(fn)


_ARRAY_ONLY = (
    "absolute", "add", "arctan2", "around", "atan2", "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor",
    "clip", "copysign", "divide", "divmod", "equal", "erfinv", "floor_divide", "fmax", "fmin", "fmod", "greater", "greater_equal", "hypot",
    "invert", "isfinite", "isinf", "isnan", "left_shift", "less", "less_equal", "logaddexp", "logical_and",
    "logical_not", "logical_or", "logical_xor", "mod", "multiply", "negative", "not_equal", "positive", "pow",
    "power", "reciprocal", "remainder", "right_shift", "round", "sign", "square", "subtract", "true_divide", "astype",
)  # fmt: skip
"""NumPy names with array-program semantics only (`tt.round(x)`, `tt.logical_and(a, b)`, `tt.astype(x, dt)`)."""

BUILTINS: dict[str, Any] = {name: _array_only(name, f"NumPy's {name} (array programs).") for name in _ARRAY_ONLY}
"""The `tt.<name>` builtins, by name (tinyton/language/__init__.py puts them in the language's namespace)."""
