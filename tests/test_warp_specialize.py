"""Warp specialisation (lowering/tt_to_llvm/warp_specialize.py, warp_roles.py): a K loop whose operands arrive by TMA
split into a producer warpgroup and the program's warps, asked for by `tl.range(..., warp_specialize=True)` in a
kernel and by a `warp_specialize` tile in an array program, whose kernel is also persistent (a program an SM
walking over the tiles, lowering/fusion/persistent.py); which loops qualify; the PTX's registers, barriers and
launch size; the tuner's warp-specialised candidates on Hopper; on a GPU, NumPy's results.

The simulator runs the loop as written (the split is the lowering's), so the results below are NumPy's on it by
construction; what holds the split without a GPU is its protocol, run on a model of the mbarriers
(ws_protocol.py: every dot gets its tiles, no slot is overwritten early, nothing waits forever, and the model finds
a missing release and a wrong phase), and its PTX.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from xdsl.dialects import scf
from xdsl.parser import Parser

import tinyton as tt
import tinyton.language as tl
from tinyton.compiler import compile_module, program
from tinyton.dialects import tinyton_context
from tinyton.dialects import tt as ttd
from tinyton.frontend.tracing import trace
from tinyton.lowering.fusion import fusion_to_kernels
from tinyton.lowering.fusion.matmul_tiles import (
    SIBLING_WARP_SPECIALIZED_CANDIDATES,
    WARP_SPECIALIZE_ENV,
    WARP_SPECIALIZED_CANDIDATES,
    MatmulProblem,
    MatmulTiles,
    candidates,
    warp_specialized,
)
from tinyton.lowering.ptx import assemble_ptx
from tinyton.lowering.ptx.usage import register_usage
from tinyton.lowering.tt_to_llvm.pipeline import pipeline_module
from tinyton.rewrites.pipeline import fuse_module
from tinyton.tools.tensor_descriptor import TensorDescriptor
from sass import accumulator_reads_before_the_last_wait, nvdisasm, sass
from ws_protocol import ProtocolError, check, check_turns
from toolchains import TOOLCHAINS, needs_ptxas

BF16 = ml_dtypes.bfloat16
WIDE = MatmulTiles(128, 256, 64, 8, 4, warp_specialize=True)
PAIR = MatmulTiles(128, 128, 64, 8, 4, warp_specialize=True)


@tt.jit
def ws_matmul(a_desc, b_desc, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in tl.range(0, K, BK, num_stages=4, warp_specialize=True):
        acc = tl.dot(a_desc.load([pid_m * BM, k]), b_desc.load([k, pid_n * BN]), acc)
    rm = pid_m * BM + tl.arange(0, BM)[:, None]
    rn = pid_n * BN + tl.arange(0, BN)[None, :]
    tl.store(c_ptr + rm * N + rn, acc, mask=(rm < M) & (rn < N))


def swiglu(x, w1, w3):
    gate = x @ w1.T
    return tt.sigmoid(gate) * gate * (x @ w3.T)


def gelu_linear(x, w, b):
    y = x @ w.T + b
    return 0.5 * y * (1 + tt.tanh(0.7978845608 * (y + 0.044715 * y * y * y)))


def _array_inputs(fn, m=300, n=520, k=264, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((m, k)).astype(BF16)
    ws = [(rng.standard_normal((n, k)) * 0.05).astype(BF16) for _ in range(2 if fn is swiglu else 1)]
    return [x, *ws] if fn is swiglu else [x, *ws, rng.standard_normal(n).astype(BF16)]


def _kernel(fn, tiles, sm_count=132):
    module = fuse_module(trace(fn, _array_inputs(fn)))
    (spec,) = fusion_to_kernels(module, choose_tiles=lambda p: tiles.fit(p), sm_count=sm_count)
    spec.module.verify()
    return spec


def _split(module) -> ttd.WarpSpecializeOp | None:
    return next((op for op in module.walk() if isinstance(op, ttd.WarpSpecializeOp)), None)


@pytest.mark.parametrize("fn, tiles", [(gelu_linear, WIDE), (swiglu, PAIR)], ids=["gelu", "swiglu"])
def test_an_array_tile_splits_its_kernel(fn, tiles):
    """The producer copies and waits only; the consumers hold the dots (SwiGLU's two on one slot's two parts),
    release the slots, and run the epilogue's stores; no `tt.tma_wait` (no barrier of all threads) is left."""
    spec = _kernel(fn, tiles)
    module = spec.module.clone()
    pipeline_module(module, 227 * 1024, num_warps=spec.num_warps, arch="sm_90a")
    split = _split(module)
    assert split is not None and split.producer_warps.value.data == 4
    producer = [type(op) for op in split.producer.walk()]
    consumer = [type(op) for op in split.consumer.walk()]
    assert ttd.TmaCopyOp in producer and ttd.DotOp not in producer and ttd.StoreOp not in producer
    assert consumer.count(ttd.DotOp) == (2 if fn is swiglu else 1) and ttd.DescriptorStoreOp in consumer
    assert ttd.BarrierArriveOp in consumer and ttd.TmaCopyOp not in consumer
    assert not any(isinstance(op, ttd.TmaWaitOp) for op in module.walk())
    inits = [op.arrival_count for op in module.walk() if isinstance(op, ttd.BarrierInitOp)]
    assert sorted(inits) == [1, spec.num_warps]
    slots = {op.result.type.get_shape()[0] for op in module.walk() if isinstance(op, ttd.LocalAllocOp)}
    # the stages asked for, no slot kept for the dots in flight; GELU's 128 x 256 output tile, staged in shared
    # memory for its TMA store (64 KiB), leaves room for three
    assert slots == {3 if fn is gelu_linear else 4}
    assert any(isinstance(op, ttd.DescriptorStoreOp) for op in split.consumer.walk())


def test_warp_specialised_tiles_run_persistent_programs():
    """A program an SM (here 4 of 15 tiles) walks over the tiles `pid, pid + 4, ...`, the loop marked for the
    pipeliner; on the simulator (which runs it as written) the program gives the unsplit kernel's values."""
    spec = _kernel(swiglu, PAIR, sm_count=4)
    assert spec.grid == (4, 1, 1)
    (tiles,) = [op for op in spec.module.walk() if isinstance(op, scf.ForOp) and ttd.WARP_SPECIALIZE_ATTR in op.attributes
                and isinstance(op.parent_op(), type(next(iter(spec.module.ops))))]
    assert not any(isinstance(op, ttd.ProgramIdOp) for op in tiles.walk())


@pytest.mark.parametrize("fn, tiles", [(gelu_linear, WIDE), (swiglu, PAIR)], ids=["gelu", "swiglu"])
def test_persistent_programs_compute_what_one_program_a_tile_does(monkeypatch, fn, tiles):
    monkeypatch.setenv("TINYTON_BACKEND", "sim")
    monkeypatch.setattr(program, "sm_count", lambda: 2)
    args = _array_inputs(fn, seed=2)
    monkeypatch.setattr(program, "matmul_tiles", lambda p: replace(tiles, warp_specialize=False).fit(p))
    want = np.asarray(tt.jit(lambda *a: fn(*a))(*args))
    monkeypatch.setattr(program, "matmul_tiles", lambda p: tiles.fit(p))
    persistent = tt.jit(lambda *a: fn(*a))
    assert persistent.compile(*args).steps[0].grid == (2, 1, 1)
    np.testing.assert_array_equal(np.asarray(persistent(*args)), want)


def _split_module(fn, tiles, programs):
    spec = _kernel(fn, tiles, sm_count=programs)
    module = spec.module.clone()
    pipeline_module(module, 227 * 1024, num_warps=spec.num_warps, arch="sm_90a")
    return spec, module


@pytest.mark.parametrize("fn, tiles, programs", [(gelu_linear, WIDE, 4), (swiglu, PAIR, 4), (swiglu, PAIR, 32),
                                                 (gelu_linear, MatmulTiles(128, 128, 32, 8, 2, warp_specialize=True), 1)],
                         ids=["gelu", "swiglu", "a-tile-each", "one-program-two-stages"])
def test_the_mbarrier_protocol_feeds_every_dot_its_tiles(fn, tiles, programs):
    """The split kernel's producer and consumers run as coroutines on a model of the mbarriers (ws_protocol.py):
    every program's consumers read each K step of each of its tiles from the slot the producer copied it to,
    no slot is overwritten before its release, and neither side waits forever, the ring running on across the
    tiles (4 programs over 9 or 15 tiles; one program over 9 with 9 K steps of 32 in 2 slots)."""
    spec, module = _split_module(fn, tiles, programs)
    fitted = tiles.fit(MatmulProblem(1, 300, 520, 264, "bfloat16", dots=2 if fn is swiglu else 1))
    grid_tiles = -(-300 // fitted.block_m) * -(-520 // fitted.block_n)
    steps = -(-264 // fitted.block_k)
    operands = 3 if fn is swiglu else 2  # x's tile and a tile of each weight a K step
    for pid in range(spec.grid[0]):
        mine = len(range(pid, grid_tiles, spec.grid[0]))
        assert check(module, pid) == (operands * steps * mine,) * 2


def test_the_protocol_check_finds_a_missing_release():
    """Without the release of each tile's last slot, a program of more tiles than slots waits forever."""
    _, module = _split_module(gelu_linear, WIDE, 1)
    split = _split(module)
    releases = [op for op in split.consumer.walk() if isinstance(op, ttd.BarrierArriveOp)]
    (last,) = [op for op in releases if not any(isinstance(o, ttd.LocalLoadOp) for o in op.parent_block().ops)]
    last.detach()
    last.erase()
    with pytest.raises(ProtocolError, match="deadlock"):
        check(module, 0)


def test_the_protocol_check_finds_a_wrong_phase():
    """A producer waiting for the empty slots' current phase, not the previous one, never starts."""
    _, module = _split_module(gelu_linear, WIDE, 4)
    wait = next(op for op in _split(module).producer.walk() if isinstance(op, ttd.BarrierWaitOp))
    loop = wait.parent_op()
    wait.operands[2] = loop.body.block.args[-1]  # the phase itself
    with pytest.raises(ProtocolError, match="deadlock"):
        check(module, 0)


@pytest.mark.parametrize("steps", [[0, 3, 2], [2, 0, 0, 1]], ids=["three-tiles", "empty-tiles"])
def test_the_turns_of_persistent_consumers_run_on_across_their_tiles(steps):
    """Ping-pong turns opened and closed around each tile's loop deadlock once the last warpgroup runs ahead: its
    last `pass` and the next tile's `open` complete warpgroup 0's barrier with no one waiting (a named barrier
    counts arrivals). Opened once around the tile loop (warpgroup_turns.py), the same turns hold, empty tiles too."""
    per_tile = [["take", "pass"] * n for n in steps]
    with pytest.raises(ProtocolError, match="deadlock"):
        check_turns([step for turns in per_tile for step in ["open", *turns, "close"]], 2)
    check_turns(["open", *(step for turns in per_tile for step in turns), "close"], 2)


def test_the_protocol_of_a_split_loop_at_the_top_of_its_kernel():
    """tests/filecheck/lowering/wgmma_warp_specialized.mlir's kernel (no tile loop): K 256 in steps of 32."""
    text = (Path(__file__).parent / "filecheck/lowering/wgmma_warp_specialized.mlir").read_text()
    module = Parser(tinyton_context(), text).parse_module()
    pipeline_module(module, 227 * 1024, arch="sm_90a")
    m_n_k = {3: 200, 4: 136, 5: 256}
    assert check(module, 0, m_n_k) == (2 * 8,) * 2


@tt.jit
def ws_clamped(a_desc, b_desc, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """The loop reads each dot's result (a clamp): its dots wait for themselves, not in flight."""
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in tl.range(0, K, BK, num_stages=3, warp_specialize=True):
        acc = tl.minimum(tl.dot(a_desc.load([pid_m * BM, k]), b_desc.load([k, pid_n * BN]), acc), 1e4)
    rm = pid_m * BM + tl.arange(0, BM)[:, None]
    rn = pid_n * BN + tl.arange(0, BN)[None, :]
    tl.store(c_ptr + rm * N + rn, acc, mask=(rm < M) & (rn < N))


def test_dots_that_wait_for_themselves_release_their_own_slot():
    """No dot in flight: each iteration releases the slot it read once its dots are done; the protocol holds for
    K 256 in steps of 64 over 3 slots, and the simulator gives NumPy's product."""
    a, b, ad, bd = _ws_kernel(200, 144, 256)
    c = np.zeros((200, 144), np.float32)
    compiled = ws_clamped.compile(ad, bd, c, 200, 144, 256, 128, 128, 64, num_warps=8)
    module = compiled.module.clone()
    pipeline_module(module, 227 * 1024, num_warps=8, arch="sm_90a")
    assert _split(module) is not None
    assert not any(ttd.ASYNC_DOT_ATTR in op.attributes for op in module.walk())
    kernel = next(op for op in module.walk() if isinstance(op, ttd.WarpSpecializeOp)).parent_block()
    k = next(i for i, arg in enumerate(kernel.args) if arg.name_hint == "K")
    assert check(module, 0, {k: 256}) == (2 * 4,) * 2
    ws_clamped[(2, 2)](ad, bd, c, 200, 144, 256, 128, 128, 64, num_warps=8)
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-2, atol=1e-2)


@needs_ptxas
def test_two_programs_share_an_sm_when_their_rings_are_small():
    """One consumer warpgroup on two stages of 128 x 128 x 64 (64 KiB): two programs an SM, each launched with half
    the register file (128 a thread: `.maxnreg`, `.minnctapersm 2`), its consumers raised to 232; programs for
    twice the SMs; the protocol holds over 15 tiles in 8 programs."""
    tiles = MatmulTiles(128, 128, 64, 4, 2, warp_specialize=True)
    spec = _kernel(gelu_linear, tiles, sm_count=4)
    assert spec.grid == (8, 1, 1) and spec.module.attributes["tt.min_programs_per_sm"].value.data == 2
    ptx = compile_module(spec.module, num_warps=spec.num_warps, arch="sm_90a").asm["ptx"]
    assert re.search(r"\.maxnreg 128", ptx) and re.search(r"\.minnctapersm 2", ptx)
    assert "setmaxnreg.inc.sync.aligned.u32 232;" in ptx and register_usage(ptx, "sm_90a") == (128, 0)
    _, module = _split_module(gelu_linear, tiles, 4)
    for pid in range(8):
        assert check(module, pid) == (2 * 5 * len(range(pid, 15, 8)),) * 2


def test_only_what_qualifies_is_split():
    """No request, a target without wgmma or TMA (sm_80): the usual pipeline."""
    plain = _kernel(gelu_linear, MatmulTiles(128, 256, 64, 8, 4))
    module = plain.module.clone()
    pipeline_module(module, 227 * 1024, num_warps=8, arch="sm_90a")
    assert _split(module) is None
    module = _kernel(gelu_linear, WIDE).module.clone()
    pipeline_module(module, 160 * 1024, num_warps=8, arch="sm_80")
    assert _split(module) is None


@needs_ptxas
@pytest.mark.parametrize("fn, tiles", [(gelu_linear, WIDE), (swiglu, PAIR)], ids=["gelu", "swiglu"])
def test_ptx_of_a_split_kernel(fn, tiles):
    """384 threads launched with 168 registers each (`.maxnreg`), the producer's cut to 24 and the consumers'
    raised to 240; the only barriers of all threads initialise the mbarriers, before the split; no spills; the
    epilogue's tile is stored by TMA."""
    spec = _kernel(fn, tiles)
    kernel = compile_module(spec.module, num_warps=spec.num_warps, arch="sm_90a")
    ptx = kernel.asm["ptx"]
    assert kernel.threads == 384
    assert re.search(r"\.reqntid 384, 1, 1", ptx) and re.search(r"\.maxnreg 168", ptx)
    assert "setmaxnreg.dec.sync.aligned.u32 24;" in ptx and "setmaxnreg.inc.sync.aligned.u32 240;" in ptx
    split = ptx.index("setmaxnreg.dec")
    assert ptx.count("bar.sync \t0;") == 2 and ptx.rindex("bar.sync \t0;") < split
    assert register_usage(ptx, "sm_90a") == (168, 0)
    assert "trap;" not in ptx  # a wait with a way out made ptxas read the accumulators early (tma.lower_tma_wait)
    # the output tile goes out by TMA, a 64-column panel at a time, from shared memory the consumers filled
    stores = re.findall(r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta\.bulk_group", ptx)
    assert len(stores) == tiles.block_n // 64 and "cp.async.bulk.wait_group.read 0;" in ptx
    # thread 0 waits for the last tile's store only at the end; each store waits for the one before, not itself
    first_store, last_wait = ptx.index("bulk_group ["), ptx.rindex("cp.async.bulk.wait_group 0;")
    assert ptx.index("cp.async.bulk.wait_group.read 0;") < first_store < last_wait
    if fn is swiglu:  # the two products are one wgmma a K step (dots issued together) in the split kernel too
        assert set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m64n\d+k16)", ptx)) == {"m64n256k16"}
    assemble_ptx(ptx, "sm_90a")


def _ws_kernel(m=256, n=256, k=256):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((m, k)).astype(np.float16), rng.standard_normal((k, n)).astype(np.float16)
    return a, b, TensorDescriptor.from_tensor(a, [128, 64]), TensorDescriptor.from_tensor(b, [64, 128])


@needs_ptxas
@pytest.mark.skipif(nvdisasm() is None, reason="nvdisasm not found (it comes with Triton's wheel)")
@pytest.mark.parametrize("toolchain", TOOLCHAINS)
@pytest.mark.parametrize("fn, tiles", [(gelu_linear, WIDE), (swiglu, PAIR)], ids=["gelu", "swiglu"])
def test_the_epilogue_reads_the_accumulators_after_the_last_wait(fn, tiles, toolchain):
    """In the SASS of both PTX paths, nothing between the K loop's last wgmma and the wait that retires it reads
    its accumulators. (With a `trap` after N tries in the mbarrier waits, ptxas moved the epilogue's conversions
    of all 128 accumulators above that wait: on an H200 the last K step was missing from part of each tile.)"""
    spec = _kernel(fn, tiles)
    ptx = compile_module(spec.module, num_warps=spec.num_warps, arch="sm_90a", toolchain=toolchain).asm["ptx"]
    assert accumulator_reads_before_the_last_wait(sass(ptx)) == []


@needs_ptxas
def test_a_kernel_asks_for_it_with_tl_range():
    """Triton's spelling: `tl.range(0, K, BK, warp_specialize=True)` over tensor-descriptor loads."""
    a, b, ad, bd = _ws_kernel()
    c = np.zeros((256, 256), np.float32)
    compiled = ws_matmul.compile(ad, bd, c, 256, 256, 256, 128, 128, 64, num_warps=8)
    loop = next(op for op in compiled.module.walk() if isinstance(op, scf.ForOp))
    assert ttd.WARP_SPECIALIZE_ATTR in loop.attributes
    kernel = compile_module(compiled.module.clone(), num_warps=8, arch="sm_90a")
    ptx = kernel.asm["ptx"]
    assert "setmaxnreg.dec" in ptx and kernel.threads == 384
    assemble_ptx(ptx, "sm_90a")


def test_a_kernel_with_the_request_computes_numpys_product():
    """200 x 144 x 272: row and column blocks masked, a ragged last K step (strides of multiples of 16 elements,
    which TMA needs)."""
    a, b, ad, bd = _ws_kernel(200, 144, 272)
    c = np.zeros((200, 144), np.float32)
    compiled = ws_matmul.compile(ad, bd, c, 200, 144, 272, 128, 128, 64, num_warps=8)
    assert "setmaxnreg.dec" in compile_module(compiled.module.clone(), num_warps=8, arch="sm_90a").asm["ptx"]
    ws_matmul[(tt.cdiv(200, 128), tt.cdiv(144, 128))](ad, bd, c, 200, 144, 272, 128, 128, 64, num_warps=8)
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-2, atol=1e-2)


def test_the_tuner_measures_warp_specialised_tiles_on_hopper(monkeypatch):
    """Beside the other candidates where the GPU is a Hopper (the tuner's `warp_specialize`), unless
    TINYTON_WARP_SPECIALIZE=0; never for a few rows."""
    problem = MatmulProblem(1, 4096, 4096, 4096, "bfloat16")
    assert not any(t.warp_specialize for t in candidates(problem))
    assert {t for t in candidates(problem, warp_specialize=True) if t.warp_specialize} == {
        t.fit(problem) for t in WARP_SPECIALIZED_CANDIDATES}
    assert not any(t.warp_specialize for t in candidates(MatmulProblem(1, 16, 4096, 4096, "bfloat16"), True))
    siblings = MatmulProblem(1, 512, 18944, 3584, "bfloat16", dots=2)  # SwiGLU's gate and up: 128 registers at most
    assert {t for t in candidates(siblings, warp_specialize=True) if t.warp_specialize} == {
        MatmulTiles(128, 128, 64, 8, 4, warp_specialize=True), *SIBLING_WARP_SPECIALIZED_CANDIDATES}
    assert warp_specialized()
    monkeypatch.setenv(WARP_SPECIALIZE_ENV, "0")
    assert not warp_specialized()


@pytest.mark.gpu
@pytest.mark.isolated
@pytest.mark.parametrize("fn, tiles", [(gelu_linear, WIDE), (swiglu, PAIR), (gelu_linear, MatmulTiles(128, 128, 64, 8, 2, warp_specialize=True)),
                                       (gelu_linear, MatmulTiles(128, 128, 64, 4, 2, warp_specialize=True)),
                                       (swiglu, SIBLING_WARP_SPECIALIZED_CANDIDATES[0])],
                         ids=["gelu", "swiglu", "two-stages", "two-an-sm", "swiglu-two-an-sm"])
@pytest.mark.parametrize("programs", [None, 2], ids=["an-sm-each", "two-programs"])
def test_split_array_kernels_match_numpy_on_the_gpu(monkeypatch, fn, tiles, programs):
    """300 rows, 520 columns, K 264: masked row and column blocks, a ragged last K step zero-filled by TMA; with
    two programs each walks over several tiles, the ring running on across them."""
    monkeypatch.setenv("TINYTON_BACKEND", "cuda")
    monkeypatch.setattr(program, "matmul_tiles", lambda p: tiles.fit(p))
    if programs:
        monkeypatch.setattr(program, "sm_count", lambda: programs)
    args = _array_inputs(fn, seed=3)
    got = np.asarray(tt.jit(fn)(*args)).astype(np.float32)
    with monkeypatch.context() as m:
        m.setenv("TINYTON_BACKEND", "sim")
        want = np.asarray(tt.jit(fn)(*args)).astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=3e-2, atol=3e-2)


@pytest.mark.gpu
@pytest.mark.isolated
def test_a_split_kernel_matches_numpy_on_the_gpu(monkeypatch):
    monkeypatch.setenv("TINYTON_BACKEND", "cuda")
    test_a_kernel_with_the_request_computes_numpys_product()


@tt.jit
def persistent_matmul(a_desc, b_desc, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                      NUM_SMS: tl.constexpr):
    """Triton's persistent spelling: a loop over the tiles marked `warp_specialize`, the K loop inside it (strides
    of multiples of 16 elements: TMA's 16 bytes, known when the kernel is specialised)."""
    tiles_n = tl.cdiv(N, BN)
    tiles = tl.cdiv(M, BM) * tiles_n
    for tile in tl.range(tl.program_id(0), tiles, NUM_SMS, flatten=True, warp_specialize=True):
        pid_m, pid_n = tile // tiles_n, tile % tiles_n
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            acc = tl.dot(a_desc.load([pid_m * BM, k]), b_desc.load([k, pid_n * BN]), acc)
        rm = pid_m * BM + tl.arange(0, BM)[:, None]
        rn = pid_n * BN + tl.arange(0, BN)[None, :]
        tl.store(c_ptr + rm * N + rn, acc, mask=(rm < M) & (rn < N))


def _persistent(m=300, n=384, k=256, programs=3):
    a, b, ad, bd = _ws_kernel(m, n, k)
    return a, b, ad, bd, np.zeros((m, n), np.float32), (m, n, k, 128, 128, 64, programs)


@needs_ptxas
def test_a_persistent_kernel_splits_across_its_tiles():
    a, b, ad, bd, c, rest = _persistent()
    compiled = persistent_matmul.compile(ad, bd, c, *rest, num_warps=8)
    module = compiled.module.clone()
    pipeline_module(module, 227 * 1024, num_warps=8, arch="sm_90a")
    split = _split(module)
    assert split is not None
    producer_loops = [op for op in split.producer.walk() if isinstance(op, scf.ForOp)]
    assert len(producer_loops) == 2  # the tiles, and the K steps of each
    kernel = split.parent_block()
    sizes = {i: {"M": 300, "N": 384, "K": 256}[arg.name_hint] for i, arg in enumerate(kernel.args)
             if arg.name_hint in ("M", "N", "K")}
    for pid in range(3):  # 9 tiles over 3 programs, 4 K steps of 2 tiles each
        assert check(module, pid, sizes) == (3 * 4 * 2,) * 2
    kernel = compile_module(compiled.module.clone(), num_warps=8, arch="sm_90a")
    assert kernel.threads == 384 and "setmaxnreg.inc" in kernel.asm["ptx"]
    assemble_ptx(kernel.asm["ptx"], "sm_90a")


@pytest.mark.parametrize("backend", ["sim", pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.isolated])])
def test_a_persistent_kernel_computes_numpys_product(monkeypatch, backend):
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    a, b, ad, bd, c, rest = _persistent()
    persistent_matmul[(3,)](ad, bd, c, *rest, num_warps=8)
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-2, atol=1e-2)
