"""Per-launch state shared by the simulator's impls: memory, grid, running programs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from xdsl.interpreter import Interpreter, InterpreterFunctions
from xdsl.ir import Operation

from .values import per_program


class Turns(Protocol):
    """The cooperative schedule's hooks, called by `scf.while` on the running program (schedule.py)."""

    def back_edge(self, loop: Operation) -> None: ...

    def loop_done(self, loop: Operation) -> None: ...


@dataclass
class Launch:
    """One kernel launch as the impls see it.

    `pid[axis]` is this program's id (an `np.int32`) when one program runs, or an int32 array of shape `(P,)`
    (a scalar when equal for the whole batch) when a batch of P programs runs at once; `programs` then holds
    their `(x, y, z)` ids, and `active` says which of them execute the current region (None: all).
    """

    buffers: list[np.ndarray]
    """Flat views of the pointer arguments (the memory), numbered as `Pointer.buffer`."""
    buffer_args: list[tuple[int, str]]
    """(argument number, argument name) of each buffer, for error messages."""
    grid: tuple[int, int, int]
    pid: tuple[Any, Any, Any] = (np.int32(0), np.int32(0), np.int32(0))
    programs: np.ndarray | None = None
    active: np.ndarray | None = field(default=None)
    turns: Turns | None = None
    """Set when programs run cooperatively (each program its own `Launch`): where a waiting loop gives way."""

    def share_memory(self, a: int, b: int) -> bool:
        """Whether pointer arguments number `a` and `b` (kernel parameter indices) reach common memory."""
        buffers = {arg: buffer for (arg, _), buffer in zip(self.buffer_args, self.buffers)}
        x, y = buffers[a], buffers[b]
        return x.size > 0 and y.size > 0 and bool(np.may_share_memory(x, y))

    def restrict(self, mask: Any, r: int) -> Any:
        """`mask` (lanes of tile rank r, or None) limited to the programs executing now."""
        if self.active is None:
            return mask
        act = per_program(self.active, r)
        return act if mask is None else mask & act

    def locate(self, bad: Any, r: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(program id, tile lane) of the first true element of `bad`, a lane mask of tile rank r."""
        bad = np.asarray(bad)
        pos = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), bad.shape)) if bad.ndim else ()
        if bad.ndim > r:
            return tuple(int(i) for i in self.programs[pos[0]]), pos[1:]
        return self.first_program(), pos

    def first_program(self) -> tuple[int, ...]:
        """Id of the first executing program (the running one outside the batched path)."""
        if self.programs is None:
            return tuple(int(p) for p in self.pid)
        first = 0 if self.active is None else int(np.argmax(self.active))
        return tuple(int(i) for i in self.programs[first])


class SimFunctions(InterpreterFunctions):
    """Base of the simulator's impl classes: access to the launch state."""

    @staticmethod
    def launch(interpreter: Interpreter) -> Launch:
        return interpreter.get_data(SimFunctions, "launch", _no_launch)

    @staticmethod
    def op_text(op: Operation) -> str:
        """The op as one line of IR, for error messages."""
        text = str(op)
        return text if len(text) < 400 else text[:400] + " ..."


def _no_launch() -> Launch:
    raise RuntimeError("tinyton simulator impls need a launch: use tinyton.runtime.simulator.run")
