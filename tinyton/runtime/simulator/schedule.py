"""The cooperative schedule: programs that wait on each other (spin locks, polled counters) make progress.

On the GPU the programs of a launch run at the same time, so a program spinning in
`while tl.atomic_cas(lock, 0, 1) == 1: pass` waits for another one to release the lock, and one polling
`while tl.atomic_add(count, 0) < n: pass` waits for the others to arrive. Run as one batch (every program
steps together) the holder of the lock can never leave the loop the others spin in; run one by one, a program
waiting for a later one never finishes. A kernel with a *spin loop* (an `scf.while` that reads memory the
kernel may write, analysis/pointers.py) therefore runs cooperatively: every program is a thread of its own, exactly one
runs at a time, and a program gives its turn away at each back-edge of a spin loop. The turn then goes to the
next program not started yet, else back to the program that gave it away longest ago (round-robin). A program
that never waits runs to its end before the next starts, as one by one; atomics stay sequential (one valid
serialisation of the GPU's), so the results are the GPU's.

Programs that wait on each other forever (a deadlock: the GPU would hang) raise `SimulatorError` after
`STALL_ROUNDS` rounds over the waiting programs in which none of them ended or left its spin loop.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

from xdsl.dialects import func, scf
from xdsl.ir import Operation

from tinyton.analysis.pointers import READS, WRITES, pointer_params

from .errors import SimulatorError

STALL_ROUNDS = 200
"""Rounds over every waiting program, none of them making progress, before the schedule calls it a deadlock."""


def spin_loops(kernel: func.FuncOp, share_memory: Callable[[int, int], bool]) -> frozenset[Operation]:
    """The `scf.while` loops of `kernel` that read memory the kernel may write: through a pointer parameter
    it writes through, or one whose memory `share_memory(i, j)` with such a parameter (arguments that alias).
    Nothing another program does can change what any other loop reads."""
    written = pointer_params(kernel, [op.ptr for op in kernel.walk() if isinstance(op, WRITES)])
    if not written:
        return frozenset()
    loops = []
    for loop in (op for op in kernel.walk() if isinstance(op, scf.WhileOp)):
        read = pointer_params(kernel, [op.ptr for op in loop.walk() if isinstance(op, READS)])
        if any(r == w or share_memory(r, w) for r in read for w in written):
            loops.append(loop)
    return frozenset(loops)


class _Cancelled(BaseException):
    """Unwinds a waiting program's thread when the launch stops (another program failed)."""


class Program:
    """One program of a cooperative launch. The simulator's `scf.while` calls `back_edge` / `loop_done`
    (through `Launch.turns`) on the thread running it."""

    def __init__(self, index: int, spin: frozenset[Operation], worker: Worker) -> None:
        self.index = index
        self.spin = spin
        self.worker = worker
        self.progressed = False
        self.finished = False
        self.error: BaseException | None = None

    def back_edge(self, loop: Operation) -> None:
        """At the back-edge of `loop`: give the turn away if it is a spin loop."""
        if loop in self.spin:
            self.worker.give_way()

    def loop_done(self, loop: Operation) -> None:
        """`loop` ended: leaving a spin loop is progress."""
        if loop in self.spin:
            self.progressed = True


class Worker:
    """A thread that runs programs, one after another, whenever the scheduler hands it the turn.

    Exactly one of the scheduler's thread and the workers runs at any time: the turn passes with a pair of
    events (`take_turn` on the scheduler's side, `give_way` or the end of a program on the worker's)."""

    def __init__(self, body: Callable[[Program], None]) -> None:
        self.body = body
        self.program: Program | None = None
        self._stopping = False
        self._resume = threading.Event()
        self._handed_back = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tinyton-program", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            self._resume.wait()
            if self._stopping:
                return
            program = self.program
            assert program is not None
            try:
                self.body(program)
            except _Cancelled:
                return
            except BaseException as error:  # noqa: BLE001 - handed to the scheduler's thread, which raises it
                program.error = error
            program.finished = True
            self._resume.clear()
            self._handed_back.set()

    def take_turn(self) -> None:
        """(Scheduler's thread) run the worker's program until it gives way or ends."""
        self._handed_back.clear()
        self._resume.set()
        self._handed_back.wait()

    def give_way(self) -> None:
        """(Worker's thread) hand the turn back to the scheduler and wait until it comes back."""
        self._resume.clear()
        self._handed_back.set()
        self._resume.wait()
        if self._stopping:
            raise _Cancelled

    def stop(self) -> None:
        """End the thread, unwinding a program that waits in it."""
        self._stopping = True
        self._resume.set()
        self._thread.join()


def run_cooperatively(total: int, spin: frozenset[Operation], body: Callable[[Program], None]) -> None:
    """Run programs 0..total-1 (`body(program)` runs one) with the cooperative schedule above."""
    waiting: deque[Program] = deque()
    idle: list[Worker] = []
    started = 0
    stalled = 0
    try:
        while started < total or waiting:
            if started < total:
                worker = idle.pop() if idle else Worker(body)
                program = worker.program = Program(started, spin, worker)
                started += 1
                stalled = 0
            else:
                program = waiting.popleft()
            program.progressed = False
            program.worker.take_turn()
            if program.finished:
                idle.append(program.worker)
                if program.error is not None:
                    raise program.error
                stalled = 0
                continue
            stalled = 0 if program.progressed else stalled + 1
            waiting.append(program)
            if stalled > STALL_ROUNDS * len(waiting):
                raise SimulatorError(_deadlock(waiting))
    finally:
        for worker in [*idle, *(p.worker for p in waiting)]:
            worker.stop()


def _deadlock(waiting: deque[Program]) -> str:
    ids = ", ".join(str(p.index) for p in list(waiting)[:8]) + (", ..." if len(waiting) > 8 else "")
    return (
        f"the kernel's programs wait on each other forever: programs {ids} spin in a while loop that no "
        f"other program lets them leave ({STALL_ROUNDS} rounds without progress); on the GPU this launch would "
        "hang. Check the lock or counter the loop waits for (is it released/reached by every path?)"
    )
