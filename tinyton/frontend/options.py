"""Launch options: the keyword arguments of `kernel[grid](...)` that are not kernel parameters.

As Triton: `num_warps` (threads per program / 32), `num_stages` (software-pipelining depth of loops; the
kernel carries it as the `tt.num_stages` module attribute when given), `num_ctas` (thread-block clusters;
accepted, tinyton launches one CTA per program) and `maxnreg` (a register cap; accepted, recorded in the
kernel's metadata, not applied). What cannot apply on this GPU is ignored without an error, as Triton
does.
"""

from __future__ import annotations

from typing import Any

from tinyton.errors import call_error

LAUNCH_OPTIONS: dict[str, Any] = {"num_warps": 4, "num_stages": None, "num_ctas": 1, "maxnreg": None}
"""Option -> default (None: not given; `num_stages` then means Triton's default of 3)."""
DEFAULT_NUM_STAGES = 3


def launch_options(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Take the launch options out of `kwargs` (in place), checked, defaults filled in."""
    options = {name: kwargs.pop(name, default) for name, default in LAUNCH_OPTIONS.items()}
    num_warps = options["num_warps"]
    if type(num_warps) is not int or num_warps not in (1, 2, 4, 8, 16):  # 4.0 == 4, but is no int
        raise call_error(f"num_warps must be an int, 1, 2, 4, 8 or 16, got {num_warps!r}; e.g. num_warps=4")
    for name, least in (("num_stages", 0), ("num_ctas", 1), ("maxnreg", 1)):
        value = options[name]
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < least):
            raise call_error(f"{name} must be an int >= {least}, got {value!r}")
    return options
