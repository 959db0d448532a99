"""`tt.assert` and `tt.print`: device assertions are checked in every executing program and lane;
prints show each element with its program id and index, as Triton's `device_print` does."""

from __future__ import annotations

import numpy as np
from xdsl.interpreter import Interpreter, PythonValues, impl, register_impls

from tinyton.dialects import tt

from .errors import DeviceAssertionError
from .state import SimFunctions
from .values import rank


@register_impls
class DebugFunctions(SimFunctions):
    """Device assertions and prints."""

    @impl(tt.AssertOp)
    def run_assert(self, interpreter: Interpreter, op: tt.AssertOp, args: PythonValues) -> PythonValues:
        launch = self.launch(interpreter)
        r = rank(op.condition.type)
        failed = launch.restrict(~np.asarray(args[0]), r)
        if np.any(failed):
            program, lane = launch.locate(failed, r)
            raise DeviceAssertionError(message=op.message.data, program=program, lane=lane)
        return ()

    @impl(tt.PrintOp)
    def run_print(self, interpreter: Interpreter, op: tt.PrintOp, args: PythonValues) -> PythonValues:
        launch = self.launch(interpreter)
        batched = launch.programs is not None
        programs = launch.programs if batched else np.array([[int(p) for p in launch.pid]])
        for p, pid in enumerate(programs):
            if launch.active is not None and not launch.active[p]:
                continue
            for value, operand in zip(args, op.values):
                r = rank(operand.type)
                x = np.asarray(value)
                x = x[p] if batched and x.ndim > r else x
                for index in np.ndindex(x.shape):
                    text = format(int(x[index]) & 0xFFFFFFFF, "#x") if op.hex.value else str(x[index])
                    where = f" idx ({', '.join(map(str, index))})" if index else ""
                    print(f"pid ({', '.join(map(str, pid))}){where} {op.prefix.data}{text}")
        return ()
