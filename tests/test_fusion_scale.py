"""Compile time grows linearly with program length (issue 11, "Scale"), and the planner's incremental
analysis (tinyton/analysis/groups.py) agrees with `analyze` on every merge it tries.

Compile = trace + fuse + generate the tt kernels (no simulator run, no LLVM). Growth and the absolute bound are
measured in function calls (deterministic, whatever the machine's speed or load).
"""

from __future__ import annotations

import cProfile
import pstats
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fuzz.generate import generate as generate_fuzz_case
from fuzz.run import DEFAULT_SEED, load
from scale_programs import (
    chain,
    chain_inputs,
    mixed,
    mixed_inputs,
    straight,
    wide,
    wide_inputs,
)
from test_fusion_property import TracedBackend, generate

from tinyton.analysis import groups
from tinyton.analysis.domain import NotFusable, analyze
from tinyton.compiler import build_program
from tinyton.errors import CompilationError
from tinyton.frontend import array_ops as ops
from tinyton.frontend.programs import compile_array_program
from tinyton.frontend.tracing import is_array, trace


PROGRAMS = {
    "chain": (chain, chain_inputs),
    "mixed": (mixed, mixed_inputs),
    "wide": (wide, wide_inputs),
    "straight": (straight, chain_inputs),
}


def compile_calls(fn: Callable[..., Any], args: list[np.ndarray]) -> int:
    """Python function calls made to trace, fuse and generate the kernels of `fn(*args)`, through the path a call
    of an array program takes: a count of work that, unlike a time, does not depend on what else the machine runs."""
    profile = cProfile.Profile()
    profile.enable()
    program = compile_array_program(fn, args, fuse=True)
    profile.disable()
    assert program.num_launches >= 1
    return pstats.Stats(profile).total_calls


CALLS_PER_OP = 10_000
"""The work bound of a 10,000-op program: counted 2026-12-04, 3,700 calls an op (chain) to 6,900 (wide). It replaced
a bound of 30 CPU seconds, which the widest failed that day with the day's code and the day before's alike (34-47 s,
on a machine that ran the whole suite in 35 minutes where it had taken 13)."""


@pytest.mark.parametrize("kind", list(PROGRAMS))
def test_ten_thousand_ops_compile_in_bounded_work(kind: str) -> None:
    make, inputs = PROGRAMS[kind]
    compile_calls(make(10), inputs())  # imports and first-use caches out of the count
    calls = compile_calls(make(10_000), inputs())
    assert calls < 10_000 * CALLS_PER_OP, f"{kind}: 10,000 ops took {calls:,} calls ({calls // 10_000:,} an op)"


@pytest.mark.parametrize("kind", list(PROGRAMS))
def test_compile_work_is_near_linear(kind: str) -> None:
    """4x the ops must cost well under 16x (quadratic) the work: at most 6x the function calls."""
    make, inputs = PROGRAMS[kind]
    compile_calls(make(10), inputs())  # imports and first-use caches out of the count
    small, large = (compile_calls(make(n), inputs()) for n in (1000, 4000))
    assert large / small < 6, f"{kind}: 1000 ops {small} calls, 4000 ops {large} calls ({large / small:.1f}x)"


# ---- the incremental analysis equals analyze ----------------------------------------------------


def _summary(dom) -> tuple:
    return dom.shape, dom.red, dom.matmul, dict(dom.maps), dict(dom.views)


@pytest.fixture
def checked_unions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every union the planner tries is also analyzed from scratch; both must agree."""
    union = groups.GroupDomain.union
    tried = [0]

    def checked(a: groups.GroupDomain, b: groups.GroupDomain):
        ops_ = sorted([*a.ops, *b.ops], key=a.position.__getitem__)
        members = set(ops_)
        outputs = [r for op in ops_ for r in op.results if any(u.operation not in members for u in r.uses)]
        try:
            want = _summary(analyze(ops_, outputs))
        except NotFusable:
            want = None
        try:
            got = union(a, b)
        except NotFusable:
            assert want is None, "the incremental analysis refused a fusable union"
            tried[0] += 1
            raise
        assert want is not None, "the incremental analysis accepted a union analyze refuses"
        dom = got.dom
        maps = {v: dom.maps[v] for v in want[3]}
        assert (dom.shape, dom.red, dom.matmul) == want[:3]
        assert maps == want[3]
        assert all(v in dom.views and dom.views[v] == view for v, view in want[4].items())
        assert set(outputs) == set(got.fresh.outputs if got.fresh else _union_outputs(got))
        tried[0] += 1
        return got

    monkeypatch.setattr(groups.GroupDomain, "union", staticmethod(checked))
    return tried


def _union_outputs(u: groups.Union) -> list:
    return [v for v in u.big.outputs if v not in u.removed] + u.added


@pytest.mark.parametrize("seed", range(0, 300, 3))
def test_incremental_analysis_matches_analyze_on_random_programs(seed: int, checked_unions: list[int]) -> None:
    prog = generate(seed, rows_only=seed % 2 == 1)
    rng = np.random.default_rng(seed)
    args = [rng.uniform(-2, 2, s).astype(np.float32) for s in prog.inputs]
    build_program(trace(lambda *xs: prog.run(TracedBackend, list(xs)), args), "p", list(range(len(args))))


def _views_and_matmuls(x, w, idx):
    t = x.T * 2.0  # a transpose of an input: a view
    y = (t.reshape(8, 4, 4) + 1.0).reshape(8, 16)
    z = ops.exp(y) @ w  # a matmul with an elementwise prologue in another kernel
    g = ops.take(z, idx, axis=0)  # a gather from a computed table: its own kernel
    s = g.sum(axis=0, keepdims=True)
    b = ops.broadcast_to(s, (3, 16)) * g
    return b.max(axis=-1), x.sum(axis=0), (x * x).mean(axis=1)


@pytest.mark.parametrize("n", [1, 3, 20])
def test_incremental_analysis_matches_analyze_on_layouts(n: int, checked_unions: list[int]) -> None:
    rng = np.random.default_rng(n)
    x = rng.standard_normal((16, 8)).astype(np.float32)
    w = rng.standard_normal((16, 16)).astype(np.float32)
    idx = np.array([0, 5, 7], dtype=np.int32)

    def program(x, w, idx):
        outs = []
        for _ in range(n):
            outs += _views_and_matmuls(x, w, idx)
            x = x * 0.5 + outs[-1].reshape(16, 1)
        return tuple(outs)

    build_program(trace(program, [x, w, idx]), "p", [0, 1, 2])
    assert checked_unions[0] > 0


@pytest.mark.parametrize("kind", list(PROGRAMS))
def test_incremental_analysis_matches_analyze_on_long_programs(kind: str, checked_unions: list[int]) -> None:
    make, inputs = PROGRAMS[kind]
    build_program(trace(make(300), inputs()), "p", list(range(len(inputs()))))
    assert checked_unions[0] > 0


@pytest.mark.parametrize("index", range(0, 400, 4))
def test_incremental_analysis_matches_analyze_on_fuzzer_programs(
    index: int, checked_unions: list[int], tmp_path: Path
) -> None:
    """The differential fuzzer's programs (transposes and matmuls of intermediates, reductions over any
    axis, broadcasting, several outputs): every union the planner tries, checked against `analyze`."""
    case = generate_fuzz_case(DEFAULT_SEED, index)
    fn = load(case, tmp_path)
    try:
        graph = trace(fn, case.inputs)
    except CompilationError:
        return  # a program the tracer refuses has nothing to plan
    build_program(graph, case.name, [i for i, a in enumerate(case.inputs) if is_array(a)])
