"""Generating names: the device generator (tinyton: one graph replay per token) and the NumPy reference.

`TinytonGenerator` keeps everything a token step touches on the device (weights, KV caches, the current
token, its position, the random-draw counter, the generated row), so a step is `decode_program` plus the
`kv_write` (layers but the last) and `last_kernel` launches with no host round trip, captured once by `tt.graphed`. The host only
resets the token and position between names and reads the generated row back once per name.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from decode import decode, decode_program, kv_write_kernel, last_kernel, sample_numpy
from model import Config, NumpyOps
from tokens import BOS
from tokens import decode as detokenize

import tinyton as tt
from tinyton.runtime import driver


def _on_device(x: np.ndarray):
    return tt.to_device(x) if driver.is_available() else np.array(x)


def _write(dst, values: np.ndarray) -> None:
    if isinstance(dst, np.ndarray):
        dst[...] = values
    else:
        dst.copy_from_host(values)


def _read(src) -> np.ndarray:
    return np.array(src) if isinstance(src, np.ndarray) else src.numpy()


class TinytonGenerator:
    """Names sampled on the device. `fuse=False` runs the unfused program; `graph=False` plain launches."""

    def __init__(self, cfg: Config, params: Sequence[np.ndarray], *, seed: int = 0, temperature: float = 0.5,
                 fuse: bool = True, graph: bool = True):  # fmt: skip
        self.cfg, self.seed, self.inv_temperature = cfg, seed, 1.0 / temperature
        cache = np.zeros((cfg.n_head, cfg.block_size, cfg.head_dim), np.float32)
        self.kcache = [_on_device(cache) for _ in range(cfg.n_layer)]
        self.vcache = [_on_device(cache) for _ in range(cfg.n_layer)]
        self.token, self.pos = _on_device(np.array([BOS], np.int32)), _on_device(np.zeros(1, np.int32))
        self.counter = _on_device(np.zeros(1, np.int32))
        self.out = _on_device(np.full(cfg.block_size, BOS, np.int32))
        self.arrays = (self.token, self.pos, *map(_on_device, params), *self.kcache, *self.vcache)
        self.program = decode_program.compile(cfg, *self.arrays, fuse=fuse)
        self.step = tt.graphed(self._step) if graph else self._step

    @property
    def launches_per_token(self) -> int:
        """Kernel launches of one token step (all of them inside one graph replay when graphed)."""
        return self.program.num_launches + self.cfg.n_layer

    def _step(self) -> None:
        cfg, n = self.cfg, self.cfg.n_layer
        logits, *rows = self.program(cfg, *self.arrays)
        sizes = {"T": cfg.block_size, "D": cfg.head_dim, "C": cfg.n_embd}
        layers = list(zip(self.kcache, self.vcache, rows[:n], rows[n:]))
        for kc, vc, k, v in layers[:-1]:
            kv_write_kernel[(1,)](kc, vc, k, v, self.pos, BLOCK=tt.next_power_of_2(cfg.n_embd), **sizes)
        last_kernel[(1,)](logits, self.token, self.pos, self.counter, self.out, self.seed, self.inv_temperature,
                          *layers[-1], V=cfg.vocab, BLOCK=tt.next_power_of_2(cfg.vocab),
                          ROW_BLOCK=tt.next_power_of_2(cfg.n_embd), **sizes)  # fmt: skip

    def tokens(self) -> np.ndarray:
        """One name's generated row: `block_size` token steps from BOS at position 0."""
        if driver.is_available():
            driver.synchronize()
        _write(self.token, np.array([BOS], np.int32))
        _write(self.pos, np.zeros(1, np.int32))
        for _ in range(self.cfg.block_size):
            self.step()
        if driver.is_available():
            driver.synchronize()
        return _read(self.out)

    def name(self) -> str:
        row = list(self.tokens())
        return detokenize(row[: row.index(BOS)] if BOS in row else row)


class NumpyGenerator:
    """The same model and decode step in NumPy on the CPU (NumPy's random generator draws)."""

    def __init__(self, cfg: Config, params: Sequence[np.ndarray], *, seed: int = 0, temperature: float = 0.5):
        self.cfg, self.params, self.temperature = cfg, list(params), temperature
        self.rng = np.random.default_rng(seed)

    def name(self, stop: bool = True, steps: int | None = None) -> str:
        """One name; `stop=False` runs all `steps` (default `block_size`) steps, for timing."""
        cfg = self.cfg
        shape = (cfg.n_head, cfg.block_size, cfg.head_dim)
        kcache = [np.zeros(shape, np.float32) for _ in range(cfg.n_layer)]
        vcache = [np.zeros(shape, np.float32) for _ in range(cfg.n_layer)]
        token, generated = BOS, []
        for pos in range(steps or cfg.block_size):
            token_pos = np.array([token], np.int32), np.array([pos], np.int32)
            logits, *rows = decode(NumpyOps, cfg, *token_pos, *self.params, *kcache, *vcache)
            for cache, row in zip(kcache + vcache, rows):
                cache[:, pos, :] = row.reshape(cfg.n_head, cfg.head_dim)
            token = sample_numpy(logits, self.temperature, self.rng)
            if token == BOS and stop:
                break
            generated.append(token)
        return detokenize(generated)
