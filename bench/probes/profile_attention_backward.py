"""Where an attention backward's time goes: CUPTI µs of each of tinyton's kernels (delta, dk/dv, dq) and of SDPA's
backward kernels (flash and cuDNN), at the backward table's shapes (bench/attention_backward_table.py), fp16.

    python bench/probes/profile_attention_backward.py
"""

from __future__ import annotations

import bench_path

bench_path.add()

import torch
from attention_backward_table import BACKWARD_CASES, GQA_GROUP, _logsumexp, _sdpa_backward
from common import DEVICE, print_table
from profile_torch_call import kernel_durations
from torch.nn.attention import SDPBackend

from tinyton.compiler.attention_backward import attention_backward


def _short(name: str) -> str:
    return name if len(name) <= 60 else name[:57] + "..."


def main() -> None:
    rows = []
    for shape, kind in BACKWARD_CASES:
        b, h, s, d = shape
        causal = kind in ("causal", "gqa")
        h_kv = h // GQA_GROUP if kind == "gqa" else h
        q, do = (torch.randn(b, h, s, d, device=DEVICE, dtype=torch.float16) for _ in range(2))
        k, v = (torch.randn(b, h_kv, s, d, device=DEVICE, dtype=torch.float16) for _ in range(2))
        scale, options = d**-0.5, {"is_causal": causal, **({"enable_gqa": True} if h_kv != h else {})}
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, **options)
        lse = _logsumexp(q, k, scale, causal)
        contestants = {"tinyton": lambda: attention_backward(q, k, v, o, lse, do, scale, causal=causal)}
        for name, backend in (("SDPA flash", SDPBackend.FLASH_ATTENTION), ("SDPA cuDNN", SDPBackend.CUDNN_ATTENTION)):
            try:
                contestants[name] = _sdpa_backward(backend, q, k, v, do, options)
            except RuntimeError:
                continue
        for who, fn in contestants.items():
            for kernel, us in kernel_durations(lambda fn=fn: fn(), ()).items():
                rows.append([f"{shape} {kind}", who, _short(kernel), f"{us:.1f}"])
    print_table("Attention backward kernels, fp16 (CUPTI µs per call)", ["problem", "who", "kernel", "µs"], rows)


if __name__ == "__main__":
    main()
