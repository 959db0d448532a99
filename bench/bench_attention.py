"""Issue 7 benchmark: the naive attention array program, rewritten into one flash-attention kernel.

    python bench/bench_attention.py         # on a GPU host with torch and Triton; prints Markdown tables
    python bench/bench_attention.py decode  # only some tables: any of fp16, bf16, fp8, decode, backward, spellings
    python bench/bench_attention.py fp16 unfused  # the forward table with its unfused column measured too

TFLOPS (4·B·H·S_q·S_kv·D, halved when causal) of tinyton's rewritten program next to torch's
scaled_dot_product_attention (flash and cuDNN backends where present), a Triton flash-attention kernel
(bench/triton_attention.py) and, asked for (`unfused`: its matmuls' tuning takes minutes), tinyton unfused (the
same program with fuse=False, which builds the S x S scores), all on the same tensors; `fp8`: e4m3 q, k and v next to bf16 on the same values; then decode steps (S_q = 1 against a KV cache) in µs, small batches
included (two launches: the KV loop split across programs, then the combine kernel). Kinds: full,
causal (a mask from `tt.arange`), bias (an S x S array added to the scores) and gqa (grouped-query: each
key/value head serves GQA_GROUP query heads, broadcast over a group axis; SDPA's `enable_gqa`).
`backward` (attention_backward_table.py): the backward at six shapes against SDPA's flash and cuDNN
backward, and the textbook training step as one program; `spellings` (attention_spellings_table.py): one
shape under every spelling of the scale, softmax, mask, grouped-query heads and training step, each the
same kernel(s).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import tinyton as tt
import triton_attention
from attention_backward_table import backward_table, training_table
from attention_spellings_table import spelling_table
from common import DEVICE, ONESHOT, check_close, device_name, median_ms, peer, pick, print_table

CASES = pick(
    [((1, 28, 2048, 128), "causal"), ((4, 16, 4096, 64), "full"), ((8, 32, 1024, 128), "causal"),
     ((2, 16, 8192, 128), "causal"), ((16, 16, 512, 64), "full"), ((4, 8, 2048, 256), "full"),
     ((1, 16, 16384, 128), "causal"), ((8, 16, 1024, 256), "causal"), ((1, 32, 8192, 64), "full"),
     ((2, 16, 2048, 64), "bias"), ((2, 32, 2048, 128), "gqa"), ((4, 32, 4096, 128), "gqa")],
    [((1, 3, 100, 128), "causal"), ((2, 2, 77, 64), "full"), ((1, 2, 130, 128), "causal"),
     ((2, 2, 70, 64), "bias"), ((1, 4, 90, 64), "gqa"), ((1, 2, 60, 256), "full")],
)  # fmt: skip
"""(B, H, S, D) and kind: head dims 64, 128 and 256, S from 512 to 16384, causal and full, a bias, grouped-query
heads, batches 1 to 16 (the issue's five shapes among them); one-shot: sequence lengths that are not multiples of
the blocks."""
DECODES = pick([(8, 32, 4096, 128), (1, 8, 32768, 128), (2, 8, 8192, 128)], [(2, 3, 300, 128), (1, 2, 3000, 128)])
"""Decode steps (B, H, S_kv, D): the issue's, and small batches whose KV loop is split (flash-decoding)."""
GQA_GROUP = 4


@tt.jit
def attention(q, k, v, scale):
    s = (q @ tt.swapaxes(k, -1, -2)) * scale
    e = tt.exp(s - tt.max(s, axis=-1, keepdims=True))
    return (e / tt.sum(e, axis=-1, keepdims=True)) @ v


def _softmax(s):
    e = tt.exp(s - tt.max(s, axis=-1, keepdims=True))
    return e / tt.sum(e, axis=-1, keepdims=True)


def _causal_scores(q, k, scale):
    n = q.shape[-2]
    keep = tt.arange(n).reshape(n, 1) >= tt.arange(n)
    return tt.where(keep, (q @ tt.swapaxes(k, -1, -2)) * scale, float("-inf"))


@tt.jit
def float8_attention(q, k, v, scale):
    """FlashAttention-3's float8 forward as NumPy spells it: the probabilities cast to v's e4m3 for `p @ v`."""
    return _softmax((q @ tt.swapaxes(k, -1, -2)) * scale).astype(v.dtype) @ v


@tt.jit
def causal_float8_attention(q, k, v, scale):
    return _softmax(_causal_scores(q, k, scale)).astype(v.dtype) @ v


@tt.jit
def causal_attention(q, k, v, scale):
    n = q.shape[-2]
    keep = tt.arange(n).reshape(n, 1) >= tt.arange(n)
    s = tt.where(keep, (q @ tt.swapaxes(k, -1, -2)) * scale, float("-inf"))
    e = tt.exp(s - tt.max(s, axis=-1, keepdims=True))
    return (e / tt.sum(e, axis=-1, keepdims=True)) @ v


@tt.jit
def biased_attention(q, k, v, scale, bias):
    s = (q @ tt.swapaxes(k, -1, -2)) * scale + bias
    e = tt.exp(s - tt.max(s, axis=-1, keepdims=True))
    return (e / tt.sum(e, axis=-1, keepdims=True)) @ v


def sdpa(backend: SDPBackend):
    def run(q, k, v, **options):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, **options)

    return run


def tflops(shape: tuple[int, ...], s_kv: int, causal: bool, ms: float) -> float:
    b, h, s_q, d = shape
    flops = 4 * b * h * s_q * s_kv * d * (0.5 if causal else 1.0)
    return flops / (ms * 1e-3) / 1e12


def measure(fn, *args) -> float | str:
    """`median_ms` of a peer, or why it cannot run here."""
    try:
        return median_ms(lambda: fn(*args))
    except Exception as e:  # a backend the GPU or torch build lacks
        return f"n/a ({type(e).__name__})"


def case(shape: tuple[int, ...], kind: str, dtype: torch.dtype):
    """The tinyton program and its arguments, SDPA's tensors and options, and the float64 reference."""
    b, h, s, d = shape
    q, k, v = (torch.randn(shape, device=DEVICE, dtype=dtype) for _ in range(3))
    scale = d**-0.5
    if kind == "gqa":  # (B, H_kv, group, S, D) queries against (B, H_kv, 1, S, D) keys and values
        k, v = k[:, : h // GQA_GROUP].contiguous(), v[:, : h // GQA_GROUP].contiguous()
        grouped = (q.view(b, h // GQA_GROUP, GQA_GROUP, s, d), k.unsqueeze(2), v.unsqueeze(2), scale)
        program, args, options = attention, grouped, {"enable_gqa": True}
    elif kind == "bias":
        bias = torch.randn(s, s, device=DEVICE, dtype=dtype)
        program, args, options = biased_attention, (q, k, v, scale, bias), {"attn_mask": bias}
    else:
        causal = kind == "causal"
        program, args, options = causal_attention if causal else attention, (q, k, v, scale), {"is_causal": causal}
    # the float64 reference over the first batch element's first heads (a key/value head's group for GQA): the
    # S x S scores of every head in float64 would take 34 GB at (1, 16, 16384)
    heads = GQA_GROUP if kind == "gqa" else min(h, 2)
    kv_heads = 1 if kind == "gqa" else heads
    wide = {name: x.double() if isinstance(x, torch.Tensor) else x for name, x in options.items()}
    reference = F.scaled_dot_product_attention(
        q[:1, :heads].double(), k[:1, :kv_heads].double(), v[:1, :kv_heads].double(), **wide)
    return program, args, (q, k, v), options, reference


def checked(out: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """The part of an output the float64 reference covers (`case`)."""
    return out[: reference.shape[0], : reference.shape[1]]


def forward_table(dtype: torch.dtype, unfused_asked: bool) -> None:
    """The 12 forward shapes in `dtype` against SDPA's flash and cuDNN backends and Triton."""
    rows = []
    for shape, kind in CASES:
        b, h, s, d = shape
        program, args, (q, k, v), options, reference = case(shape, kind, dtype)
        print(f"# {dtype} {shape} {kind}: compiling", flush=True)
        check_close(f"tinyton {shape} {kind}", checked(program(*args).reshape(shape), reference), reference, tol=2e-2)
        launches = program.compile(*args).num_launches
        times = {
            "tinyton": median_ms(lambda: program(*args)),
            "SDPA flash": peer(measure, lambda: sdpa(SDPBackend.FLASH_ATTENTION)(q, k, v, **options)),
            "SDPA cuDNN": peer(measure, lambda: sdpa(SDPBackend.CUDNN_ATTENTION)(q, k, v, **options)),
            "Triton": "n/a (no bias or GQA)",
        }
        if kind in ("full", "causal"):
            triton = lambda: triton_attention.attention(q, k, v, kind == "causal")
            if not ONESHOT:
                check_close(f"Triton {shape}", checked(triton(), reference), reference, tol=2e-2)
            times["Triton"] = peer(measure, triton)
        if not unfused_asked:  # its matmuls are tuned on first use: minutes of a device call
            times["tinyton unfused"] = "not asked (`unfused`)"
        elif b * h * s * s * 2 <= 4 << 30:  # unfused materialises the scores: only where they fit
            unfused = program.compile(*args, fuse=False)
            check_close(f"tinyton unfused {shape} {kind}", checked(unfused(*args).reshape(shape), reference),
                        reference, tol=2e-2)
            times["tinyton unfused"] = median_ms(lambda: unfused(*args))
        else:
            times["tinyton unfused"] = "skipped (S x S too large)"
        causal = kind == "causal"
        figures = {n: (tflops(shape, s, causal, t) if isinstance(t, float) else t) for n, t in times.items()}
        best_sdpa = max((f for n, f in figures.items() if n.startswith("SDPA") and isinstance(f, float)), default=None)
        ratio = f"{100 * figures['tinyton'] / best_sdpa:.0f}%" if best_sdpa else "n/a"
        rows.append([f"{shape} {kind}", *figures.values(), ratio, launches])
        print(f"# {rows[-1]}", flush=True)
    print_table(
        f"Attention forward, {str(dtype).split('.')[-1]} (TFLOPS)",
        ["(B, H, S, D)", "tinyton", "SDPA flash", "SDPA cuDNN", "Triton", "tinyton unfused", "tinyton / best SDPA",
         "launches"],
        rows,
    )


def decode_table() -> None:
    """Decode steps (S_q = 1 against a KV cache) in µs against SDPA and Triton."""
    rows = []
    for b, h, s_kv, d in DECODES:
        q = torch.randn(b, h, 1, d, device=DEVICE, dtype=torch.float16)
        k, v = (torch.randn(b, h, s_kv, d, device=DEVICE, dtype=torch.float16) for _ in range(2))
        reference = F.scaled_dot_product_attention(q.double(), k.double(), v.double())
        check_close(f"decode {(b, h, s_kv, d)}", attention(q, k, v, d**-0.5), reference, tol=2e-2)
        decode = {
            "tinyton": median_ms(lambda: attention(q, k, v, d**-0.5)),
            "SDPA (default backend)": peer(measure, lambda: F.scaled_dot_product_attention(q, k, v)),
            "SDPA flash": peer(measure, lambda: sdpa(SDPBackend.FLASH_ATTENTION)(q, k, v)),
            "Triton": peer(measure, lambda: triton_attention.attention(q, k, v, False)),
        }
        micros = [t * 1e3 if isinstance(t, float) else t for t in decode.values()]
        sdpa_best = min((t for n, t in zip(decode, micros) if n.startswith("SDPA") and isinstance(t, float)),
                        default=None)
        ratio = f"{micros[0] / sdpa_best:.2f}x" if sdpa_best else "n/a"
        rows.append([f"({b}, {h}, {s_kv}, {d})", *micros, ratio, attention.compile(q, k, v, d**-0.5).num_launches])
        print(f"# {rows[-1]}", flush=True)
    header = ["(B, H, S_kv, D)", *decode, "tinyton / best SDPA", "launches"]
    print_table("Decode step (S_q = 1, fp16), µs", header, rows)


def main(tables: list[str]) -> None:
    """Each asked table in turn; a table whose result check fails is reported and the others still run (under
    bench/sanitize.py, the tables after it are then still checked), and the run exits 1."""
    print(f"device: {device_name()}; torch {torch.__version__}\n")
    dtypes = {"fp16": torch.float16, "bf16": torch.bfloat16}
    runs: list[tuple[str, Callable[[], None]]] = [
        (t, lambda dtype=dtypes[t]: forward_table(dtype, "unfused" in tables)) for t in tables if t in dtypes]
    runs += [("fp8", float8_table)] if "fp8" in tables else []
    runs += [("decode", decode_table)] if "decode" in tables else []
    if "backward" in tables:
        runs += [("backward fp16", lambda: backward_table(torch.float16)),
                 ("backward bf16", lambda: backward_table(torch.bfloat16)),
                 ("training fp16", lambda: training_table(torch.float16))]
    runs += [("spellings", lambda: spelling_table(torch.float16))] if "spellings" in tables else []
    wrong = []
    for name, run in runs:
        try:
            run()
        except AssertionError as error:
            print(f"# WRONG ({name} table, the rest of it not run): {error}", flush=True)
            wrong.append(name)
    if wrong:
        sys.exit(f"wrong results in the {', '.join(wrong)} table(s)")


def float8_table() -> None:
    """The full and causal shapes with e4m3 q, k and v (both products on float8 tensor cores), next to tinyton's and
    SDPA's bf16 on the same values: SDPA has no float8 attention to compare with."""
    rows = []
    for shape, kind in [(shape, kind) for shape, kind in CASES if kind in ("full", "causal")]:
        b, h, s, d = shape
        causal = kind == "causal"
        q, k, v = (torch.randn(shape, device=DEVICE, dtype=torch.bfloat16) for _ in range(3))
        q8, k8, v8 = (x.to(torch.float8_e4m3fn) for x in (q, k, v))
        q, k, v = (x.to(torch.bfloat16) for x in (q8, k8, v8))  # the same values in both dtypes
        program = causal_float8_attention if causal else float8_attention
        reference = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
        check_close(f"tinyton float8 {shape} {kind}", program(q8, k8, v8, d**-0.5).reshape(shape), reference, tol=6e-2)
        bf16 = causal_attention if causal else attention
        times = {
            "tinyton e4m3": median_ms(lambda: program(q8, k8, v8, d**-0.5)),
            "tinyton bf16": median_ms(lambda: bf16(q, k, v, d**-0.5)),
            "SDPA cuDNN bf16": peer(measure, lambda: sdpa(SDPBackend.CUDNN_ATTENTION)(q, k, v, is_causal=causal)),
        }
        figures = [tflops(shape, s, causal, t) if isinstance(t, float) else t for t in times.values()]
        rows.append([f"{shape} {kind}", *figures, program.compile(q8, k8, v8, d**-0.5).num_launches])
        print(f"# {rows[-1]}", flush=True)
    print_table("Attention forward, float8 e4m3 (TFLOPS)", ["(B, H, S, D)", *times, "launches"], rows)


if __name__ == "__main__":
    main(sys.argv[1:] or ["fp16", "bf16", "fp8", "decode", "backward", "spellings"])
