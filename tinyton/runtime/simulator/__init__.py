"""NumPy simulator: interprets a kernel's tt IR over a launch grid, so kernels run without a GPU.

`run(module, grid, args)` executes the module's kernel (`func.func`) program by program semantically;
pointer arguments are NumPy arrays (the memory, updated in place), scalar arguments numbers. A masked-off
lane is never read or written; a lane with a true mask outside its array raises `OutOfBoundsError`.
Programs are normally executed a chunk at a time with a leading program dimension (see `driver`), which
gives the same results as one by one for every race-free kernel.

Impls follow xDSL's interpreter conventions (`@register_impls` classes of `@impl(Op)` methods) and run on
`xdsl.interpreter.Interpreter`; modules: `values` (representation), `state` (launch), `tiles`,
`elementwise`, `memory`, `shapes`, `combine` (tt.reduce/tt.scan), `debug`, `control` (scf, predication),
`schedule` (programs that wait on each other run cooperatively), `driver` (`run`).
"""

from .driver import run
from .errors import DeviceAssertionError, KernelArgumentError, OutOfBoundsError, SimulatorError
from .values import Pointer

__all__ = [
    "DeviceAssertionError",
    "KernelArgumentError",
    "OutOfBoundsError",
    "Pointer",
    "SimulatorError",
    "run",
]
