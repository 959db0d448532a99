"""Whole-row and elementwise kernels load every input before computing (tinyton/lowering/fusion/schedule.py
`_load_inputs_first`): on a latency-bound shape a load issued after the first input's reductions or divisions
waited for that input's memory latency first. The kernels' results are unchanged: NumPy's, on the simulator
and on the GPU."""

from __future__ import annotations

import numpy as np
import pytest

import tinyton as tt


@tt.jit
def silu_gate(a, b):
    return a / (1.0 + tt.exp(-a)) * b


@tt.jit
def layernorm(x, w, b):
    d = x - tt.mean(x, axis=-1, keepdims=True)
    return d * tt.rsqrt(tt.mean(d * d, axis=-1, keepdims=True) + 1e-5) * w + b


def np_silu_gate(a, b):
    return a / (1.0 + np.exp(-a)) * b


def np_layernorm(x, w, b):
    d = x - x.mean(-1, keepdims=True)
    return d / np.sqrt((d * d).mean(-1, keepdims=True) + 1e-5) * w + b


RNG = np.random.default_rng(0)


def _inputs(shapes, dtype):
    return [RNG.standard_normal(s).astype(dtype) for s in shapes]


def _ops(program, *args) -> list[str]:
    """The names of the ops of the program's (first) kernel, in order."""
    return [op.name for op in program.compile(*args).steps[0].launch.kernel.body.block.ops]


def _first_compute(names: list[str]) -> int:
    return next(i for i, n in enumerate(names) if n in ("tt.exp", "tt.reduce_sum", "tt.div"))


@pytest.mark.parametrize("shape", [(32, 2048), (7, 300), (300, 96)])
def test_loads_come_first_and_results_are_numpys(shape):
    a, b = _inputs([shape, shape], np.float32)
    names = _ops(silu_gate, a, b)
    assert names.count("tt.load") == 2 and names.index("tt.load", names.index("tt.load") + 1) < _first_compute(names)
    np.testing.assert_allclose(silu_gate(a, b), np_silu_gate(a.astype(np.float64), b), rtol=1e-6, atol=1e-6)
    x, w, bias = _inputs([shape, shape[-1:], shape[-1:]], np.float32)
    names = _ops(layernorm, x, w, bias)
    assert max(i for i, n in enumerate(names) if n == "tt.load") < _first_compute(names)
    np.testing.assert_allclose(layernorm(x, w, bias), np_layernorm(x.astype(np.float64), w, bias), rtol=1e-4, atol=1e-5)


def test_long_rows_keep_their_registers():
    """A 32768-element row with its weights: loading them first would hold 64 more registers per thread
    through the reductions, so the weights are loaded where first used."""
    x, w, bias = _inputs([(64, 32768), (32768,), (32768,)], np.float32)  # whole rows, one per program
    names = _ops(layernorm, x, w, bias)
    loads = [i for i, n in enumerate(names) if n == "tt.load"]
    assert len(loads) == 3 and loads[1] > _first_compute(names)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_on_the_gpu(dtype):
    import torch

    tol = {np.float32: 1e-5, np.float16: 5e-3}[dtype]
    for shape in [(32, 2048), (8192, 768), (65536, 128)]:
        a, b = (torch.from_numpy(v).cuda() for v in _inputs([shape, shape], dtype))
        want = np_silu_gate(a.double().cpu().numpy(), b.double().cpu().numpy())
        got = silu_gate(a, b).double().cpu().numpy()
        assert np.linalg.norm(got - want) / np.linalg.norm(want) < tol
        x, w, bias = (torch.from_numpy(v).cuda() for v in _inputs([shape, shape[-1:], shape[-1:]], dtype))
        want = np_layernorm(*(v.double().cpu().numpy() for v in (x, w, bias)))
        got = layernorm(x, w, bias).double().cpu().numpy()
        assert np.linalg.norm(got - want) / np.linalg.norm(want) < tol
