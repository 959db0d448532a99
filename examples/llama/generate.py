"""Generate tokens with a Llama-architecture model: prefill the prompt, then decode one token per step.

    python examples/llama/generate.py --config tiny --prompt-tokens 8 --tokens 16 [--device cpu]
        [--temperature T] [--top-k K] [--top-p P] [--batch B] [--checkpoint DIR] [--seed S]

Prints the generated token ids of each sequence on one line, then `launches per token: N` (tinyton
kernels of one decode step: the decode program, which also writes each layer's new cache rows in place, and
the sampler's two). On tinyton every step stays on the device (sampling included) and, on a
GPU, is one CUDA-graph replay; `--device cpu` runs the same model in NumPy (the reference: greedy
decoding, the default, gives the same ids). With no `--checkpoint`, weights are random from a fixed seed
and the prompt is random token ids.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import numpy as np
from config import CONFIGS, Config
from model import (
    NumpyOps,
    decode,
    decode_program,
    prefill,
    prefill_program,
    rope_tables,
)
from sampler import advance_kernel, draw, greedy_chunks, sample_numpy
from weights import BF16, Weights, load_checkpoint, random_weights

import tinyton as tt
from tinyton.runtime import driver

def _on_device(x):
    """A NumPy array moved to the GPU (kept on the host for the simulator); device arrays and torch tensors
    as they are."""
    if not isinstance(x, np.ndarray):
        return x
    return tt.to_device(x) if driver.is_available() else np.ascontiguousarray(x)


def _read(x) -> np.ndarray:
    return np.array(x) if isinstance(x, np.ndarray) else x.numpy()


class Sampling:
    def __init__(self, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0, seed: int = 0):
        if temperature < 0 or not 0 < top_p <= 1 or top_k < 0:
            raise ValueError(f"need temperature >= 0, 0 < top_p <= 1, top_k >= 0; got {temperature}, {top_p}, {top_k}")
        self.temperature, self.top_k, self.top_p, self.seed = temperature, top_k, top_p, seed


class TinytonEngine:
    """The model on tinyton: weights, caches, the current token and position all on the device."""

    def __init__(self, weights: Weights, batch: int, context: int, sampling: Sampling, graph: bool = True):
        cfg = self.cfg = weights.cfg
        self.batch, self.context, self.sampling = batch, context, sampling
        self.weights = [_on_device(w) for w in weights.flat()]
        cos, sin = rope_tables(cfg, context)
        self.cos, self.sin = _on_device(cos), _on_device(sin)
        shape = (batch, cfg.num_key_value_heads, context, cfg.head_dim)
        self.kcache = [_on_device(np.zeros(shape, BF16)) for _ in range(cfg.num_hidden_layers)]
        self.vcache = [_on_device(np.zeros(shape, BF16)) for _ in range(cfg.num_hidden_layers)]
        self.token = _on_device(np.zeros(batch, np.int32))
        self.pos = _on_device(np.zeros(1, np.int32))
        self.out = _on_device(np.zeros((batch, context), np.int32))
        chunks = greedy_chunks(cfg.vocab_size)
        self.best, self.at = _on_device(np.zeros((batch, chunks), np.float32)), _on_device(np.zeros((batch, chunks), np.int32))
        self.decode_arrays = (self.token, self.pos, self.cos, self.sin, *self.weights, *self.kcache, *self.vcache)
        self.program = decode_program.compile(cfg, *self.decode_arrays)
        self.step = tt.graphed(self._step) if graph else self._step

    @property
    def launches_per_token(self) -> int:
        """Kernels of one decode step: the program (which also writes the caches' new rows), the draw (two
        kernels greedy, one sampled), the advance."""
        return self.program.num_launches + (3 if self.sampling.temperature == 0 else 2)

    def _choose(self, logits) -> None:
        draw(logits, self.token, self.out, self.pos, self.best, self.at, self.sampling, self.cfg.vocab_size, self.context)
        advance_kernel[(1,)](self.pos)

    def _step(self) -> None:
        self._choose(self.program(self.cfg, *self.decode_arrays))

    def generate(self, prompt: np.ndarray, new_tokens: int) -> np.ndarray:
        p = prompt.shape[1]
        cos, sin = rope_tables(self.cfg, p)
        logits = prefill_program(self.cfg, _on_device(prompt), _on_device(cos), _on_device(sin), *self.weights,
                                 *self.kcache, *self.vcache)  # fmt: skip
        _copy(self.pos, np.array([p - 1], np.int32))
        self._choose(logits)  # the first new token, at position p; pos becomes p
        for _ in range(new_tokens - 1):
            self.step()
        if driver.is_available():
            driver.synchronize()
        return _read(self.out)[:, p : p + new_tokens]


class NumpyEngine:
    """The same model in NumPy on the CPU (NumPy's generator for sampling)."""

    def __init__(self, weights: Weights, batch: int, context: int, sampling: Sampling):
        self.cfg, self.weights, self.batch, self.context = weights.cfg, weights.flat(), batch, context
        self.sampling, self.rng = sampling, np.random.default_rng(sampling.seed)

    def _choose(self, logits: np.ndarray) -> np.ndarray:
        s = self.sampling
        return sample_numpy(logits, s.temperature, s.top_k, s.top_p, self.rng)

    def generate(self, prompt: np.ndarray, new_tokens: int) -> np.ndarray:
        cfg, p, n = self.cfg, prompt.shape[1], self.cfg.num_hidden_layers
        cos, sin = rope_tables(cfg, self.context)
        shape = (self.batch, cfg.num_key_value_heads, self.context, cfg.head_dim)
        caches = [np.zeros(shape, BF16) for _ in range(2 * n)]
        token = self._choose(prefill(NumpyOps, cfg, prompt, cos[:p], sin[:p], *self.weights, *caches))
        generated = [token]
        for pos in range(p, p + new_tokens - 1):
            logits = decode(NumpyOps, cfg, token, np.array([pos], np.int32), cos, sin, *self.weights, *caches)
            token = self._choose(logits)
            generated.append(token)
        return np.stack(generated, axis=1)


def _copy(dst, values: np.ndarray) -> None:
    if isinstance(dst, np.ndarray):
        dst[...] = values
    else:
        dst.copy_from_host(values)


def random_prompt(cfg: Config, batch: int, length: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, cfg.vocab_size, (batch, length)).astype(np.int32)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", choices=sorted(CONFIGS), default="tiny")
    parser.add_argument("--checkpoint", help="a Hugging Face checkpoint directory (config.json + *.safetensors)")
    parser.add_argument("--prompt-tokens", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--device", choices=("cpu", "tinyton"), default="tinyton")
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--top-k", type=int, default=0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-graph", action="store_true", help="plain launches instead of a CUDA graph")
    args = parser.parse_args(argv)
    weights = load_checkpoint(args.checkpoint) if args.checkpoint else random_weights(CONFIGS[args.config])
    cfg = weights.cfg
    context = args.prompt_tokens + args.tokens
    if args.prompt_tokens < 1 or args.tokens < 1:
        parser.error("--prompt-tokens and --tokens must be at least 1")
    if context > cfg.max_position_embeddings:
        parser.error(f"a prompt of {args.prompt_tokens} tokens and {args.tokens} new ones exceed the model's "
                     f"context of {cfg.max_position_embeddings} positions")  # fmt: skip
    sampling = Sampling(args.temperature, args.top_k, args.top_p, args.seed)
    prompt = random_prompt(cfg, args.batch, args.prompt_tokens, args.seed)
    if args.device == "cpu":
        engine = NumpyEngine(weights, args.batch, context, sampling)
        launches = 0
    else:
        engine = TinytonEngine(weights, args.batch, context, sampling, graph=not args.no_graph)
        launches = engine.launches_per_token
    for row in engine.generate(prompt, args.tokens):
        print(" ".join(str(int(t)) for t in row))
    print(f"launches per token: {launches}")


if __name__ == "__main__":
    sys.exit(main())
