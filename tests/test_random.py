"""`tl.philox`, `tl.randint(4x)`, `tl.rand(4x)`, `tl.randn(4x)`: Triton's Philox 4x32, checked against the
Random123 known-answer vectors and against the algorithm written with NumPy's uint32 here, bit for bit on
the simulator and on the GPU (randn's cos/sin/log are approximations on the GPU: close, not exact)."""

from __future__ import annotations

import numpy as np
import pytest
from sim_helpers import run_sim

import tinyton as tt
import tinyton.language as tl
from tinyton.errors import CompilationError
from tinyton.lowering.ptx import assemble_ptx
from toolchains import needs_ptxas

U32 = np.uint32


def reference_philox(key: tuple[int, int], counters: list[np.ndarray], rounds: int = 10) -> list[np.ndarray]:
    """Philox 4x32 in NumPy's uint32 (Salmon et al. 2011, the round Triton uses)."""
    c0, c1, c2, c3 = (np.asarray(c).astype(U32) for c in counters)
    k0, k1 = U32(key[0]), U32(key[1])
    with np.errstate(over="ignore"):
        for _ in range(rounds):
            p0 = c0.astype(np.uint64) * np.uint64(0xD2511F53)
            p2 = c2.astype(np.uint64) * np.uint64(0xCD9E8D57)
            c0, c1, c2, c3 = (
                (p2 >> np.uint64(32)).astype(U32) ^ c1 ^ k0,
                p2.astype(U32),
                (p0 >> np.uint64(32)).astype(U32) ^ c3 ^ k1,
                p0.astype(U32),
            )
            k0, k1 = U32(k0 + U32(0x9E3779B9)), U32(k1 + U32(0xBB67AE85))
    return [c0, c1, c2, c3]


def reference_uniform(bits: np.ndarray) -> np.ndarray:
    x = bits.astype(U32).view(np.int32)
    with np.errstate(over="ignore"):
        x = np.where(x < 0, -x - 1, x)
    return x.astype(np.float32) * np.float32(4.6566127342e-10)


def reference_normal(seed: int, offsets: np.ndarray) -> np.ndarray:
    i1, i2, _, _ = reference_philox((seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF), [offsets, 0, 0, 0])
    u1, u2 = np.maximum(np.float32(1e-7), reference_uniform(i1)), reference_uniform(i2)
    r = np.sqrt(np.float32(-2.0) * np.log(u1))
    return r * np.cos(np.float32(6.283185307179586) * u2)



@tt.jit
def philox_kernel(out_ptr, C0: tl.constexpr, C1: tl.constexpr, C2: tl.constexpr, C3: tl.constexpr, SEED: tl.constexpr):
    offs = tl.arange(0, 1)
    a, b, c, d = tl.philox(SEED, C0 + offs * 0, C1, C2, C3)
    tl.store(out_ptr + offs, a)
    tl.store(out_ptr + 1 + offs, b)
    tl.store(out_ptr + 2 + offs, c)
    tl.store(out_ptr + 3 + offs, d)


KAT = [  # Random123's kat_vectors for philox4x32-10: counters, key (lo, hi), result
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF, 0xFFFFFFFF), (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0), (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize("counters, key, expected", KAT)
def test_philox_known_answers(counters, key, expected):
    out = np.zeros(4, np.int32)
    signed = [c - (1 << 32) if c & 0x80000000 else c for c in counters]
    run_sim(philox_kernel, (1,), out, C0=signed[0], C1=signed[1], C2=signed[2], C3=signed[3], SEED=key[0] | key[1] << 32)
    np.testing.assert_array_equal(out.view(U32), np.array(expected, U32))
    np.testing.assert_array_equal(np.concatenate(reference_philox(key, [[c] for c in counters])), np.array(expected, U32))


@tt.jit
def streams(ints_ptr, uniform_ptr, normal_ptr, four_ptr, seed, N, BLOCK: tl.constexpr, ROUNDS: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    tl.store(ints_ptr + offs, tl.randint(seed, offs, ROUNDS), mask=m)
    tl.store(uniform_ptr + offs, tl.rand(seed, offs, n_rounds=ROUNDS), mask=m)
    tl.store(normal_ptr + offs, tl.randn(seed, offs, ROUNDS), mask=m)
    i0, i1, i2, i3 = tl.randint4x(seed, offs, ROUNDS)
    tl.store(four_ptr + offs, i3, mask=m)


def make_streams(n: int = 1000):
    return np.zeros(n, np.int32), np.zeros(n, np.float32), np.zeros(n, np.float32), np.zeros(n, np.int32)


@pytest.mark.parametrize("seed", [0, 42, 123456789, -7])
@pytest.mark.parametrize("rounds", [10, 7])
def test_streams_match_numpy(seed, rounds):
    ints, uniform, normal, four = make_streams()
    run_sim(streams, (8,), ints, uniform, normal, four, seed, 1000, BLOCK=128, ROUNDS=rounds)
    offsets = np.arange(1000)
    key = (seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF)  # a negative int32 seed is sign-extended
    expected = reference_philox(key, [offsets, 0, 0, 0], rounds)
    np.testing.assert_array_equal(ints.view(U32), expected[0])
    np.testing.assert_array_equal(four.view(U32), expected[3])
    np.testing.assert_array_equal(uniform, reference_uniform(expected[0]))
    if rounds == 10:
        np.testing.assert_allclose(normal, reference_normal(seed, offsets), rtol=1e-6, atol=1e-6)


@tt.jit
def uniform_block(out_ptr, seed, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    u1, u2, u3, u4 = tl.rand4x(seed, offs)
    n1, n2, n3, n4 = tl.randn4x(seed, offs)
    tl.store(out_ptr + offs, u4)
    tl.store(out_ptr + 65536 + offs, n3)


def test_uniform_and_normal_statistics():
    out = np.zeros(2 * 65536, np.float32)
    run_sim(uniform_block, (64,), out, 2024, BLOCK=1024)
    u, n = out[:65536], out[65536:]
    assert u.min() >= 0.0 and u.max() < 1.0
    counts = np.histogram(u, bins=16, range=(0, 1))[0]
    chi2 = ((counts - 4096) ** 2 / 4096).sum()
    assert chi2 < 50, chi2  # 15 degrees of freedom: p < 1e-5 above 50
    assert abs(n.mean()) < 0.02 and abs(n.std() - 1) < 0.02
    assert abs((np.abs(n) < 1).mean() - 0.6827) < 0.01


def test_batched_and_one_by_one_agree_and_seeds_differ():
    a, b = make_streams(), make_streams()
    run_sim(streams, (8,), *a, 5, 1000, BLOCK=128, ROUNDS=10, batched=True)
    run_sim(streams, (8,), *b, 5, 1000, BLOCK=128, ROUNDS=10, batched=False)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    c = make_streams()
    run_sim(streams, (8,), *c, 6, 1000, BLOCK=128, ROUNDS=10)
    assert (c[0] != a[0]).mean() > 0.99


@tt.jit
def float_offsets(out_ptr):
    tl.store(out_ptr, tl.rand(1, tl.arange(0, 4).to(tl.float32)))


def test_float_offsets_are_refused():
    with pytest.raises(CompilationError, match="offsets and counters must be int32"):
        float_offsets.compile(np.zeros(4, np.float32))


@needs_ptxas
@pytest.mark.parametrize("toolchain", ["mlir", "llvmlite"])
def test_random_ptx(toolchain, monkeypatch):
    monkeypatch.setenv("TINYTON_TOOLCHAIN", toolchain)
    ptx = streams.compile(*make_streams(), 1, 1000, BLOCK=128, ROUNDS=10).asm["ptx"]
    assert "mul.hi.u32" in ptx and "cvt.rni.f32.f32" in ptx  # Philox's products; Box-Muller's cos (trig.py)
    assemble_ptx(ptx, "sm_90")


@pytest.mark.gpu
@pytest.mark.parametrize("seed", [0, 42, -7])
def test_random_gpu_matches_simulator(seed):
    sim, gpu = make_streams(), make_streams()
    run_sim(streams, (8,), *sim, seed, 1000, BLOCK=128, ROUNDS=10)
    streams.compile(*gpu, seed, 1000, BLOCK=128, ROUNDS=10).launch((8,), [*gpu, seed, 1000])
    np.testing.assert_array_equal(sim[0], gpu[0])  # randint: bit for bit
    np.testing.assert_array_equal(sim[1], gpu[1])  # rand: bit for bit
    np.testing.assert_array_equal(sim[3], gpu[3])
    np.testing.assert_allclose(sim[2], gpu[2], rtol=1e-4, atol=1e-4)  # randn: approximate cos and log
