"""Choosing the next token on the device.

Greedy is the first maximum (NumPy's argmax): `argmax_partials_kernel` finds each chunk's over (row, chunk)
programs, `greedy_kernel` the row's from its chunks' (one program walking a 128k-entry row took 42 µs on the
H200, the two kernels a few). `sample_kernel` runs one program per sequence over its logits row in `BLOCK`
chunks: it scales by the temperature, keeps the top-k values and the smallest top-p nucleus (thresholds found
by bisection on the logit value, so nothing is sorted), and draws by inverse CDF with a Philox uniform keyed
on the position. Both write the token as the next step's input and at `out[b, pos + 1]`; `advance_kernel`
then moves the position on. Everything stays on the device, so a decode step can be captured as one CUDA
graph. `draw` launches the kernels of a choice.
"""

from __future__ import annotations

import numpy as np

import tinyton as tt
from tinyton.intmath import cdiv, next_power_of_2

BISECTION_STEPS = 24
"""Halvings of the logit range when looking for the top-k / top-p threshold (2**-24 of the range)."""

SAMPLE_BLOCK, SAMPLE_WARPS = 4096, 8
"""The sampling kernel's chunk of the logits row and its warps: 16 lanes a thread, 32 chunks of a 128k vocabulary."""

GREEDY_CHUNK = 2048
"""Entries of the logits row per program of the greedy draw's first kernel: 63 programs on a 128k vocabulary."""

NO_INDEX = 2**30
"""Above any vocabulary index: the minimum of the indices holding the maximum ignores lanes that do not."""


def greedy_chunks(vocab: int) -> int:
    """Chunks of a logits row in the greedy draw (the columns of its partial buffers)."""
    return cdiv(vocab, GREEDY_CHUNK)


def draw(logits, token, out, pos, best, at, sampling, vocab: int, out_len: int) -> None:
    """Launch the choice of each row's next token from `logits (B, vocab)`: into `token (B,)` and `out[b, pos + 1]`.
    `best`, `at` `(B, greedy_chunks(vocab))` f32 / i32: the greedy draw's partials."""
    s, batch = sampling, token.shape[0]
    if s.temperature == 0:
        chunks = greedy_chunks(vocab)
        argmax_partials_kernel[(batch, chunks)](logits, best, at, vocab, chunks, BLOCK=GREEDY_CHUNK)
        greedy_kernel[(batch,)](best, at, token, out, pos, chunks, out_len, BLOCK=next_power_of_2(chunks))
    else:
        sample_kernel[(batch,)](logits, token, out, pos, s.seed, 1.0 / s.temperature, s.top_k, s.top_p, vocab,
                                out_len, BLOCK=SAMPLE_BLOCK, num_warps=SAMPLE_WARPS)  # fmt: skip


@tt.jit
def _row_max(row_ptr, scale, V, BLOCK: tt.constexpr):
    best = tt.full([BLOCK], float("-inf"), tt.float32)  # a running maximum per lane, reduced once at the end
    for start in range(0, V, BLOCK):
        i = start + tt.arange(0, BLOCK)
        best = tt.maximum(best, tt.load(row_ptr + i, mask=i < V, other=float("-inf")) * scale)
    return tt.max(best, axis=0)


@tt.jit
def argmax_partials_kernel(logits_ptr, best_ptr, at_ptr, V, CHUNKS, BLOCK: tt.constexpr):
    """Program (row b, chunk c): the chunk's maximum and the first index of it (NaN never wins; an all -inf
    chunk gives its first index)."""
    b, c = tt.program_id(0), tt.program_id(1)
    i = c * BLOCK + tt.arange(0, BLOCK)
    z = tt.load(logits_ptr + b * V + i, mask=i < V, other=float("-inf")).to(tt.float32)
    z = tt.where(z == z, z, float("-inf"))
    top = tt.max(z, axis=0)
    tt.store(best_ptr + b * CHUNKS + c, top)
    tt.store(at_ptr + b * CHUNKS + c, tt.min(tt.where(z == top, i, NO_INDEX), axis=0))


@tt.jit
def greedy_kernel(best_ptr, at_ptr, token_ptr, out_ptr, pos_ptr, CHUNKS, OUT_LEN, BLOCK: tt.constexpr):
    """Row b's first maximum: the first index of the first chunk holding the largest chunk maximum."""
    b = tt.program_id(0)
    c = tt.arange(0, BLOCK)
    best = tt.load(best_ptr + b * CHUNKS + c, mask=c < CHUNKS, other=float("-inf"))
    at = tt.load(at_ptr + b * CHUNKS + c, mask=c < CHUNKS, other=NO_INDEX)
    token = tt.min(tt.where(best == tt.max(best, axis=0), at, NO_INDEX), axis=0)
    _store_token(token_ptr, out_ptr, pos_ptr, b, OUT_LEN, token)


@tt.jit
def _store_token(token_ptr, out_ptr, pos_ptr, b, OUT_LEN, token):
    """The next step's input, and the generated sequence at the position after the current one."""
    tt.store(token_ptr + b, token)
    tt.store(out_ptr + b * OUT_LEN + tt.load(pos_ptr) + 1, token)


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
                  BLOCK: tt.constexpr):  # fmt: skip
    """Row b's draw at temperature `1 / inv_temperature` from its top-k entries' smallest top-p nucleus."""
    b = tt.program_id(0)
    row = logits_ptr + b * V
    pos = tt.load(pos_ptr)
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
    _store_token(token_ptr, out_ptr, pos_ptr, b, OUT_LEN, token)


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
