"""Issue 20: `torch.compile(backend="tinyton")` against torch eager and inductor (default and max-autotune).

deplodock's suite on TinyLlama-1.1B and Qwen2.5-7B shapes (batch 1, seq 32/128/512; fp32 and bf16): a
projection matmul, RMSNorm, softmax over attention scores, SiLU-and-multiply, SDPA (causal, GQA), attention
written out as Hugging Face's eager path does it (repeat_kv, additive causal mask, float32 softmax) and a whole
Llama decoder block (tests/torch_models.py). Every contestant compiles the same torch function, is checked
against eager before timing, and is timed with common.median_ms in the same run; the table gives each row's
device microseconds, tinyton's speed-up over each (>1: tinyton faster), the wall time of one call back to back
(tinyton's and inductor's: where it exceeds the device time, the call path sets the pace), its kernel launches
and the ops that ran in torch, then the geomean per contestant.

    python bench/bench_torch.py                                   # everything (max-autotune compiles for minutes)
    python bench/bench_torch.py --no-max-autotune --seqs 128 --dtypes fp32
    python bench/bench_torch.py --configs Qwen2.5-7B --seqs 512 --out rows.jsonl     # a part, kept
    python bench/bench_torch.py --report rows.jsonl more.jsonl                        # parts merged: table, geomeans
    python bench/bench_torch.py --training --cases "decoder block training" --seqs 512 --dtypes bf16  # fwd + bwd

The whole suite takes longer than one device call; `--out` keeps each part's rows (with the hash of tinyton's
sources they ran on) and `--report` merges parts into one table.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from common import (
    DEVICE,
    ONESHOT,
    check_close,
    device_name,
    host_us_per_call,
    median_ms,
    peer,
    pick,
    print_table,
)
from torch_models import LlamaBlock, rope_tables

import tinyton.torch
from tinyton.runtime.cache import tinyton_version


@dataclass(frozen=True)
class Config:
    dim: int
    heads: int
    kv_heads: int
    hidden: int

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads


CONFIGS = {
    "TinyLlama-1.1B": Config(2048, 32, 4, 5632),
    "Qwen2.5-7B": Config(3584, 28, 4, 18944),
}
SMALL = Config(64, 4, 2, 96)
"""One-shot mode's stand-in (TINYTON_BENCH_ONESHOT=1: the simulator runs every case once)."""
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
TOLERANCE = {torch.float32: 2e-3, torch.bfloat16: 3e-2}
"""Relative L2 error allowed against eager (fp32 matmuls may use TF32 in either)."""


def hf_rmsnorm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Hugging Face's LlamaRMSNorm: statistics in float32, weight applied in the input's dtype."""
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
    return w * h.to(x.dtype)


def hf_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Hugging Face's eager attention: repeat_kv, scaled scores plus an additive causal mask, float32 softmax."""
    group = q.size(1) // k.size(1)
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(2, 3) * (1.0 / math.sqrt(q.size(-1))) + mask
    return F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype) @ v


def training_step(block: torch.nn.Module) -> Callable:
    """A decoder block's training step: forward, then the backward of the output's sum (each contestant's compiled
    backward graph runs in it; gradients accumulate into the block's parameters). Returns the loss."""

    @torch.enable_grad()
    def step(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        loss = block(x, cos, sin).float().sum()
        loss.backward()
        return loss.detach()

    return step


def cases(cfg: Config, seq: int, dtype: torch.dtype, training: bool = False) -> dict[str, tuple[Callable, tuple]]:
    """Case name -> (torch function, its arguments), fresh random inputs on the benchmark's device; with `training`,
    the decoder block's training step too (not one of deplodock's rows)."""
    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, device=DEVICE, dtype=dtype)

    hd = cfg.head_dim
    q, k, v = rand(1, cfg.heads, seq, hd), rand(1, cfg.kv_heads, seq, hd), rand(1, cfg.kv_heads, seq, hd)
    mask = torch.full((seq, seq), float("-inf"), device=DEVICE, dtype=dtype).triu(1)[None, None]
    block = LlamaBlock(cfg.dim, cfg.heads, cfg.kv_heads, cfg.hidden).to(DEVICE, dtype).eval()
    cos, sin = (t.to(DEVICE, dtype) for t in rope_tables(seq, hd))
    extra = {}
    if training:
        trained = LlamaBlock(cfg.dim, cfg.heads, cfg.kv_heads, cfg.hidden).to(DEVICE, dtype).train()
        extra["decoder block training"] = (training_step(trained), (rand(1, seq, cfg.dim) * 0.5, cos, sin))
    return extra | {
        "matmul (q_proj)": (lambda x, w: x @ w.T, (rand(1, seq, cfg.dim), rand(cfg.dim, cfg.dim) * 0.02)),
        "matmul (kv_proj)": (lambda x, w: x @ w.T, (rand(1, seq, cfg.dim), rand(2 * cfg.kv_heads * hd, cfg.dim) * 0.02)),
        "rmsnorm": (hf_rmsnorm, (rand(1, seq, cfg.dim), rand(cfg.dim))),
        "softmax": (lambda s: torch.softmax(s, dim=-1), (rand(1, cfg.heads, seq, seq),)),
        "silu_mul": (lambda g, u: F.silu(g) * u, (rand(1, seq, cfg.hidden), rand(1, seq, cfg.hidden))),
        "sdpa": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True), (q, k, v)),
        "naive attention": (hf_attention, (q, k, v, mask)),
        "decoder block": (block, (rand(1, seq, cfg.dim) * 0.5, cos, sin)),
    }


def compiled(fn: Callable, contestant: str) -> Callable:
    """`fn` as the contestant runs it (dynamo's caches reset, so that earlier rows never count)."""
    torch._dynamo.reset()
    if contestant == "eager":
        return fn
    return torch.compile(fn, mode=None if contestant == "inductor" else "max-autotune", dynamic=False)


def timed(fn: Callable, inputs: tuple) -> float:
    """Device time of one call in µs (CUDA events on torch's stream, which the backend launches on)."""
    return median_ms(lambda: fn(*inputs)) * 1e3


def call_us(fn: Callable, inputs: tuple) -> float:
    """Wall time of one call in µs, back to back: where it exceeds `timed`, the call path, not the kernels,
    sets the pace (dynamo's guards, AOTAutograd's wrappers, the backend's own work)."""
    return host_us_per_call(lambda: fn(*inputs), calls=1000, rounds=3)


@torch.no_grad()
def run(args: argparse.Namespace) -> list[dict]:
    """Measure the selected rows; each is printed as it is measured (a run cut by the device call's limit keeps
    what it measured) and appended to `args.out` as a JSON line (`--report` merges such files)."""
    contestants = ["eager", "inductor"] + ([] if args.no_max_autotune else ["max-autotune"])
    rows = []
    for model in args.configs.split(","):
        cfg = pick(CONFIGS[model], SMALL)
        for seq in (int(s) for s in pick(args.seqs, "8").split(",")):
            for dtype_name in args.dtypes.split(","):
                dtype = DTYPES[dtype_name]
                for name, (fn, inputs) in cases(cfg, seq, dtype, args.training).items():
                    if args.cases and name not in args.cases.split(","):
                        continue
                    torch._dynamo.reset()
                    explanation = tinyton.torch.explain(fn, *inputs)  # compiles as backend="tinyton" does
                    ours = explanation.compiled
                    check_close(f"{model} {seq} {dtype_name} {name}", ours(*inputs), fn(*inputs), TOLERANCE[dtype])
                    row = {"model": model, "seq": seq, "dtype": dtype_name, "case": name, "µs": {},
                           "inductor call": math.nan, "tinyton": timed(ours, inputs),
                           "tinyton call": call_us(ours, inputs), "launches": explanation.num_launches,
                           "ran in torch": ", ".join(explanation.fallbacks) or "-", "source": tinyton_version(),
                           "device": device_name(), "date": time.strftime("%Y-%m-%d")}
                    for c in contestants:
                        row["µs"][c] = peer(timed, peer_fn := compiled(fn, c), inputs)
                        if c == "inductor":  # before the next contestant's reset drops its compiled code
                            row["inductor call"] = peer(call_us, peer_fn, inputs)
                    rows.append(row)
                    print(f"# {row}", flush=True)
                    if args.out:
                        with open(args.out, "a") as out:
                            out.write(json.dumps(row) + "\n")
    return rows


def report(rows: list[dict]) -> None:
    """The rows as one table (a row measured again replaces the earlier one), and tinyton's geomean speed-up over
    each contestant, with the source versions (hashes of tinyton's sources) and devices they were measured on."""
    rows = list({(r["model"], r["seq"], r["dtype"], r["case"]): r for r in rows}.values())
    contestants = list(dict.fromkeys(c for row in rows for c in row["µs"]))
    header = ["model", "seq", "dtype", "case", *(f"{c} µs" for c in contestants), "tinyton µs",
              *(f"x {c}" for c in contestants), "tinyton call µs", "inductor call µs", "launches", "ran in torch"]
    table = [[r["model"], r["seq"], r["dtype"], r["case"], *(r["µs"].get(c, math.nan) for c in contestants),
              r["tinyton"], *(f"{r['µs'][c] / r['tinyton']:.2f}" if c in r["µs"] else "-" for c in contestants),
              r["tinyton call"], r["inductor call"], r["launches"], r["ran in torch"]] for r in rows]
    devices = ", ".join(sorted({r["device"] for r in rows}))
    print_table(f"torch.compile(backend='tinyton') vs eager and inductor, {devices}", header, table)
    if ONESHOT:
        return
    print(f"sources: {dict(Counter(r['source'] for r in rows))}; {len(rows)} of the suite's "
          f"{len(CONFIGS) * 3 * len(DTYPES) * 8} rows")
    for c in contestants:
        values = [r["µs"][c] / r["tinyton"] for r in rows if c in r["µs"]]
        values = [v for v in values if math.isfinite(v)]
        if values:
            geomean = math.exp(sum(map(math.log, values)) / len(values))
            print(f"geomean speed-up of tinyton over {c}: {geomean:.2f}x (min {min(values):.2f}x, {len(values)} rows)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--seqs", default="32,128,512")
    parser.add_argument("--dtypes", default="fp32,bf16")
    parser.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    parser.add_argument("--no-max-autotune", action="store_true", help="skip inductor's max-autotune (slow to compile)")
    parser.add_argument("--training", action="store_true",
                        help="also time a decoder block's training step (forward and backward; --cases to select it)")
    parser.add_argument("--out", help="append each measured row to this file as a JSON line")
    parser.add_argument("--report", nargs="+", metavar="FILE",
                        help="measure nothing: the table and geomeans of the rows in these files (from --out)")
    args = parser.parse_args()
    if args.report:
        report([json.loads(line) for name in args.report for line in Path(name).read_text().splitlines() if line])
        return
    torch._dynamo.config.cache_size_limit = 64
    report(run(args))


if __name__ == "__main__":
    main()
