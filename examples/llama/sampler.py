"""Choosing the next token on the device.

`sample_kernel` runs one program per sequence over its logits row in `BLOCK` chunks (vocabularies of
128k entries do not fit one block): greedy is the first maximum (NumPy's argmax); sampling scales by the
temperature, keeps the top-k values and the smallest top-p nucleus (thresholds found by bisection on the
logit value, so nothing is sorted), and draws by inverse CDF with a Philox uniform keyed on the position.
It writes the token as the next step's input and at `out[b, pos + 1]`; `advance_kernel` then moves the
position on. Everything stays on the device, so a decode step can be captured as one CUDA graph.
"""

from __future__ import annotations

import numpy as np

import tinyton as tt

BISECTION_STEPS = 24
"""Halvings of the logit range when looking for the top-k / top-p threshold (2**-24 of the range)."""


@tt.jit
def _row_max(row_ptr, scale, V, BLOCK: tt.constexpr):
    best = tt.full([BLOCK], float("-inf"), tt.float32)  # a running maximum per lane, reduced once at the end
    for start in range(0, V, BLOCK):
        i = start + tt.arange(0, BLOCK)
        best = tt.maximum(best, tt.load(row_ptr + i, mask=i < V, other=float("-inf")) * scale)
    return tt.max(best, axis=0)


@tt.jit
def _row_argmax(row_ptr, V, BLOCK: tt.constexpr):
    """The first index of the row's maximum (NumPy's argmax; NaN never wins): a running maximum and its index
    per lane, one reduction at the end (two block reductions per chunk made a 128k-entry row take 78 µs)."""
    best = tt.full([BLOCK], float("-inf"), tt.float32)
    at = tt.zeros([BLOCK], tt.int32)
    for start in range(0, V, BLOCK):
        i = start + tt.arange(0, BLOCK)
        z = tt.load(row_ptr + i, mask=i < V, other=float("-inf"))
        better = z > best  # strict: a lane keeps its first maximum
        at = tt.where(better, i, at)
        best = tt.where(better, z, best)
    top = tt.max(best, axis=0)
    return tt.min(tt.where(best == top, at, V), axis=0)  # the first lane of the maximum, 0 for all -inf


@tt.jit
def _mass_above(row_ptr, scale, top, threshold, V, BLOCK: tt.constexpr):
    """`(count, sum of exp(z - top))` over the entries with `z >= threshold` (per-lane sums, reduced once)."""
    count = tt.zeros([BLOCK], tt.int32)
    mass = tt.zeros([BLOCK], tt.float32)
    for start in range(0, V, BLOCK):
        i = start + tt.arange(0, BLOCK)
        z = tt.load(row_ptr + i, mask=i < V, other=float("-inf")) * scale
        kept = z >= threshold
        count += kept.to(tt.int32)
        mass += tt.where(kept, tt.exp(z - top), 0.0)
    return tt.sum(count, axis=0), tt.sum(mass, axis=0)


@tt.jit
def sample_kernel(logits_ptr, token_ptr, out_ptr, pos_ptr, seed, inv_temperature, top_k, top_p, V, OUT_LEN,
                  GREEDY: tt.constexpr, BLOCK: tt.constexpr):  # fmt: skip
    b = tt.program_id(0)
    row = logits_ptr + b * V
    pos = tt.load(pos_ptr)
    if GREEDY:
        token = _row_argmax(row, V, BLOCK)
    else:
        top = _row_max(row, inv_temperature, V, BLOCK)
        _, total = _mass_above(row, inv_temperature, top, float("-inf"), V, BLOCK)
        lo_k, lo_p, hi = top - 100.0, top - 100.0, top  # exp(-100) of the top: nothing below matters
        if top_k > 0:
            for _ in tt.range(0, BISECTION_STEPS):
                mid = 0.5 * (lo_k + hi)
                count, _ = _mass_above(row, inv_temperature, top, mid, V, BLOCK)
                lo_k = tt.where(count >= top_k, mid, lo_k)
                hi = tt.where(count >= top_k, hi, mid)
        hi = top
        if top_p < 1.0:
            for _ in tt.range(0, BISECTION_STEPS):
                mid = 0.5 * (lo_p + hi)
                _, mass = _mass_above(row, inv_temperature, top, mid, V, BLOCK)
                lo_p = tt.where(mass >= top_p * total, mid, lo_p)
                hi = tt.where(mass >= top_p * total, hi, mid)
        threshold = tt.maximum(lo_k, lo_p)
        _, kept_mass = _mass_above(row, inv_temperature, top, threshold, V, BLOCK)
        target = tt.rand(seed, pos * 65536 + b) * kept_mass
        running, token, last, found = 0.0, 0, 0, 0
        for start in range(0, V, BLOCK):
            i = start + tt.arange(0, BLOCK)
            z = tt.load(row + i, mask=i < V, other=float("-inf")) * inv_temperature
            q = tt.where(z >= threshold, tt.exp(z - top), 0.0)
            cdf = tt.cumsum(q, axis=0) + running
            before = tt.sum((cdf <= target).to(tt.int32), axis=0)
            hit = (found == 0) & (before < BLOCK) & (start + before < V)
            token = tt.where(hit, start + before, token)
            found = tt.where(hit, 1, found)
            last = tt.maximum(last, tt.max(tt.where(q > 0.0, i, 0), axis=0))
            running += tt.sum(q, axis=0)
        token = tt.where(found == 1, token, last)  # rounding left the draw past the last kept entry
    tt.store(token_ptr + b, token)
    tt.store(out_ptr + b * OUT_LEN + pos + 1, token)


@tt.jit
def advance_kernel(pos_ptr):
    tt.store(pos_ptr, tt.load(pos_ptr) + 1)


def sample_numpy(logits: np.ndarray, temperature: float, top_k: int, top_p: float,
                 rng: np.random.Generator) -> np.ndarray:  # fmt: skip
    """The CPU reference's choice for each row of `logits (B, V)`: the same rules, NumPy's generator."""
    if temperature == 0:
        return logits.argmax(axis=-1).astype(np.int32)
    tokens = []
    for row in logits.astype(np.float64) / temperature:
        order = np.argsort(-row, kind="stable")
        p = np.exp(row[order] - row[order[0]])
        p /= p.sum()
        keep = len(row) if top_k <= 0 else top_k
        if top_p < 1.0:
            keep = min(keep, int(np.searchsorted(np.cumsum(p), top_p)) + 1)
        p = p[:keep] / p[:keep].sum()
        tokens.append(order[min(int(np.searchsorted(np.cumsum(p), rng.random(), side="right")), keep - 1)])
    return np.array(tokens, np.int32)
