"""A runtime 0-d scale against a constant one in the same flash-attention kernel, in one process.

    python bench/probes/probe_runtime_scale.py [--rounds 3]

The spelling table's `* scale, a 0-d array argument` rows ran at 93-95 % of `* (d ** -0.5)` on an H100. This times
the two, full and causal, alternating `--rounds` times so that clock drift shows as spread: by `median_ms` (each call
after an L2 flush, host time inside the events) and back to back (the host's launch hidden behind the previous
kernel). On 2026-12-06 (H100) three ways of taking the scale's sign ran alike, 93.5-94.9 % full and 97-98 % causal:
the softmax step emitted for each sign (today's), the scores multiplied by the scale first (one FMUL a score, no
branch), and a branch around the row reductions alone: the branch is not the gap (nor, ptxas says, registers:
168 in each; docs/benchmarks.md).
"""

from __future__ import annotations

import argparse

import bench_path

bench_path.add()

import torch
from attention_spellings_table import causal_where, runtime_scale, scaled
from common import DEVICE, back_to_back_ms, median_ms

import tinyton as tt


@tt.jit
def causal_runtime_scale(q, k, v, scale):
    n = q.shape[-2]
    s = tt.where(tt.arange(n).reshape(n, 1) >= tt.arange(n), (q @ k.mT) * scale, float("-inf"))
    e = tt.exp(s - tt.max(s, axis=-1, keepdims=True))
    return (e / tt.sum(e, axis=-1, keepdims=True)) @ v


def timings(program, args) -> tuple[float, float]:
    program(*args)
    return median_ms(lambda: program(*args)), back_to_back_ms(lambda: program(*args), 20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shape", default="4,16,2048,128")
    args = parser.parse_args()
    b, h, s, d = (int(x) for x in args.shape.split(","))
    q, k, v = (torch.randn(b, h, s, d, device=DEVICE, dtype=torch.float16) for _ in range(3))
    scale = torch.tensor(d**-0.5, device=DEVICE, dtype=torch.float16)
    cases = [("full", scaled, runtime_scale, 1.0), ("causal", causal_where, causal_runtime_scale, 0.5)]
    for _ in range(args.rounds):
        for kind, constant, runtime, fraction in cases:
            tflops = 4 * b * h * s * s * d * fraction / 1e9
            rows = [("constant", *timings(constant, (q, k, v))), ("runtime", *timings(runtime, (q, k, v, scale)))]
            base = rows[0][1]
            print(f"{kind} {args.shape}: " + ", ".join(
                f"{name} {tflops / ms:.1f} ({base / ms:.1%}) b2b {tflops / b2b:.1f}" for name, ms, b2b in rows),
                flush=True)


if __name__ == "__main__":
    main()
