"""`scf.for`, `scf.if`, `scf.while` and their terminators, with per-program predication for the batched path.

When every program of a batch takes the same path (the condition or the loop bounds have no program
dimension) these run like xDSL's own scf impls. Otherwise they predicate like a SIMT machine: a branch runs
for the programs that take it (`Launch.active` masks their loads, stores and division checks) and the results
are merged per program; a loop runs until its longest-running program ends, and a program whose loop has
ended keeps its carried values (for `while`: the values its condition forwarded when it left).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from xdsl.dialects import scf
from xdsl.interpreter import (
    Interpreter,
    PythonValues,
    ReturnedValues,
    TerminatorValue,
    impl,
    impl_terminator,
    register_impls,
)
from xdsl.ir import Region

from .errors import SimulatorError
from .state import Launch, SimFunctions
from .values import choose_programs, rank, scalar


@register_impls
class ControlFunctions(SimFunctions):
    """Structured control flow over uniform or per-program conditions and bounds."""

    @impl(scf.IfOp)
    def run_if(self, interpreter: Interpreter, op: scf.IfOp, args: PythonValues) -> PythonValues:
        (cond,) = args
        if np.ndim(cond) == 0:
            return interpreter.run_ssacfg_region(op.true_region if cond else op.false_region, (), "scf.if")
        launch = self.launch(interpreter)
        outer = launch.active
        taken = cond if outer is None else cond & outer
        skipped = ~cond if outer is None else ~cond & outer
        if not skipped.any():
            return self._run_with(interpreter, launch, op.true_region, (), outer)
        if not taken.any():
            return self._run_with(interpreter, launch, op.false_region, (), outer)
        then = self._run_with(interpreter, launch, op.true_region, (), taken)
        other = self._run_with(interpreter, launch, op.false_region, (), skipped)
        return tuple(choose_programs(cond, a, b, rank(r.type)) for a, b, r in zip(then, other, op.results))

    @impl(scf.ForOp)
    def run_for(self, interpreter: Interpreter, op: scf.ForOp, args: PythonValues) -> PythonValues:
        lb, ub, step, *carried = args
        iv_type = np.asarray(lb).dtype.type
        if np.ndim(lb) == np.ndim(ub) == np.ndim(step) == 0:
            if step <= 0:
                raise SimulatorError(f"scf.for needs a positive step, got {step}")
            for i in range(int(lb), int(ub), int(step)):
                carried = interpreter.run_ssacfg_region(op.body, (iv_type(i), *carried), "scf.for")
            return tuple(carried)

        launch = self.launch(interpreter)
        outer = launch.active
        executing = np.ones(len(launch.programs), dtype=bool) if outer is None else outer
        lb, ub, step = (np.asarray(v, dtype=np.int64) for v in (lb, ub, step))
        if np.any((step <= 0) & executing):
            raise SimulatorError("scf.for needs a positive step")
        trips = np.broadcast_to(np.maximum(0, (ub - lb + step - 1) // np.maximum(step, 1)), executing.shape)
        ranks = [rank(r.type) for r in op.results]
        for k in range(int(trips[executing].max(initial=0))):
            live = executing & (trips > k)
            everyone = bool(np.array_equal(live, executing))
            iv = scalar((lb + k * step).astype(iv_type))
            new = self._run_with(interpreter, launch, op.body, (iv, *carried), outer if everyone else live)
            carried = new if everyone else [choose_programs(live, n, c, r) for n, c, r in zip(new, carried, ranks)]
        return tuple(carried)

    @impl(scf.WhileOp)
    def run_while(self, interpreter: Interpreter, op: scf.WhileOp, args: PythonValues) -> PythonValues:
        """Uniform while the condition is the same for every program; then per program: a program that
        leaves keeps the values its condition forwarded, the others go on."""
        carried: PythonValues = args
        launch = self.launch(interpreter)
        outer = launch.active
        live: np.ndarray | None = None  # programs still looping, once the condition differs between them
        results: list[Any] = []
        ranks = [rank(r.type) for r in op.results]
        while True:
            cond, *forwarded = self._run_with(interpreter, launch, op.before_region, carried, outer if live is None else live)
            if live is None and np.ndim(cond) == 0:
                if not cond:
                    if launch.turns is not None:
                        launch.turns.loop_done(op)
                    return tuple(forwarded)
                carried = self._run_with(interpreter, launch, op.after_region, tuple(forwarded), outer)
                if launch.turns is not None:
                    launch.turns.back_edge(op)
                continue
            if live is None:
                live = np.ones(len(launch.programs), dtype=bool) if outer is None else outer.copy()
                results = list(forwarded)
            leaving = live & ~np.asarray(cond, dtype=bool)
            results = [choose_programs(leaving, f, r, k) for f, r, k in zip(forwarded, results, ranks)]
            live = live & ~leaving
            if not live.any():
                return tuple(results)
            new = self._run_with(interpreter, launch, op.after_region, tuple(forwarded), live)
            carried = tuple(choose_programs(live, n, f, k) for n, f, k in zip(new, forwarded, ranks))

    @impl_terminator(scf.ConditionOp)
    def run_condition(
        self, interpreter: Interpreter, op: scf.ConditionOp, args: PythonValues
    ) -> tuple[TerminatorValue, PythonValues]:
        return ReturnedValues(args), ()

    @impl_terminator(scf.YieldOp)
    def run_yield(
        self, interpreter: Interpreter, op: scf.YieldOp, args: PythonValues
    ) -> tuple[TerminatorValue, PythonValues]:
        return ReturnedValues(args), ()

    @staticmethod
    def _run_with(
        interpreter: Interpreter, launch: Launch, region: Region, args: tuple[Any, ...], active: np.ndarray | None
    ) -> PythonValues:
        """Run `region` with `active` as the executing programs."""
        outer = launch.active
        launch.active = active
        try:
            return interpreter.run_ssacfg_region(region, args, "predicated")
        finally:
            launch.active = outer
