"""`exp2` keeps NaN by a select (`elementwise._nan_kept`: ptxas takes `ex2.approx`'s result to be ordered and folds
comparisons of it) only where something compares what it computes (tinyton/lowering/tt_to_llvm/math.py
`_order_blind`): a sum, a product or a dot of it needs none, which saves two instructions an element in the
softmax of the flash-attention kernel. NaN in, NaN out either way, on the simulator and the GPU."""

from __future__ import annotations

import numpy as np
import pytest

import tinyton as tt
from tinyton.frontend.tracing import trace
from tinyton.lowering.fusion import fusion_to_kernels
from tinyton.lowering.tt_to_llvm import lower_to_llvm
from tinyton.rewrites.pipeline import fuse_module

BACKENDS = ["sim", pytest.param("cuda", marks=pytest.mark.gpu)]


def compared(x):
    return tt.exp2(x) > -1.0


def summed(x):
    return (tt.exp2(x) * 3.0).sum(axis=-1)


def running_sum(x):
    """A sum carried by a loop (the flash kernel's `l`): the exp2 is fed through the loop to its result."""
    return tt.exp2(x - x.max(axis=-1, keepdims=True)).sum(axis=-1)


def _lowered(fn) -> str:
    module = trace(fn, [np.zeros((4, 96), np.float32)])
    fuse_module(module, True)
    texts = []
    for spec in fusion_to_kernels(module):
        lower_to_llvm(spec.module, None)
        texts.append(str(spec.module))
    return "\n".join(texts)


def test_a_compared_exp2_keeps_nan_by_a_select():
    assert '"uno"' in _lowered(compared)


@pytest.mark.parametrize("fn", [summed, running_sum])
def test_an_exp2_only_summed_has_no_select(fn):
    assert '"uno"' not in _lowered(fn)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [compared, summed, running_sum])
def test_nan_in_nan_out(monkeypatch, backend, fn):
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    x = np.linspace(-3, 3, 4 * 96, dtype=np.float32).reshape(4, 96)
    x[1, 5] = np.nan
    with np.errstate(invalid="ignore"):
        e = np.exp2(x.astype(np.float64) - (np.max(x, axis=-1, keepdims=True) if fn is running_sum else 0))
        want = {compared: e > -1.0, summed: (e * 3.0).sum(axis=-1), running_sum: e.sum(axis=-1)}[fn]
        np.testing.assert_allclose(tt.jit(fn)(x), want, rtol=1e-5, equal_nan=True)
