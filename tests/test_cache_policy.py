"""L2 eviction policies on the input loads of fused kernels (`lowering/fusion/cache_policy.py`): a policy only
marks the loads of the region's inputs (not the partials, not the stores), changes no result (the simulator
ignores it; on the GPU against NumPy), and reaches the PTX as Triton's `createpolicy` + `.L2::cache_hint`."""

from __future__ import annotations

import numpy as np
import pytest
from fusion_helpers import compile_program, execute
from test_fusion import np_softmax, rel
from test_split_rows import CASES

import tinyton as tt
from tinyton.dialects import tt as tt_dialect
from tinyton.dialects.tt import shape_of
from tinyton.lowering.fusion import cache_policy

rng = np.random.default_rng(5)
KNOBS = ("GRID_LOADS", "SPLIT_LOADS", "ROW_LOADS")


def _loads(spec) -> list[tt_dialect.LoadOp]:
    return [op for op in spec.module.walk() if isinstance(op, tt_dialect.LoadOp)]


def _policies(spec) -> set[tuple[int, str | None]]:
    """(tile length, evict property) of the kernel's loads."""
    return {(shape_of(op.result.type)[-1], op.evict.data if op.evict else None) for op in _loads(spec)}


def test_no_policy_by_default() -> None:
    x = rng.standard_normal((3, 9001)).astype(np.float32)
    _, (spec,) = compile_program(CASES["online softmax"][0], [x], fuse=True)
    for s in (spec, *spec.fallback):
        assert all(op.evict is None for op in _loads(s)), s.name


@pytest.mark.parametrize("knob", KNOBS)
@pytest.mark.parametrize("kind", CASES)
def test_policy_marks_input_loads_and_changes_nothing(monkeypatch, knob: str, kind: str) -> None:
    """3 rows of 9001: the grid kernel (2048-element slices, 64-lane tiles of partials) and its two-kernel
    fallback; 40 rows of 1000: a row kernel."""
    fn, _ = CASES[kind]
    for shape in ((3, 9001), (40, 1000)):
        x = rng.standard_normal(shape).astype(np.float32)
        x[1, 7] = np.nan
        module, plain = compile_program(fn, [x], fuse=True)
        with np.errstate(invalid="ignore"):
            want = execute(module, plain, [x])
            monkeypatch.setattr(cache_policy, knob, "evict_last")
            module, hinted = compile_program(fn, [x], fuse=True)
            for y, z in zip(execute(module, hinted, [x]), want):
                np.testing.assert_array_equal(y, z)
            if plain[0].fallback:
                for y, z in zip(execute(module, hinted[0].fallback, [x]), want):
                    np.testing.assert_array_equal(y, z)
        monkeypatch.setattr(cache_policy, knob, None)
        if shape[0] == 3:
            grid_kernel, (first, *_, last) = hinted[0], hinted[0].fallback
            marked = {"GRID_LOADS": grid_kernel, "SPLIT_LOADS": first}.get(knob)
            for spec in (grid_kernel, first, last):
                hints = _policies(spec)
                if spec is marked:
                    assert (2048, "evict_last") in hints and (2048, None) not in hints, spec.name
                    assert all(p is None for n, p in hints if n != 2048), spec.name  # partials: plain
                else:
                    assert all(p is None for _, p in hints), spec.name
        else:
            (row_kernel,) = hinted
            assert {p for _, p in _policies(row_kernel)} == {"evict_last" if knob == "ROW_LOADS" else None}


def test_policy_reaches_the_ptx(monkeypatch) -> None:
    pytest.importorskip("llvmlite")
    monkeypatch.setattr(cache_policy, "GRID_LOADS", "evict_last")
    x = rng.standard_normal((3, 9001)).astype(np.float32)
    program = tt.jit(CASES["online softmax"][0]).compile(x)
    ptx = program.kernels()[0].asm["ptx"]
    assert "createpolicy.fractional.L2::evict_last.b64" in ptx
    assert "ld.global.L1::evict_last.L2::cache_hint" in ptx
    assert "st.global.L1" not in ptx


@pytest.mark.gpu
@pytest.mark.parametrize("knob, shape", [("GRID_LOADS", (16, 262144)), ("GRID_LOADS", (6, 70001)),
                                         ("SPLIT_LOADS", (64, 262144)), ("ROW_LOADS", (8192, 1024))])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_policy_on_gpu(monkeypatch, knob: str, shape, dtype) -> None:
    monkeypatch.setenv("TINYTON_BACKEND", "cuda")
    monkeypatch.setattr(cache_policy, knob, "evict_last")
    x = rng.standard_normal(shape).astype(dtype)
    program = tt.jit(CASES["online softmax"][0])
    want = np_softmax(x.astype(np.float64))
    for _ in range(2):
        assert rel(program(x), want) <= (1e-5 if dtype == np.float32 else 5e-3)
