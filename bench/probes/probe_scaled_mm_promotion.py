"""How often cuBLAS's `torch._scaled_mm` (without `use_fast_accum`) promotes its float8 partial sums, and whether
tinyton's array program keeps the same bits: operands whose first L elements of K are 16 x 16 products and the
rest small fractions (tests/test_fp8_matmul.py `_small_after_large`) come out exactly from a kernel that adds its
partials in f32 at least every L products on multiples of L; a longer chain loses the fractions. Prints, per L,
whether each result equals the f32 reference. Usage: python3 bench/probes/probe_scaled_mm_promotion.py"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import torch

import tinyton as tt

E4M3 = ml_dtypes.float8_e4m3fn


def operands(m: int, n: int, k: int, large: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(4)
    a = rng.choice([0.5, 0.75, 0.875], (m, k)).astype(E4M3)
    b = rng.choice([0.5, 0.625, 0.75, 0.875], (k, n)).astype(E4M3)
    a[:, :large], b[:large] = 16.0, 16.0
    return a, b


@tt.jit
def product_wt(a, w):
    return a @ w.T


def main() -> None:
    m, n, k = 512, 512, 1024
    one = torch.ones((), device="cuda")
    for large in (32, 64, 128, 256, 512):
        a, b = operands(m, n, k, large)
        want = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
        ta = torch.from_numpy(a.view(np.uint8)).cuda().view(torch.float8_e4m3fn)
        tw = torch.from_numpy(np.ascontiguousarray(b.T).view(np.uint8)).cuda().view(torch.float8_e4m3fn)
        cublas = torch._scaled_mm(ta, tw.t(), scale_a=one, scale_b=one, out_dtype=torch.float32).cpu().numpy()
        ours = np.asarray(product_wt(a, np.ascontiguousarray(b.T)))
        print(f"large {large:4d}: cuBLAS exact {np.array_equal(cublas, want)} (max error {np.abs(cublas - want).max():.4g}), "
              f"tinyton exact {np.array_equal(ours, want)} (max error {np.abs(ours - want).max():.4g})", flush=True)


if __name__ == "__main__":
    main()
