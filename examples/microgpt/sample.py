"""Print 20 names sampled from microgpt: `python examples/microgpt/sample.py [--device cpu|tinyton]`.

Reads the checkpoint train.py writes (training briefly first when there is none). On tinyton every token
step runs on the device (sampling included) and, on a GPU, is one CUDA-graph replay; `--device cpu` runs
the same model in NumPy as the reference.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from generate import NumpyGenerator, TinytonGenerator
from model import Config
from train import DEFAULT_CHECKPOINT, load, save, train

BRIEF_STEPS = 100


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "tinyton"), default="tinyton")
    parser.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT)
    parser.add_argument("--num", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--temperature", type=float, default=0.5)
    args = parser.parse_args(argv)
    if os.path.exists(args.checkpoint):
        cfg, params = load(args.checkpoint)
    else:
        cfg = Config()
        params, _ = train(cfg, BRIEF_STEPS, args.device)
        save(args.checkpoint, cfg, params)
    make = TinytonGenerator if args.device == "tinyton" else NumpyGenerator
    generator = make(cfg, params, seed=args.seed, temperature=args.temperature)
    for _ in range(args.num):
        print(generator.name())


if __name__ == "__main__":
    main()
