"""Train microgpt: `python examples/microgpt/train.py [--steps N] [--device cpu|tinyton]`.

Each step is one array program (forward, hand-written backward, Adam; examples/microgpt/backward.py) on a
batch of names. With `--device tinyton` (default) the same steps also run in NumPy with the same seed,
and both validation losses are printed. The weights are saved to a checkpoint that sample.py reads.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Sequence

import numpy as np
from backward import BETA1, BETA2, train_step, train_step_program
from data import split
from model import Config, NumpyOps, evaluate, evaluate_program, init_params

LEARNING_RATE = 0.01
DEFAULT_CHECKPOINT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "microgpt.npz")


def train(cfg: Config, steps: int, device: str, *, batch: int = 8, seed: int = 0,
          log: Callable[[str], None] | None = None) -> tuple[list[np.ndarray], list[float]]:  # fmt: skip
    """Train from `init_params(cfg, seed)`; returns the weights and the loss of every step."""
    train_set, _ = split(cfg.block_size)
    rng = np.random.default_rng(seed)
    params = init_params(cfg, seed)
    state = [*params, *(np.zeros_like(p) for p in params), *(np.zeros_like(p) for p in params)]
    step_fn = train_step_program if device == "tinyton" else lambda *a: train_step(NumpyOps, *a)
    losses = []
    for step in range(steps):
        rows = train_set.rows(rng.integers(0, len(train_set), batch))
        schedule = (LEARNING_RATE * (1 - step / steps), 1 - BETA1 ** (step + 1), 1 - BETA2 ** (step + 1))
        loss, *state = step_fn(cfg, *rows, *(np.array([s], np.float32) for s in schedule), *state)
        losses.append(float(np.asarray(loss)[0]))
        if log and (step % max(1, steps // 10) == 0 or step == steps - 1):
            log(f"{device:>7} step {step + 1:5d}/{steps}: loss {losses[-1]:.4f}")
    return [np.asarray(p) for p in state[: cfg.n_params]], losses


def validation_loss(cfg: Config, params: Sequence[np.ndarray], device: str) -> float:
    _, val = split(cfg.block_size)
    rows = val.rows(np.arange(len(val)))
    if device == "tinyton":
        return float(np.asarray(evaluate_program(cfg, *rows, *params))[0])
    return float(evaluate(NumpyOps, cfg, *rows, *params)[0])


def save(path: str, cfg: Config, params: Sequence[np.ndarray]) -> None:
    sizes = np.array([cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.block_size, cfg.vocab])
    np.savez(path, *params, config=sizes)


def load(path: str) -> tuple[Config, list[np.ndarray]]:
    with np.load(path) as f:
        cfg = Config(*(int(v) for v in f["config"]))
        return cfg, [f[f"arr_{i}"] for i in range(cfg.n_params)]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--device", choices=("cpu", "tinyton"), default="tinyton")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-layer", type=int, default=1)
    parser.add_argument("--n-embd", type=int, default=16)
    parser.add_argument("--n-head", type=int, default=4)
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT)
    args = parser.parse_args(argv)
    cfg = Config(args.n_layer, args.n_embd, args.n_head, args.block_size)
    devices = [args.device] if args.device == "cpu" else ["tinyton", "cpu"]
    for device in devices:
        start = time.perf_counter()
        params, _ = train(cfg, args.steps, device, batch=args.batch, seed=args.seed, log=print)
        seconds = time.perf_counter() - start
        print(f"{device:>7}: {args.steps} steps in {seconds:.1f} s ({args.steps / seconds:.1f} steps/s), "
              f"validation loss {validation_loss(cfg, params, device):.4f}")  # fmt: skip
        if device == args.device:
            save(args.checkpoint, cfg, params)
            print(f"checkpoint written to {args.checkpoint}")


if __name__ == "__main__":
    main()
