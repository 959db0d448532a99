"""examples/microgpt on the GPU: fused, unfused and NumPy agree on a forward pass and a decode step, and
graphed token steps give the plain launches' tokens. Needs no `names` package (the GPU host has none)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import tinyton as tt
from tinyton.runtime import driver

sys.path.insert(0, str(Path(__file__).parent.parent / "examples" / "microgpt"))

from decode import decode, decode_program
from generate import TinytonGenerator
from model import Config, NumpyOps, evaluate, evaluate_program, init_params
from tokens import VOCAB

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not driver.is_available(), reason="needs a GPU")]


def _host(x) -> np.ndarray:
    return x.numpy() if hasattr(x, "numpy") else np.asarray(x)


def _rows(cfg: Config, batch: int, seed: int):
    rng = np.random.default_rng(seed)
    shape = (batch, cfg.block_size)
    return rng.integers(0, VOCAB, shape).astype(np.int32), rng.integers(0, VOCAB, shape).astype(np.int32), np.ones(shape, np.float32)


@pytest.mark.parametrize("cfg", [Config(), Config(n_layer=2, n_embd=64, n_head=1, block_size=32)])
def test_forward_fused_unfused_numpy_agree_on_gpu(cfg):
    params = init_params(cfg, seed=1)
    rows = _rows(cfg, 8, 0)
    want = evaluate(NumpyOps, cfg, *rows, *params)
    args = [tt.to_device(a) for a in (*rows, *params)]
    for fuse in (True, False):
        got = evaluate_program.compile(cfg, *args, fuse=fuse)(cfg, *args)
        np.testing.assert_allclose(_host(got), want, rtol=1e-4)


@pytest.mark.parametrize("n_layer, n_embd, n_head", [(1, 16, 4), (2, 16, 4), (2, 256, 4)])
def test_decode_step_fused_unfused_numpy_agree_on_gpu(n_layer, n_embd, n_head):
    cfg = Config(n_layer=n_layer, n_embd=n_embd, n_head=n_head)
    rng = np.random.default_rng(n_layer)
    cache = [rng.standard_normal((cfg.n_head, cfg.block_size, cfg.head_dim)).astype(np.float32) for _ in range(2 * n_layer)]
    host = (np.array([5], np.int32), np.array([7], np.int32), *init_params(cfg, seed=2), *cache)
    want = decode(NumpyOps, cfg, *host)
    args = [tt.to_device(a) for a in host]
    for fuse in (True, False):
        for got, ref in zip(decode_program.compile(cfg, *args, fuse=fuse)(cfg, *args), want):
            np.testing.assert_allclose(_host(got), ref, rtol=1e-4, atol=3e-5)  # 3xTF32 `@`: a few float32 ulps of the logits


def test_graph_replay_gives_plain_launch_tokens():
    cfg = Config(n_layer=2)
    params = init_params(cfg, seed=0)
    graphed, plain = (TinytonGenerator(cfg, params, seed=11, graph=g) for g in (True, False))
    rows = [graphed.tokens() for _ in range(4)]
    assert graphed.step.graph is not None  # replays after the first two steps
    for row in rows:
        np.testing.assert_array_equal(row, plain.tokens())


def test_graphed_fused_and_plain_unfused_generators_agree():
    params = init_params(Config(), seed=0)
    graphed = TinytonGenerator(Config(), params, seed=5)
    unfused = TinytonGenerator(Config(), params, seed=5, graph=False, fuse=False)
    assert [graphed.name() for _ in range(3)] == [unfused.name() for _ in range(3)]
    assert graphed.launches_per_token == 8
