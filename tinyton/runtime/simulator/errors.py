"""Errors raised by the simulator while it runs a kernel."""

from __future__ import annotations


class SimulatorError(Exception):
    """A kernel did something the simulator (and the GPU) cannot do meaningfully."""


class KernelArgumentError(SimulatorError, TypeError):
    """The launch arguments do not fit the kernel's parameters (count, kind or dtype)."""


class OutOfBoundsError(SimulatorError, IndexError):
    """A `tt.load`/`tt.store` lane whose mask is true addresses memory outside its argument array."""

    def __init__(
        self,
        *,
        access: str,
        argument: str,
        argument_number: int,
        size: int,
        dtype: str,
        program: tuple[int, ...],
        index: int,
        lane: tuple[int, ...],
        masked: bool,
        op_text: str,
    ):
        self.access = access
        self.argument = argument
        self.argument_number = argument_number
        self.size = size
        self.program = program
        self.index = index
        self.lane = lane
        verb = "reads" if access == "load" else "writes"
        where = f"lane {lane} of the tile" if lane else "the scalar pointer"
        if masked:
            where += ", whose mask is true"
        valid = f", valid indices 0..{size - 1}" if size else ""
        super().__init__(
            f"tt.{access} out of bounds: program {program} {verb} element {index} of argument "
            f"'{argument}' (#{argument_number}, {size} elements of {dtype}{valid}); "
            f"at {where}\n    {op_text}"
        )


class DeviceAssertionError(SimulatorError, AssertionError):
    """A `tl.device_assert` whose condition is false in some lane of a running program."""

    def __init__(self, *, message: str, program: tuple[int, ...], lane: tuple[int, ...]):
        self.message, self.program, self.lane = message, program, lane
        where = f" lane {lane}" if lane else ""
        super().__init__(f"device_assert failed in program {program}{where}: {message}")
